//! The runtime's life-cycle hooks used the way the other modules will use them: every task gets
//! a PID from `idspace::pid` when it is created, carries it in its own hook data (no map) and
//! gives it back when it exits, and each worker runs one task at a time between its switch-in
//! and switch-out.

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod sched_util;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use idspace::pid::{PerCpu, PidAllocator, ROOT};
use idspace::sched::{Builder, Exit, Hooks, JoinError, Policy, TaskId};
use sched_util::{join_within, yield_now, Bell};

const WORKERS: usize = 3;
/// Tasks in the ring, and the rounds each goes: fewer under Miri, which runs the same code some
/// thousand times slower.
const TASKS: usize = if cfg!(miri) { 8 } else { 64 };
const ROUNDS: u64 = if cfg!(miri) { 3 } else { 10 };

struct PidHooks {
    pids: PerCpu,
    /// Tasks whose PID is held.
    live: AtomicUsize,
    /// The task each worker is running (its ID), or 0.
    running: Vec<AtomicU64>,
    violations: AtomicUsize,
}

/// What each task carries from its creation to its exit: no map, the runtime hands it over.
struct TaskPid {
    task: TaskId,
    pid: u32,
    /// Set when its PID was given back, so a second exit shows.
    freed: AtomicBool,
}

impl PidHooks {
    /// The allocator's CPU slot for a hook called on `worker` (outside threads share the last).
    fn slot(worker: Option<usize>) -> usize {
        worker.unwrap_or(WORKERS)
    }

    fn check(&self, ok: bool) {
        if !ok {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Whether `data`'s PID still names it in the allocator.
    fn holds(&self, data: &TaskPid) -> bool {
        let found = self.pids.lookup(ROOT, data.pid).ok().flatten();
        found.is_some_and(|pid| pid.ids() == [data.pid]) && !data.freed.load(Ordering::SeqCst)
    }
}

impl Hooks for PidHooks {
    type Data = TaskPid;

    fn created(&self, task: TaskId, worker: Option<usize>) -> TaskPid {
        let pid = self
            .pids
            .alloc(ROOT, &[], Self::slot(worker))
            .expect("a PID for every task");
        self.live.fetch_add(1, Ordering::SeqCst);
        TaskPid {
            task,
            pid: pid.ids()[0],
            freed: AtomicBool::new(false),
        }
    }

    fn switched_in(&self, task: TaskId, data: &TaskPid, worker: usize) {
        self.check(self.running[worker].swap(task.0, Ordering::SeqCst) == 0);
        self.check(data.task == task && self.holds(data));
    }

    fn switched_out(&self, task: TaskId, data: &TaskPid, worker: usize) {
        self.check(self.running[worker].swap(0, Ordering::SeqCst) == task.0);
        self.check(data.task == task && self.holds(data));
    }

    fn exited(&self, task: TaskId, data: &TaskPid, worker: Option<usize>, _how: Exit) {
        self.check(data.task == task && self.holds(data));
        self.check(!data.freed.swap(true, Ordering::SeqCst));
        self.check(self.pids.free(ROOT, data.pid, Self::slot(worker)).is_ok());
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn every_task_holds_a_pid_from_creation_to_exit() {
    for policy in Policy::ALL {
        let pids = PerCpu::new(WORKERS + 1).unwrap();
        // PID 1 is the space's init: it lives for the whole test, as a namespace dies with its
        // init (the kernel's rule, which the allocator keeps).
        let init = pids.alloc(ROOT, &[], 0).unwrap();
        assert_eq!(init.ids(), vec![1]);
        let hooks = Arc::new(PidHooks {
            pids,
            live: AtomicUsize::new(0),
            running: (0..WORKERS).map(|_| AtomicU64::new(0)).collect(),
            violations: AtomicUsize::new(0),
        });
        let mut runtime = Builder::new()
            .workers(WORKERS)
            .policy(policy)
            .hooks(hooks.clone())
            .build()
            .unwrap();
        let handle = runtime.handle().clone();
        let bells: Vec<Arc<Bell>> = (0..TASKS).map(|_| Bell::new()).collect();
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (mine, next) = (bells[i].clone(), bells[(i + 1) % TASKS].clone());
                let handle = handle.clone();
                runtime.spawn(async move {
                    for round in 1..=ROUNDS {
                        if i == 0 {
                            next.ring();
                        }
                        mine.until(round).await;
                        if i != 0 {
                            next.ring();
                        }
                        // Children spawned from inside the runtime get PIDs too.
                        handle.spawn(async { yield_now().await }).await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            join_within(task, Duration::from_secs(60), policy.name()).unwrap();
        }
        // A task that panics and one left asleep at shutdown exit too.
        assert!(runtime
            .spawn(async { panic!("exit by panic") })
            .join()
            .is_err());
        // The sleeper leaves its waker with the test and waits for a wakeup that never comes.
        let parked: Arc<Mutex<Vec<Waker>>> = Arc::default();
        let asleep = Bell::new();
        let sleeper = {
            let (parked, asleep) = (parked.clone(), asleep.clone());
            runtime.spawn(std::future::poll_fn(move |cx| {
                parked.lock().unwrap().push(cx.waker().clone());
                asleep.ring();
                Poll::<()>::Pending
            }))
        };
        while asleep.rung() == 0 {
            std::thread::yield_now();
        }
        // Shutdown cancels it although its waker lives on.
        runtime.shutdown();
        assert!(matches!(sleeper.join(), Err(JoinError::Cancelled)));
        parked.lock().unwrap().clear();
        assert_eq!(hooks.violations.load(Ordering::SeqCst), 0, "{policy}");
        let live = hooks.live.load(Ordering::SeqCst);
        assert_eq!(live, 0, "{policy}: tasks never exited");
        // Every PID went back: only init's is left.
        assert!(hooks.pids.lookup(ROOT, 2).unwrap().is_none());
        assert_eq!(runtime.stats().spawned, TASKS as u64 * (1 + ROUNDS) + 2);
    }
}
