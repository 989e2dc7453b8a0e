//! [`Sleep`]: a future that completes at an instant, on its runtime's wheel.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
// Timer targets and drivers are trait objects, which loom's `Arc` cannot hold.
use crate::sync::unmodeled::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::arm::{self, Driver};
use super::bases::{Slot, Target, Waiting};
use crate::sched::runtime::with_current_driver;
use crate::sched::{Handle, Hooks};

/// How far away "never" is: a duration too long for an `Instant` is cut to this (about 30
/// years), as tokio does.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `now + duration`, or 30 years from now if that does not fit in an `Instant`.
pub(crate) fn deadline_after(duration: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(duration)
        .unwrap_or_else(|| now + FAR_FUTURE)
}

/// The message of the panic of a time future polled outside any runtime.
const NO_RUNTIME: &str = "an idspace timer future (sleep, timeout, interval) was polled outside \
     an idspace runtime: poll it from one of the runtime's tasks or its block_on, or create it \
     with Handle::sleep / Handle::timeout / Handle::interval, which work anywhere";

/// The message of the panic of a time future polled after its runtime shut down.
const SHUT_DOWN: &str = "an idspace timer future was polled after its runtime shut down: its \
     timers no longer run";

/// A future that completes once its deadline has passed: from [`sleep`], [`sleep_until`] or
/// [`Handle::sleep`].
///
/// It arms its entry when first polled, on the wheel of the worker polling it, and dropping it
/// cancels the entry at once. A deadline the wheel has already seen pass completes at the first
/// poll; one that passed since the wheel last looked at the clock is armed and fires at the
/// worker's next look (first polls read no clock). It is `Unpin`: the entry lives in the
/// wheel's slab, not in the future.
///
/// # Panics
///
/// Polled outside any runtime when made by [`sleep`] or [`sleep_until`] (the runtime is found
/// at the first poll; see [`Handle::sleep`] for the alternative), and polled after its runtime
/// shut down. A sleep that is pending when its runtime shuts down is woken then, so its next
/// poll panics too, wherever it is polled (a plain thread, another executor, another
/// runtime's `block_on`): it never waits forever for a timer that can no longer fire. (The
/// runtime's own tasks are cancelled at shutdown, so inside them this cannot happen.)
///
/// # Examples
///
/// A sleep can be moved to another deadline, even after it completed:
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::sleep;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// runtime.block_on(async {
///     // An hour away, then brought forward to 2 ms from now.
///     let mut nap = sleep(Duration::from_secs(3600));
///     assert!(!nap.is_elapsed());
///     let soon = Instant::now() + Duration::from_millis(2);
///     nap.reset(soon);
///     assert_eq!(nap.deadline(), soon);
///     (&mut nap).await;
///     assert!(nap.is_elapsed() && Instant::now() >= soon);
///     // Reset after completing: pending again.
///     nap.reset(Instant::now() + Duration::from_millis(1));
///     assert!(!nap.is_elapsed());
///     nap.await;
/// })?;
/// # Ok(())
/// # }
/// ```
///
/// Polled outside any runtime, a sleep made by [`sleep`] panics (one made by
/// [`Handle::sleep`] would not):
///
/// ```should_panic
/// use std::future::Future;
/// use std::pin::Pin;
/// use std::task::{Context, Waker};
/// use std::time::Duration;
///
/// let mut nap = idspace::sched::time::sleep(Duration::from_millis(1));
/// let _ = Pin::new(&mut nap).poll(&mut Context::from_waker(Waker::noop()));
/// ```
pub struct Sleep {
    deadline: Instant,
    /// The runtime, when given by a [`Handle`]; otherwise the thread's current runtime is used
    /// each time the sleep arms (without taking a reference to it).
    driver: Option<Arc<dyn Driver>>,
    /// The armed entry, while it may be pending.
    slot: Option<Slot>,
    /// The deadline the entry was armed for: earlier than `deadline` once
    /// [`extend`](Self::extend) moved the deadline without touching the entry, which then fires
    /// early and is armed again for the rest.
    armed_for: Instant,
    /// Whether the deadline was seen to pass.
    done: bool,
}

/// A future that completes after `duration`, counted from now (not from the first poll).
/// A duration too long for an `Instant` means about 30 years.
///
/// See [`Sleep`] for where it may be polled.
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::sleep;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let start = Instant::now();
/// // In a task: the task waits, the worker runs others meanwhile.
/// let task = runtime.spawn(async move {
///     sleep(Duration::from_millis(3)).await;
///     start.elapsed()
/// });
/// assert!(task.join()? >= Duration::from_millis(3));
/// // In block_on too.
/// runtime.block_on(sleep(Duration::from_millis(1)))?;
/// assert!(start.elapsed() >= Duration::from_millis(4));
/// # Ok(())
/// # }
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(deadline_after(duration))
}

/// A future that completes once `deadline` has passed (at once if it has already).
///
/// See [`Sleep`] for where it may be polled.
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::sleep_until;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let deadline = Instant::now() + Duration::from_millis(2);
/// runtime.block_on(sleep_until(deadline))?;
/// assert!(Instant::now() >= deadline);
/// // A deadline already past completes at once.
/// runtime.block_on(sleep_until(deadline))?;
/// # Ok(())
/// # }
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(deadline, None)
}

impl Sleep {
    pub(crate) fn new(deadline: Instant, driver: Option<Arc<dyn Driver>>) -> Self {
        Sleep {
            deadline,
            driver,
            slot: None,
            armed_for: deadline,
            done: false,
        }
    }

    /// Moves the deadline to `deadline`, as [`reset`](Self::reset) does, but leaves a pending
    /// entry armed when the new deadline is no earlier: the entry then fires at the old
    /// deadline, and the poll it wakes arms again for the rest. A timeout pushed back at every
    /// step (hyper's header-read timeout, started anew for each request of a keep-alive
    /// connection) so costs one early wakeup per old deadline instead of a cancel and an arm
    /// per step: tokio's `TimerEntry::reset` extends a pending entry the same way.
    #[cfg_attr(any(loom, not(feature = "hyper")), allow(dead_code))] // Only hyper's timer uses it.
    pub(crate) fn extend(&mut self, deadline: Instant) {
        if self.slot.is_some() && !self.done && deadline >= self.deadline {
            self.deadline = deadline;
        } else {
            self.reset(deadline);
        }
    }

    /// Whether the sleep holds an entry that may be pending (armed, not seen to fire).
    #[cfg_attr(any(loom, not(feature = "hyper")), allow(dead_code))] // Only hyper's timer uses it.
    pub(crate) fn is_armed(&self) -> bool {
        self.slot.is_some() && !self.done
    }

    /// Whether its entry, if any, is on `base` (for [`extend`](Self::extend): a caller that
    /// moves between workers may prefer an entry on its own worker's wheel).
    #[cfg_attr(any(loom, not(feature = "hyper")), allow(dead_code))] // Only hyper's timer uses it.
    pub(crate) fn is_on(&self, timers: &super::bases::Timers, base: usize) -> bool {
        self.slot
            .as_ref()
            .is_some_and(|slot| slot.is_on(timers, base))
    }

    /// The instant the future completes at.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline was seen to pass (the future returned `Ready`).
    pub fn is_elapsed(&self) -> bool {
        self.done
    }

    /// Moves the deadline to `deadline`, pending again even if it had completed: the current
    /// entry is cancelled and a new one is armed at the next poll.
    pub fn reset(&mut self, deadline: Instant) {
        self.cancel();
        self.deadline = deadline;
        self.done = false;
    }

    fn cancel(&mut self) {
        if let Some(slot) = self.slot.take() {
            arm::cancel(&slot);
        }
    }

    /// `Future::poll` without the pin (the future is `Unpin`).
    ///
    /// # Panics
    /// As [`Sleep`] documents.
    pub(crate) fn poll_at(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_checked(cx)
            .map(|outcome| outcome.unwrap_or_else(|ShutDown| panic!("{SHUT_DOWN}")))
    }

    /// [`poll_at`](Self::poll_at), with its runtime's shutdown as an error instead of a panic
    /// (for the futures that have an error to report it with).
    pub(crate) fn poll_checked(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ShutDown>> {
        self.poll_checked_on(None, cx)
    }

    /// [`poll_checked`](Self::poll_checked), arming on `driver` if one is given (the caller
    /// keeps it alive: a sleep made without a driver of its own takes no reference on the
    /// runtime per sleep), else on the sleep's own driver or the calling thread's runtime.
    pub(crate) fn poll_checked_on(
        &mut self,
        driver: Option<&dyn Driver>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), ShutDown>> {
        if self.done {
            return Poll::Ready(Ok(()));
        }
        match &self.slot {
            Some(slot) => {
                let (waiting, replaced) = slot.still_pending(cx.waker());
                // The waker it replaced is dropped here, outside the wheel's lock.
                drop(replaced);
                match waiting {
                    Waiting::Pending => return Poll::Pending,
                    // Its entry was freed as it expired.
                    Waiting::Expired => self.slot = None,
                    Waiting::ShutDown => return Poll::Ready(Err(ShutDown)),
                }
                if self.armed_for < self.deadline {
                    // Armed for an earlier deadline (`extend`): due only now, arm for the rest.
                    return self.poll_checked_on(driver, cx);
                }
            }
            None => {
                let target = Target::Wake(cx.waker().clone());
                let armed = match driver.or(self.driver.as_deref()) {
                    Some(driver) => arm::arm(driver, self.deadline, target),
                    None => with_current_driver(|driver| {
                        arm::arm(driver.expect(NO_RUNTIME), self.deadline, target)
                    }),
                };
                match armed {
                    Ok(Some(slot)) => {
                        self.slot = Some(slot);
                        self.armed_for = self.deadline;
                        return Poll::Pending;
                    }
                    // The wheel has seen the deadline pass already.
                    Ok(None) => {}
                    Err(_) => return Poll::Ready(Err(ShutDown)),
                }
            }
        }
        self.done = true;
        Poll::Ready(Ok(()))
    }
}

/// The runtime of a time future shut down before its deadline: its timers no longer run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShutDown;

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_at(cx)
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("armed", &self.slot.is_some())
            .field("elapsed", &self.done)
            .finish()
    }
}

impl<H: Hooks> Handle<H> {
    /// A [`Sleep`] on this runtime's timers for `duration` from now: unlike [`sleep`], it can
    /// be polled from any thread and any executor.
    ///
    /// Here a plain thread waits on it with a minimal executor of its own:
    ///
    /// ```
    /// use std::future::Future;
    /// use std::sync::Arc;
    /// use std::task::{Context, Poll, Wake, Waker};
    /// use std::time::{Duration, Instant};
    /// use idspace::sched::{Policy, Runtime};
    ///
    /// /// Polls `future` on this thread, parking between polls.
    /// fn block_on<F: Future>(future: F) -> F::Output {
    ///     struct Unpark(std::thread::Thread);
    ///     impl Wake for Unpark {
    ///         fn wake(self: Arc<Self>) {
    ///             self.0.unpark();
    ///         }
    ///     }
    ///     let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    ///     let mut cx = Context::from_waker(&waker);
    ///     let mut future = std::pin::pin!(future);
    ///     loop {
    ///         if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
    ///             return output;
    ///         }
    ///         std::thread::park();
    ///     }
    /// }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let runtime = Runtime::new(1, Policy::Wakelist)?;
    /// let handle = runtime.handle().clone();
    /// let waited = std::thread::spawn(move || {
    ///     let start = Instant::now();
    ///     block_on(handle.sleep(Duration::from_millis(3)));
    ///     start.elapsed()
    /// });
    /// assert!(waited.join().unwrap() >= Duration::from_millis(3));
    /// # Ok(())
    /// # }
    /// ```
    pub fn sleep(&self, duration: Duration) -> Sleep {
        self.sleep_until(deadline_after(duration))
    }

    /// A [`Sleep`] on this runtime's timers until `deadline`, pollable anywhere: here by
    /// another runtime's `block_on`, whose own timers are not involved.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use idspace::sched::{Policy, Runtime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let timers = Runtime::new(1, Policy::Wakelist)?;
    /// let other = Runtime::new(1, Policy::Locked)?;
    /// let deadline = Instant::now() + Duration::from_millis(2);
    /// other.block_on(timers.handle().sleep_until(deadline))?;
    /// assert!(Instant::now() >= deadline);
    /// # Ok(())
    /// # }
    /// ```
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::new(deadline, Some(self.driver()))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::future::{poll_fn, Future};
    use std::pin::pin;
    use std::task::Poll;
    use std::time::{Duration, Instant};

    use super::sleep_until;
    use crate::sched::{Policy, Runtime};

    /// Polls `future` once: whether it is still pending.
    async fn pending_once(future: impl Future) -> bool {
        let mut future = pin!(future);
        poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx).is_pending())).await
    }

    #[test]
    fn an_extended_sleep_fires_at_its_new_deadline_not_at_its_entry() {
        let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
        let (start, done) = runtime
            .spawn(async {
                let start = Instant::now();
                let mut sleep = sleep_until(start + Duration::from_millis(20));
                assert!(pending_once(&mut sleep).await, "armed at its first poll");
                sleep.extend(start + Duration::from_millis(150));
                assert!(sleep.is_armed(), "the entry stays armed for 20 ms");
                sleep.await;
                (start, Instant::now())
            })
            .join()
            .unwrap();
        // Without the check of what the entry was armed for, it completes at about 20 ms.
        assert!(
            done >= start + Duration::from_millis(150),
            "{:?}",
            done - start
        );
    }

    #[test]
    fn an_earlier_deadline_is_not_an_extension() {
        let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
        let took = runtime
            .spawn(async {
                let start = Instant::now();
                let mut sleep = sleep_until(start + Duration::from_secs(30));
                assert!(pending_once(&mut sleep).await);
                sleep.extend(start + Duration::from_millis(10));
                sleep.await;
                start.elapsed()
            })
            .join()
            .unwrap();
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
}
