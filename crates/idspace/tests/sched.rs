//! The task runtime: behaviour of every policy, panics, cancellation, shutdown and hooks.

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod sched_util;

use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use idspace::sched::{
    BuildError, Builder, Exit, Hooks, JoinError, Placement, Policy, Runtime, TaskId,
};
use sched_util::{join_within, spawn_ping_pong, yield_now, Bell};

fn runtimes(workers: usize) -> impl Iterator<Item = Runtime> {
    Policy::ALL
        .into_iter()
        .map(move |policy| Runtime::new(workers, policy).expect("runtime"))
}

#[test]
fn block_on_returns_the_output_under_every_policy() {
    for runtime in runtimes(2) {
        assert_eq!(runtime.block_on(async { 6 * 7 }).unwrap(), 42);
    }
}

#[test]
fn block_on_takes_borrowing_non_send_futures_and_reports_panics() {
    let runtime = Runtime::new(2, Policy::Wakelist).unwrap();
    let local = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let mut borrowed = vec![1u64, 2, 3];
    let sum = runtime
        .block_on(async {
            // Awaits a task of the runtime while holding a non-Send Rc and a borrow.
            let child = idspace::sched::spawn(async { 10u64 })
                .unwrap()
                .await
                .unwrap();
            local.set(child);
            borrowed.push(child);
            borrowed.iter().sum::<u64>()
        })
        .unwrap();
    assert_eq!((sum, local.get()), (16, 10));
    let failed = runtime.block_on(async { panic!("in block_on") });
    assert_eq!(failed.unwrap_err().panic_message(), Some("in block_on"));
}

#[test]
fn handle_current_and_spawn_reach_the_runtime_running_the_code() {
    use idspace::sched::{Handle, NoRuntime};
    assert_eq!(
        Handle::<idspace::sched::NoHooks>::current().unwrap_err(),
        NoRuntime
    );
    assert!(idspace::sched::spawn(async {}).is_err());
    let runtime = Runtime::new(2, Policy::Wakelist).unwrap();
    let (workers, grandchild) = runtime
        .spawn(async {
            let handle = Handle::<idspace::sched::NoHooks>::current().unwrap();
            let grandchild = idspace::sched::spawn(async { 7 }).unwrap().await.unwrap();
            (handle.workers(), grandchild)
        })
        .join()
        .unwrap();
    assert_eq!((workers, grandchild), (2, 7));
    // A runtime with other hooks is not found under this type.
    let recorder = Arc::new(Recorder::default());
    let hooked = Builder::new().workers(1).hooks(recorder).build().unwrap();
    let found = hooked.block_on(async {
        (
            Handle::<idspace::sched::NoHooks>::current().is_err(),
            Handle::<Recorder>::current().is_ok(),
        )
    });
    assert_eq!(found.unwrap(), (true, true));
    // The thread is outside any runtime again.
    assert!(idspace::sched::spawn(async {}).is_err());
}

#[test]
fn ping_pong_completes_and_uses_each_policys_path() {
    for policy in Policy::ALL {
        // Remote placement: every wakeup crosses workers, so each travels by the policy.
        let runtime = Builder::new()
            .workers(2)
            .policy(policy)
            .placement(Placement::Remote)
            .build()
            .unwrap();
        let (a, b) = spawn_ping_pong(&runtime, 2_000);
        a.join().unwrap();
        b.join().unwrap();
        let stats = runtime.stats();
        assert_eq!(stats.spawned, 2, "{policy}");
        match policy {
            Policy::Locked => assert_eq!(stats.wakelist, 0, "{policy}: {stats:?}"),
            Policy::Wakelist | Policy::WakelistAlways => {
                assert!(stats.wakelist > 0, "{policy}: {stats:?}")
            }
            other => panic!("{other}: a policy this test does not know"),
        }
    }
}

#[test]
fn a_panicking_task_reports_its_panic_and_the_runtime_goes_on() {
    for runtime in runtimes(2) {
        let handle = runtime.spawn(async {
            if true {
                panic!("boom in a task");
            }
        });
        let error = handle.join().unwrap_err();
        assert!(matches!(error, JoinError::Panicked(_)));
        assert_eq!(error.panic_message(), Some("boom in a task"));
        assert!(error.to_string().contains("boom in a task"));
        // Both workers still run tasks.
        let handles: Vec<_> = (0..20u64)
            .map(|i| runtime.spawn(async move { i }))
            .collect();
        let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, 190);
    }
}

#[test]
fn a_task_no_one_can_wake_is_cancelled() {
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let runtime = Runtime::new(2, Policy::Wakelist).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = Dropped(drops.clone());
    // Pending without keeping the waker: nothing can ever wake it.
    let handle = runtime.spawn(async move {
        let _guard = guard;
        poll_fn(|_| Poll::<()>::Pending).await;
    });
    assert!(matches!(handle.join(), Err(JoinError::Cancelled)));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_task_future_is_dropped_before_its_join_handle_resolves() {
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    // Each round ends one task by completion and one by a panic; Miri interprets every unwind,
    // so it runs a few rounds.
    let rounds = if cfg!(miri) { 3 } else { 50 };
    for runtime in runtimes(2) {
        let drops = Arc::new(AtomicUsize::new(0));
        for round in 1..=rounds {
            let guard = Dropped(drops.clone());
            let completes = runtime.spawn(async move {
                let _guard = guard;
                yield_now().await;
            });
            completes.join().unwrap();
            assert_eq!(drops.load(Ordering::SeqCst), 2 * round - 1);
            let guard = Dropped(drops.clone());
            let panics = runtime.spawn(async move {
                let _guard = guard;
                yield_now().await;
                panic!("after a yield");
            });
            assert!(panics.join().is_err());
            assert_eq!(drops.load(Ordering::SeqCst), 2 * round);
        }
    }
}

#[test]
fn a_future_whose_drop_panics_does_not_stop_a_worker() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("panic in drop");
        }
    }
    let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
    let bomb = Bomb;
    // The future completes; dropping it (before its output is handed over) panics.
    let handle = runtime.spawn(async move {
        let _bomb = bomb;
        yield_now().await;
        7
    });
    let error = handle.join().unwrap_err();
    assert_eq!(error.panic_message(), Some("panic in drop"));
    // The only worker still runs tasks.
    assert_eq!(runtime.block_on(async { 5 }).unwrap(), 5);
}

/// A task asleep with its waker held elsewhere (here, by the test, which never wakes it) is
/// cancelled by shutdown and by dropping the runtime: its future is dropped and its join
/// resolves, rather than blocking forever once the runtime is gone.
#[test]
fn shutdown_and_drop_cancel_sleepers_whose_wakers_live_on() {
    for drop_it in [false, true] {
        for mut runtime in runtimes(2) {
            let parked: Arc<Mutex<Vec<Waker>>> = Arc::default();
            let asleep = Bell::new();
            let dropped = Arc::new(AtomicUsize::new(0));
            struct Flag(Arc<AtomicUsize>);
            impl Drop for Flag {
                fn drop(&mut self) {
                    self.0.fetch_add(1, Ordering::SeqCst);
                }
            }
            let sleeper = {
                let (parked, asleep) = (parked.clone(), asleep.clone());
                let flag = Flag(dropped.clone());
                runtime.spawn(async move {
                    let _flag = flag;
                    poll_fn(|cx| {
                        parked.lock().unwrap().push(cx.waker().clone());
                        asleep.ring();
                        Poll::<()>::Pending
                    })
                    .await
                })
            };
            while asleep.rung() == 0 {
                std::thread::yield_now();
            }
            if drop_it {
                drop(runtime);
            } else {
                assert_eq!(runtime.shutdown(), 1);
            }
            let outcome = join_within(sleeper, Duration::from_secs(10), "the sleeper");
            assert!(matches!(outcome, Err(JoinError::Cancelled)));
            assert_eq!(dropped.load(Ordering::SeqCst), 1, "its future was dropped");
            // The waker still held is harmless now.
            parked.lock().unwrap().drain(..).for_each(Waker::wake);
        }
    }
}

#[test]
fn shutdown_cancels_sleeping_and_queued_tasks_and_later_wakeups() {
    for mut runtime in runtimes(2) {
        let parked: Arc<Mutex<Vec<Waker>>> = Arc::default();
        let started = Bell::new();
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (parked, started) = (parked.clone(), started.clone());
                runtime.spawn(async move {
                    let mut first = true;
                    poll_fn(|cx| {
                        if first {
                            first = false;
                            parked.lock().unwrap().push(cx.waker().clone());
                            started.ring();
                        }
                        Poll::<()>::Pending
                    })
                    .await
                })
            })
            .collect();
        while started.rung() < 8 {
            std::thread::yield_now();
        }
        // Half of them are woken (and queued) right before shutdown.
        for waker in parked.lock().unwrap().iter().take(4) {
            waker.wake_by_ref();
        }
        runtime.shutdown();
        // Wakeups after shutdown cancel instead of queueing.
        for waker in parked.lock().unwrap().drain(..) {
            waker.wake();
        }
        for handle in handles {
            assert!(matches!(handle.join(), Err(JoinError::Cancelled)));
        }
        // Spawning after shutdown cancels at once.
        let late = runtime.spawn(async { 1 });
        assert!(matches!(late.join(), Err(JoinError::Cancelled)));
        assert!(runtime.stats().cancelled >= 1);
    }
}

#[test]
fn join_handles_can_be_awaited_by_other_tasks() {
    for runtime in runtimes(3) {
        let handle = runtime.handle().clone();
        let total = runtime
            .block_on(async move {
                let children: Vec<_> = (1..=10u64)
                    .map(|i| {
                        handle.spawn(async move {
                            yield_now().await;
                            i * i
                        })
                    })
                    .collect();
                let mut total = 0;
                for child in children {
                    total += child.await.unwrap();
                }
                total
            })
            .unwrap();
        assert_eq!(total, 385);
    }
}

#[test]
fn a_task_woken_during_its_own_poll_runs_again() {
    for runtime in runtimes(1) {
        let count = runtime
            .block_on(async {
                for _ in 0..100 {
                    yield_now().await;
                }
                100
            })
            .unwrap();
        assert_eq!(count, 100);
    }
}

#[test]
fn builder_rejects_bad_configurations() {
    assert_eq!(
        Builder::new().workers(0).build().unwrap_err(),
        BuildError::Workers(0)
    );
    let error = Builder::new().workers(5000).build().unwrap_err();
    assert!(error.to_string().contains("5000"), "{error}");
    let error = "fast".parse::<Policy>().unwrap_err();
    assert!(error.to_string().contains("\"fast\""), "{error}");
    for policy in Policy::ALL {
        assert_eq!(policy.name().parse::<Policy>().unwrap(), policy);
    }
}

#[derive(Default)]
struct Recorder {
    created: AtomicU64,
    switched_in: AtomicU64,
    switched_out: AtomicU64,
    /// Each task's ID, how it ended, and its own switch count from its data.
    exits: Mutex<Vec<(TaskId, Exit, u64)>>,
    workers: AtomicU64,
    /// Hooks that saw data not made for their task, or a switch-out without a switch-in.
    mismatches: AtomicU64,
}

/// What each task carries: its own ID, as `created` saw it, and its switch-ins and -outs.
struct Carried {
    task: TaskId,
    switched_in: AtomicU64,
    switched_out: AtomicU64,
}

impl Recorder {
    fn check(&self, ok: bool) {
        if !ok {
            self.mismatches.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Hooks for Recorder {
    type Data = Carried;

    fn worker_started(&self, _worker: usize) {
        self.workers.fetch_add(1, Ordering::SeqCst);
    }
    fn created(&self, task: TaskId, _worker: Option<usize>) -> Carried {
        self.created.fetch_add(1, Ordering::SeqCst);
        Carried {
            task,
            switched_in: AtomicU64::new(0),
            switched_out: AtomicU64::new(0),
        }
    }
    fn switched_in(&self, task: TaskId, data: &Carried, _worker: usize) {
        self.switched_in.fetch_add(1, Ordering::SeqCst);
        self.check(data.task == task);
        // Switch-ins and -outs of one task alternate: the next switch-in waits for the last
        // switch-out.
        let ins = data.switched_in.fetch_add(1, Ordering::Relaxed);
        self.check(ins == data.switched_out.load(Ordering::Relaxed));
    }
    fn switched_out(&self, task: TaskId, data: &Carried, _worker: usize) {
        self.switched_out.fetch_add(1, Ordering::SeqCst);
        self.check(data.task == task);
        let outs = data.switched_out.fetch_add(1, Ordering::Relaxed);
        self.check(outs + 1 == data.switched_in.load(Ordering::Relaxed));
    }
    fn exited(&self, task: TaskId, data: &Carried, _worker: Option<usize>, how: Exit) {
        self.check(data.task == task);
        let switches = data.switched_in.load(Ordering::Relaxed);
        self.exits.lock().unwrap().push((task, how, switches));
    }
}

#[test]
fn hooks_see_every_life_cycle_point() {
    let recorder = Arc::new(Recorder::default());
    let mut runtime = Builder::new()
        .workers(2)
        .policy(Policy::Wakelist)
        .poll(Duration::ZERO)
        .hooks(recorder.clone())
        .build()
        .unwrap();
    let ok = runtime.spawn(async {
        yield_now().await;
    });
    let ok_id = ok.id();
    ok.join().unwrap();
    let bad = runtime.spawn(async { panic!("hook test") });
    let bad_id = bad.id();
    assert!(bad.join().is_err());
    runtime.shutdown();
    assert_eq!(recorder.workers.load(Ordering::SeqCst), 2);
    assert_eq!(recorder.created.load(Ordering::SeqCst), 2);
    // The first task is polled twice (it yields), the second once.
    assert_eq!(recorder.switched_in.load(Ordering::SeqCst), 3);
    assert_eq!(recorder.switched_out.load(Ordering::SeqCst), 3);
    let mut exits = recorder.exits.lock().unwrap().clone();
    exits.sort_by_key(|(id, _, _)| *id);
    // Each task's own data counted its own switches.
    assert_eq!(
        exits,
        vec![(ok_id, Exit::Completed, 2), (bad_id, Exit::Panicked, 1)]
    );
    assert_eq!(recorder.mismatches.load(Ordering::SeqCst), 0);
}

/// Kernel placement: a task woken by a running task runs next on the waker's worker; remote
/// placement never does that and sends wakeups across workers.
#[test]
fn sync_wakeups_use_the_next_slot_only_under_kernel_placement() {
    for placement in Placement::ALL {
        let runtime = Builder::new()
            .workers(2)
            .placement(placement)
            .build()
            .unwrap();
        assert_eq!(runtime.handle().placement(), placement);
        let (a, b) = spawn_ping_pong(&runtime, 1_000);
        a.join().unwrap();
        b.join().unwrap();
        let stats = runtime.stats();
        match placement {
            Placement::Kernel => assert!(stats.affine > 0, "{placement}: {stats:?}"),
            Placement::Remote => {
                assert_eq!(stats.affine, 0, "{placement}: {stats:?}");
                assert!(stats.locked + stats.wakelist > 0, "{placement}: {stats:?}");
            }
            other => panic!("{other}: a placement this test does not know"),
        }
    }
    let error = "near".parse::<Placement>().unwrap_err();
    assert!(error.to_string().contains("\"near\""), "{error}");
}
