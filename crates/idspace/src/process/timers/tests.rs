//! Unit tests of the timer cells: notification, staleness, waiting, cancelling on the wheel,
//! the map's hasher and images.

use std::future::Future;
use std::hash::Hasher;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::cell::Notify;
use super::cell::TimerCell;
use super::map::{IdHasher, ProcessTimers};
use super::wait::TimerWait;
use crate::process::error::ProcessError;
use crate::process::posix_timer::{Clock, ITimerSpec, Now, PosixTimer, TimeSpec, When};
use crate::sched::time::Armed;
use crate::sync;

const MS: u64 = 1_000_000;

/// A timer of process 7 armed at time 0 to expire at 1 ms, then every `interval` ms.
fn armed(timers: &ProcessTimers, id: u32, interval: u64, notify: Notify) -> Arc<TimerCell> {
    let mut timer = PosixTimer::new(Clock::Monotonic);
    let setting = ITimerSpec::every(
        TimeSpec::from_nanos(MS),
        TimeSpec::from_nanos(interval * MS),
    );
    timer
        .settime(Now::at(0, 0), When::Relative, setting)
        .unwrap();
    timers.insert(id, timer, notify)
}

struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_channel_event_is_pending_until_accepted() {
    let timers = ProcessTimers::new(7);
    let (tx, rx) = mpsc::channel();
    let cell = armed(&timers, 3, 2, Notify::Channel(tx));
    assert_eq!(cell.fire(MS / 2), Some(MS), "early: nothing");
    assert!(rx.try_recv().is_err());
    assert_eq!(cell.fire(MS), Some(3 * MS));
    let event = rx.try_recv().unwrap();
    assert_eq!((event.pid(), event.timer()), (7, 3));
    // Two more expirations while the event waits: overruns, no second event.
    assert_eq!(cell.fire(5 * MS), Some(7 * MS));
    assert!(rx.try_recv().is_err());
    assert_eq!(event.accept(), Some(2));
    assert_eq!(cell.with(|t| t.getoverrun()), Ok(2));
    // The next expiry sends again; dropping the event delivers it too.
    cell.fire(7 * MS);
    drop(rx.try_recv().unwrap());
    assert_eq!(cell.with(|t| t.is_pending()), Ok(false));
    assert_eq!(cell.with(|t| t.getoverrun()), Ok(0));
}

#[test]
fn an_event_of_an_old_setting_or_a_deleted_timer_is_stale() {
    let timers = ProcessTimers::new(7);
    let (tx, rx) = mpsc::channel();
    let cell = armed(&timers, 0, 0, Notify::Channel(tx));
    cell.fire(MS);
    let event = rx.try_recv().unwrap();
    cell.with(|t| {
        t.settime(
            Now::at(MS, 0),
            When::Relative,
            ITimerSpec::once(TimeSpec::new(1, 0)),
        )
    })
    .unwrap()
    .unwrap();
    assert_eq!(event.accept(), None);
    cell.fire(2 * NSEC);
    let event = rx.try_recv().unwrap();
    timers.delete(0);
    assert_eq!(event.accept(), None);
    assert_eq!(cell.fire(10 * NSEC), None, "a deleted timer never fires");
    assert!(rx.try_recv().is_err());
    assert!(timers.get(0).is_err());
}

const NSEC: u64 = 1_000_000_000;

#[test]
fn a_lost_receiver_leaves_the_notification_pending() {
    let timers = ProcessTimers::new(7);
    let (tx, rx) = mpsc::channel();
    drop(rx);
    let cell = armed(&timers, 0, 1, Notify::Channel(tx));
    assert_eq!(cell.fire(MS), Some(2 * MS));
    assert_eq!(cell.with(|t| t.is_pending()), Ok(true));
    cell.fire(4 * MS);
    assert_eq!(cell.with(|t| t.snapshot(4 * MS).overrun), Ok(3));
    timers.delete_all();
    assert_eq!(timers.len(), 0);
}

#[test]
fn wake_timers_wake_their_waiters_who_take_the_overruns() {
    let timers = ProcessTimers::new(7);
    let cell = armed(&timers, 0, 1, Notify::Wake);
    let count = std::sync::Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(std::sync::Arc::clone(&count));
    let mut cx = Context::from_waker(&waker);
    let mut wait = TimerWait::new(Arc::clone(&cell));
    assert!(Pin::new(&mut wait).poll(&mut cx).is_pending());
    assert!(Pin::new(&mut wait).poll(&mut cx).is_pending());
    cell.fire(3 * MS);
    let woken = count.0.load(Ordering::Relaxed);
    // One waker registered once, however often it polled; under Miri `will_wake` may not
    // recognise the same waker (its vtables are not deduplicated), so it may be twice.
    if cfg!(miri) {
        assert!(woken >= 1);
    } else {
        assert_eq!(woken, 1, "woken once");
    }
    assert_eq!(Pin::new(&mut wait).poll(&mut cx), Poll::Ready(Ok(2)));
    assert!(Pin::new(&mut wait).poll(&mut cx).is_pending());
    timers.delete_all();
    assert!(count.0.load(Ordering::Relaxed) > woken, "deletion wakes");
    assert_eq!(
        Pin::new(&mut wait).poll(&mut cx),
        Poll::Ready(Err(ProcessError::NotFound))
    );
}

#[test]
fn exits_and_deletes_cancel_every_wheel_entry() {
    use crate::pid::ROOT;
    use crate::process::ProcessHooks;
    let hooks: ProcessHooks = ProcessHooks::for_workers(2).unwrap();
    let model = Arc::clone(hooks.model());
    let runtime = crate::sched::Builder::new()
        .workers(2)
        .hooks(Arc::new(hooks))
        .build()
        .unwrap();
    model.attach_wheel(runtime.handle()).unwrap();
    let mut cells = Vec::new();
    let mut pids = Vec::new();
    let (processes, timers) = if cfg!(miri) { (2, 10) } else { (8, 50) };
    for _ in 0..processes {
        let pid = model.fork(ROOT, 0).unwrap().tid();
        for i in 0..timers {
            let id = model
                .timer_create_with(pid, Clock::Monotonic, Notify::Wake)
                .unwrap();
            let hour = ITimerSpec::every(TimeSpec::new(3600 + i, 0), TimeSpec::new(1, 0));
            model.timer_settime(pid, id, When::Relative, hour).unwrap();
            let cell = model.live_process(pid).unwrap().timers().get(id).unwrap();
            let pending = sync::lock(&cell.inner)
                .armed
                .as_ref()
                .is_some_and(Armed::is_pending);
            assert!(pending, "armed on the wheel");
            if i % 5 == 0 {
                model.timer_delete(pid, id).unwrap();
            }
            cells.push(Arc::downgrade(&cell));
        }
        pids.push(pid);
    }
    for pid in pids {
        model.kill(pid, 0).unwrap();
    }
    // Nothing holds a timer any more: neither its process nor a wheel entry.
    assert!(cells.iter().all(|cell| cell.strong_count() == 0));
}

#[test]
fn a_fire_of_an_earlier_arming_changes_nothing() {
    let timers = ProcessTimers::new(7);
    let (tx, rx) = mpsc::channel();
    let cell = armed(&timers, 0, 1, Notify::Channel(tx));
    let stale = sync::lock(&cell.inner).arming;
    cell.rearm(&mut sync::lock(&cell.inner), None);
    assert_eq!(cell.fire_arming(stale, 5 * MS), None);
    assert!(rx.try_recv().is_err());
    assert_eq!(cell.with(|t| t.deadline()), Ok(Some(MS)));
    let current = sync::lock(&cell.inner).arming;
    assert_eq!(cell.fire_arming(current, 5 * MS), Some(6 * MS));
    assert!(rx.try_recv().is_ok());
}

#[test]
fn the_map_hash_keeps_a_group_of_ids_in_one_block_with_distinct_tags() {
    let hash = |id: u32| {
        let mut hasher = IdHasher::default();
        hasher.write_u32(id);
        hasher.finish()
    };
    for group in [0u32, 1, 1000] {
        let hashes: Vec<u64> = (group * 64..group * 64 + 64).map(hash).collect();
        let blocks: std::collections::BTreeSet<u64> =
            hashes.iter().map(|h| (h >> 6) & 0xffff).collect();
        assert_eq!(blocks.len(), 1, "one block of 64 buckets");
        let buckets: std::collections::BTreeSet<u64> = hashes.iter().map(|h| h & 63).collect();
        assert_eq!(buckets.len(), 64, "one bucket each");
        let tags: std::collections::BTreeSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert_eq!(tags.len(), 64, "distinct tags");
    }
    // IDs 512 apart (a restore's) land in different blocks.
    let blocks: std::collections::BTreeSet<u64> =
        (0..64u32).map(|i| (hash(i * 512) >> 6) & 0xffff).collect();
    assert!(blocks.len() > 32);
}

#[test]
fn images_leave_plain_timers_out() {
    let timers = ProcessTimers::new(7);
    timers.insert(0, PosixTimer::new(Clock::Monotonic), Notify::None);
    timers.insert(1, PosixTimer::new(Clock::Realtime), Notify::None);
    timers.insert(2, PosixTimer::new(Clock::Monotonic), Notify::Wake);
    armed(&timers, 3, 0, Notify::None);
    let ids: Vec<u32> = timers.images(0).iter().map(|image| image.id).collect();
    assert_eq!(ids, [1, 2, 3]);
}
