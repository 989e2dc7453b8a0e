//! [`RawRwLock`]: std's reader-writer lock (Linux's futex implementation in
//! `library/std/src/sys/sync/rwlock/futex.rs`, without `downgrade`) behind `lock_api`, so that
//! the structures that took std's `RwLock` before the locks became a type parameter keep its
//! behaviour in the `std` build.
//!
//! # Why not `parking_lot`'s
//!
//! Both prefer writers, but they hand the lock over differently. With more threads than CPUs
//! and writers that never stop (the PID lab's lookups while allocations run: four lookup
//! threads, four allocating ones, two CPUs), `parking_lot`'s waiters yield and its unlocks are
//! eventually fair, and the writers took most of the lock: the IDR designs' lookups ran at 0.4
//! to 0.55 times std's, their allocations at three to four times. Lookups are what those
//! designs are measured by, as the kernel's readers are (RCU there).
//!
//! # Protocol (std's)
//!
//! `state` holds a 30-bit reader count (all ones: write-locked) and two flags, readers waiting
//! and writers waiting. A reader enters while no one waits and no writer holds it, a writer
//! when the count is zero; both spin 100 times before they sleep on a futex, readers on
//! `state` and writers on `writer_notify`, a counter bumped at every writer wake-up. An unlock
//! that leaves the lock free with waiters wakes one writer, or else every reader.

use crate::sync::unmodeled::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sys::futex;

/// A reader-writer lock on futexes: std's (Linux's futex implementation in
/// `library/std/src/sys/sync/rwlock/futex.rs`, without `downgrade`), as a
/// `lock_api::RawRwLock`, so that the structures that took std's `RwLock` before their locks
/// became a type parameter keep its behaviour in the `std` build.
///
/// Why not `parking_lot`'s: both prefer writers, but they hand the lock over differently.
/// With more threads than CPUs and writers that never stop (the PID lab's lookups while
/// allocations run: four lookup threads, four allocating ones, two CPUs), `parking_lot`'s
/// waiters yield and its unlocks are eventually fair, and the writers took most of the lock:
/// the IDR designs' lookups ran at 0.4 to 0.55 times their speed on std's lock, their
/// allocations at three to four times.
///
/// ```
/// let lock = lock_api::RwLock::<idspace::lock::FutexRwLock, u32>::new(1);
/// *lock.write() += 1;
/// assert_eq!(*lock.read(), 2);
/// ```
pub struct RawRwLock {
    /// The reader count (or [`WRITE_LOCKED`]) and the two waiting flags.
    state: AtomicU32,
    /// Writers sleep on this; bumped before every wake-up of one.
    writer_notify: AtomicU32,
}

const READ_LOCKED: u32 = 1;
const MASK: u32 = (1 << 30) - 1;
const WRITE_LOCKED: u32 = MASK;
const MAX_READERS: u32 = MASK - 1;
const READERS_WAITING: u32 = 1 << 30;
const WRITERS_WAITING: u32 = 1 << 31;

fn is_unlocked(state: u32) -> bool {
    state & MASK == 0
}

fn is_write_locked(state: u32) -> bool {
    state & MASK == WRITE_LOCKED
}

fn has_readers_waiting(state: u32) -> bool {
    state & READERS_WAITING != 0
}

fn has_writers_waiting(state: u32) -> bool {
    state & WRITERS_WAITING != 0
}

/// A reader may enter: room in the count and no one waiting (an unlock may be waking writers,
/// which go first).
fn is_read_lockable(state: u32) -> bool {
    state & MASK < MAX_READERS && !has_readers_waiting(state) && !has_writers_waiting(state)
}

impl RawRwLock {
    fn try_read(&self) -> bool {
        let mut state = self.state.load(Relaxed);
        while is_read_lockable(state) {
            // Acquire pairs with the Release of the unlocks: the last writer's writes are seen.
            match self
                .state
                .compare_exchange_weak(state, state + READ_LOCKED, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
        false
    }

    #[cold]
    fn read_contended(&self) {
        let mut state = self.spin_read();
        loop {
            if is_read_lockable(state) {
                // Acquire: as in `try_read`.
                match self
                    .state
                    .compare_exchange_weak(state, state + READ_LOCKED, Acquire, Relaxed)
                {
                    Ok(_) => return,
                    Err(now) => {
                        state = now;
                        continue;
                    }
                }
            }
            // A reader count this high means a leak of read guards, which lock_api's guards
            // cannot produce; wait like any reader rather than overflow into the writer bits.
            // Relaxed: the flag only asks the unlocker to wake us; the futex orders the sleep.
            if !has_readers_waiting(state) {
                if let Err(now) =
                    self.state
                        .compare_exchange(state, state | READERS_WAITING, Relaxed, Relaxed)
                {
                    state = now;
                    continue;
                }
            }
            futex::wait(&self.state, state | READERS_WAITING);
            state = self.spin_read();
        }
    }

    fn try_write(&self) -> bool {
        let mut state = self.state.load(Relaxed);
        while is_unlocked(state) {
            // Acquire pairs with the Release of the unlocks.
            match self
                .state
                .compare_exchange_weak(state, state + WRITE_LOCKED, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
        false
    }

    #[cold]
    fn write_contended(&self) {
        let mut state = self.spin_write();
        // Once we waited, other writers may wait too: keep their flag when we take the lock.
        let mut other_writers_waiting = 0;
        loop {
            if is_unlocked(state) {
                // Acquire pairs with the Release of the unlocks.
                match self.state.compare_exchange_weak(
                    state,
                    state | WRITE_LOCKED | other_writers_waiting,
                    Acquire,
                    Relaxed,
                ) {
                    Ok(_) => return,
                    Err(now) => {
                        state = now;
                        continue;
                    }
                }
            }
            // Relaxed: as the readers' flag.
            if !has_writers_waiting(state) {
                if let Err(now) =
                    self.state
                        .compare_exchange(state, state | WRITERS_WAITING, Relaxed, Relaxed)
                {
                    state = now;
                    continue;
                }
            }
            other_writers_waiting = WRITERS_WAITING;
            // The notification count before the state is checked, so no wake-up is missed;
            // Acquire pairs with the Release increment in `wake_writer`.
            let seq = self.writer_notify.load(Acquire);
            state = self.state.load(Relaxed);
            if is_unlocked(state) || !has_writers_waiting(state) {
                continue;
            }
            futex::wait(&self.writer_notify, seq);
            state = self.spin_write();
        }
    }

    /// After an unlock left the lock free with waiters: one writer, or else every reader.
    #[cold]
    fn wake_writer_or_readers(&self, mut state: u32) {
        // Relaxed throughout: the flags only say who sleeps; the lock word's Acquire/Release
        // pairs order the data, and the futex calls order the sleeps against the wake-ups.
        if state == WRITERS_WAITING {
            match self.state.compare_exchange(state, 0, Relaxed, Relaxed) {
                Ok(_) => {
                    self.wake_writer();
                    return;
                }
                Err(now) => state = now,
            }
        }
        if state == READERS_WAITING + WRITERS_WAITING {
            if self
                .state
                .compare_exchange(state, READERS_WAITING, Relaxed, Relaxed)
                .is_err()
            {
                return; // locked meanwhile: its unlock wakes the waiters
            }
            if self.wake_writer() {
                return;
            }
            // No writer was asleep: wake the readers instead.
            state = READERS_WAITING;
        }
        if state == READERS_WAITING
            && self
                .state
                .compare_exchange(state, 0, Relaxed, Relaxed)
                .is_ok()
        {
            futex::wake(&self.state, u32::MAX);
        }
    }

    /// Wakes one writer; whether one was asleep.
    fn wake_writer(&self) -> bool {
        // Release pairs with the Acquire load in `write_contended`.
        self.writer_notify.fetch_add(1, Release);
        futex::wake(&self.writer_notify, 1) > 0
    }

    /// Spins until `done` holds for the state, at most 100 times (std's count).
    fn spin_until(&self, done: impl Fn(u32) -> bool) -> u32 {
        let mut spins = 100;
        loop {
            let state = self.state.load(Relaxed);
            if done(state) || spins == 0 {
                return state;
            }
            core::hint::spin_loop();
            spins -= 1;
        }
    }

    fn spin_write(&self) -> u32 {
        self.spin_until(|state| is_unlocked(state) || has_writers_waiting(state))
    }

    fn spin_read(&self) -> u32 {
        self.spin_until(|state| {
            !is_write_locked(state) || has_readers_waiting(state) || has_writers_waiting(state)
        })
    }
}

// SAFETY: a reader enters only by raising the count while it is below `WRITE_LOCKED - 1`, a
// writer only by moving the count from 0 to `WRITE_LOCKED`, each with a compare-exchange from
// the value it checked; so a writer excludes everyone and readers exclude writers. The unlocks
// are called by holders only (the trait's contract) and undo exactly their lock.
unsafe impl lock_api::RawRwLock for RawRwLock {
    #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern.
    const INIT: RawRwLock = RawRwLock {
        state: AtomicU32::new(0),
        writer_notify: AtomicU32::new(0),
    };
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock_shared(&self) {
        let state = self.state.load(Relaxed);
        // Acquire: as in `try_read`.
        if !is_read_lockable(state)
            || self
                .state
                .compare_exchange_weak(state, state + READ_LOCKED, Acquire, Relaxed)
                .is_err()
        {
            self.read_contended();
        }
    }

    #[inline]
    fn try_lock_shared(&self) -> bool {
        self.try_read()
    }

    #[inline]
    unsafe fn unlock_shared(&self) {
        // Release pairs with the Acquire of the next writer's lock.
        let state = self.state.fetch_sub(READ_LOCKED, Release) - READ_LOCKED;
        if is_unlocked(state) && has_writers_waiting(state) {
            self.wake_writer_or_readers(state);
        }
    }

    #[inline]
    fn lock_exclusive(&self) {
        // Acquire pairs with the Release of the unlocks.
        if self
            .state
            .compare_exchange_weak(0, WRITE_LOCKED, Acquire, Relaxed)
            .is_err()
        {
            self.write_contended();
        }
    }

    #[inline]
    fn try_lock_exclusive(&self) -> bool {
        self.try_write()
    }

    #[inline]
    unsafe fn unlock_exclusive(&self) {
        // Release pairs with the Acquire of the next reader's or writer's lock.
        let state = self.state.fetch_sub(WRITE_LOCKED, Release) - WRITE_LOCKED;
        if has_writers_waiting(state) || has_readers_waiting(state) {
            self.wake_writer_or_readers(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_api::RawRwLock as _;

    type Lock<T> = lock_api::RwLock<RawRwLock, T>;

    #[test]
    fn readers_share_and_a_writer_excludes() {
        let lock = Lock::new(0u32);
        let (a, b) = (lock.read(), lock.read());
        assert!(lock.try_write().is_none());
        drop((a, b));
        let mut w = lock.write();
        assert!(lock.try_read().is_none());
        *w += 1;
        drop(w);
        assert_eq!(*lock.read(), 1);
        // SAFETY: not held; a raw lock and unlock pair.
        unsafe {
            lock.raw().lock_exclusive();
            lock.raw().unlock_exclusive();
        }
    }

    #[test]
    fn sleeping_readers_and_writers_all_get_through() {
        let lock = Lock::new(0u64);
        std::thread::scope(|scope| {
            for writer in 0..4 {
                let lock = &lock;
                scope.spawn(move || {
                    for _ in 0..2_000 {
                        *lock.write() += writer + 1;
                    }
                });
            }
            for _ in 0..4 {
                let lock = &lock;
                scope.spawn(move || {
                    let mut last = 0;
                    for _ in 0..2_000 {
                        let now = *lock.read();
                        assert!(now >= last, "a reader saw the sum go back");
                        last = now;
                    }
                });
            }
        });
        assert_eq!(*lock.read(), 2_000 * (1 + 2 + 3 + 4));
    }
}
