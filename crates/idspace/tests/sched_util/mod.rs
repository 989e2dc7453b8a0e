//! Small runtime-agnostic async primitives for the scheduler tests.

#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// A counter one task waits on and others bump: the smallest "wake me when" primitive.
#[derive(Default)]
pub struct Bell {
    rung: AtomicU64,
    waiter: Mutex<Option<Waker>>,
}

impl Bell {
    pub fn new() -> Arc<Bell> {
        Arc::new(Bell::default())
    }

    /// Rings once and wakes the waiter, if any.
    pub fn ring(&self) {
        self.rung.fetch_add(1, Ordering::SeqCst);
        let waker = self.waiter.lock().unwrap().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    pub fn rung(&self) -> u64 {
        self.rung.load(Ordering::SeqCst)
    }

    /// Resolves once the bell has rung at least `times` times.
    pub fn until(self: &Arc<Self>, times: u64) -> Until {
        Until {
            bell: Arc::clone(self),
            times,
        }
    }
}

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
        *self.bell.waiter.lock().unwrap() = Some(cx.waker().clone());
        // Recheck after registering: a ring between the check and the registration found no
        // waker to wake.
        if self.bell.rung() >= self.times {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Yields once: wakes itself and returns Pending the first time.
pub fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}

/// Joins `handle`, failing the test (instead of hanging it) if the task does not finish within
/// `limit`: a lost wakeup shows up as a timeout.
pub fn join_within<T>(
    handle: idspace::sched::JoinHandle<T>,
    limit: std::time::Duration,
    what: &str,
) -> Result<T, idspace::sched::JoinError> {
    let deadline = std::time::Instant::now() + limit;
    while !handle.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {} never finished (a lost wakeup?)",
            handle.id()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    handle.join()
}
