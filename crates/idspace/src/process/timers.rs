//! POSIX timers of a process: each timer's [`PosixTimer`] state behind its own lock (the
//! kernel's `it_lock`), its notification target, and its entry in the runtime's timer wheel.
//!
//! # The kernel design
//!
//! `timer_create` allocates a `k_itimer`, takes an ID from the process's cursor in the global
//! hash (seed `001`) and links the timer into `signal_struct::posix_timers`. `timer_settime`
//! and friends find the timer by (process, ID) in the hash and work under its `it_lock`; the
//! hrtimer's callback takes the same lock, queues the preallocated signal and, for an
//! interval timer, forwards the expiry. `exit_itimers` deletes every timer of an exiting
//! process, cancelling each hrtimer. A notification is a signal (`SIGEV_SIGNAL`,
//! `SIGEV_THREAD_ID`) or nothing (`SIGEV_NONE`).
//!
//! # Here
//!
//! The ID still comes from the process's owner in the table design; the timer itself lives
//! in the process's map from ID to timer (the table holds no values the model could reach
//! without the model's lock). Every timer operation but create and delete takes only the
//! map's lock for a lookup and then the timer's own lock, never the model's. Expiry comes
//! from the runtime's timer wheel (attached with
//! [`Processes::attach_wheel`](super::Processes::attach_wheel)); without one, timers keep
//! their settings and times but never fire.
//!
//! Notifications ([`Notify`]) take the place of signals:
//!
//! * [`Notify::None`] is `SIGEV_NONE`: expirations are counted, nothing is sent.
//! * [`Notify::Wake`] wakes the tasks waiting in
//!   [`timer_wait`](super::Processes::timer_wait), as `sigwaitinfo` would: the first to run
//!   takes the notification and its overrun count.
//! * [`Notify::Channel`] sends a [`TimerEvent`] on a channel. The event is the queued signal:
//!   the notification stays pending, and later expirations count as its overruns, until the
//!   receiver [accepts](TimerEvent::accept) or drops it. An event whose receiver is gone is
//!   lost and its notification stays pending (overruns keep counting) until the next
//!   `timer_settime`.
//!
//! Lock order: the model's lock, then a process's map, then one timer's lock; the wheel calls
//! the timer's lock alone, and events are sent (never dropped) under it.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::Sender;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::design::{CidDesign, PidDesign, TableDesign};
use super::image::Image;
use super::posix_timer::{
    Clock, ITimerSpec, Now, PosixTimer, TimeSpec, TimerSnapshot, Token, When, NSEC_PER_SEC,
};
use super::{ProcessError, Processes};
use std::sync::Arc;

use crate::sync::{self, Mutex};

/// How a timer tells of its expiry (`sigev_notify`).
pub enum Notify {
    /// Nothing is sent (`SIGEV_NONE`): read the timer with `timer_gettime`.
    None,
    /// Tasks waiting in [`timer_wait`](super::Processes::timer_wait) are woken.
    Wake,
    /// A [`TimerEvent`] is sent on the channel.
    Channel(Sender<TimerEvent>),
}

impl Notify {
    /// Which kind of target it is (what a checkpoint keeps).
    pub fn kind(&self) -> NotifyKind {
        match self {
            Notify::None => NotifyKind::None,
            Notify::Wake => NotifyKind::Wake,
            Notify::Channel(_) => NotifyKind::Channel,
        }
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.kind())
    }
}

/// The kind of a [`Notify`], without its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyKind {
    /// [`Notify::None`].
    None,
    /// [`Notify::Wake`].
    Wake,
    /// [`Notify::Channel`].
    Channel,
}

/// A timer's notification sent on a channel: pending until [accepted](Self::accept) or
/// dropped, as a queued signal is until delivered.
pub struct TimerEvent {
    pid: u32,
    timer: u32,
    token: Token,
    /// The timer to deliver to; `None` once delivered.
    cell: Option<Arc<TimerCell>>,
}

impl TimerEvent {
    /// The root-level PID of the timer's process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The timer's ID.
    pub fn timer(&self) -> u32 {
        self.timer
    }

    /// Delivers the notification: returns its overrun count (expirations since it was sent,
    /// capped at [`DELAYTIMER_MAX`](super::DELAYTIMER_MAX)), which `timer_getoverrun` reports
    /// from then on. `None` if the timer was set again or deleted since (the event is stale,
    /// as a signal of an old setting the kernel drops).
    pub fn accept(mut self) -> Option<u32> {
        self.deliver()
    }

    fn deliver(&mut self) -> Option<u32> {
        let cell = self.cell.take()?;
        let mut inner = sync::lock(&cell.inner);
        if inner.deleted {
            return None;
        }
        inner.timer.consume(self.token)
    }
}

impl Drop for TimerEvent {
    fn drop(&mut self) {
        self.deliver();
    }
}

impl fmt::Debug for TimerEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerEvent")
            .field("pid", &self.pid)
            .field("timer", &self.timer)
            .finish_non_exhaustive()
    }
}

/// The clocks timers read: a fixed epoch for the monotonic nanoseconds of [`PosixTimer`], and
/// the wall clock for realtime.
pub(crate) fn now() -> Now {
    let mono = mono_of(Instant::now());
    let real = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_nanos()).unwrap_or(i64::MAX),
    };
    Now { mono, real }
}

/// `clock_gettime` of the clocks timers use: the time to give [`When::Absolute`] settings.
/// The monotonic clock is the kernel's `CLOCK_MONOTONIC`, read once and followed by
/// [`Instant`] from then on (the same clock); the realtime clock is the system's.
pub fn clock_gettime(clock: Clock) -> TimeSpec {
    let at = now();
    match clock {
        Clock::Monotonic => TimeSpec::from_nanos(at.mono),
        Clock::Realtime => TimeSpec::new(
            at.real.div_euclid(NSEC_PER_SEC),
            at.real.rem_euclid(NSEC_PER_SEC),
        ),
    }
}

/// An instant and its `CLOCK_MONOTONIC` reading, taken together once: what converts between
/// [`Instant`]s and the monotonic nanoseconds of [`PosixTimer`].
fn epoch() -> (Instant, u64) {
    static EPOCH: OnceLock<(Instant, u64)> = OnceLock::new();
    *EPOCH.get_or_init(|| (Instant::now(), crate::sys::clock::monotonic_nanos()))
}

/// Monotonic nanoseconds of `instant`.
pub(crate) fn mono_of(instant: Instant) -> u64 {
    let (base, nanos) = epoch();
    match instant.checked_duration_since(base) {
        Some(after) => nanos.saturating_add(u64::try_from(after.as_nanos()).unwrap_or(u64::MAX)),
        None => {
            let before = base.duration_since(instant).as_nanos();
            nanos.saturating_sub(u64::try_from(before).unwrap_or(u64::MAX))
        }
    }
}

/// The instant of monotonic nanoseconds `mono`, if representable.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn instant_of(mono: u64) -> Option<Instant> {
    let (base, nanos) = epoch();
    if mono >= nanos {
        base.checked_add(std::time::Duration::from_nanos(mono - nanos))
    } else {
        base.checked_sub(std::time::Duration::from_nanos(nanos - mono))
    }
}

/// One timer: its state and notification under its own lock.
pub(crate) struct TimerCell {
    pid: u32,
    id: u32,
    inner: Mutex<Inner>,
}

struct Inner {
    timer: PosixTimer,
    notify: Notify,
    /// Deleted (by `timer_delete` or the process's exit): every call refuses, nothing fires.
    deleted: bool,
    /// Tasks waiting in `timer_wait`.
    waiters: Vec<Waker>,
}

impl TimerCell {
    fn new(pid: u32, id: u32, timer: PosixTimer, notify: Notify) -> TimerCell {
        TimerCell {
            pid,
            id,
            inner: Mutex::new(Inner {
                timer,
                notify,
                deleted: false,
                waiters: Vec::new(),
            }),
        }
    }

    /// The wheel fired at `now` (monotonic nanoseconds): counts the expirations, sends a
    /// notification if none is pending, and returns the next deadline of an interval timer.
    // Until the timer wheel calls it, only the tests do.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn fire(self: &Arc<Self>, now: u64) -> Option<u64> {
        let mut inner = sync::lock(&self.inner);
        if inner.deleted {
            return None;
        }
        let expired = inner.timer.expire(now);
        let wake = match expired.notify {
            Some(token) => self.notify(&mut inner, token),
            None => Vec::new(),
        };
        let next = inner.timer.deadline();
        drop(inner);
        for waker in wake {
            waker.wake();
        }
        next
    }

    /// Sends the notification of `token` to the timer's target; returns the wakers to wake
    /// once the lock is let go.
    fn notify(self: &Arc<Self>, inner: &mut Inner, token: Token) -> Vec<Waker> {
        match &inner.notify {
            Notify::None | Notify::Wake => std::mem::take(&mut inner.waiters),
            Notify::Channel(sender) => {
                let event = TimerEvent {
                    pid: self.pid,
                    timer: self.id,
                    token,
                    cell: Some(Arc::clone(self)),
                };
                if let Err(unsent) = sender.send(event) {
                    // The receiver is gone: the event must not deliver itself (its drop would
                    // take the lock held here); the notification stays pending.
                    let mut event = unsent.0;
                    event.cell = None;
                }
                Vec::new()
            }
        }
    }

    /// Deletes the timer: it refuses every call from now on, never fires again, and its
    /// waiters are woken (to be told so).
    fn delete(&self) {
        let mut inner = sync::lock(&self.inner);
        inner.deleted = true;
        let waiters = std::mem::take(&mut inner.waiters);
        // The sender goes too (events in flight keep the timer alive, and it keeps their
        // channel), dropped once the lock is let go: dropping the last sender of a channel
        // whose receiver is gone drops its events, and each takes this lock.
        let notify = std::mem::replace(&mut inner.notify, Notify::None);
        drop(inner);
        drop(notify);
        for waker in waiters {
            waker.wake();
        }
    }

    /// Runs `f` on the live timer's state.
    fn with<R>(&self, f: impl FnOnce(&mut PosixTimer) -> R) -> Result<R, ProcessError> {
        let mut inner = sync::lock(&self.inner);
        if inner.deleted {
            return Err(ProcessError::NotFound);
        }
        Ok(f(&mut inner.timer))
    }
}

/// A timer as a checkpoint keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerImage {
    /// Its ID.
    pub id: u32,
    /// Its notification's kind (the target itself is given again at restore).
    pub notify: NotifyKind,
    /// Its clock, times (relative to the checkpoint) and overrun state.
    pub state: TimerSnapshot,
}

impl TimerImage {
    /// Whether the timer is what `timer_create` without arguments makes and nothing changed
    /// since: monotonic, no notification, disarmed, no overruns. Images leave those out.
    pub(crate) fn is_plain(&self) -> bool {
        let plain = PosixTimer::new(Clock::Monotonic).snapshot(0);
        self.notify == NotifyKind::None && self.state == plain
    }
}

/// A process's timers by ID (the kernel's `signal_struct::posix_timers`).
pub(crate) struct ProcessTimers {
    pid: u32,
    by_id: Mutex<HashMap<u32, Arc<TimerCell>>>,
}

impl ProcessTimers {
    pub(crate) fn new(pid: u32) -> ProcessTimers {
        ProcessTimers {
            pid,
            by_id: Mutex::new(HashMap::new()),
        }
    }

    /// Adds timer `id` (just created in the table).
    pub(crate) fn insert(&self, id: u32, timer: PosixTimer, notify: Notify) -> Arc<TimerCell> {
        let cell = Arc::new(TimerCell::new(self.pid, id, timer, notify));
        sync::lock(&self.by_id).insert(id, Arc::clone(&cell));
        cell
    }

    /// Timer `id`.
    pub(crate) fn get(&self, id: u32) -> Result<Arc<TimerCell>, ProcessError> {
        sync::lock(&self.by_id)
            .get(&id)
            .cloned()
            .ok_or(ProcessError::NotFound)
    }

    /// Deletes timer `id` (just removed from the table).
    pub(crate) fn delete(&self, id: u32) {
        let cell = sync::lock(&self.by_id).remove(&id);
        if let Some(cell) = cell {
            cell.delete();
        }
    }

    /// Deletes every timer (the process exits).
    pub(crate) fn delete_all(&self) {
        let cells: Vec<Arc<TimerCell>> = sync::lock(&self.by_id).drain().map(|(_, c)| c).collect();
        for cell in cells {
            cell.delete();
        }
    }

    /// The timers that are not plain, ascending by ID, with times relative to `now`.
    pub(crate) fn images(&self, now: u64) -> Vec<TimerImage> {
        let cells: Vec<Arc<TimerCell>> = sync::lock(&self.by_id).values().cloned().collect();
        let mut images: Vec<TimerImage> = cells
            .iter()
            .filter_map(|cell| {
                let inner = sync::lock(&cell.inner);
                let image = TimerImage {
                    id: cell.id,
                    notify: inner.notify.kind(),
                    state: inner.timer.snapshot(now),
                };
                (!inner.deleted && !image.is_plain()).then_some(image)
            })
            .collect();
        images.sort_unstable_by_key(|image| image.id);
        images
    }

    /// Recreates the timers of `image` (a fresh process, its IDs just created in the table),
    /// the non-plain ones notifying `targets` (in the order of `image.timer_states`), their
    /// remaining times counted from `now`. A notification pending at the checkpoint is sent
    /// again: the one sent before was lost with the checkpointed process.
    pub(crate) fn restore(&self, image: &Image, targets: Vec<Notify>, now: u64) {
        let mut states = image.timer_states.iter().zip(targets).peekable();
        for &id in &image.timers {
            let Some((state, notify)) = states.next_if(|(state, _)| state.id == id) else {
                self.insert(id, PosixTimer::new(Clock::Monotonic), Notify::None);
                continue;
            };
            // `Image::check` has restored each state once already: this cannot fail.
            let timer = PosixTimer::restore(&state.state, now)
                .unwrap_or_else(|_| PosixTimer::new(state.state.clock));
            let cell = self.insert(id, timer, notify);
            let mut inner = sync::lock(&cell.inner);
            if inner.timer.is_pending() {
                let token = inner.timer.token();
                // No task waits on a timer that did not exist a moment ago.
                let _ = cell.notify(&mut inner, token);
            }
        }
    }

    /// How many timers the process has.
    pub(crate) fn len(&self) -> usize {
        sync::lock(&self.by_id).len()
    }
}

/// The future of [`Processes::timer_wait`](super::Processes::timer_wait).
pub struct TimerWait {
    cell: Arc<TimerCell>,
}

impl TimerWait {
    pub(crate) fn new(cell: Arc<TimerCell>) -> TimerWait {
        TimerWait { cell }
    }
}

impl Future for TimerWait {
    type Output = Result<u32, ProcessError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut inner = sync::lock(&self.cell.inner);
        if inner.deleted {
            return Poll::Ready(Err(ProcessError::NotFound));
        }
        if inner.notify.kind() != NotifyKind::Wake {
            return Poll::Ready(Err(ProcessError::NotWaitable));
        }
        let token = inner.timer.token();
        if let Some(overrun) = inner.timer.consume(token) {
            return Poll::Ready(Ok(overrun));
        }
        if !inner.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            inner.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl fmt::Debug for TimerWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerWait")
            .field("pid", &self.cell.pid)
            .field("timer", &self.cell.id)
            .finish()
    }
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> Processes<P, C, T> {
    /// Timer `timer` of live process `pid`.
    fn timer_cell(&self, pid: u32, timer: u32) -> Result<Arc<TimerCell>, ProcessError> {
        self.live_process(pid)?.timers().get(timer)
    }

    /// `timer_settime`: arms timer `timer` of process `pid` (relative or absolute, one-shot or
    /// with an interval), or disarms it with a zero value; returns the old setting. A
    /// notification of the old setting still pending is dropped and the overrun count
    /// cleared.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`] (no such timer, or
    /// deleted), [`ProcessError::Timer`] for a negative or unnormalised time. A refused call
    /// changes nothing.
    pub fn timer_settime(
        &self,
        pid: u32,
        timer: u32,
        when: When,
        setting: ITimerSpec,
    ) -> Result<ITimerSpec, ProcessError> {
        let cell = self.timer_cell(pid, timer)?;
        let mut inner = sync::lock(&cell.inner);
        if inner.deleted {
            return Err(ProcessError::NotFound);
        }
        let old = inner
            .timer
            .settime(now(), when, setting)
            .map_err(ProcessError::Timer)?;
        Ok(old)
    }

    /// `timer_gettime`: the time left to the next expiry and the interval of timer `timer` of
    /// process `pid` (both zero when disarmed).
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`].
    pub fn timer_gettime(&self, pid: u32, timer: u32) -> Result<ITimerSpec, ProcessError> {
        let at = now();
        self.timer_cell(pid, timer)?.with(|state| state.gettime(at))
    }

    /// `timer_getoverrun`: the expirations that happened while the last delivered
    /// notification of timer `timer` was pending, capped at
    /// [`DELAYTIMER_MAX`](super::DELAYTIMER_MAX).
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`].
    pub fn timer_getoverrun(&self, pid: u32, timer: u32) -> Result<u32, ProcessError> {
        self.timer_cell(pid, timer)?
            .with(|state| state.getoverrun())
    }

    /// Waits for the next notification of timer `timer` of process `pid` (made with
    /// [`Notify::Wake`]) and takes it: the future gives its overrun count, or
    /// [`ProcessError::NotFound`] if the timer is deleted meanwhile (or the process exits). A
    /// notification already pending is taken at once.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`]; the future gives
    /// [`ProcessError::NotWaitable`] for a timer that notifies otherwise.
    pub fn timer_wait(&self, pid: u32, timer: u32) -> Result<TimerWait, ProcessError> {
        Ok(TimerWait::new(self.timer_cell(pid, timer)?))
    }

    /// How many timers process `pid` has.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`].
    pub fn timer_count(&self, pid: u32) -> Result<usize, ProcessError> {
        Ok(self.live_process(pid)?.timers().len())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::task::Wake;

    use super::*;

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
        assert_eq!(count.0.load(Ordering::Relaxed), 1, "woken once");
        assert_eq!(Pin::new(&mut wait).poll(&mut cx), Poll::Ready(Ok(2)));
        assert!(Pin::new(&mut wait).poll(&mut cx).is_pending());
        timers.delete_all();
        assert_eq!(count.0.load(Ordering::Relaxed), 2, "deletion wakes");
        assert_eq!(
            Pin::new(&mut wait).poll(&mut cx),
            Poll::Ready(Err(ProcessError::NotFound))
        );
    }

    #[test]
    fn instants_and_monotonic_nanoseconds_convert_both_ways() {
        let now = Instant::now();
        let mono = mono_of(now);
        assert!(mono > 0, "the kernel's monotonic clock, not a count from 0");
        assert_eq!(instant_of(mono), Some(now));
        let later = now + std::time::Duration::from_millis(1500);
        assert_eq!(mono_of(later), mono + 1_500_000_000);
        assert_eq!(instant_of(mono + 1_500_000_000), Some(later));
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
}
