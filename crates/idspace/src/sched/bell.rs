//! [`Bell`]: a counter that one task waits on and other tasks (or threads) ring.
//!
//! It is the smallest "wake me when" primitive: the waiter asks for the `n`-th ring, each
//! ringer adds one and wakes the waiter. It knows nothing of the runtime that polls it, so the
//! same future runs on ours and on any other executor, and a benchmark that compares runtimes
//! measures the runtimes, not two bells.

use std::future::Future;
use std::pin::Pin;
// A `self: &Arc<Self>` receiver must be std's `Arc` (loom's cannot be a receiver). What races
// is the bell's own count and waiter slot, and those come from the facade, so loom sees them.
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::sync::{self, AtomicU64, Mutex, Ordering};

/// A counter one task waits on and others ring.
///
/// A bell is shared by the waiter and its ringers, so [`Bell::new`] hands it out in an
/// [`Arc`]. [`ring`](Bell::ring) adds one to the count and wakes the waiter;
/// [`until`](Bell::until) is a future that resolves once the count has reached a total. The
/// count only grows, so a waiter that asks for round `r` of a ping-pong never misses a ring
/// that came early, and a ring with nobody waiting is kept, not lost.
///
/// A bell has one waiter at a time: a second task polling an [`Until`] of the same bell takes
/// the waiter slot from the first, which then waits for a wakeup that may never come.
///
/// Everything a ringer did before [`ring`](Bell::ring) is visible to the waiter once its
/// [`Until`] resolves.
///
/// # Examples
///
/// Two tasks hitting a ball back and forth, on our runtime:
///
/// ```
/// use idspace::sched::{Bell, Policy, Runtime};
///
/// let runtime = Runtime::new(2, Policy::Wakelist).unwrap();
/// let (ping, pong) = (Bell::new(), Bell::new());
/// let (ping2, pong2) = (ping.clone(), pong.clone());
/// let partner = runtime.spawn(async move {
///     for round in 1..=100 {
///         ping2.until(round).await;
///         pong2.ring();
///     }
/// });
/// let player = runtime.spawn(async move {
///     for round in 1..=100 {
///         ping.ring();
///         pong.until(round).await;
///     }
///     pong.rung()
/// });
/// assert_eq!(player.join().unwrap(), 100);
/// partner.join().unwrap();
///
/// // A thread that is no task rings too: the bell needs no runtime.
/// let done = Bell::new();
/// let ringer = std::thread::spawn({
///     let done = done.clone();
///     move || done.ring()
/// });
/// runtime.block_on(done.until(1)).unwrap();
/// ringer.join().unwrap();
/// ```
pub struct Bell {
    /// How many times the bell has rung.
    rung: AtomicU64,
    /// The waker of the task waiting in [`Until::poll`], if it is waiting.
    waiter: Mutex<Option<Waker>>,
}

impl Bell {
    /// A bell that has not rung, ready to share with the ringers.
    pub fn new() -> Arc<Bell> {
        Arc::new(Bell {
            rung: AtomicU64::new(0),
            waiter: Mutex::new(None),
        })
    }

    /// Rings once and wakes the waiter if it is waiting.
    pub fn ring(&self) {
        // Release: pairs with the Acquire loads in `rung`, so that the waiter sees what the
        // ringer did before ringing. No wakeup is lost to the waiter's check-then-register
        // race: the waiter slot's lock orders this increment against the registration (see
        // `Until::poll`).
        self.rung.fetch_add(1, Ordering::Release);
        let waiter = sync::lock(&self.waiter).take();
        if let Some(waker) = waiter {
            waker.wake();
        }
    }

    /// How many times the bell has rung so far.
    pub fn rung(&self) -> u64 {
        // Acquire: pairs with the Release increment in `ring`.
        self.rung.load(Ordering::Acquire)
    }

    /// A future that resolves once the bell has rung `times` times in all (at once if it
    /// already has).
    pub fn until(self: &Arc<Self>, times: u64) -> Until {
        Until {
            bell: Arc::clone(self),
            times,
        }
    }
}

impl std::fmt::Debug for Bell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bell").field("rung", &self.rung()).finish()
    }
}

/// The future [`Bell::until`] returns: ready once its bell has rung a given number of times.
///
/// It needs no runtime: here it is polled by hand, as any executor would poll it.
///
/// ```
/// use std::future::Future;
/// use std::pin::pin;
/// use std::task::{Context, Waker};
///
/// use idspace::sched::{Bell, Until};
///
/// let bell = Bell::new();
/// bell.ring(); // a ring before anyone waits is kept
/// let mut second: std::pin::Pin<&mut Until> = pin!(bell.until(2));
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(second.as_mut().poll(&mut cx).is_pending(), "one ring of two");
/// bell.ring();
/// assert!(second.as_mut().poll(&mut cx).is_ready());
/// assert!(pin!(bell.until(1)).poll(&mut cx).is_ready(), "a total already reached");
/// ```
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Until {
    bell: Arc<Bell>,
    times: u64,
}

impl Future for Until {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.bell.rung() >= self.times {
            return Poll::Ready(());
        }
        *sync::lock(&self.bell.waiter) = Some(cx.waker().clone());
        // A ring between the first check and the registration found no waker: check again.
        // A ring that took the lock before us incremented before its unlock, which happens
        // before our lock, so this load sees it; a ring that takes the lock after us finds the
        // waker.
        if self.bell.rung() >= self.times {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    /// A waker that counts its wakeups.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn poll(until: &mut Until, waker: &Arc<Count>) -> Poll<()> {
        let waker = Waker::from(Arc::clone(waker));
        Pin::new(until).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn resolves_at_once_when_the_bell_has_rung_enough() {
        let bell = Bell::new();
        bell.ring();
        bell.ring();
        let count = Arc::new(Count::default());
        assert_eq!(poll(&mut bell.until(2), &count), Poll::Ready(()));
        assert_eq!(poll(&mut bell.until(0), &count), Poll::Ready(()));
        assert_eq!(count.0.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn waits_for_the_total_and_is_woken_by_each_ring() {
        let bell = Bell::new();
        let count = Arc::new(Count::default());
        let mut until = bell.until(2);
        assert_eq!(poll(&mut until, &count), Poll::Pending);
        bell.ring();
        assert_eq!(
            count.0.load(Ordering::Relaxed),
            1,
            "the first ring wakes the waiter"
        );
        assert_eq!(poll(&mut until, &count), Poll::Pending, "one ring of two");
        bell.ring();
        assert_eq!(count.0.load(Ordering::Relaxed), 2);
        assert_eq!(poll(&mut until, &count), Poll::Ready(()));
        assert_eq!(bell.rung(), 2);
    }

    #[test]
    fn a_ring_wakes_once_and_clears_the_waiter() {
        let bell = Bell::new();
        let count = Arc::new(Count::default());
        let mut until = bell.until(5);
        assert_eq!(poll(&mut until, &count), Poll::Pending);
        bell.ring();
        bell.ring();
        assert_eq!(
            count.0.load(Ordering::Relaxed),
            1,
            "no waiter registered again"
        );
    }

    #[test]
    fn rings_from_other_threads_reach_a_blocked_waiter() {
        const RINGERS: u64 = 4;
        // Fewer under Miri, which interprets every ring and wakeup.
        const RINGS: u64 = if cfg!(miri) { 50 } else { 1_000 };
        let bell = Bell::new();
        let ringers: Vec<_> = (0..RINGERS)
            .map(|_| {
                let bell = Arc::clone(&bell);
                std::thread::spawn(move || (0..RINGS).for_each(|_| bell.ring()))
            })
            .collect();
        block_on(bell.until(RINGERS * RINGS));
        ringers.into_iter().for_each(|r| r.join().unwrap());
        assert_eq!(bell.rung(), RINGERS * RINGS);
    }

    /// Polls `future` on this thread, parking between polls until its waker unparks it.
    fn block_on(future: impl Future<Output = ()>) {
        struct Unpark(std::thread::Thread);
        impl Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut future = std::pin::pin!(future);
        while future
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
        {
            std::thread::park();
        }
    }
}
