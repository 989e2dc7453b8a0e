//! The low-level arming API: a [`Fire`] callback armed at an instant on a runtime's wheel, and
//! the [`Armed`] handle that cancels it.

use std::fmt;
// Timer targets and drivers are trait objects, which loom's `Arc` cannot hold.
use crate::sync::unmodeled::Arc;
use std::time::Instant;

use super::bases::{Slot, Target, Timers};
use super::wheel::Cancelled;
use crate::sched::{Handle, Hooks};

/// What a timer does when it expires: called by the worker whose wheel holds the entry.
///
/// `fire` runs on a worker thread between task polls, with no lock of the timer machinery held,
/// so it may arm and cancel timers (its own [`Armed`] included), wake tasks or take locks of its
/// own. It should be short: the worker runs no task while it runs. It is called at most once per
/// arming (or re-arming), and never before the deadline.
///
/// Returning `Some(t)` re-arms the same entry at `t` (an interval timer's next period; a `t`
/// already past fires at the worker's next pass); [`Armed::cancel`] and [`Armed::deadline`]
/// keep working on it. Returning `None` frees the entry.
///
/// A one-shot timer that reports its expiry on a channel:
///
/// ```
/// use std::sync::mpsc;
/// use std::sync::Arc;
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::Fire;
/// use idspace::sched::{Policy, Runtime};
///
/// struct Report(mpsc::Sender<Instant>);
/// impl Fire for Report {
///     fn fire(&self, now: Instant) -> Option<Instant> {
///         let _ = self.0.send(now);
///         None // not re-armed
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let (sender, fired) = mpsc::channel();
/// let deadline = Instant::now() + Duration::from_millis(2);
/// let armed = runtime.handle().arm(deadline, Arc::new(Report(sender)));
/// let now = fired.recv_timeout(Duration::from_secs(10))?;
/// assert!(now >= deadline, "never early");
/// assert!(!armed.is_pending());
/// assert!(fired.try_recv().is_err(), "fired once");
/// # Ok(())
/// # }
/// ```
pub trait Fire: Send + Sync + 'static {
    /// The timer expired; `now` is the clock reading of the expiry pass (at or after the
    /// deadline).
    fn fire(&self, now: Instant) -> Option<Instant>;
}

/// What arming needs of a runtime, with its hooks' type erased: its timers, which worker the
/// caller runs on, and how to tell a worker that its next expiry moved earlier.
pub(crate) trait Driver: Send + Sync + 'static {
    /// The runtime's timer bases.
    fn timers(&self) -> &Timers;
    /// The index of the worker running the caller, if it is one of this runtime's.
    fn here(&self) -> Option<usize>;
    /// Makes worker `worker` recompute when to wake up (it may be asleep until a later
    /// deadline): the idle word's notification.
    fn kick(&self, worker: usize);
    /// Worker `worker`'s poller.
    #[cfg(not(loom))]
    fn reactor(&self, worker: usize) -> &crate::sched::io::Reactor;
    /// The worker whose poller takes a resource registered from a thread that is not a
    /// worker (round-robin).
    #[cfg(not(loom))]
    fn io_home(&self) -> usize;
    /// The runtime's blocking pool.
    #[cfg(not(loom))]
    fn blocking(&self) -> &crate::sched::io::BlockingPool;
    /// A fresh task ID (for a blocking job's handle).
    #[cfg(not(loom))]
    fn next_task_id(&self) -> crate::sched::TaskId;
}

/// Arms `target` at `deadline` on the caller's worker's wheel, or, from a thread that is not
/// one of the runtime's workers, on a worker chosen round-robin, which is told if it must now
/// wake up earlier. `Ok(None)` when a [`Target::Wake`] is due already (see [`Timers::arm`]);
/// `Err(target)` once the runtime has shut down.
pub(crate) fn arm(
    driver: &dyn Driver,
    deadline: Instant,
    target: Target,
) -> Result<Option<Slot>, Target> {
    let here = driver.here();
    let timers = driver.timers();
    let base = here.unwrap_or_else(|| timers.external_base());
    let Some((slot, earlier)) = timers.arm(base, deadline, target)? else {
        return Ok(None);
    };
    // A worker arming on its own wheel is awake: it recomputes before it sleeps.
    if earlier && here != Some(base) {
        driver.kick(base);
    }
    Ok(Some(slot))
}

/// Cancels the entry at `slot`: true if it was pending (it will never fire). The value is
/// dropped here, after the base's lock was released.
pub(crate) fn cancel(slot: &Slot) -> bool {
    match slot.cancel() {
        Cancelled::Pending(target) => {
            drop(target);
            true
        }
        Cancelled::Detached | Cancelled::Stale => false,
    }
}

/// An armed [`Fire`] target, from [`Handle::arm`]. Dropping it cancels the timer.
///
/// The entry lives on the wheel of the worker that armed it (or of a worker chosen round-robin
/// when armed from another thread) until it fires or is cancelled; cancelling frees it at once.
/// `Armed` is `Send` and `Sync`: it can be cancelled from any thread.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::Fire;
/// use idspace::sched::{Policy, Runtime};
///
/// struct Flag(AtomicBool);
/// impl Fire for Flag {
///     fn fire(&self, _now: Instant) -> Option<Instant> {
///         self.0.store(true, Ordering::SeqCst);
///         None
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut runtime = Runtime::new(1, Policy::Wakelist)?;
/// let flag = Arc::new(Flag(AtomicBool::new(false)));
/// let deadline = Instant::now() + Duration::from_secs(3600);
/// let armed = runtime.handle().arm(deadline, flag.clone());
/// assert!(armed.is_pending());
/// assert_eq!(armed.deadline(), Some(deadline));
/// // Cancelled while pending: true, and it never fires.
/// assert!(armed.cancel());
/// assert!(!armed.cancel(), "only once");
/// assert_eq!(armed.deadline(), None);
///
/// // After shutdown nothing is armed.
/// let handle = runtime.handle().clone();
/// runtime.shutdown();
/// let late = handle.arm(Instant::now(), flag.clone());
/// assert!(!late.is_pending() && !late.cancel());
/// assert!(!flag.0.load(Ordering::SeqCst));
/// # Ok(())
/// # }
/// ```
pub struct Armed {
    /// `None` when the runtime had shut down at arming: nothing will fire.
    slot: Option<Slot>,
}

impl Armed {
    /// Arms `target` at `deadline` on `driver`'s runtime: [`Handle::arm`] for callers that hold
    /// the runtime type-erased (the process layer's POSIX timers, whose model the runtime's
    /// hooks hold, keep it weakly).
    pub(crate) fn on(driver: &dyn Driver, deadline: Instant, target: Arc<dyn Fire>) -> Armed {
        // A `Fire` target is always armed (never `Ok(None)`), and fires even if already due.
        let slot = arm(driver, deadline, Target::Fire { target, deadline })
            .ok()
            .flatten();
        Armed { slot }
    }

    /// Cancels the timer. Returns true if it was still pending: then `fire` will never be
    /// called for this arming. Returns false if it had expired already (its `fire` ran, or is
    /// running on a worker right now: cancelling does not wait for it) or was cancelled before;
    /// in every case no *further* call follows, because an entry whose `fire` is running when
    /// it is cancelled is not re-armed, whatever `fire` returns. The race between this call and
    /// the expiry is decided once, under the wheel's lock: exactly one of "cancel returned true"
    /// and "`fire` was called" happens for each arming.
    pub fn cancel(&self) -> bool {
        self.slot.as_ref().is_some_and(cancel)
    }

    /// The deadline of the pending arming (the latest one, after a re-arm by
    /// [`Fire::fire`]); `None` once it fired without re-arming, was cancelled, or while its
    /// `fire` runs.
    pub fn deadline(&self) -> Option<Instant> {
        self.slot.as_ref().and_then(Slot::deadline)
    }

    /// Whether the timer is pending (armed and neither fired nor cancelled).
    pub fn is_pending(&self) -> bool {
        self.deadline().is_some()
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Armed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Armed")
            .field("deadline", &self.deadline())
            .finish()
    }
}

impl<H: Hooks> Handle<H> {
    /// Arms `target` to [`fire`](Fire::fire) at `deadline` (rounded up to the runtime's
    /// [`RESOLUTION`](super::RESOLUTION); a deadline already past fires at once, on the next
    /// pass of the worker). Callable from any thread: from a task the entry goes on its
    /// worker's wheel; from elsewhere on a worker chosen round-robin, woken if it sleeps past
    /// the new deadline.
    ///
    /// After the runtime shut down, nothing is armed: the target never fires,
    /// [`Armed::cancel`] returns false and [`Armed::deadline`] `None`.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use std::time::{Duration, Instant};
    /// use idspace::sched::time::Fire;
    /// use idspace::sched::{Policy, Runtime};
    ///
    /// /// Counts its expirations and re-arms itself twice, 1 ms apart.
    /// struct Ticks(AtomicUsize);
    /// impl Fire for Ticks {
    ///     fn fire(&self, now: Instant) -> Option<Instant> {
    ///         let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
    ///         (n < 3).then(|| now + Duration::from_millis(1))
    ///     }
    /// }
    ///
    /// let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
    /// let ticks = Arc::new(Ticks(AtomicUsize::new(0)));
    /// let armed = runtime.handle().arm(Instant::now() + Duration::from_millis(1), ticks.clone());
    /// while ticks.0.load(Ordering::SeqCst) < 3 {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// // The last fire did not re-arm: nothing is pending any more.
    /// assert!(!armed.cancel());
    /// ```
    pub fn arm(&self, deadline: Instant, target: Arc<dyn Fire>) -> Armed {
        Armed::on(self.driver().as_ref(), deadline, target)
    }
}
