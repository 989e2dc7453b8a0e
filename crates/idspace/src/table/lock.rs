//! The tables' locks: `parking_lot`'s in normal builds, loom's model-checked ones under
//! `--cfg loom`, and std's under Miri.
//!
//! Why not std's everywhere: a table lock is held for a few nanoseconds, but with more threads
//! than CPUs a holder is sometimes preempted inside it. std's futex mutex then sends every
//! waiter to sleep after a short spin, and each unlock pays a wake-up system call; once a lock
//! is contended in this way it stays so (a lock convoy). `parking_lot`'s waiters spin briefly
//! and then *yield* a few times before parking, which hands the CPU to the preempted holder,
//! and its fast paths are one compare-exchange each way on one byte. The kernel's bucket
//! spinlocks never meet this case: it disables preemption while one is held.
//!
//! Under Miri the tables use std's locks: `parking_lot`'s parking path stores thread pointers
//! in integers, which Miri's strict-provenance mode (the one CI runs) rejects. Miri checks our
//! code, which is the same over either lock.
//!
//! `parking_lot`'s locks do not poison, and std's are recovered from poisoning (see
//! [`crate::sync`]): the table code never panics while holding one, and user values are never
//! dropped under a table lock.

#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(any(loom, miri)))]
pub(crate) use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(all(miri, not(loom)))]
pub(crate) use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`.
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(any(loom, miri))]
    return crate::sync::lock(mutex);
    #[cfg(not(any(loom, miri)))]
    return mutex.lock();
}

/// Locks `mutex` if no other thread holds it.
#[inline]
pub(crate) fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    #[cfg(any(loom, miri))]
    return crate::sync::try_lock(mutex);
    #[cfg(not(any(loom, miri)))]
    return mutex.try_lock();
}

/// Takes `lock` for reading.
#[inline]
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    #[cfg(any(loom, miri))]
    return crate::sync::read(lock);
    #[cfg(not(any(loom, miri)))]
    return lock.read();
}

/// Takes `lock` for writing.
#[inline]
pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    #[cfg(any(loom, miri))]
    return crate::sync::write(lock);
    #[cfg(not(any(loom, miri)))]
    return lock.write();
}
