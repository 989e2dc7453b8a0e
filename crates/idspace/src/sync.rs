//! The one place where concurrency primitives come from.
//!
//! Every concurrent module imports its atomics, locks, threads, shared cells and reference
//! counts from here, so that building with `RUSTFLAGS="--cfg loom"` swaps the whole crate onto
//! [loom]'s model-checked primitives without a line changing elsewhere. The facade also papers
//! over lock poisoning: a panic while a lock is held cannot leave our structures half-updated
//! (no code of ours panics with a lock held, and user values are never dropped under a lock),
//! so [`lock`], [`read`] and [`write`](write()) recover the guard instead of propagating the
//! poison.
//!
//! Data shared between threads without a lock lives in an [`UnsafeCell`] that is reached only
//! through [`with`](UnsafeCell::with) and [`with_mut`](UnsafeCell::with_mut): each call brackets
//! one access, so that loom can report two threads touching the cell without an ordering
//! between them. Such data is usually owned by an [`Arc`], which comes from here too: loom's
//! `Arc` models the ordering its last drop provides, so that a destructor reading the cell is
//! not reported as racing the accesses that came before it.
//!
//! Two submodules hold the rest:
//!
//! - [`fast`]: the locks of the tables' hot paths, `parking_lot`'s in normal builds (the module
//!   says why), loom's under loom;
//! - [`unmodeled`]: std's primitives where loom's cannot stand in (a static, a waker, a weak
//!   reference, a word the kernel reads), each with the reason. Nothing else in the crate names
//!   `std::sync`, so a grep for it finds every primitive loom does not see.
//!
//! [loom]: https://docs.rs/loom

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

/// Reference counts: loom's model-checked `Arc` under `--cfg loom`, std's otherwise.
#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

/// A cell shared between threads under a protocol of the caller's, reached only through
/// closures that bracket each access: loom's checked cell under `--cfg loom`.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// A cell shared between threads under a protocol of the caller's, reached only through
/// closures that bracket each access. Without loom it is `std::cell::UnsafeCell` and the
/// closures compile away; under `--cfg loom` it is loom's checked cell with the same methods.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T: ?Sized>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// A cell holding `value`.
    #[inline]
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> UnsafeCell<T> {
    /// Runs `f` with a pointer through which it may read the value. The caller's protocol must
    /// rule out a concurrent [`with_mut`](Self::with_mut).
    // Loom's cell has this read half too; the crate's one such cell (a task's body) is only
    // ever entered to be changed, so without loom nothing calls it yet.
    #[allow(dead_code)]
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a pointer through which it may read and write the value. The caller's
    /// protocol must rule out any other access during the call.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Threads: loom's model-checked threads under `--cfg loom`, std's otherwise.
#[cfg(loom)]
pub(crate) use loom::{thread, thread_local};
#[cfg(not(loom))]
pub(crate) use std::{thread, thread_local};

/// Locks `mutex`, recovering the guard if another thread panicked while holding it.
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Tries to lock `mutex` without blocking; `None` if another thread holds it.
// Only [`fast::try_lock`] calls it, and only under loom or Miri.
#[cfg_attr(not(any(loom, miri)), allow(dead_code))]
#[inline]
pub(crate) fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    // loom's `try_lock` reports with std's error type too.
    use std::sync::TryLockError;
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// Takes `lock` for reading, recovering the guard after a poisoning panic.
#[inline]
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Takes `lock` for writing, recovering the guard after a poisoning panic.
#[inline]
pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One step of a spin-wait: a CPU hint, and under loom a yield so that the model checker runs
/// the thread that will end the wait.
#[inline]
pub(crate) fn spin_wait() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Waits on `condvar`, recovering the guard after a poisoning panic.
#[inline]
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One step of a busy poll that expects another CPU to end it soon: the CPU's spin hint (the
/// kernel's `cpu_relax`), and under loom a yield so that the model checker runs the other
/// thread.
#[inline]
pub(crate) fn cpu_relax() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// The pointer in `atomic`, read through exclusive access (a destructor's): no atomic operation,
/// so that loom counts no branch for it (std's `get_mut`, loom's `with_mut`).
#[inline]
pub(crate) fn exclusive_load<T>(atomic: &mut AtomicPtr<T>) -> *mut T {
    #[cfg(loom)]
    return atomic.with_mut(|pointer| *pointer);
    #[cfg(not(loom))]
    return *atomic.get_mut();
}

/// The locks of the tables' hot paths: `parking_lot`'s in normal builds, loom's model-checked
/// ones under `--cfg loom`, and std's under Miri.
///
/// Why not std's everywhere: a table lock is held for a few nanoseconds, but with more threads
/// than CPUs a holder is sometimes preempted inside it. std's futex mutex then sends every
/// waiter to sleep after a short spin, and each unlock pays a wake-up system call; once a lock
/// is contended in this way it stays so (a lock convoy). `parking_lot`'s waiters spin briefly
/// and then *yield* a few times before parking, which hands the CPU to the preempted holder,
/// and its fast paths are one compare-exchange each way on one byte. The kernel's bucket
/// spinlocks never meet this case: it disables preemption while one is held.
///
/// Under Miri the tables use std's locks: `parking_lot`'s parking path stores thread pointers
/// in integers, which Miri's strict-provenance mode (the one CI runs) rejects. Miri checks our
/// code, which is the same over either lock.
///
/// `parking_lot`'s locks do not poison, and std's are recovered from poisoning (as in the
/// parent module): the table code never panics while holding one, and user values are never
/// dropped under a table lock.
pub(crate) mod fast {
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
        return super::lock(mutex);
        #[cfg(not(any(loom, miri)))]
        return mutex.lock();
    }

    /// Locks `mutex` if no other thread holds it.
    #[inline]
    pub(crate) fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
        #[cfg(any(loom, miri))]
        return super::try_lock(mutex);
        #[cfg(not(any(loom, miri)))]
        return mutex.try_lock();
    }

    /// Takes `lock` for reading.
    #[inline]
    pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
        #[cfg(any(loom, miri))]
        return super::read(lock);
        #[cfg(not(any(loom, miri)))]
        return lock.read();
    }

    /// Takes `lock` for writing.
    #[inline]
    pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
        #[cfg(any(loom, miri))]
        return super::write(lock);
        #[cfg(not(any(loom, miri)))]
        return lock.write();
    }
}

/// std's primitives, in every build, where loom's cannot stand in. Each import of one says
/// which of these reasons applies:
///
/// - **statics**: loom's primitives cannot be created in a `static` (`OnceLock`, a process-wide
///   `Mutex`); no model reaches those tables;
/// - **wakers and type erasure**: `std::task::Wake` takes std's `Arc`, and loom's `Arc` neither
///   coerces to a trait object (`Arc<dyn Driver>`, `Arc<dyn Any>`) nor holds a slice built from
///   a `Vec`, nor has a `Weak`;
/// - **the kernel's words**: a futex word lives at an address the kernel reads and sleeps on,
///   which loom's atomics do not have (the module does not exist under loom).
pub(crate) mod unmodeled {
    #[allow(unused_imports)] // Each build uses a different subset.
    pub(crate) use std::sync::{
        atomic::{AtomicU32, AtomicU64},
        Arc, Barrier, Mutex, MutexGuard, OnceLock, Weak,
    };
}
