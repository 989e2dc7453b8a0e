//! Loom models of the runtime's timers (see `src/sched/time/mod.rs`): an arm from a thread
//! outside the runtime reaching a worker that is going to sleep, and a cancel racing the
//! expiry, with and without the target re-arming itself. Real workers and wheels, model-checked
//! primitives.
//!
//! Time does not pass inside a model (a worker's sleep until a deadline still ahead lasts until
//! a notification), so the models use deadlines already passed, which every expiry pass finds
//! due whatever the real clock says.
//!
//! Run with `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2
//! cargo test --release --test loom_time`.

#![cfg(feature = "std")]
#![cfg(loom)]

use std::time::{Duration, Instant};

use idspace::sched::time::Fire;
use idspace::sched::{Builder, Runtime};
use std::sync::Arc;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

mod loom_util;
use loom_util::run_model;

/// One worker that parks without polling, so that every idle period goes through the
/// announce / recheck / park handshake.
fn runtime() -> Runtime {
    Builder::new()
        .workers(1)
        .poll(Duration::ZERO)
        .build()
        .expect("runtime")
}

/// A deadline before the runtime's clock started: due at every expiry pass.
fn passed() -> Instant {
    Instant::now()
        .checked_sub(Duration::from_secs(1))
        .expect("the clock has run for a second")
}

/// Counts its expirations (a loom atomic, so that the models see the ordering); re-arms itself (already due) while it has fired fewer than `rearm`
/// times.
struct Count {
    fired: AtomicUsize,
    rearm: usize,
}

impl Fire for Count {
    fn fire(&self, _now: Instant) -> Option<Instant> {
        let n = self.fired.fetch_add(1, Ordering::SeqCst) + 1;
        (n <= self.rearm).then(passed)
    }
}

/// Waits (in the model) until `count` has fired at least `n` times.
fn wait_fired(count: &Count, n: usize) {
    while count.fired.load(Ordering::SeqCst) < n {
        thread::yield_now();
    }
}

/// A timer armed from outside onto a worker that is going idle must fire: either the worker's
/// recheck after its fenced announcement sees the new expiry, or the arm sees the worker
/// polling or parked and notifies it. A lost kick leaves the worker asleep for good and the
/// model spinning in `wait_fired`.
#[test]
fn an_outside_arm_reaches_a_worker_going_to_sleep() {
    run_model("outside arm vs park", || {
        let runtime = runtime();
        let count = Arc::new(Count {
            fired: AtomicUsize::new(0),
            rearm: 0,
        });
        let armed = runtime.handle().arm(passed(), count.clone());
        wait_fired(&count, 1);
        assert!(!armed.cancel(), "a fired timer is not pending");
        drop(runtime);
        assert_eq!(count.fired.load(Ordering::SeqCst), 1);
    });
}

/// A cancel from another thread racing the worker's expiry: exactly one of "cancel returned
/// true" and "fire was called" happens.
#[test]
fn a_cancel_racing_the_expiry_is_decided_once() {
    run_model("cancel vs expiry", || {
        let runtime = runtime();
        let count = Arc::new(Count {
            fired: AtomicUsize::new(0),
            rearm: 0,
        });
        let armed = runtime.handle().arm(passed(), count.clone());
        let canceller = thread::spawn(move || armed.cancel());
        let cancelled = canceller.join().unwrap();
        if !cancelled {
            // It expired first: its fire ran or is running.
            wait_fired(&count, 1);
        }
        drop(runtime);
        assert_eq!(
            count.fired.load(Ordering::SeqCst),
            usize::from(!cancelled),
            "cancel returned {cancelled}"
        );
    });
}

/// A cancel racing an interval timer that re-arms itself: once the cancel returns, at most the
/// fire already running completes, and nothing is re-armed after it.
#[test]
fn a_cancel_racing_a_rearm_stops_the_timer() {
    run_model("cancel vs re-arm", || {
        let runtime = runtime();
        let count = Arc::new(Count {
            fired: AtomicUsize::new(0),
            rearm: 1,
        });
        let armed = runtime.handle().arm(passed(), count.clone());
        let observer = Arc::clone(&count);
        let canceller = thread::spawn(move || {
            let cancelled = armed.cancel();
            (cancelled, observer.fired.load(Ordering::SeqCst))
        });
        let (cancelled, seen) = canceller.join().unwrap();
        // Shutting down joins the worker: any fire in progress has returned.
        drop(runtime);
        let fired = count.fired.load(Ordering::SeqCst);
        if cancelled {
            // The pending arming (first or re-armed) never fires.
            assert_eq!(fired, seen, "fired after a successful cancel");
        } else {
            // One fire may have been running when the cancel returned; no re-arm after it.
            assert!(
                fired >= 1 && fired <= seen + 1,
                "fired {fired}, seen {seen}"
            );
        }
        // The wheel let go of the target.
        assert_eq!(Arc::strong_count(&count), 1);
    });
}
