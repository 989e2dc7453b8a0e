//! Loom models of the runtime's wake/park protocol (see `src/sched/PROTOCOL.md`): a wakeup
//! racing a worker going to sleep, task-to-task wakeups through the wakelist, a task woken twice
//! while it runs, and wakeups racing shutdown. Real workers, real tasks, model-checked
//! primitives.
//!
//! Run with `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! cargo test --release --test loom_sched` (debug assertions on, so that the models check the
//! task and wakelist asserts too).

#![cfg(feature = "std")]
#![cfg(loom)]

use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::Duration;

use idspace::sched::{Builder, JoinError, Placement, Policy, Runtime};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

mod loom_util;
use loom_util::{run_model, run_model_capped};

/// A runtime whose idle workers park without polling: every idle period goes through the
/// announce / recheck / park handshake. Remote placement: no next slot and no stealing, which
/// the models of the handshake do not need (they have models of their own, below), so that
/// the handshake's models stay small.
fn runtime(workers: usize, policy: Policy) -> Runtime {
    placed_runtime(workers, policy, Placement::Remote, Duration::ZERO)
}

fn placed_runtime(workers: usize, policy: Policy, placement: Placement, poll: Duration) -> Runtime {
    Builder::new()
        .workers(workers)
        .policy(policy)
        .placement(placement)
        .poll(poll)
        .build()
        .expect("runtime")
}

/// A task that parks on its first poll, leaving its waker in `slot`, and completes on any later
/// poll. Returns how often it was polled.
fn sleeper(
    slot: Arc<Mutex<Option<Waker>>>,
    dropped: Arc<AtomicUsize>,
) -> impl std::future::Future<Output = usize> + Send + 'static {
    struct Guard(Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let guard = Guard(dropped);
    let mut polls = 0;
    poll_fn(move |cx| {
        let _keep = &guard;
        polls += 1;
        if polls == 1 {
            *slot.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        } else {
            Poll::Ready(polls)
        }
    })
}

/// Waits (in the model) until the sleeper has left its waker, then takes it.
fn take_waker(slot: &Mutex<Option<Waker>>) -> Waker {
    loop {
        if let Some(waker) = slot.lock().unwrap().take() {
            return waker;
        }
        thread::yield_now();
    }
}

/// An outside thread wakes a task while its only worker goes idle and parks: the wakeup must
/// reach it whichever side wins (the Dekker handshake of the protocol, section 4).
#[test]
fn an_outside_wakeup_reaches_a_worker_going_to_sleep() {
    for policy in [Policy::Locked, Policy::Wakelist] {
        run_model(&format!("outside wakeup vs park, {policy}"), move || {
            let runtime = runtime(1, policy);
            let slot = Arc::new(Mutex::new(None));
            let dropped = Arc::new(AtomicUsize::new(0));
            let handle = runtime.spawn(sleeper(slot.clone(), dropped.clone()));
            let waker_thread = thread::spawn(move || take_waker(&slot).wake());
            assert_eq!(handle.join().unwrap(), 2);
            waker_thread.join().unwrap();
            drop(runtime);
            assert_eq!(dropped.load(Ordering::SeqCst), 1);
        });
    }
}

/// One task wakes another across two workers, through the wakelist when the target is idle:
/// push, notify-on-empty and the target's batch take, racing the target's park (remote
/// placement, so that the wakeup crosses). Under the kernel's placement the same wakeup is a
/// sync one: the wakee goes into the waker's worker's next slot, racing the other worker's
/// newidle steal and park. The sleeper spawns its waker from inside its first poll, after
/// leaving its waker, so nothing spins.
#[test]
fn a_task_wakes_a_task_on_another_worker() {
    for (policy, placement) in [
        (Policy::Wakelist, Placement::Remote),
        (Policy::WakelistAlways, Placement::Remote),
        (Policy::Wakelist, Placement::Kernel),
    ] {
        run_model_capped(
            &format!("task wakes task, {policy}, {placement}"),
            1,
            move || {
                let runtime = placed_runtime(2, policy, placement, Duration::from_micros(1));
                let handle = runtime.handle().clone();
                let mut polls = 0;
                let mut waking = None;
                let sleeping = runtime.spawn(poll_fn(move |cx| {
                    polls += 1;
                    if polls > 1 {
                        return Poll::Ready(waking.take());
                    }
                    let waker = cx.waker().clone();
                    waking = Some(handle.spawn(async move { waker.wake() }));
                    Poll::Pending
                }));
                let waking = sleeping.join().unwrap().expect("the waking task's handle");
                waking.join().unwrap();
                drop(runtime);
            },
        );
    }
}

/// An outside thread wakes a task twice while it may be running or queued: it is never polled
/// by two workers at once, it is polled again after the wakeup, and it completes exactly once.
#[test]
fn a_task_woken_twice_is_never_polled_twice_at_once() {
    run_model_capped("woken twice", 1, || {
        let runtime = runtime(2, Policy::Wakelist);
        let slot: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let in_poll = Arc::new(AtomicBool::new(false));
        let overlap = Arc::new(AtomicBool::new(false));
        let task = {
            let (slot, in_poll, overlap) = (slot.clone(), in_poll.clone(), overlap.clone());
            let mut polls = 0;
            runtime.spawn(poll_fn(move |cx| {
                if in_poll.swap(true, Ordering::SeqCst) {
                    overlap.store(true, Ordering::SeqCst);
                }
                polls += 1;
                if polls == 1 {
                    *slot.lock().unwrap() = Some(cx.waker().clone());
                }
                in_poll.store(false, Ordering::SeqCst);
                if polls >= 2 {
                    Poll::Ready(polls)
                } else {
                    Poll::Pending
                }
            }))
        };
        let waker = take_waker(&slot);
        waker.wake_by_ref();
        waker.wake();
        assert!(task.join().unwrap() >= 2);
        assert!(
            !overlap.load(Ordering::SeqCst),
            "two workers polled one task"
        );
    });
}

/// A wakeup races shutdown: the task is either run to completion or cancelled, its future is
/// dropped exactly once, and nothing is left on a queue.
#[test]
fn a_wakeup_racing_shutdown_loses_no_task() {
    for policy in [Policy::Locked, Policy::WakelistAlways] {
        run_model(&format!("wakeup vs shutdown, {policy}"), move || {
            let mut runtime = runtime(1, policy);
            let slot = Arc::new(Mutex::new(None));
            let dropped = Arc::new(AtomicUsize::new(0));
            let handle = runtime.spawn(sleeper(slot.clone(), dropped.clone()));
            let waker = take_waker(&slot);
            let waker_thread = thread::spawn(move || waker.wake());
            runtime.shutdown();
            waker_thread.join().unwrap();
            match handle.join() {
                Ok(polls) => assert_eq!(polls, 2),
                Err(JoinError::Cancelled) => {}
                Err(other) => panic!("unexpected {other}"),
            }
            assert_eq!(dropped.load(Ordering::SeqCst), 1);
        });
    }
}
