//! One timer: its [`PosixTimer`] state, notification target, waiters and wheel entry under its
//! own lock (the kernel's `it_lock`), and the arming protocol that ties it to the wheel (see
//! the [`timers`](super) docs); and how it tells of its expiry: its target ([`Notify`]) and the
//! event a channel target receives ([`TimerEvent`]), which stays pending, as a queued signal
//! does, until it is accepted or dropped. The three refer to each other (a cell holds its
//! target, a channel target carries events, an event delivers to its cell), so they share
//! this file.

use std::fmt;
// The target is the user's channel: std's, which loom does not replace.
use std::sync::mpsc::Sender;
// std's `Arc`: the cell's methods take `self: &Arc<Self>` (a receiver loom's `Arc` cannot
// be) to hand the wheel and events their own reference, and the wheel takes its targets as
// `Arc<dyn Fire>` (an unsized coercion, which loom's `Arc` lacks).
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Instant;

use super::clock::{instant_of, mono_of, now};
use super::wheel::WheelLink;
use crate::process::error::ProcessError;
use crate::process::image::{NotifyKind, TimerImage};
use crate::process::posix_timer::{Clock, ITimerSpec, Now, PosixTimer, Token, When, FOREVER};
use crate::sched::time::{Armed, Driver, Fire};
use crate::sync::{self, Mutex};

/// How a timer tells of its expiry (`sigev_notify`).
///
/// # Examples
///
/// A timer that sends a [`TimerEvent`] on a channel, fired by a runtime's timer wheel:
///
/// ```
/// use std::sync::{mpsc, Arc};
/// use std::time::Duration;
///
/// use idspace::pid::ROOT;
/// use idspace::process::{Clock, ITimerSpec, Notify, NotifyKind, ProcessHooks, TimeSpec, When};
/// use idspace::sched::Builder;
///
/// let hooks: ProcessHooks = ProcessHooks::for_workers(1)?;
/// let model = Arc::clone(hooks.model());
/// let runtime = Builder::new().workers(1).hooks(Arc::new(hooks)).build()?;
/// model.attach_wheel(runtime.handle())?;
/// let pid = model.fork(ROOT, 0)?.tid();
///
/// let (tx, rx) = mpsc::channel();
/// let notify = Notify::Channel(tx);
/// assert_eq!(notify.kind(), NotifyKind::Channel);
/// let timer = model.timer_create_with(pid, Clock::Monotonic, notify)?;
/// let in_1ms = ITimerSpec::once(TimeSpec::new(0, 1_000_000));
/// model.timer_settime(pid, timer, When::Relative, in_1ms)?;
///
/// let event = rx.recv_timeout(Duration::from_secs(10))?;
/// assert_eq!((event.pid(), event.timer()), (pid, timer));
/// assert_eq!(event.accept(), Some(0), "no expiration while it was pending");
/// drop(runtime);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
pub enum Notify {
    /// Nothing is sent (`SIGEV_NONE`): read the timer with `timer_gettime`.
    None,
    /// Tasks waiting in [`timer_wait`](crate::process::Processes::timer_wait) are woken.
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

/// A timer's notification sent on a channel: pending until [accepted](Self::accept) or
/// dropped, as a queued signal is until delivered.
///
/// # Examples
///
/// While an event waits in the channel, later expirations are its overruns, and no second
/// event is sent:
///
/// ```
/// use std::sync::{mpsc, Arc};
/// use std::time::Duration;
///
/// use idspace::pid::ROOT;
/// use idspace::process::{Clock, ITimerSpec, Notify, ProcessHooks, TimeSpec, When};
/// use idspace::sched::Builder;
///
/// let hooks: ProcessHooks = ProcessHooks::for_workers(1)?;
/// let model = Arc::clone(hooks.model());
/// let runtime = Builder::new().workers(1).hooks(Arc::new(hooks)).build()?;
/// model.attach_wheel(runtime.handle())?;
/// let pid = model.fork(ROOT, 0)?.tid();
/// let (tx, rx) = mpsc::channel();
/// let timer = model.timer_create_with(pid, Clock::Monotonic, Notify::Channel(tx))?;
/// let every_ms = ITimerSpec::every(TimeSpec::new(0, 1_000_000), TimeSpec::new(0, 1_000_000));
/// model.timer_settime(pid, timer, When::Relative, every_ms)?;
///
/// let event = rx.recv_timeout(Duration::from_secs(10))?;
/// std::thread::sleep(Duration::from_millis(20));
/// assert!(rx.try_recv().is_err(), "one notification pending at a time");
/// let overrun = event.accept().expect("the setting is current");
/// assert!(overrun >= 1, "the expirations while it was pending");
/// assert_eq!(model.timer_getoverrun(pid, timer)?, overrun);
/// drop(runtime);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TimerEvent {
    pid: u32,
    timer: u32,
    token: Token,
    /// The timer to deliver to; `None` once delivered (or never to be: its receiver is gone).
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
    /// capped at [`DELAYTIMER_MAX`](crate::process::DELAYTIMER_MAX)), which
    /// `timer_getoverrun` reports from then on. `None` if the timer was set again or deleted
    /// since (the event is stale, as a signal of an old setting the kernel drops).
    pub fn accept(mut self) -> Option<u32> {
        self.deliver()
    }

    fn deliver(&mut self) -> Option<u32> {
        self.cell.take()?.deliver(self.token)
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

/// One timer: its state and notification under its own lock.
pub(crate) struct TimerCell {
    pub(super) pid: u32,
    pub(super) id: u32,
    pub(super) inner: Mutex<Inner>,
}

/// What a timer's lock guards.
pub(super) struct Inner {
    pub(super) timer: PosixTimer,
    pub(super) notify: Notify,
    /// Deleted (by `timer_delete` or the process's exit): every call refuses, nothing fires.
    pub(super) deleted: bool,
    /// Tasks waiting in `timer_wait`.
    pub(super) waiters: Vec<Waker>,
    /// The wheel entry of the current arming, if the timer is armed on a wheel. Replacing or
    /// dropping it cancels the entry (never waiting for a `fire` in progress).
    pub(super) armed: Option<Armed>,
    /// The number of the current arming: a `fire` of an earlier one (whose cancel came too
    /// late, while it was running) finds another number and changes nothing.
    pub(super) arming: u64,
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

impl TimerCell {
    pub(super) fn new(pid: u32, id: u32, timer: PosixTimer, notify: Notify) -> TimerCell {
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
    pub(super) fn fire(self: &Arc<Self>, now: u64) -> Option<u64> {
        let arming = sync::lock(&self.inner).arming;
        self.fire_arming(arming, now)
    }

    /// [`fire`](Self::fire) for arming number `arming`: nothing if the timer was set again
    /// (or deleted) since.
    pub(super) fn fire_arming(self: &Arc<Self>, arming: u64, now: u64) -> Option<u64> {
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

    /// Delivers the notification of `token` (a [`TimerEvent`] accepted or dropped): its
    /// overrun count, or `None` if the timer was set again or deleted since.
    pub(super) fn deliver(&self, token: Token) -> Option<u32> {
        let mut inner = sync::lock(&self.inner);
        if inner.deleted {
            return None;
        }
        inner.timer.consume(token)
    }

    /// Deletes the timer: it refuses every call from now on, never fires again, and its
    /// waiters are woken (to be told so).
    pub(super) fn delete(&self) {
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
    pub(super) fn rearm(self: &Arc<Self>, inner: &mut Inner, wheel: Option<Arc<dyn Driver>>) {
        inner.arming += 1;
        inner.armed = None;
        let deadline = inner.timer.deadline().filter(|&at| at < FOREVER);
        let (Some(driver), Some(at)) = (wheel, deadline.and_then(instant_of)) else {
            return;
        };
        // A fresh target per arming tells a stale `fire` from a current one.
        let target: Arc<dyn Fire> = Arc::new(Arming {
            cell: Arc::clone(self),
            arming: inner.arming,
        });
        inner.armed = Some(Armed::on(driver.as_ref(), at, target));
    }

    /// Arms the timer on `wheel` if it is armed but has no wheel entry (a wheel attached
    /// after it was set).
    pub(crate) fn arm_if_unarmed(self: &Arc<Self>, wheel: &WheelLink) {
        let mut inner = sync::lock(&self.inner);
        if !inner.deleted && inner.armed.is_none() && inner.timer.deadline().is_some() {
            self.rearm(&mut inner, wheel.driver());
        }
    }

    /// A timer just restored (its process new, its state from an image): armed on `wheel`,
    /// and a notification pending at the checkpoint sent again (the one sent before was lost
    /// with the checkpointed process).
    pub(super) fn restart(self: &Arc<Self>, wheel: &WheelLink) {
        let mut inner = sync::lock(&self.inner);
        self.rearm(&mut inner, wheel.driver());
        if inner.timer.is_pending() {
            let token = inner.timer.token();
            // No task waits on a timer that did not exist a moment ago.
            let _ = self.notify(&mut inner, token);
        }
    }

    /// Runs `f` on the live timer's state.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut PosixTimer) -> R) -> Result<R, ProcessError> {
        let mut inner = sync::lock(&self.inner);
        if inner.deleted {
            return Err(ProcessError::NotFound);
        }
        Ok(f(&mut inner.timer))
    }

    /// `timer_settime` on the live timer, then re-armed on `wheel`'s runtime: returns the old
    /// setting.
    pub(crate) fn settime(
        self: &Arc<Self>,
        when: When,
        setting: ITimerSpec,
        wheel: &WheelLink,
    ) -> Result<ITimerSpec, ProcessError> {
        let mut inner = sync::lock(&self.inner);
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
        self.rearm(&mut inner, wheel.driver());
        Ok(old)
    }

    /// The timer as a checkpoint at `now` keeps it, unless it is deleted or plain.
    pub(super) fn image(&self, now: u64) -> Option<TimerImage> {
        let inner = sync::lock(&self.inner);
        let image = TimerImage {
            id: self.id,
            notify: inner.notify.kind(),
            state: inner.timer.snapshot(now),
        };
        (!inner.deleted && !image.is_plain()).then_some(image)
    }

    /// A poll of [`TimerWait`](super::TimerWait) with `waker`: takes a pending notification
    /// (its overrun count), or registers the waker.
    pub(super) fn poll_wait(&self, waker: &Waker) -> Poll<Result<u32, ProcessError>> {
        let mut inner = sync::lock(&self.inner);
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
        if !inner.waiters.iter().any(|w| w.will_wake(waker)) {
            inner.waiters.push(waker.clone());
        }
        Poll::Pending
    }
}
