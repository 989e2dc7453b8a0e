//! A worker's idle state: the user-space `TIF_POLLING_NRFLAG` / `NEED_RESCHED` pair and the
//! sleep that stands in for the kernel's idle loop.
//!
//! One word per worker, written by the worker and by wakers:
//!
//! | state      | meaning                                   | who moves it out, to what           |
//! |------------|-------------------------------------------|-------------------------------------|
//! | `RUNNING`  | running tasks or looking for them         | the worker: `POLLING`               |
//! | `POLLING`  | idle, spinning on its queues              | a waker: `NOTIFIED` (no syscall); the worker: `PARKED` or `RUNNING` |
//! | `PARKED`   | asleep in `futex_wait` on this word       | a waker: `NOTIFIED`, then `futex_wake` |
//! | `NOTIFIED` | told to look at its queues                | the worker: `RUNNING`               |
//!
//! The full protocol, and why no wakeup is lost, is in the [`protocol`](super::protocol)
//! document.

use std::time::Instant;

use crate::sync::{fence, AtomicU32, Ordering};
#[cfg(not(loom))]
use crate::sys::futex;

const RUNNING: u32 = 0;
const POLLING: u32 = 1;
const PARKED: u32 = 2;
const NOTIFIED: u32 = 3;

/// How a notification reached its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// The worker was running (or already notified): it will see the work by itself.
    NotNeeded,
    /// The worker was polling: its flag was set, no system call (`set_nr_if_polling`).
    Polling,
    /// The worker was asleep: it was woken with a futex wake (the IPI).
    Woken,
}

/// One worker's idle word and, under loom, the lock and condition variable that model the
/// futex.
pub(crate) struct Idle {
    state: AtomicU32,
    #[cfg(loom)]
    sleep: (crate::sync::Mutex<()>, crate::sync::Condvar),
}

impl Idle {
    pub(crate) fn new() -> Self {
        Idle {
            state: AtomicU32::new(RUNNING),
            #[cfg(loom)]
            sleep: (crate::sync::Mutex::new(()), crate::sync::Condvar::new()),
        }
    }

    /// Whether the worker is running or about to (the `curr != idle` part of `idle_cpu`).
    /// A hint for choosing targets; correctness never rests on it.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(self.state.load(Ordering::Relaxed), RUNNING | NOTIFIED)
    }

    /// The worker announces that it is idle and polling, then fences: the store is ordered
    /// before the worker's recheck of its queues. This SeqCst fence pairs with the one in
    /// [`notify`](Self::notify) (the Dekker handshake of the protocol, section 4): a fence pair
    /// rather than SeqCst accesses because that is what the C11 model guarantees for mixed
    /// orderings, and what loom checks.
    ///
    /// Every write to the word is a read-modify-write, so the word's history is one chain in
    /// which each write follows the value it replaced. With plain stores the handshake holds in
    /// the C11 model, but loom, which orders a plain store only after the writes its thread has
    /// seen, finds a lost wakeup; with read-modify-writes both agree, at no cost on the hot path
    /// (these writes happen only on the way into and out of idle).
    pub(crate) fn start_polling(&self) {
        self.state.swap(POLLING, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Whether a waker has set this worker's flag (`need_resched()` in the idle loop).
    pub(crate) fn is_notified(&self) -> bool {
        self.state.load(Ordering::Relaxed) == NOTIFIED
    }

    /// The worker goes back to running (a swap, like every write to the word). Relaxed: the
    /// word is a hint for wakers choosing a target; a stale `POLLING` only costs them a needless
    /// notification.
    pub(crate) fn stop_idling(&self) {
        self.state.swap(RUNNING, Ordering::Relaxed);
    }

    /// The worker, polling and still without work, goes to sleep until notified, or until
    /// `deadline` (its next timer) if it has one. Returns whether it slept (false when a waker
    /// set its flag first).
    ///
    /// A sleep that times out leaves the word `PARKED`; the worker's `stop_idling` then moves it
    /// to `RUNNING`, and a waker that raced it (`PARKED -> NOTIFIED` and a futex wake that finds
    /// no one) loses nothing: the worker goes back to its loop and looks at its queues anyway.
    pub(crate) fn park(&self, deadline: Option<Instant>) -> bool {
        // Races the waker's CAS POLLING -> NOTIFIED on the same word: exactly one of them wins.
        if self
            .state
            .compare_exchange(POLLING, PARKED, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.sleep_while_parked(deadline);
        true
    }

    #[cfg(not(loom))]
    fn sleep_while_parked(&self, deadline: Option<Instant>) {
        // Acquire pairs with the waker's AcqRel CAS PARKED -> NOTIFIED.
        while self.state.load(Ordering::Acquire) == PARKED {
            // The kernel compares the word with PARKED atomically with going to sleep, so a
            // waker that changes it first makes the call return at once (no lost wakeup).
            match deadline {
                None => futex::wait(&self.state, PARKED),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return;
                    }
                    futex::wait_timeout(&self.state, PARKED, left);
                }
            }
        }
    }

    /// Under loom time stands still while a worker sleeps: a deadline still ahead is never
    /// reached, so the sleep lasts until a notification, and one already passed ends it at once.
    #[cfg(loom)]
    fn sleep_while_parked(&self, deadline: Option<Instant>) {
        if deadline.is_some_and(|deadline| deadline <= Instant::now()) {
            return;
        }
        let (lock, condvar) = &self.sleep;
        let mut guard = crate::sync::lock(lock);
        while self.state.load(Ordering::Acquire) == PARKED {
            guard = crate::sync::wait(condvar, guard);
        }
    }

    /// A waker, having published work for this worker, makes sure the worker will look at it.
    /// The SeqCst fence orders the publish before the read of the idle word; it pairs with the
    /// fence in [`start_polling`](Self::start_polling).
    pub(crate) fn notify(&self) -> Notice {
        fence(Ordering::SeqCst);
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let from = match state {
                RUNNING | NOTIFIED => return Notice::NotNeeded,
                POLLING | PARKED => state,
                _ => unreachable!("idle state word holds only the four states"),
            };
            match self
                .state
                .compare_exchange(from, NOTIFIED, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) if from == POLLING => return Notice::Polling,
                Ok(_) => {
                    self.wake_sleeper();
                    return Notice::Woken;
                }
                Err(actual) => state = actual,
            }
        }
    }

    #[cfg(not(loom))]
    fn wake_sleeper(&self) {
        // The word is NOTIFIED already: the worker, once woken, sees it and stays up.
        futex::wake(&self.state, 1);
    }

    #[cfg(loom)]
    fn wake_sleeper(&self) {
        let (lock, condvar) = &self.sleep;
        // Taking the lock orders this wake after the sleeper's check of the state word.
        drop(crate::sync::lock(lock));
        condvar.notify_one();
    }
}
