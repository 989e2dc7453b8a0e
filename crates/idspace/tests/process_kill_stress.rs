//! Kill under load: processes with threads and armed timers run on real workers and are killed
//! at random while they run, some directly, some through their namespace's init. Every poll of
//! every task checks that:
//!
//! * no two live tasks claim one TID (so no PID either: a PID is its leader's TID);
//! * the IDs `current` reports are held by the task's own thread and process, never free nor
//!   another's;
//! * once its process is reaped, a task runs at most the one poll that was under way.
//!
//! After each kill, every timer of the killed process is freed: its notification channel is
//! closed, and its wheel entries with it. At the end every ID and record is gone.

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod process_util;
mod sched_util;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use idspace::pid::{NsId, ROOT};
use idspace::process::{
    self, Clock, ITimerSpec, Notify, ProcessHooks, Processes, TimeSpec, TimerEvent, When,
    FREED_NS_BYTES,
};
use idspace::sched::{Handle, JoinError, JoinHandle, Policy};
use process_util::runtime;
use sched_util::yield_now;

/// How long the test kills processes.
const RUN: Duration = Duration::from_millis(if cfg!(miri) { 200 } else { 2500 });
/// Groups alive at once.
const LIVE: usize = 6;
/// How long anything may take before the test calls it a hang.
const LIMIT: Duration = Duration::from_secs(30);

/// What every task checks, shared by the test.
#[derive(Default)]
struct Watch {
    /// Root-level TID -> the token of the live task that claims it.
    claims: Mutex<HashMap<u32, usize>>,
    next_token: AtomicUsize,
    violations: Mutex<Vec<String>>,
}

impl Watch {
    fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }
}

/// A process's state as the tasks see it: reaped once the test has seen it end.
#[derive(Default)]
struct Fate {
    reaped: AtomicBool,
}

/// A task's future, checked at every poll (see the module docs).
struct Watched<F> {
    future: Pin<Box<F>>,
    watch: Arc<Watch>,
    model: Arc<Processes>,
    fate: Arc<Fate>,
    token: usize,
    claimed: Option<u32>,
    polls_after_reaping: usize,
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        if this.fate.reaped.load(Ordering::SeqCst) {
            this.polls_after_reaping += 1;
            if this.polls_after_reaping > 1 {
                this.watch.violation(format!(
                    "task {} polled {} times after its process was reaped",
                    this.token, this.polls_after_reaping
                ));
            }
        }
        this.check();
        this.future.as_mut().poll(cx)
    }
}

impl<F> Watched<F> {
    fn check(&mut self) {
        let Some(me) = process::current() else {
            return self.watch.violation("a task of no process".into());
        };
        {
            let mut claims = self.watch.claims.lock().unwrap();
            match self.claimed {
                None => {
                    if let Some(other) = claims.insert(me.root_tid, self.token) {
                        drop(claims);
                        let tid = me.root_tid;
                        return self
                            .watch
                            .violation(format!("TID {tid} claimed twice: {other}"));
                    }
                    self.claimed = Some(me.root_tid);
                }
                Some(tid) if tid != me.root_tid || claims.get(&tid) != Some(&self.token) => {
                    drop(claims);
                    return self
                        .watch
                        .violation(format!("task {} lost TID {tid}", self.token));
                }
                Some(_) => {}
            }
        }
        let thread = self.model.lookup(ROOT, me.root_tid).unwrap();
        let leader = self.model.lookup(ROOT, me.root_pid).unwrap();
        if thread != Some((me.root_pid, me.root_tid)) || leader != Some((me.root_pid, me.root_pid))
        {
            self.watch.violation(format!(
                "current() gave {me:?}, held as {thread:?} and {leader:?}"
            ));
        }
    }
}

impl<F> Drop for Watched<F> {
    fn drop(&mut self) {
        if let Some(tid) = self.claimed {
            let mut claims = self.watch.claims.lock().unwrap();
            if claims.get(&tid) == Some(&self.token) {
                claims.remove(&tid);
            }
        }
    }
}

/// A process as the test keeps it: its PID, its tasks, its fate and its timers' channels.
struct Group {
    pid: u32,
    tasks: Vec<JoinHandle<()>>,
    fate: Arc<Fate>,
    channels: Vec<mpsc::Receiver<TimerEvent>>,
    /// A process in this one's namespace, killed with it (its init).
    child: Option<Box<Group>>,
}

/// The runtime, its model, and what the tasks check.
struct World {
    handle: Handle<ProcessHooks>,
    model: Arc<Processes>,
    watch: Arc<Watch>,
}

impl World {
    fn watched<F: Future + Send + 'static>(&self, fate: &Arc<Fate>, future: F) -> Watched<F> {
        Watched {
            future: Box::pin(future),
            watch: Arc::clone(&self.watch),
            model: Arc::clone(&self.model),
            fate: Arc::clone(fate),
            token: self.watch.next_token.fetch_add(1, Ordering::Relaxed),
            claimed: None,
            polls_after_reaping: 0,
        }
    }

    /// A process in `ns`: a spinning leader (or, without `leader_task`, a leader made in the
    /// model that runs nothing), a spinning thread and a thread waiting on a ticking timer,
    /// with a second timer notifying a channel and a third armed for an hour.
    fn spawn_group(&self, ns: NsId, leader_task: bool) -> Group {
        let fate = Arc::new(Fate::default());
        let mut tasks = Vec::new();
        let pid = if leader_task {
            let (tell, told) = mpsc::channel();
            let leader = self.watched(&fate, async move {
                let _ = tell.send(process::current().unwrap().root_pid);
                spin().await
            });
            tasks.push(self.handle.spawn_process(ns, leader).unwrap());
            told.recv_timeout(LIMIT).unwrap()
        } else {
            self.model.fork(ns, 0).unwrap().tid()
        };
        let ms = TimeSpec::new(0, 1_000_000);
        let every_ms = ITimerSpec::every(ms, ms);
        let ticking = self
            .model
            .timer_create_with(pid, Clock::Monotonic, Notify::Wake)
            .unwrap();
        self.model
            .timer_settime(pid, ticking, When::Relative, every_ms)
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let sending = self
            .model
            .timer_create_with(pid, Clock::Monotonic, Notify::Channel(tx))
            .unwrap();
        self.model
            .timer_settime(pid, sending, When::Relative, every_ms)
            .unwrap();
        let hour = self.model.timer_create(pid).unwrap();
        let later = ITimerSpec::once(TimeSpec::new(3600, 0));
        self.model
            .timer_settime(pid, hour, When::Relative, later)
            .unwrap();
        let spinning = self.watched(&fate, spin());
        let model = Arc::clone(&self.model);
        let waiting = self.watched(&fate, async move {
            while let Ok(wait) = model.timer_wait(pid, ticking) {
                if wait.await.is_err() {
                    break;
                }
            }
            // The process is gone; its task is stopped at its next poll.
            std::future::pending::<()>().await
        });
        tasks.push(self.handle.spawn_thread_of(pid, spinning).unwrap());
        tasks.push(self.handle.spawn_thread_of(pid, waiting).unwrap());
        Group {
            pid,
            tasks,
            fate,
            channels: vec![rx],
            child: None,
        }
    }

    /// A namespace whose init is a group, with another group in it.
    fn spawn_namespace(&self, leader_task: bool) -> Group {
        let ns = self.model.ns_new(ROOT).unwrap();
        let mut init = self.spawn_group(ns, leader_task);
        init.child = Some(Box::new(self.spawn_group(ns, true)));
        init
    }

    /// Kills `group` (and, through its init, its namespace's other group), then checks that
    /// everything of it is gone.
    fn kill(&self, group: Group) {
        self.model.kill(group.pid, 0).unwrap();
        group.fate.reaped.store(true, Ordering::SeqCst);
        assert!(self.model.timers(group.pid).is_err());
        let child = group.child.map(|child| *child);
        if let Some(child) = &child {
            // Reaped when the init's task stops: the test sees it leave the process list.
            let deadline = Instant::now() + LIMIT;
            while self.model.process_ids().contains(&child.pid) {
                assert!(
                    Instant::now() < deadline,
                    "the init's end never reaped {}",
                    child.pid
                );
                std::thread::yield_now();
            }
            child.fate.reaped.store(true, Ordering::SeqCst);
        }
        for group in std::iter::once(group.tasks).chain(child.map(|child| child.tasks)) {
            for task in group {
                let deadline = Instant::now() + LIMIT;
                while !task.is_finished() {
                    assert!(Instant::now() < deadline, "a killed task never stopped");
                    std::thread::yield_now();
                }
                assert!(matches!(task.join(), Err(JoinError::Killed)));
            }
        }
        for channel in group.channels {
            // Its timer is freed (off the table and the wheel): its sender is dropped.
            let deadline = Instant::now() + LIMIT;
            loop {
                match channel.recv_timeout(LIMIT) {
                    Ok(_) => assert!(Instant::now() < deadline, "a killed timer still fires"),
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    Err(mpsc::RecvTimeoutError::Timeout) => panic!("a killed timer is kept"),
                }
            }
        }
    }
}

/// Yields for ever.
async fn spin() {
    loop {
        yield_now().await;
    }
}

/// A small xorshift generator: the test's randomness, reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn processes_killed_at_random_under_load_leave_no_task_and_no_id_behind() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let mut rng = Rng(seed);
    let runtime = runtime(Policy::Wakelist);
    let world = World {
        handle: runtime.handle().clone(),
        model: Arc::clone(runtime.handle().hooks().model()),
        watch: Arc::default(),
    };
    let start_bytes = world.model.model_bytes();
    let mut live: Vec<Group> = Vec::new();
    let (mut killed, mut namespaces) = (0, 0);
    let end = Instant::now() + RUN;
    while Instant::now() < end {
        while live.len() < LIVE {
            // A quarter are namespaces killed through their init; a third of the leaders run
            // no task.
            let leader_task = rng.below(3) != 0;
            let group = if rng.below(4) == 0 {
                namespaces += 1;
                world.spawn_namespace(leader_task)
            } else {
                world.spawn_group(ROOT, leader_task)
            };
            live.push(group);
        }
        std::thread::sleep(Duration::from_micros(rng.below(2000)));
        let victim = live.swap_remove(rng.below(live.len() as u64) as usize);
        world.kill(victim);
        killed += 1;
    }
    for group in live.drain(..) {
        world.kill(group);
    }
    let violations = world.watch.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    println!("{killed} kills, {namespaces} namespaces");
    assert!(killed > 5, "only {killed} kills");
    // Every task's claim is gone, and every ID and record with it (a freed namespace keeps
    // its number).
    assert!(world.watch.claims.lock().unwrap().is_empty());
    let expected = start_bytes + namespaces * FREED_NS_BYTES;
    let deadline = Instant::now() + LIMIT;
    while world.model.model_bytes() != expected {
        assert!(Instant::now() < deadline, "seed {seed}: records left");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(world.model.process_ids(), [1]);
}
