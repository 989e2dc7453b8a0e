//! Loom models of [`Bell`]: a ring racing the waiter's check-then-register must not be lost,
//! and what a ringer wrote before ringing is visible to the waiter it woke.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test
//! loom_bell`.

#![cfg(feature = "std")]
#![cfg(loom)]

use std::future::Future;
use std::task::{Context, Poll, Wake, Waker};

use idspace::sched::Bell;
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

mod loom_util;
use loom_util::run_model;

/// A waker that sets a flag and signals a condition variable, both loom's.
struct Signal {
    woken: Mutex<bool>,
    wakeup: Condvar,
}

// `Wake` takes std's `Arc`; what the threads race on, the flag and the condition variable, is
// loom's.
impl Wake for Signal {
    fn wake(self: std::sync::Arc<Self>) {
        *self.woken.lock().unwrap() = true;
        self.wakeup.notify_one();
    }
}

/// Polls `future` to completion on this thread, sleeping on a loom condition variable between
/// polls: a wakeup that never comes is a deadlock, which loom reports.
fn block_on<F: Future>(future: F) -> F::Output {
    let signal = std::sync::Arc::new(Signal {
        woken: Mutex::new(false),
        wakeup: Condvar::new(),
    });
    let waker = Waker::from(std::sync::Arc::clone(&signal));
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
            return output;
        }
        let mut woken = signal.woken.lock().unwrap();
        while !*woken {
            woken = signal.wakeup.wait(woken).unwrap();
        }
        *woken = false;
    }
}

/// One ringer against a waiter that polls, registers and polls again: if the ring fell
/// between the check and the registration and were lost, `block_on` would never return and
/// loom would report the deadlock.
#[test]
fn a_ring_racing_the_registration_still_wakes_the_waiter() {
    run_model("ring racing registration", || {
        let bell = Bell::new();
        let ringer = {
            let bell = bell.clone();
            thread::spawn(move || bell.ring())
        };
        block_on(bell.until(1));
        ringer.join().unwrap();
        assert_eq!(bell.rung(), 1);
    });
}

/// Two ringers, and a waiter for both rings.
#[test]
fn the_waiter_wakes_after_every_ring_it_waits_for() {
    run_model("two ringers", || {
        let bell = Bell::new();
        let ringers: Vec<_> = (0..2)
            .map(|_| {
                let bell = bell.clone();
                thread::spawn(move || bell.ring())
            })
            .collect();
        block_on(bell.until(2));
        for ringer in ringers {
            ringer.join().unwrap();
        }
    });
}

/// A ringer writes a cell, then rings; the waiter reads the cell once its wait resolves. Loom
/// reports the read as racing the write unless the ring orders them.
#[test]
fn what_the_ringer_wrote_before_ringing_is_visible_to_the_waiter() {
    run_model("ring publishes", || {
        let bell = Bell::new();
        let cell = Arc::new(UnsafeCell::new(0u32));
        let ringer = {
            let (bell, cell) = (bell.clone(), Arc::clone(&cell));
            thread::spawn(move || {
                // SAFETY: the only write, before the ring the reader waits for.
                cell.with_mut(|value| unsafe { *value = 7 });
                bell.ring();
            })
        };
        block_on(bell.until(1));
        // SAFETY: the write happened before the ring this wait observed.
        let value = cell.with(|value| unsafe { *value });
        assert_eq!(value, 7);
        ringer.join().unwrap();
    });
}
