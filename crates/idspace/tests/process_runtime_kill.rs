//! Killed processes on real workers: their tasks stop at their next poll and report
//! `JoinError::Killed`, an init's end stops its namespace's tasks, a killed task never sees its
//! IDs freed or taken by another task, and a restored process runs in a second runtime under
//! its restored TIDs with its timers firing there.

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod process_util;
mod sched_util;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use idspace::pid::{NsId, PidAllocator, ROOT};
use idspace::process::{self, Clock, ITimerSpec, Notify, Processes, TimeSpec, When};
use idspace::sched::{time, JoinError, JoinHandle, Policy};
use process_util::runtime;
use sched_util::{join_within, yield_now, Bell};

/// How long a task may take to stop before the test calls it a hang.
const LIMIT: Duration = Duration::from_secs(30);

/// Joins a task that must have been killed.
fn join_killed<T: std::fmt::Debug>(task: JoinHandle<T>, what: &str) {
    match join_within(task, LIMIT, what) {
        Err(JoinError::Killed) => {}
        other => panic!("{what}: {other:?}, not killed"),
    }
}

/// Waits until no thread holds `tid` in the root namespace (a killed task's exit hook frees
/// its IDs after its join handle is told).
fn wait_until_free(model: &Processes, tid: u32) {
    let deadline = Instant::now() + LIMIT;
    while model.lookup(ROOT, tid).unwrap().is_some() {
        assert!(Instant::now() < deadline, "ID {tid} never freed");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Counts a violation unless the IDs that `current` reports are held by the caller's own
/// thread and process.
fn check_own_ids(model: &Processes, bad: &AtomicUsize) {
    let Some(me) = process::current() else {
        bad.fetch_add(1, Ordering::SeqCst);
        return;
    };
    let thread = model.lookup(ROOT, me.root_tid).unwrap();
    let leader = model.lookup(ROOT, me.root_pid).unwrap();
    if thread != Some((me.root_pid, me.root_tid)) || leader != Some((me.root_pid, me.root_pid)) {
        bad.fetch_add(1, Ordering::SeqCst);
    }
}

/// A thread that never ends by itself: it yields for ever, checking its IDs at every poll.
async fn spinner(model: Arc<Processes>, started: Arc<Bell>, bad: Arc<AtomicUsize>) {
    started.ring();
    loop {
        check_own_ids(&model, &bad);
        yield_now().await;
    }
}

/// A thread that sleeps for ever: nothing but a kill can end it.
async fn sleeper(started: Arc<Bell>) {
    started.ring();
    std::future::pending::<()>().await;
}

/// Spawns a process in `ns` whose leader spins, with one spinning and one sleeping thread;
/// returns its PID and the three tasks once all of them have run.
fn spinning_process(
    handle: &idspace::sched::Handle<idspace::process::ProcessHooks>,
    ns: NsId,
    bad: &Arc<AtomicUsize>,
) -> (u32, Vec<JoinHandle<()>>) {
    let model = Arc::clone(handle.hooks().model());
    let started = Bell::new();
    let (tell, told) = mpsc::channel();
    let leader = {
        let spin = spinner(Arc::clone(&model), Arc::clone(&started), Arc::clone(bad));
        handle
            .spawn_process(ns, async move {
                tell.send(process::current().unwrap().root_pid).unwrap();
                spin.await
            })
            .unwrap()
    };
    let pid = told.recv_timeout(LIMIT).unwrap();
    let spin = spinner(model, Arc::clone(&started), Arc::clone(bad));
    let thread = handle.spawn_thread_of(pid, spin).unwrap();
    let asleep = handle
        .spawn_thread_of(pid, sleeper(Arc::clone(&started)))
        .unwrap();
    let deadline = Instant::now() + LIMIT;
    while started.rung() < 3 {
        assert!(Instant::now() < deadline, "the process never ran");
        std::thread::yield_now();
    }
    (pid, vec![leader, thread, asleep])
}

#[test]
fn kill_stops_running_and_sleeping_tasks_and_their_joins_report_killed() {
    for policy in Policy::ALL {
        let runtime = runtime(policy);
        let model = Arc::clone(runtime.handle().hooks().model());
        let bad = Arc::new(AtomicUsize::new(0));
        let (pid, tasks) = spinning_process(runtime.handle(), ROOT, &bad);
        let tids = model.threads(pid).unwrap();
        let timer = model.timer_create(pid).unwrap();
        assert_eq!(model.kill(pid, 0).unwrap(), 3, "{policy}");
        // The process is gone at once, with its timers.
        assert!(model.timers(pid).is_err(), "{policy}: timer {timer} kept");
        assert_eq!(model.process_ids(), [1], "{policy}");
        for task in tasks {
            join_killed(task, policy.name());
        }
        for tid in tids {
            wait_until_free(&model, tid);
        }
        assert_eq!(
            bad.load(Ordering::SeqCst),
            0,
            "{policy}: a task saw foreign IDs"
        );
    }
}

/// Sets its flag when dropped.
struct EndPoll(Arc<AtomicBool>);

impl Drop for EndPoll {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_task_killed_mid_poll_keeps_its_ids_until_it_stops_at_its_next_poll() {
    let runtime = runtime(Policy::Wakelist);
    let model = Arc::clone(runtime.handle().hooks().model());
    let bad = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let after_kill = Arc::new(AtomicUsize::new(0));
    let (tell, told) = mpsc::channel();
    let task = {
        let (model, bad) = (Arc::clone(&model), Arc::clone(&bad));
        let (killed, after_kill) = (Arc::clone(&killed), Arc::clone(&after_kill));
        runtime
            .spawn_process(ROOT, async move {
                tell.send(process::current().unwrap().root_pid).unwrap();
                // One long poll, during which the process is killed.
                while !killed.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                check_own_ids(&model, &bad);
                after_kill.fetch_add(1, Ordering::SeqCst);
                yield_now().await;
                // The next poll must never come.
                after_kill.fetch_add(1, Ordering::SeqCst);
                check_own_ids(&model, &bad);
            })
            .unwrap()
    };
    let pid = told.recv_timeout(LIMIT).unwrap();
    // Ends the long poll however the checks below end (a failed one must not leave a worker
    // spinning, which would hang the runtime's drop).
    let end_poll = EndPoll(Arc::clone(&killed));
    assert_eq!(model.kill(pid, 0).unwrap(), 1);
    // Killed, but still running: its PID stays held, so no one else can take it.
    assert!(model.lookup(ROOT, pid).unwrap().is_some());
    assert!(model.fork(ROOT, 0).unwrap().tid() != pid);
    drop(end_poll);
    join_killed(task, "mid-poll");
    assert_eq!(
        after_kill.load(Ordering::SeqCst),
        1,
        "polled again after the kill"
    );
    assert_eq!(bad.load(Ordering::SeqCst), 0, "current() gave a freed ID");
    wait_until_free(&model, pid);
}

#[test]
fn an_init_s_end_kills_every_task_of_its_namespace() {
    for kill_init in [false, true] {
        let runtime = runtime(Policy::Wakelist);
        let handle = runtime.handle().clone();
        let model = Arc::clone(handle.hooks().model());
        let ns = model.ns_new(ROOT).unwrap();
        let release = Bell::new();
        let (tell, told) = mpsc::channel();
        let init = {
            let release = Arc::clone(&release);
            handle
                .spawn_process(ns, async move {
                    tell.send(process::current().unwrap().root_pid).unwrap();
                    release.until(1).await;
                })
                .unwrap()
        };
        let init_pid = told.recv_timeout(LIMIT).unwrap();
        let bad = Arc::new(AtomicUsize::new(0));
        let children: Vec<_> = (0..3)
            .map(|_| spinning_process(&handle, ns, &bad))
            .collect();
        if kill_init {
            model.kill(init_pid, 0).unwrap();
            join_killed(init, "the init");
        } else {
            release.ring();
            join_within(init, LIMIT, "the init").unwrap();
        }
        for (_, tasks) in children {
            for task in tasks {
                join_killed(task, "a child of the namespace");
            }
        }
        let deadline = Instant::now() + LIMIT;
        while model.ns_exists(ns) || model.process_ids() != [1] {
            assert!(Instant::now() < deadline, "the namespace was never freed");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(bad.load(Ordering::SeqCst), 0, "a task saw foreign IDs");
    }
}

/// Removes a task's claim on a PID when its future is dropped.
struct Claim {
    pid: u32,
    token: usize,
    claims: Arc<Mutex<HashMap<u32, usize>>>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut claims = self.claims.lock().unwrap();
        if claims.get(&self.pid) == Some(&self.token) {
            claims.remove(&self.pid);
        }
    }
}

#[test]
fn a_fork_kill_cycle_at_pid_max_301_never_has_two_live_tasks_on_one_pid() {
    // Past `pid_max`, PIDs wrap to the bottom and freed ones come back.
    const CYCLES: usize = if cfg!(miri) { 20 } else { 450 };
    /// Processes alive at once: each is killed this many cycles after it was spawned.
    const WINDOW: usize = 4;
    let runtime = runtime(Policy::Wakelist);
    let model = Arc::clone(runtime.handle().hooks().model());
    model.pids().set_pid_max(ROOT, 301).unwrap();
    let claims: Arc<Mutex<HashMap<u32, usize>>> = Arc::default();
    let bad = Arc::new(AtomicUsize::new(0));
    let mut live = std::collections::VecDeque::new();
    let (mut seen, mut killed) = (std::collections::HashSet::new(), Vec::new());
    for token in 0..CYCLES {
        let (tell, told) = mpsc::channel();
        let (claims, bad) = (Arc::clone(&claims), Arc::clone(&bad));
        let task = runtime
            .spawn_process(ROOT, async move {
                let pid = process::current().unwrap().root_pid;
                if claims.lock().unwrap().insert(pid, token).is_some() {
                    bad.fetch_add(1, Ordering::SeqCst);
                }
                let _claim = Claim {
                    pid,
                    token,
                    claims: Arc::clone(&claims),
                };
                tell.send(pid).unwrap();
                // It runs on, a poll every millisecond, until it is killed.
                loop {
                    let me = process::current().unwrap().root_pid;
                    if claims.lock().unwrap().get(&me) != Some(&token) {
                        bad.fetch_add(1, Ordering::SeqCst);
                    }
                    time::sleep(Duration::from_millis(1)).await;
                }
            })
            .unwrap();
        let pid = told.recv_timeout(LIMIT).unwrap();
        seen.insert(pid);
        live.push_back((pid, task));
        if live.len() > WINDOW {
            let (pid, task) = live.pop_front().unwrap();
            model.kill(pid, 0).unwrap();
            killed.push(task);
        }
    }
    for (pid, task) in live {
        model.kill(pid, 0).unwrap();
        killed.push(task);
    }
    for task in killed {
        join_killed(task, "a cycled process");
    }
    assert!(seen.len() < CYCLES || cfg!(miri), "PIDs were reused");
    assert_eq!(
        bad.load(Ordering::SeqCst),
        0,
        "two live tasks claimed one PID"
    );
}

#[test]
fn a_restored_process_runs_in_a_second_runtime_under_its_restored_tids() {
    // The process runs in a first runtime: a leader and two threads, waiting, and two timers.
    let first = runtime(Policy::Wakelist);
    let model = Arc::clone(first.handle().hooks().model());
    let bad = Arc::new(AtomicUsize::new(0));
    let (pid, tasks) = spinning_process(first.handle(), ROOT, &bad);
    let ms = TimeSpec::new(0, 1_000_000);
    let ticking = model
        .timer_create_with(pid, Clock::Monotonic, Notify::Wake)
        .unwrap();
    model
        .timer_settime(pid, ticking, When::Relative, ITimerSpec::every(ms, ms))
        .unwrap();
    let hour = model.timer_create(pid).unwrap();
    model
        .timer_settime(
            pid,
            hour,
            When::Relative,
            ITimerSpec::once(TimeSpec::new(3600, 0)),
        )
        .unwrap();
    let image = model.checkpoint(pid).unwrap();
    let tids = model.threads(pid).unwrap();
    model.kill(pid, 0).unwrap();
    for task in tasks {
        join_killed(task, "the checkpointed process");
    }
    drop(first);

    // A second runtime restores it: each thread runs under its restored TID, and the ticking
    // timer fires on this runtime's wheel.
    let second = runtime(Policy::Wakelist);
    let target = Arc::clone(second.handle().hooks().model());
    let restored = second
        .restore_process(ROOT, &image, |thread| {
            let (target, leader, tid) = (Arc::clone(&target), thread.is_leader(), thread.tid());
            async move {
                let mut fired = 0;
                // Read here, while the process lives: it ends with its last thread.
                let hour_armed = !target.timer_gettime(pid, hour).unwrap().value.is_zero();
                if leader {
                    for _ in 0..3 {
                        let wait = target.timer_wait(pid, ticking).unwrap();
                        wait.await.unwrap();
                        fired += 1;
                    }
                }
                let me = process::current().unwrap();
                (tid, me.root_tid, me.root_pid, fired, hour_armed)
            }
        })
        .unwrap();
    let restored_tids: Vec<u32> = restored.iter().map(|(tid, _)| *tid).collect();
    assert_eq!(restored_tids, tids, "every thread, leader first");
    for (tid, task) in restored {
        let (given, ran_as, pid_as, fired, hour_armed) =
            join_within(task, LIMIT, "restored").unwrap();
        assert_eq!((given, ran_as, pid_as), (tid, tid, pid));
        assert!(hour_armed, "the hour-long timer came back armed");
        assert_eq!(fired, if tid == pid { 3 } else { 0 });
    }
    assert_eq!(bad.load(Ordering::SeqCst), 0);
}

#[test]
fn a_leader_without_a_task_keeps_its_pid_while_an_exited_thread_s_task_runs() {
    let runtime = runtime(Policy::Wakelist);
    let model = Arc::clone(runtime.handle().hooks().model());
    // A leader made in the model (no task), and a thread that a task runs, caught mid-poll.
    let pid = model.fork(ROOT, 0).unwrap().tid();
    let (gate, started) = (Arc::new(AtomicBool::new(false)), Bell::new());
    let bad = Arc::new(AtomicUsize::new(0));
    let (tell, told) = mpsc::channel();
    let task = {
        let (gate, started) = (Arc::clone(&gate), Arc::clone(&started));
        let (model, bad) = (Arc::clone(&model), Arc::clone(&bad));
        runtime
            .handle()
            .spawn_thread_of(pid, async move {
                tell.send(process::current().unwrap().root_tid).unwrap();
                started.ring();
                while !gate.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                check_own_ids(&model, &bad);
                yield_now().await;
                bad.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap()
    };
    let tid = told.recv_timeout(LIMIT).unwrap();
    let end_poll = EndPoll(Arc::clone(&gate));
    // The thread exits, asked from outside: its task is killed, its IDs stay held.
    assert!(!model.exit(tid, 0).unwrap().process_exited);
    assert_eq!(model.threads(pid).unwrap(), [pid]);
    // The process ends: the leader's PID, which the running task reports, stays held too.
    assert_eq!(model.kill(pid, 0).unwrap(), 1);
    assert_eq!(model.lookup(ROOT, pid).unwrap(), Some((pid, pid)));
    assert_eq!(model.lookup(ROOT, tid).unwrap(), Some((pid, tid)));
    drop(end_poll);
    join_killed(task, "the exited thread");
    assert_eq!(bad.load(Ordering::SeqCst), 0, "current() gave a freed ID");
    wait_until_free(&model, tid);
    wait_until_free(&model, pid);
    assert_eq!(model.process_ids(), [1]);
}
