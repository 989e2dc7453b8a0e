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
//! # Expiry on the wheel
//!
//! An armed timer has one entry on the runtime's wheel ([`Armed`]), holding an `Arming`: the
//! timer and the number of this arming. `timer_settime` replaces the entry (dropping the old
//! [`Armed`] cancels it), `timer_delete` and exit drop it. The wheel calls
//! [`Fire::fire`](crate::sched::time::Fire) with the time of its pass; the timer counts its
//! expirations up to then ([`PosixTimer::expire`]), notifies, and gives back the next
//! deadline of an interval timer, which re-arms the same entry. A cancel that comes while the
//! entry is firing does not wait for it: that `fire` then finds a newer arming number (or the
//! timer deleted) and changes nothing, so every expiration is counted by exactly one arming.
//! Deadlines are the wheel's, rounded up to its [`RESOLUTION`](crate::sched::time::RESOLUTION)
//! (100 µs): a timer never fires early, and a restored timer fires when the original would
//! have, to that resolution. The model holds its runtime weakly: the runtime's hooks hold the
//! model.
//!
//! Where we differ from the kernel: each arming allocates its small `Arming` (the kernel embeds
//! the hrtimer in the `k_itimer`); the wheel's low-level API takes its target as an
//! `Arc<dyn Fire>`, and a fresh one per arming is what tells a stale `fire` from a current one.
//!
//! Lock order: the model's lock, then a process's map, then one timer's lock; the wheel calls
//! the timer's lock alone (arming and cancelling under it never wait for a `fire`), and events
//! are sent (never dropped) under it.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::mpsc::Sender;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::design::{CidDesign, PidDesign, TableDesign};
use super::image::Image;
use super::posix_timer::{
    Clock, ITimerSpec, Now, PosixTimer, TimeSpec, TimerSnapshot, Token, When, FOREVER, NSEC_PER_SEC,
};
use super::{ProcessError, Processes};
use std::sync::{Arc, Weak};

use crate::sched::time::{Armed, Driver, Fire};
use crate::sched::{Handle, Hooks};
use crate::sync::{self, Mutex};
use crate::util::hash::mix;

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
    /// The wheel entry of the current arming, if the timer is armed on a wheel. Replacing or
    /// dropping it cancels the entry (never waiting for a `fire` in progress).
    armed: Option<Armed>,
    /// The number of the current arming: a `fire` of an earlier one (whose cancel came too
    /// late, while it was running) finds another number and changes nothing.
    arming: u64,
}

/// One arming of a timer on the wheel: what the wheel holds and calls.
struct Arming {
    cell: Arc<TimerCell>,
    arming: u64,
}

impl Fire for Arming {
    fn fire(&self, now: Instant) -> Option<Instant> {
        let next = self.cell.fire_arming(self.arming, mono_of(now))?;
        instant_of(next)
    }
}

/// The wheel a model's timers arm on: a runtime's, held weakly, since the runtime's hooks
/// may hold the model (a strong reference would make a cycle that keeps both alive).
#[derive(Default)]
pub(crate) struct Wheel {
    driver: OnceLock<Weak<dyn Driver>>,
}

impl Wheel {
    /// The runtime, if one is attached and still exists.
    fn driver(&self) -> Option<Arc<dyn Driver>> {
        self.driver.get()?.upgrade()
    }

    /// Attaches `driver`: `Some(true)` if it was not attached before, `Some(false)` if it
    /// was, `None` if another runtime is.
    fn attach(&self, driver: &Arc<dyn Driver>) -> Option<bool> {
        let weak = Arc::downgrade(driver);
        let mut new = false;
        let attached = self.driver.get_or_init(|| {
            new = true;
            weak.clone()
        });
        Weak::ptr_eq(attached, &weak).then_some(new)
    }
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
                armed: None,
                arming: 0,
            }),
        }
    }

    /// The wheel fired at `now` (monotonic nanoseconds): counts the expirations, sends a
    /// notification if none is pending, and returns the next deadline of an interval timer.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn fire(self: &Arc<Self>, now: u64) -> Option<u64> {
        let arming = sync::lock(&self.inner).arming;
        self.fire_arming(arming, now)
    }

    /// [`fire`](Self::fire) for arming number `arming`: nothing if the timer was set again
    /// (or deleted) since.
    fn fire_arming(self: &Arc<Self>, arming: u64, now: u64) -> Option<u64> {
        let mut inner = sync::lock(&self.inner);
        if inner.deleted || inner.arming != arming {
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
        inner.arming += 1;
        // Cancels the wheel entry; its target (holding this cell) is dropped by the wheel.
        inner.armed = None;
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

    /// Puts the timer's current deadline on `wheel` as a new arming, cancelling the entry of
    /// the previous one; nothing is armed without a wheel, when disarmed, or at [`FOREVER`].
    fn rearm(self: &Arc<Self>, inner: &mut Inner, wheel: Option<Arc<dyn Driver>>) {
        inner.arming += 1;
        inner.armed = None;
        let deadline = inner.timer.deadline().filter(|&at| at < FOREVER);
        let (Some(driver), Some(at)) = (wheel, deadline.and_then(instant_of)) else {
            return;
        };
        let target = Arc::new(Arming {
            cell: Arc::clone(self),
            arming: inner.arming,
        });
        inner.armed = Some(Armed::on(driver.as_ref(), at, target));
    }

    /// Arms the timer on `wheel` if it is armed but has no wheel entry (a wheel attached
    /// after it was set).
    fn arm_if_unarmed(self: &Arc<Self>, wheel: &Wheel) {
        let mut inner = sync::lock(&self.inner);
        if !inner.deleted && inner.armed.is_none() && inner.timer.deadline().is_some() {
            self.rearm(&mut inner, wheel.driver());
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

/// The hasher of a process's timer map: [`mix`]'s locality (the 64 IDs of a group in one
/// block of 64 neighbouring buckets, the blocks scattered), so that a process working through
/// its timers in ID order (they are created in that order) walks the map a block at a time
/// instead of missing the cache on every timer once the map outgrows it. The low bits of the
/// ID go into the top 7 bits too, which the map compares first: IDs of one group share their
/// block's mix, and would otherwise all compare equal there.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u32` keys are hashed; this is the generic path, kept correct.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
        self.0 = mix(0, self.0 as u32);
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = mix(0, id) ^ (u64::from(id) << 57);
    }
}

/// A process's timers by ID (the kernel's `signal_struct::posix_timers`).
pub(crate) struct ProcessTimers {
    pid: u32,
    by_id: Mutex<HashMap<u32, Arc<TimerCell>, BuildHasherDefault<IdHasher>>>,
}

impl ProcessTimers {
    pub(crate) fn new(pid: u32) -> ProcessTimers {
        ProcessTimers {
            pid,
            by_id: Mutex::new(HashMap::default()),
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
    pub(crate) fn restore(&self, image: &Image, targets: Vec<Notify>, now: u64, wheel: &Wheel) {
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
            cell.rearm(&mut inner, wheel.driver());
            if inner.timer.is_pending() {
                let token = inner.timer.token();
                // No task waits on a timer that did not exist a moment ago.
                let _ = cell.notify(&mut inner, token);
            }
        }
    }

    /// Every timer's cell.
    fn cells(&self) -> Vec<Arc<TimerCell>> {
        sync::lock(&self.by_id).values().cloned().collect()
    }

    /// How many timers the process has.
    pub(crate) fn len(&self) -> usize {
        sync::lock(&self.by_id).len()
    }
}

impl Drop for ProcessTimers {
    /// A process dropped with timers (its model went away): their wheel entries go too.
    fn drop(&mut self) {
        self.delete_all();
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
        // Only an absolute realtime setting reads the wall clock.
        let at = match (when, inner.timer.clock()) {
            (When::Absolute, Clock::Realtime) => now(),
            _ => Now {
                mono: mono_of(Instant::now()),
                real: 0,
            },
        };
        let old = inner
            .timer
            .settime(at, when, setting)
            .map_err(ProcessError::Timer)?;
        cell.rearm(&mut inner, self.wheel().driver());
        Ok(old)
    }

    /// `timer_gettime`: the time left to the next expiry and the interval of timer `timer` of
    /// process `pid` (both zero when disarmed).
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`].
    pub fn timer_gettime(&self, pid: u32, timer: u32) -> Result<ITimerSpec, ProcessError> {
        let at = Now {
            mono: mono_of(Instant::now()),
            real: 0,
        };
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

    /// Makes the timers of this model fire on `handle`'s runtime (its workers' timer wheels),
    /// arming every timer already set. [`Handle::spawn_process`] attaches its runtime by
    /// itself; timers of a model without a runtime keep their settings but never fire.
    ///
    /// # Errors
    /// [`ProcessError::OtherWheel`] if another runtime is attached already.
    pub fn attach_wheel<H: Hooks>(&self, handle: &Handle<H>) -> Result<(), ProcessError> {
        match self.wheel().attach(&handle.driver()) {
            None => return Err(ProcessError::OtherWheel),
            Some(false) => return Ok(()),
            Some(true) => {}
        }
        for pid in self.process_ids() {
            let Ok(process) = self.live_process(pid) else {
                continue;
            };
            for cell in process.timers().cells() {
                cell.arm_if_unarmed(self.wheel());
            }
        }
        Ok(())
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
        model.fork(ROOT, 0).unwrap();
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
}

/// Loom models of a timer's arming protocol on a real runtime's wheel: a `timer_settime` or a
/// `timer_delete` from another thread racing the worker's expiry of the current arming. The
/// expiry either runs first (counted, notified, and then made stale by the settime or the
/// deletion) or finds a newer arming and changes nothing; never both, never after. Run with
/// `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --release
/// -p idspace --lib process::timers`.
#[cfg(all(test, loom))]
mod loom_tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::sched::{Builder, Runtime};

    const HOUR: u64 = 3600 * 1_000_000_000;

    /// A one-worker runtime that parks without polling, and a timer of process 7 notifying
    /// `tx`, armed on it at a deadline already passed (due at every expiry pass: time does not
    /// pass inside a model).
    fn armed(tx: mpsc::Sender<TimerEvent>) -> (Runtime, Arc<TimerCell>, Wheel, u64) {
        let runtime = Builder::new()
            .workers(1)
            .poll(Duration::ZERO)
            .build()
            .expect("runtime");
        let wheel = Wheel::default();
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
}
