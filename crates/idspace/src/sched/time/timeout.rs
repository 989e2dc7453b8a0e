//! [`Timeout`]: a future with a deadline.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::sleep::{deadline_after, Sleep};
use crate::sched::{Handle, Hooks};

/// The error of a [`Timeout`] whose deadline passed before its future completed.
///
/// ```
/// use std::time::Duration;
/// use idspace::sched::time::{timeout, Elapsed};
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let never = std::future::pending::<()>();
/// let error: Elapsed = runtime.block_on(timeout(Duration::from_millis(1), never))?.unwrap_err();
/// assert_eq!(error.to_string(), "the deadline passed before the future completed");
/// // An error like any other: `?` turns it into a boxed one.
/// let boxed: Box<dyn std::error::Error> = error.into();
/// assert!(boxed.is::<Elapsed>());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed {
    /// Whether the deadline's runtime shut down rather than the deadline passing.
    shut_down: bool,
}

impl Elapsed {
    /// Whether the timer's runtime shut down before the deadline (the deadline can no longer
    /// be kept, so the future is given up), rather than the deadline passing.
    pub fn is_shut_down(&self) -> bool {
        self.shut_down
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.shut_down {
            f.write_str("the runtime of the deadline's timer shut down before the future completed")
        } else {
            f.write_str("the deadline passed before the future completed")
        }
    }
}

impl std::error::Error for Elapsed {}

/// Runs a future until a deadline: from [`timeout`], [`timeout_at`] or [`Handle::timeout`].
///
/// Each poll polls the future first, so a future that is ready wins even after the deadline,
/// and one that completes before its first `Pending` never arms a timer at all. The deadline's
/// [`Sleep`] arms when the future first returns `Pending`, and dropping the `Timeout` (or its
/// completing) cancels it at once. Where it may be polled: see [`Sleep`].
///
/// When the timer's runtime shuts down first (a [`Handle::timeout`] polled elsewhere), the
/// deadline can no longer be kept: the `Timeout` is woken and fails with an [`Elapsed`] whose
/// [`is_shut_down`](Elapsed::is_shut_down) is true, instead of waiting forever.
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::timeout;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let guarded = timeout(Duration::from_secs(60), async { 6 * 7 });
/// assert!(guarded.deadline() > Instant::now());
/// // Without its deadline, it is the plain future again.
/// let plain = guarded.into_inner();
/// assert_eq!(runtime.block_on(plain)?, 42);
/// # Ok(())
/// # }
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

/// Runs `future` for at most `duration` from now: its output, or [`Elapsed`].
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::{sleep, timeout};
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// let start = Instant::now();
/// let slow = runtime.spawn(async {
///     // Gives up on a sleep of a minute after 2 ms.
///     timeout(Duration::from_millis(2), sleep(Duration::from_secs(60))).await
/// });
/// assert!(slow.join()?.is_err());
/// assert!(start.elapsed() >= Duration::from_millis(2));
/// assert!(start.elapsed() < Duration::from_secs(60));
/// // A future that is ready wins, and arms no timer at all.
/// assert_eq!(runtime.block_on(timeout(Duration::ZERO, async { "ready" }))?, Ok("ready"));
/// # Ok(())
/// # }
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    timeout_at(deadline_after(duration), future)
}

/// Runs `future` until `deadline` at most: its output, or [`Elapsed`].
///
/// One deadline can bound several steps:
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::{sleep, timeout_at};
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let start = Instant::now();
/// let deadline = start + Duration::from_millis(20);
/// let steps = runtime.block_on(async {
///     let mut steps = 0;
///     while timeout_at(deadline, sleep(Duration::from_millis(3))).await.is_ok() {
///         steps += 1;
///     }
///     steps
/// })?;
/// // The loop ended at the deadline, not before, after whole steps of 3 ms each.
/// assert!(Instant::now() >= deadline);
/// assert!(start.elapsed() >= Duration::from_millis(3) * steps);
/// # Ok(())
/// # }
/// ```
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: Sleep::new(deadline, None),
    }
}

impl<F> Timeout<F> {
    /// The deadline.
    pub fn deadline(&self) -> Instant {
        self.sleep.deadline()
    }

    /// The future, without its deadline.
    pub fn into_inner(self) -> F {
        self.future
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of `future` only: it is never moved out of a pinned
        // `Timeout` (`into_inner` takes the `Timeout` by value, which needs it unpinned or
        // `Unpin`), `Timeout` has no `Drop` of its own, and `sleep` is `Unpin` and used through a
        // plain `&mut`.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above; `this.future` stays where the pinned `Timeout` put it.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        if let Poll::Ready(output) = future.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        this.sleep.poll_checked(cx).map(|outcome| {
            Err(Elapsed {
                shut_down: outcome.is_err(),
            })
        })
    }
}

impl<F> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("sleep", &self.sleep)
            .finish_non_exhaustive()
    }
}

impl<H: Hooks> Handle<H> {
    /// A [`Timeout`] on this runtime's timers, `duration` from now: unlike [`timeout`], it can
    /// be polled from any thread and any executor.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idspace::sched::{Policy, Runtime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let timers = Runtime::new(1, Policy::Wakelist)?;
    /// let other = Runtime::new(1, Policy::Wakelist)?;
    /// // Polled by another runtime's block_on, on the first runtime's timers.
    /// let never = std::future::pending::<()>();
    /// let outcome = other.block_on(timers.handle().timeout(Duration::from_millis(2), never))?;
    /// assert!(outcome.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn timeout<F: Future>(&self, duration: Duration, future: F) -> Timeout<F> {
        Timeout {
            future,
            sleep: self.sleep(duration),
        }
    }
}
