//! Loom models of a timer's arming protocol on a real runtime's wheel: a `timer_settime` or a
//! `timer_delete` from another thread racing the worker's expiry of the current arming. The
//! expiry either runs first (counted, notified, and then made stale by the settime or the
//! deletion) or finds a newer arming and changes nothing; never both, never after. Run with
//! `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --release
//! -p idspace --lib process::timers`.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cell::TimerCell;
use super::cell::{Notify, TimerEvent};
use super::clock::mono_of;
use super::wheel::WheelLink;
use crate::process::posix_timer::{
    Clock, ITimerSpec, Now, PosixTimer, TimeSpec, When, NSEC_PER_SEC,
};
use crate::sched::{Builder, Runtime};
use crate::sync;

const HOUR: u64 = 3600 * 1_000_000_000;

/// A one-worker runtime that parks without polling, and a timer of process 7 notifying
/// `tx`, armed on it at a deadline already passed (due at every expiry pass: time does not
/// pass inside a model).
fn armed(tx: mpsc::Sender<TimerEvent>) -> (Runtime, Arc<TimerCell>, WheelLink, u64) {
    let runtime = Builder::new()
        .workers(1)
        .poll(Duration::ZERO)
        .build()
        .expect("runtime");
    let wheel = WheelLink::default();
    assert_eq!(wheel.attach(&runtime.handle().driver()), Some(true));
    let now = mono_of(Instant::now());
    let mut timer = PosixTimer::new(Clock::Monotonic);
    let passed = Now::at(now - NSEC_PER_SEC as u64, 0);
    let setting = ITimerSpec::once(TimeSpec::new(0, 1));
    timer.settime(passed, When::Relative, setting).unwrap();
    let cell = Arc::new(TimerCell::new(7, 0, timer, Notify::Channel(tx)));
    cell.rearm(&mut sync::lock(&cell.inner), wheel.driver());
    (runtime, cell, wheel, now)
}

#[test]
fn a_settime_racing_the_expiry_of_the_previous_arming() {
    loom::model(|| {
        let (tx, rx) = mpsc::channel();
        let (runtime, cell, wheel, now) = armed(tx);
        let setter = {
            let cell = Arc::clone(&cell);
            let driver = wheel.driver();
            crate::sync::thread::spawn(move || {
                let mut inner = sync::lock(&cell.inner);
                let later = ITimerSpec::once(TimeSpec::from_nanos(HOUR));
                inner
                    .timer
                    .settime(Now::at(now, 0), When::Relative, later)
                    .unwrap();
                cell.rearm(&mut inner, driver);
            })
        };
        setter.join().unwrap();
        // Shutting down joins the worker: a fire in progress has returned.
        drop(runtime);
        let events: Vec<TimerEvent> = rx.try_iter().collect();
        assert!(events.len() <= 1, "one arming, one expiry");
        for event in events {
            assert_eq!(event.accept(), None, "the timer was set again since");
        }
        let inner = sync::lock(&cell.inner);
        assert!(!inner.timer.is_pending(), "the old expiry is not pending");
        assert_eq!(inner.timer.getoverrun(), 0);
        assert_eq!(
            inner.timer.deadline(),
            Some(now + HOUR),
            "the new setting stands"
        );
    });
}

#[test]
fn a_delete_racing_the_expiry_ends_the_timer() {
    loom::model(|| {
        let (tx, rx) = mpsc::channel();
        let (runtime, cell, _wheel, _now) = armed(tx);
        let deleter = {
            let cell = Arc::clone(&cell);
            crate::sync::thread::spawn(move || cell.delete())
        };
        deleter.join().unwrap();
        drop(runtime);
        let events: Vec<TimerEvent> = rx.try_iter().collect();
        assert!(events.len() <= 1);
        for event in events {
            assert_eq!(event.accept(), None, "the timer was deleted since");
        }
        // Nothing holds the timer but the test: the wheel let go of its entry.
        assert_eq!(Arc::strong_count(&cell), 1);
    });
}
