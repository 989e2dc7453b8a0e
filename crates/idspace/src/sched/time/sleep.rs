//! [`Sleep`]: a future that completes at an instant, on its runtime's wheel.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
// Timer targets and drivers are trait objects, which loom's `Arc` cannot hold.
use crate::sync::unmodeled::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::arm::{self, Driver};
use super::bases::{Slot, Target};
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
/// shut down (its tasks are cancelled then; only a `block_on` after shutdown can get here).
pub struct Sleep {
    deadline: Instant,
    /// The runtime, when given by a [`Handle`]; otherwise the thread's current runtime is used
    /// each time the sleep arms (without taking a reference to it).
    driver: Option<Arc<dyn Driver>>,
    /// The armed entry, while it may be pending.
    slot: Option<Slot>,
    /// Whether the deadline was seen to pass.
    done: bool,
}

/// A future that completes after `duration`, counted from now (not from the first poll).
/// A duration too long for an `Instant` means about 30 years.
///
/// See [`Sleep`] for where it may be polled.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(deadline_after(duration))
}

/// A future that completes once `deadline` has passed (at once if it has already).
///
/// See [`Sleep`] for where it may be polled.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(deadline, None)
}

impl Sleep {
    pub(crate) fn new(deadline: Instant, driver: Option<Arc<dyn Driver>>) -> Self {
        Sleep {
            deadline,
            driver,
            slot: None,
            done: false,
        }
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
    pub(crate) fn poll_at(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.done {
            return Poll::Ready(());
        }
        match &self.slot {
            Some(slot) => {
                let (pending, replaced) = slot.still_pending(cx.waker());
                // The waker it replaced is dropped here, outside the wheel's lock.
                drop(replaced);
                if pending {
                    return Poll::Pending;
                }
                // Its entry was freed as it expired.
                self.slot = None;
            }
            None => {
                let target = Target::Wake(cx.waker().clone());
                let armed = match &self.driver {
                    Some(driver) => arm::arm(driver.as_ref(), self.deadline, target),
                    None => with_current_driver(|driver| {
                        arm::arm(driver.expect(NO_RUNTIME), self.deadline, target)
                    }),
                };
                match armed {
                    Ok(Some(slot)) => {
                        self.slot = Some(slot);
                        return Poll::Pending;
                    }
                    // The wheel has seen the deadline pass already.
                    Ok(None) => {}
                    Err(_) => panic!("{SHUT_DOWN}"),
                }
            }
        }
        self.done = true;
        Poll::Ready(())
    }
}

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
    pub fn sleep(&self, duration: Duration) -> Sleep {
        self.sleep_until(deadline_after(duration))
    }

    /// A [`Sleep`] on this runtime's timers until `deadline`, pollable anywhere.
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::new(deadline, Some(self.driver()))
    }
}
