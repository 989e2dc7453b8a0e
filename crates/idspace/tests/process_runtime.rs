//! Processes on real workers: every task of a process carries its thread, takes a CID from its
//! process's space at each switch-in and gives it back; no two running tasks of one process
//! hold one CID, every CID is below the worker count, and exits (completed, panicked,
//! cancelled) release everything.

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod process_util;
mod sched_util;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use idspace::pid::ROOT;
use idspace::process::{self, ProcessError, Processes};
use idspace::sched::{JoinError, Policy};
use process_util::{runtime, WORKERS};
use sched_util::{join_within, yield_now, Bell};

const PROCESSES: usize = if cfg!(miri) { 2 } else { 12 };
const THREADS: usize = if cfg!(miri) { 2 } else { 5 };
const ROUNDS: usize = if cfg!(miri) { 3 } else { 40 };

/// Waits until the model holds no process but the root's init (exit hooks run after a join
/// handle resolves).
fn wait_until_only_init(model: &Processes) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while model.process_ids() != [1] {
        assert!(Instant::now() < deadline, "left: {:?}", model.process_ids());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One running stretch of a task of a process: its CID must be free among the process's
/// running tasks and below the worker count, and its IDs must be its own.
fn run_stretch(running: &Mutex<HashSet<u32>>, violations: &AtomicUsize) {
    let Some(me) = process::current() else {
        violations.fetch_add(1, Ordering::SeqCst);
        return;
    };
    let Some(cid) = me.cid.filter(|&cid| (cid as usize) < WORKERS) else {
        violations.fetch_add(1, Ordering::SeqCst);
        return;
    };
    if !running.lock().unwrap().insert(cid) {
        violations.fetch_add(1, Ordering::SeqCst);
        return;
    }
    // Hold it a while, so that the process's other tasks run meanwhile on the other workers.
    let until = Instant::now() + Duration::from_micros(if cfg!(miri) { 1 } else { 30 });
    while Instant::now() < until {
        std::hint::spin_loop();
    }
    running.lock().unwrap().remove(&cid);
}

/// A thread's work: `ROUNDS` stretches, each checked, with a yield between them (which keeps
/// it on its worker, so that a process whose threads were spread runs on every worker at once).
async fn stretches(running: Arc<Mutex<HashSet<u32>>>, violations: Arc<AtomicUsize>, leader: u32) {
    let me = process::current().expect("a thread of a process");
    if me.root_pid != leader {
        violations.fetch_add(1, Ordering::SeqCst);
    }
    for _ in 0..ROUNDS {
        run_stretch(&running, &violations);
        yield_now().await;
    }
}

#[test]
fn cids_are_unique_among_a_process_s_running_tasks_and_exits_release_everything() {
    for policy in Policy::ALL {
        let runtime = runtime(policy);
        let handle = runtime.handle().clone();
        let model = Arc::clone(handle.hooks().model());
        let ns = model.ns_new(ROOT).unwrap();
        model.fork(ns, 0).unwrap(); // the namespace's init, for the whole test
        let start = model.model_bytes();
        let violations = Arc::new(AtomicUsize::new(0));
        let (mut leaders, mut threads) = (Vec::new(), Vec::new());
        let mut pids = HashSet::new();
        for p in 0..PROCESSES {
            let space = if p % 2 == 0 { ROOT } else { ns };
            let running = Arc::new(Mutex::new(HashSet::new()));
            let (tell, told) = std::sync::mpsc::channel();
            // The leader goes on once its other threads exist, so the process cannot end first.
            let spawned = Bell::new();
            let leader = {
                let (running, violations) = (Arc::clone(&running), Arc::clone(&violations));
                let spawned = Arc::clone(&spawned);
                runtime
                    .spawn_process(space, async move {
                        let me = process::current().expect("a leader is a thread");
                        assert_eq!(me.tid, me.pid);
                        tell.send(me.root_pid).unwrap();
                        spawned.until(1).await;
                        // One thread from inside the process...
                        let thread = process::spawn_thread(stretches(
                            Arc::clone(&running),
                            Arc::clone(&violations),
                            me.root_pid,
                        ))
                        .unwrap();
                        stretches(running, violations, me.root_pid).await;
                        thread.await.unwrap();
                        me.root_pid
                    })
                    .unwrap()
            };
            let pid = told.recv().unwrap();
            assert!(pids.insert(pid), "{policy}: PID {pid} twice");
            leaders.push((pid, leader));
            // ...and the others from outside, spread over the workers.
            for _ in 0..THREADS {
                let work = stretches(Arc::clone(&running), Arc::clone(&violations), pid);
                threads.push(handle.spawn_thread_of(pid, work).unwrap());
            }
            spawned.ring();
        }
        for (pid, leader) in leaders {
            let got = join_within(leader, Duration::from_secs(60), policy.name()).unwrap();
            assert_eq!(got, pid, "{policy}");
        }
        for thread in threads {
            join_within(thread, Duration::from_secs(60), policy.name()).unwrap();
        }
        assert_eq!(violations.load(Ordering::SeqCst), 0, "{policy}");
        // Every process ended: IDs, CID spaces, records and timers gone.
        let deadline = Instant::now() + Duration::from_secs(30);
        while model.process_ids().len() != 2 {
            assert!(
                Instant::now() < deadline,
                "{policy}: {:?}",
                model.process_ids()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(model.model_bytes(), start, "{policy}");
    }
}

#[test]
fn panicked_and_cancelled_tasks_release_their_ids() {
    let mut runtime = runtime(Policy::Wakelist);
    let model = Arc::clone(runtime.handle().hooks().model());
    // A leader that panics after its thread finished: the process ends.
    let panicked = runtime
        .spawn_process(ROOT, async {
            process::spawn_thread(async {}).unwrap().await.unwrap();
            panic!("the leader fails");
        })
        .unwrap();
    assert!(matches!(panicked.join(), Err(JoinError::Panicked(_))));
    wait_until_only_init(&model);
    // A process whose thread panics while the leader waits for it.
    let survivor = runtime
        .spawn_process(ROOT, async {
            let failed = process::spawn_thread(async { panic!("a thread fails") })
                .unwrap()
                .await;
            assert!(failed.is_err());
            process::current().unwrap().root_pid
        })
        .unwrap();
    survivor.join().unwrap();
    wait_until_only_init(&model);
    // A sleeping leader and thread, their wakers held here, cancelled at shutdown.
    let parked: Arc<Mutex<Vec<Waker>>> = Arc::default();
    let asleep = Bell::new();
    let sleeper = {
        let (parked, asleep) = (parked.clone(), asleep.clone());
        runtime
            .spawn_process(ROOT, async move {
                let (parked2, asleep2) = (parked.clone(), asleep.clone());
                let _thread = process::spawn_thread(std::future::poll_fn(move |cx| {
                    parked2.lock().unwrap().push(cx.waker().clone());
                    asleep2.ring();
                    Poll::<()>::Pending
                }))
                .unwrap();
                std::future::poll_fn(|cx| {
                    parked.lock().unwrap().push(cx.waker().clone());
                    asleep.ring();
                    Poll::<()>::Pending
                })
                .await
            })
            .unwrap()
    };
    while asleep.rung() < 2 {
        std::thread::yield_now();
    }
    assert_eq!(model.process_ids().len(), 2);
    runtime.shutdown();
    assert!(matches!(sleeper.join(), Err(JoinError::Cancelled)));
    assert_eq!(model.process_ids(), [1]);
    parked.lock().unwrap().clear();
}

#[test]
fn outside_a_process_there_is_no_current_thread() {
    assert_eq!(process::current(), None);
    assert_eq!(
        process::spawn_thread(async {}).err(),
        Some(ProcessError::NotInProcess)
    );
    let runtime = runtime(Policy::Locked);
    // A plain task of a process runtime belongs to no process.
    let plain = runtime
        .spawn(async { (process::current(), process::spawn_thread(async {}).err()) })
        .join()
        .unwrap();
    assert_eq!(plain, (None, Some(ProcessError::NotInProcess)));
    // A dead namespace refuses new processes.
    let model = runtime.handle().hooks().model();
    let ns = model.ns_new(ROOT).unwrap();
    let init = model.fork(ns, 0).unwrap();
    model.kill(init.tid(), 0).unwrap();
    assert_eq!(
        runtime.spawn_process(ns, async {}).err(),
        Some(ProcessError::NsDead)
    );
}
