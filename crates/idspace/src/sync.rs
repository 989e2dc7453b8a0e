//! The one place where concurrency primitives come from.
//!
//! Every concurrent module imports its atomics, locks, threads, shared cells and reference
//! counts from here, so that building with `RUSTFLAGS="--cfg loom"` swaps the whole crate onto
//! [loom]'s model-checked primitives without a line changing elsewhere. The facade also papers
//! over lock poisoning: a panic while a lock is held cannot leave our structures half-updated
//! (no code of ours panics with a lock held, and user values are never dropped under a lock),
//! so [`lock`] and [`wait`] recover the guard instead of propagating the poison.
//!
//! Data shared between threads without a lock lives in an [`UnsafeCell`] that is reached only
//! through [`with`](UnsafeCell::with) and [`with_mut`](UnsafeCell::with_mut): each call brackets
//! one access, so that loom can report two threads touching the cell without an ordering
//! between them. Such data is usually owned by an [`Arc`], which comes from here too: loom's
//! `Arc` models the ordering its last drop provides, so that a destructor reading the cell is
//! not reported as racing the accesses that came before it.
//!
//! The families' locks are not here but in [`crate::lock`], chosen by each structure's user;
//! under loom and Miri their default is [`model`]'s. Two submodules hold the rest:
//!
//! - [`model`]: the families' default locks under loom and Miri;
//! - [`unmodeled`]: std's primitives where loom's cannot stand in (a static, a waker, a weak
//!   reference, a word the kernel reads), each with the reason. Besides it only [`model`]'s
//!   lazily made words and the default clock's epoch in [`host`](crate::host) (a static) name
//!   `std::sync`, and `pid`'s objects are `alloc`'s `Arc` (a slice, which loom's cannot hold),
//!   so a grep for `std::sync` and `alloc::sync` finds every primitive loom does not see.
//!
//! [loom]: https://docs.rs/loom

#[cfg(loom)]
#[allow(unused_imports)] // The runtime's; the families take theirs from `crate::lock`.
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering,
};

/// 64-bit atomics: `core`'s, or `portable-atomic`'s on targets without them (its fallback
/// takes a global seqlock per access there), loom's under loom.
#[cfg(all(not(loom), target_has_atomic = "64"))]
pub(crate) use core::sync::atomic::AtomicU64;
#[cfg(all(not(loom), not(target_has_atomic = "64")))]
pub(crate) use portable_atomic::AtomicU64;

#[cfg(all(feature = "std", not(loom)))]
#[allow(unused_imports)] // The runtime's; the families take theirs from `crate::lock`.
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(not(loom))]
pub(crate) use alloc::sync::Arc;
/// Reference counts: loom's model-checked `Arc` under `--cfg loom`, `alloc`'s otherwise.
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

/// A cell shared between threads under a protocol of the caller's, reached only through
/// closures that bracket each access: loom's checked cell under `--cfg loom`.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// A cell shared between threads under a protocol of the caller's, reached only through
/// closures that bracket each access. Without loom it is `std::cell::UnsafeCell` and the
/// closures compile away; under `--cfg loom` it is loom's checked cell with the same methods.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T: ?Sized>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
#[cfg_attr(not(feature = "std"), allow(dead_code))] // Only the runtime builds one.
impl<T> UnsafeCell<T> {
    /// A cell holding `value`.
    #[inline]
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
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
    #[cfg_attr(not(feature = "std"), allow(dead_code))] // Only the runtime writes one.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Threads: loom's model-checked threads under `--cfg loom`, std's otherwise.
#[cfg(loom)]
pub(crate) use loom::{thread, thread_local};
#[cfg(all(feature = "std", not(loom)))]
pub(crate) use std::{thread, thread_local};

#[cfg(feature = "std")]
/// Locks `mutex`, recovering the guard if another thread panicked while holding it.
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Takes `mutex` if it is free (recovering the guard if another thread panicked while holding
/// it), or `None` if another thread holds it.
#[cfg(feature = "std")]
#[cfg_attr(loom, allow(dead_code))] // Its one caller, the shared poller, is not built under loom.
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

/// One step of a spin-wait: a CPU hint, and under loom a yield so that the model checker runs
/// the thread that will end the wait.
#[inline]
pub(crate) fn spin_wait() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(all(feature = "std", not(loom)))]
    std::thread::yield_now();
    // Without threads to yield to, the CPU's spin hint: the waiter is on another CPU.
    #[cfg(not(feature = "std"))]
    core::hint::spin_loop();
}

#[cfg(feature = "std")]
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
    core::hint::spin_loop();
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

/// std's primitives, in every build, where loom's cannot stand in. Each import of one says
/// which of these reasons applies:
///
/// - **statics**: loom's primitives cannot be created in a `static` (`OnceLock`, a process-wide
///   `Mutex`); no model reaches those tables;
/// - **wakers and type erasure**: `std::task::Wake` takes std's `Arc`, and loom's `Arc` neither
///   coerces to a trait object (`Arc<dyn Driver>`, `Arc<dyn Any>`) nor holds a slice built from
///   a `Vec`, nor has a `Weak`;
/// - **the kernel's words**: a futex word lives at an address the kernel reads and sleeps on,
///   which loom's atomics do not have (the module does not exist under loom);
/// - **hints outside a protocol**: a flag that only chooses between paths that each keep the
///   protocol (the runtime's "task in hand" flag beside a worker's idle word); modelling it
///   would multiply a model's interleavings without checking anything new.
#[cfg(feature = "std")]
pub(crate) mod unmodeled {
    #[allow(unused_imports)] // Each build uses a different subset.
    pub(crate) use std::sync::{
        atomic::{AtomicBool, AtomicIsize, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
        Arc, Barrier, Mutex, MutexGuard, OnceLock, Weak,
    };
}

/// The raw locks of [`StdLocks`](crate::lock::StdLocks) under loom and Miri: spinlocks on the
/// facade's atomics whose waits yield, so that loom explores every interleaving of the
/// structures' critical sections (its own `Mutex` has no guard-less raw form to put behind
/// `lock_api`), and Miri checks them without the `membarrier(2)` call it cannot run (see
/// [`StdLocks`](crate::lock::StdLocks)).
///
/// A loom atomic cannot be built in a `const` (`lock_api` needs `INIT` to be one), so the
/// structures make these locks with [`Locks::new_mutex`](crate::lock::Locks::new_mutex), which
/// creates the word at once; `INIT` (a lock built by other code) creates it at first use, in a
/// `OnceLock` that loom does not model.
#[cfg(any(loom, miri))]
pub(crate) mod model {
    use std::sync::OnceLock;

    use super::{spin_wait, AtomicBool, AtomicUsize, Ordering};

    /// A test-and-set spinlock.
    pub struct RawMutex(OnceLock<AtomicBool>);

    impl RawMutex {
        /// A lock whose word exists now: loom then sees it made by the thread that builds the
        /// structure, before the threads that use it (a word made lazily by one of them would
        /// be unordered with the others' accesses).
        pub(crate) fn made() -> RawMutex {
            RawMutex(OnceLock::from(AtomicBool::new(false)))
        }

        fn word(&self) -> &AtomicBool {
            self.0.get_or_init(|| AtomicBool::new(false))
        }
    }

    // SAFETY: `try_lock` succeeds only for the caller that moves the flag from false to true,
    // and `unlock` is called by that holder only (the trait's contract).
    unsafe impl lock_api::RawMutex for RawMutex {
        #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern.
        const INIT: RawMutex = RawMutex(OnceLock::new());
        type GuardMarker = lock_api::GuardNoSend;

        fn lock(&self) {
            while !self.try_lock() {
                spin_wait();
            }
        }

        fn try_lock(&self) -> bool {
            // Acquire pairs with the Release in `unlock`: the previous holder's writes are seen.
            self.word()
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }

        unsafe fn unlock(&self) {
            // Release pairs with the Acquire in `try_lock`.
            self.word().store(false, Ordering::Release);
        }
    }

    /// The writer's bit of [`RawRwLock`]'s word; the readers count below it.
    const WRITER: usize = 1 << (usize::BITS - 1);

    /// A reader-writer spinlock: a count of readers and a writer bit in one word.
    pub struct RawRwLock(OnceLock<AtomicUsize>);

    impl RawRwLock {
        /// A lock whose word exists now (see [`RawMutex::made`]).
        pub(crate) fn made() -> RawRwLock {
            RawRwLock(OnceLock::from(AtomicUsize::new(0)))
        }

        fn word(&self) -> &AtomicUsize {
            self.0.get_or_init(|| AtomicUsize::new(0))
        }
    }

    // SAFETY: a reader enters only while the writer bit is clear and a writer only while the
    // word is zero, each by a compare-exchange from the value it checked, so a writer excludes
    // everyone and readers exclude writers.
    unsafe impl lock_api::RawRwLock for RawRwLock {
        #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern.
        const INIT: RawRwLock = RawRwLock(OnceLock::new());
        type GuardMarker = lock_api::GuardNoSend;

        fn lock_shared(&self) {
            while !self.try_lock_shared() {
                spin_wait();
            }
        }

        fn try_lock_shared(&self) -> bool {
            let word = self.word();
            // Relaxed: the compare-exchange below decides.
            let now = word.load(Ordering::Relaxed);
            // Acquire pairs with the Release in `unlock_exclusive`.
            now & WRITER == 0
                && word
                    .compare_exchange(now, now + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        }

        unsafe fn unlock_shared(&self) {
            // Release pairs with the Acquire of the next writer's `try_lock_exclusive`.
            self.word().fetch_sub(1, Ordering::Release);
        }

        fn lock_exclusive(&self) {
            while !self.try_lock_exclusive() {
                spin_wait();
            }
        }

        fn try_lock_exclusive(&self) -> bool {
            // Acquire pairs with the Release of the last reader's or writer's unlock.
            self.word()
                .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }

        unsafe fn unlock_exclusive(&self) {
            // Release pairs with the Acquire of the next reader's or writer's lock.
            self.word().store(0, Ordering::Release);
        }
    }
}

/// The two halves of an asymmetric fence: a process-wide barrier (`membarrier(2)`, private
/// expedited) paid by the rare side, and a compiler fence on the common side, which the
/// barrier turns into a full one whenever it matters. Under loom, which checks the language's
/// model, both halves are `SeqCst` fences. Without `std` (no `membarrier` to call) the barrier
/// is never available.
pub(crate) mod asymmetric {
    /// Whether [`heavy`] may be called: the process registered for it (once, on the first
    /// call). No on kernels before 4.14, under a seccomp filter that refuses it, and under Miri.
    #[inline]
    pub(crate) fn available() -> bool {
        #[cfg(all(feature = "std", not(loom)))]
        return crate::sys::membarrier::available();
        #[cfg(loom)]
        return true;
        #[cfg(all(not(feature = "std"), not(loom)))]
        return false;
    }

    /// The rare side's half: every thread of the process passes a full barrier before this
    /// returns. Only after [`available`] said yes; returns whether the kernel did it.
    #[cold]
    pub(crate) fn heavy() -> bool {
        #[cfg(all(feature = "std", not(loom)))]
        return crate::sys::membarrier::barrier();
        #[cfg(loom)]
        {
            super::fence(super::Ordering::SeqCst);
            true
        }
        #[cfg(all(not(feature = "std"), not(loom)))]
        return false;
    }

    /// The common side's half: a compiler fence, made a full barrier by any [`heavy`] that
    /// comes between the accesses around it.
    #[inline(always)]
    pub(crate) fn light() {
        #[cfg(not(loom))]
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
        #[cfg(loom)]
        super::fence(super::Ordering::SeqCst);
    }
}
