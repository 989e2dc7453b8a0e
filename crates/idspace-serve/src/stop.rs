//! [`StopSignal`]: the graceful stop's broadcast to every open connection, cheap to wait on.
//!
//! Each connection races its HTTP work against the stop on every poll of its task. A
//! `tokio::sync::watch` (or `Notify`) waiter takes the channel's one mutex at every such poll,
//! so that every request on every worker would write the same lock's cache line. Here a
//! waiter registers its task's waker once, under the lock; a later poll loads one flag, and
//! takes the lock again only if its task's waker changed (rare: a task keeps its waker).
//! Stopping sets the flag and wakes every registered waker.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The registered wakers: a slab, so that a waiter finds its entry again by index.
#[derive(Default)]
struct Wakers {
    slots: Vec<Option<Waker>>,
    free: Vec<usize>,
}

/// Raised once, by the graceful stop; awaited by every connection.
#[derive(Default)]
pub(crate) struct StopSignal {
    stopped: AtomicBool,
    wakers: Mutex<Wakers>,
}

impl StopSignal {
    fn wakers(&self) -> MutexGuard<'_, Wakers> {
        self.wakers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Raises the signal: every waiter, present and future, is ready.
    pub(crate) fn stop(&self) {
        // Release pairs with the Acquire load of `Stopped::poll`; the wakers are taken after,
        // under the lock a waiter registers under, so none registered before is missed.
        self.stopped.store(true, Ordering::Release);
        let wakers: Vec<Waker> = self
            .wakers()
            .slots
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// A future ready once the signal is raised.
    pub(crate) fn stopped(self: &Arc<Self>) -> Stopped {
        Stopped {
            signal: self.clone(),
            registered: None,
        }
    }
}

/// Waits for a [`StopSignal`].
pub(crate) struct Stopped {
    signal: Arc<StopSignal>,
    /// The slab index and the waker registered there.
    registered: Option<(usize, Waker)>,
}

impl Future for Stopped {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        // Acquire pairs with the Release store of `stop`.
        if this.signal.stopped.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if let Some((_, waker)) = &this.registered {
            if waker.will_wake(cx.waker()) {
                return Poll::Pending;
            }
        }
        let mut wakers = this.signal.wakers();
        // Checked again under the lock `stop` takes after raising the flag: a stop between the
        // first check and here is seen now, and one after finds this waker registered.
        if this.signal.stopped.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let waker = cx.waker().clone();
        let index = match this.registered.take() {
            Some((index, _)) => index,
            None => match wakers.free.pop() {
                Some(index) => index,
                None => {
                    wakers.slots.push(None);
                    wakers.slots.len() - 1
                }
            },
        };
        wakers.slots[index] = Some(waker.clone());
        this.registered = Some((index, waker));
        Poll::Pending
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some((index, _)) = self.registered.take() {
            let mut wakers = self.signal.wakers();
            wakers.slots[index] = None;
            wakers.free.push(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            // Relaxed: read after the join below.
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn every_waiter_is_woken_once_and_slots_are_reused() {
        let signal = Arc::new(StopSignal::default());
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut first = Box::pin(signal.stopped());
        let mut second = Box::pin(signal.stopped());
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(
            first.as_mut().poll(&mut cx).is_pending(),
            "polled again: still waiting"
        );
        assert!(second.as_mut().poll(&mut cx).is_pending());
        drop(second);
        let mut third = Box::pin(signal.stopped());
        assert!(third.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            signal.wakers().slots.len(),
            2,
            "the dropped waiter's slot is reused"
        );
        signal.stop();
        assert_eq!(count.0.load(Ordering::Relaxed), 2);
        assert!(first.as_mut().poll(&mut cx).is_ready());
        assert!(third.as_mut().poll(&mut cx).is_ready());
        assert!(Box::pin(signal.stopped()).as_mut().poll(&mut cx).is_ready());
    }
}
