//! The runtime's life-cycle hooks used the way the other modules will use them: every task gets
//! a PID from `idspace::pid` when it is created and gives it back when it exits, and each worker
//! runs one task at a time between its switch-in and switch-out.

#![cfg(not(loom))]

mod sched_util;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    live: Mutex<HashMap<TaskId, u32>>,
    /// The task each worker is running, if any.
    running: Vec<Mutex<Option<TaskId>>>,
    violations: AtomicUsize,
}

impl PidHooks {
    /// The allocator's CPU slot for a hook called on `worker` (outside threads share the last).
    fn slot(worker: Option<usize>) -> usize {
        worker.unwrap_or(WORKERS)
    }
}

impl Hooks for PidHooks {
    fn created(&self, task: TaskId, worker: Option<usize>) {
        let pid = self
            .pids
            .alloc(ROOT, &[], Self::slot(worker))
            .expect("a PID for every task");
        let previous = self.live.lock().unwrap().insert(task, pid.ids()[0]);
        if previous.is_some() {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn switched_in(&self, task: TaskId, worker: usize) {
        if self.running[worker].lock().unwrap().replace(task).is_some() {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        if !self.live.lock().unwrap().contains_key(&task) {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn switched_out(&self, task: TaskId, worker: usize) {
        if self.running[worker].lock().unwrap().take() != Some(task) {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn exited(&self, task: TaskId, worker: Option<usize>, _how: Exit) {
        match self.live.lock().unwrap().remove(&task) {
            Some(pid) => {
                if self.pids.free(ROOT, pid, Self::slot(worker)).is_err() {
                    self.violations.fetch_add(1, Ordering::SeqCst);
                }
            }
            None => {
                self.violations.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

#[test]
fn every_task_holds_a_pid_from_creation_to_exit() {
    for policy in Policy::ALL {
        let pids = PerCpu::new(WORKERS + 1);
        // PID 1 is the space's init: it lives for the whole test, as a namespace dies with its
        // init (the kernel's rule, which the allocator keeps).
        let init = pids.alloc(ROOT, &[], 0).unwrap();
        assert_eq!(init.ids(), vec![1]);
        let hooks = Arc::new(PidHooks {
            pids,
            live: Mutex::default(),
            running: (0..WORKERS).map(|_| Mutex::default()).collect(),
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
        assert!(runtime.block_on(async { panic!("exit by panic") }).is_err());
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
        runtime.shutdown();
        // Its last waker goes: it can never run again, so it exits as cancelled.
        parked.lock().unwrap().clear();
        assert!(matches!(sleeper.join(), Err(JoinError::Cancelled)));
        assert_eq!(hooks.violations.load(Ordering::SeqCst), 0, "{policy}");
        let live = hooks.live.lock().unwrap();
        assert!(live.is_empty(), "{policy}: tasks never exited: {live:?}");
        assert_eq!(runtime.stats().spawned, TASKS as u64 * (1 + ROUNDS) + 2);
    }
}
