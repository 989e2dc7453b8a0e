//! How a timer tells of its expiry: its target ([`Notify`]) and the event a channel target
//! receives ([`TimerEvent`]), which stays pending, as a queued signal does, until it is
//! accepted or dropped.

use std::fmt;
// The target is the user's channel: std's, which loom does not replace.
use std::sync::mpsc::Sender;
// std's `Arc`, as the timer cells' (see `cell`).
use std::sync::Arc;

use super::cell::TimerCell;
use crate::process::image::NotifyKind;
use crate::process::posix_timer::Token;

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
    pub(super) pid: u32,
    pub(super) timer: u32,
    pub(super) token: Token,
    /// The timer to deliver to; `None` once delivered (or never to be: its receiver is gone).
    pub(super) cell: Option<Arc<TimerCell>>,
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
