//! [`Timeout`]: a future with a deadline.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::sleep::{deadline_after, Sleep};
use crate::sched::{Handle, Hooks};

/// The error of a [`Timeout`] whose deadline passed before its future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the deadline passed before the future completed")
    }
}

impl std::error::Error for Elapsed {}

/// Runs a future until a deadline: from [`timeout`], [`timeout_at`] or [`Handle::timeout`].
///
/// Each poll polls the future first, so a future that is ready wins even after the deadline,
/// and one that completes before its first `Pending` never arms a timer at all. The deadline's
/// [`Sleep`] arms when the future first returns `Pending`, and dropping the `Timeout` (or its
/// completing) cancels it at once. Where it may be polled: see [`Sleep`].
#[must_use = "futures do nothing unless polled"]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

/// Runs `future` for at most `duration` from now: its output, or [`Elapsed`].
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    timeout_at(deadline_after(duration), future)
}

/// Runs `future` until `deadline` at most: its output, or [`Elapsed`].
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
        this.sleep.poll_at(cx).map(|()| Err(Elapsed(())))
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
    pub fn timeout<F: Future>(&self, duration: Duration, future: F) -> Timeout<F> {
        Timeout {
            future,
            sleep: self.sleep(duration),
        }
    }
}
