//! The locks the families' structures take, chosen by their user: a kernel brings its own.
//!
//! # Design
//!
//! Every structure of [`table`](crate::table), [`pid`](crate::pid), [`cid`](crate::cid) and
//! [`range`](crate::range) that takes a lock takes it through a type parameter `L: `[`Locks`],
//! which names one raw mutex and one raw reader-writer lock, both [`lock_api`] traits (the ones
//! `parking_lot` and `spin` implement). The parameter defaults to [`DefaultLocks`], so
//! `ScaledHash::new()` and every other constructor compile as before without an annotation; a
//! structure on other locks is built with a constructor whose name starts with `with_locks`,
//! and an explicit type.
//!
//! * With the `std` feature, [`DefaultLocks`] is [`StdLocks`]: our [`AsymmetricMutex`], which
//!   unlocks with a plain store and whose waiters spin briefly, then yield, then sleep, and
//!   std's futex reader-writer lock ([`StdLocks`] says why each).
//!   Under loom and Miri the same type holds model-checked spinlocks on the crate's facade
//!   atomics instead, so every lock stays visible to the checkers.
//! * Without `std`, [`DefaultLocks`] is [`SpinLocks`]: the `spin` crate's spinlocks.
//! * A kernel plugs in its own lock with one trait implementation: `lock_api::RawMutex` for its
//!   spinlock (or IRQ-disabling lock), then [`MutexOnly<ThatLock>`](MutexOnly) as the
//!   structure's `L`; the structures' reader-writer locks then take the same lock exclusively
//!   ([`Exclusive`]). A kernel with a reader-writer lock of its own implements [`Locks`] too.
//!
//! # Invariants
//!
//! No structure calls out to user code (a closure, a destructor of a user value) while holding
//! one of these locks, but for a [`RangeSource`](crate::range::RangeSource)'s own methods, which
//! [`SubRanges`](crate::range::SubRanges) calls under the CPU's lock; and none holds two of them
//! in an order another path reverses. So any lock that excludes is enough: fairness, sleeping and priority inheritance are the lock's
//! business, not the structure's.
//!
//! # Where we differ from the kernel
//!
//! The kernel's structures name their lock type (`spinlock_t`, `raw_spinlock_t`), and the
//! choice between sleeping and spinning follows the kernel's configuration (`PREEMPT_RT` turns
//! most spinlocks into sleeping ones). Here the choice is the user's, per structure type.
//!
//! One lock stays the structures' own: the CID designs' per-CPU runqueue lock, a word taken on
//! the simulated switch path, which stands for the kernel's runqueue lock that the scheduler,
//! not the CID code, holds (a kernel calling `switch` from its scheduler holds its own).
//!
//! ```
//! use idspace::lock::{Locks, MutexOnly, SpinLocks};
//! use idspace::table::{GlobalHash, IdTable};
//!
//! // The crate's defaults, then the same table on `spin`'s locks, and on a mutex alone
//! // (its reader-writer locks become exclusive).
//! let default = GlobalHash::<&str>::new();
//! let spinning = GlobalHash::<&str, SpinLocks>::with_locks();
//! let exclusive = GlobalHash::<&str, MutexOnly<spin::mutex::SpinMutex<()>>>::with_locks();
//! for table in [&default as &dyn IdTable<&str>, &spinning, &exclusive] {
//!     let id = table.create(7, "timer").expect("room");
//!     assert_eq!(table.get(7, id).as_deref(), Some(&"timer"));
//! }
//! ```

use core::marker::PhantomData;

#[cfg(feature = "std")]
// Under loom `StdLocks` holds model locks; only this file's own model builds one.
#[cfg_attr(loom, allow(dead_code))]
mod asymmetric;
#[cfg(feature = "std")]
pub use asymmetric::AsymmetricMutex;

use lock_api::{GuardNoSend, RawMutex, RawRwLock};

/// The two raw locks a structure takes: one mutex type and one reader-writer lock type, both
/// [`lock_api`] traits. Implemented by [`StdLocks`], [`SpinLocks`] and [`MutexOnly`]; a user
/// implements it for a pair of their own locks.
///
/// ```
/// use idspace::lock::Locks;
/// use idspace::pid::{IdrOnce, PidAllocator, ROOT};
///
/// // A kernel's pair of locks (here `spin`'s mutex and rwlock).
/// struct KernelLocks;
/// impl Locks for KernelLocks {
///     type Mutex = spin::mutex::SpinMutex<()>;
///     type RwLock = spin::RwLock<()>;
/// }
///
/// let pids = IdrOnce::<KernelLocks>::with_locks();
/// assert_eq!(pids.alloc(ROOT, &[], 0)?.ids(), [1]);
/// # Ok::<(), idspace::pid::PidError>(())
/// ```
pub trait Locks: Send + Sync + 'static {
    /// The mutex of the structures' exclusive locks (a table's bucket, a CPU's ranges).
    type Mutex: RawMutex + Send + Sync;
    /// The lock of the structures that are read far more than written (an owner's radix
    /// tree, the PID namespace directory).
    type RwLock: RawRwLock + Send + Sync;

    /// A new unlocked mutex: `INIT`, which every lock has; a lock that must be made at run
    /// time (a model checker's) overrides it.
    fn new_mutex() -> Self::Mutex {
        <Self::Mutex as RawMutex>::INIT
    }

    /// A new unlocked reader-writer lock, as [`Locks::new_mutex`].
    fn new_rwlock() -> Self::RwLock {
        <Self::RwLock as RawRwLock>::INIT
    }
}

/// A mutex on `L`'s raw mutex, made by [`Locks::new_mutex`].
pub(crate) fn mutex<L: Locks, T>(value: T) -> Mutex<L, T> {
    lock_api::Mutex::from_raw(L::new_mutex(), value)
}

/// A reader-writer lock on `L`'s raw lock, made by [`Locks::new_rwlock`].
pub(crate) fn rwlock<L: Locks, T>(value: T) -> RwLock<L, T> {
    lock_api::RwLock::from_raw(L::new_rwlock(), value)
}

/// [`AsymmetricMutex`] and std's reader-writer lock (loom's and Miri's checked spinlocks under
/// those checkers): the default with the `std` feature.
///
/// Why not std's mutex: a table lock is held for a few nanoseconds, but with more threads than CPUs
/// a holder is sometimes preempted inside it. std's futex mutex then sends every waiter to
/// sleep after a short spin, and each unlock pays a wake-up system call; once a lock is
/// contended in this way it stays so (a lock convoy). [`AsymmetricMutex`]'s waiters spin
/// briefly and then *yield* a few times before they sleep, which hands the CPU to the preempted
/// holder. The kernel's spinlocks never meet this case: it disables preemption while one is
/// held.
///
/// Why not `parking_lot`'s mutex, which waits the same way: its unlock is a compare-exchange,
/// to learn whether a waiter is parked. [`AsymmetricMutex`]'s is a store, as a kernel
/// spinlock's; the waiter that goes to sleep pays for it with a `membarrier(2)` call. A
/// table's create takes two locks (the owner's ID list and the bucket), and one owner's
/// creates ran about 25% faster on it: 90 ns per create instead of 115 on this 2-core machine.
///
/// Why std's reader-writer lock ([`FutexRwLock`]: std's Linux futex lock as the maintained
/// `rustix-futex-sync` crate offers it behind `lock_api`): `parking_lot`'s hands the lock to
/// writers more often. Both prefer writers, but with more threads than CPUs and writers that
/// never stop (the PID lab's lookups while allocations run: four lookup threads, four
/// allocating ones, two CPUs), `parking_lot`'s waiters yield and its unlocks are eventually
/// fair, and the writers took most of the lock: the IDR designs' lookups, which share it with
/// allocations that hold it exclusively, ran at 0.4 to 0.55 times their speed on std's lock.
/// Lookups are what those designs are measured by, as the kernel's readers are (RCU there).
///
/// Under Miri the structures take spinlocks on the facade's atomics instead: Miri cannot run
/// `membarrier(2)`, without which [`AsymmetricMutex`]'s waiters never sleep. Miri checks our
/// code, which is the same over either lock.
///
/// ```
/// use idspace::lock::StdLocks;
/// use idspace::table::{IdTable, ScaledHash};
///
/// let table = ScaledHash::<u32, StdLocks>::with_locks();
/// assert_eq!(table.create(1, 10).ok(), Some(0));
/// ```
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, Default)]
pub struct StdLocks;

#[cfg(all(feature = "std", not(any(loom, miri))))]
impl Locks for StdLocks {
    type Mutex = AsymmetricMutex;
    type RwLock = FutexRwLock;
}

/// std's Linux futex reader-writer lock as a `lock_api::RawRwLock` (from `rustix-futex-sync`):
/// [`StdLocks`]' reader-writer lock.
///
/// ```
/// let lock = lock_api::RwLock::<idspace::lock::FutexRwLock, u32>::new(1);
/// *lock.write() += 1;
/// assert_eq!(*lock.read(), 2);
/// ```
#[cfg(all(feature = "std", not(any(loom, miri))))]
pub type FutexRwLock = rustix_futex_sync::RawRwLock;

#[cfg(all(feature = "std", any(loom, miri)))]
impl Locks for StdLocks {
    type Mutex = crate::sync::model::RawMutex;
    type RwLock = crate::sync::model::RawRwLock;

    // Made with their words, so that a model sees each word created before any thread uses it.
    fn new_mutex() -> Self::Mutex {
        crate::sync::model::RawMutex::made()
    }

    fn new_rwlock() -> Self::RwLock {
        crate::sync::model::RawRwLock::made()
    }
}

/// The `spin` crate's spinlocks (`SpinMutex` and `RwLock`): the default without `std`.
///
/// ```
/// use idspace::lock::SpinLocks;
/// use idspace::cid::{CidAllocator, Rework};
///
/// let cids = Rework::<SpinLocks>::with_locks(2)?;
/// let task = cids.fork(0b11)?;
/// assert!(cids.switch(0, Some(&task))?.is_some_and(|cid| cid < 2));
/// # Ok::<(), idspace::cid::CidError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SpinLocks;

impl Locks for SpinLocks {
    type Mutex = spin::mutex::SpinMutex<()>;
    type RwLock = spin::RwLock<()>;
}

/// One mutex type for every lock, the reader-writer ones taken exclusively ([`Exclusive`]):
/// how a kernel's own spinlock plugs in with a single `lock_api::RawMutex` implementation.
///
/// ```
/// use core::sync::atomic::{AtomicBool, Ordering};
/// use idspace::lock::MutexOnly;
/// use idspace::pid::{PerCpu, PidAllocator, ROOT};
///
/// /// A kernel-style spinlock: one flag.
/// struct KernelSpin(AtomicBool);
///
/// // SAFETY: `lock` returns only once this caller set the flag, `unlock` clears it: one
/// // holder at a time.
/// unsafe impl lock_api::RawMutex for KernelSpin {
///     const INIT: KernelSpin = KernelSpin(AtomicBool::new(false));
///     type GuardMarker = lock_api::GuardSend;
///     fn lock(&self) {
///         while !self.try_lock() {
///             core::hint::spin_loop();
///         }
///     }
///     fn try_lock(&self) -> bool {
///         // Acquire pairs with the Release in `unlock`.
///         self.0
///             .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
///             .is_ok()
///     }
///     unsafe fn unlock(&self) {
///         // Release pairs with the Acquire in `try_lock`.
///         self.0.store(false, Ordering::Release);
///     }
/// }
///
/// let pids = PerCpu::<MutexOnly<KernelSpin>>::with_locks(2)?;
/// assert_eq!(pids.alloc(ROOT, &[], 1)?.ids(), [1]);
/// # Ok::<(), idspace::pid::PidError>(())
/// ```
pub struct MutexOnly<R>(PhantomData<fn() -> R>);

impl<R: RawMutex + Send + Sync + 'static> Locks for MutexOnly<R> {
    type Mutex = R;
    type RwLock = Exclusive<R>;
}

impl<R> core::fmt::Debug for MutexOnly<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("MutexOnly")
    }
}

/// A reader-writer lock made of a mutex: readers exclude each other too. Correct for every
/// structure here (none waits for a second reader while it reads), and what a kernel gets
/// when it supplies only a mutex ([`MutexOnly`]).
///
/// ```
/// use idspace::lock::Exclusive;
///
/// let lock = lock_api::RwLock::<Exclusive<spin::mutex::SpinMutex<()>>, u32>::new(1);
/// *lock.write() += 1;
/// assert_eq!(*lock.read(), 2);
/// ```
pub struct Exclusive<R>(R);

impl<R> core::fmt::Debug for Exclusive<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Exclusive")
    }
}

// SAFETY: both modes take the one mutex, so a holder in either mode excludes every other; the
// unlocks release what the matching lock took.
unsafe impl<R: RawMutex> RawRwLock for Exclusive<R> {
    #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern.
    const INIT: Self = Exclusive(R::INIT);
    type GuardMarker = GuardNoSend;

    #[inline]
    fn lock_shared(&self) {
        self.0.lock();
    }

    #[inline]
    fn try_lock_shared(&self) -> bool {
        self.0.try_lock()
    }

    #[inline]
    unsafe fn unlock_shared(&self) {
        // SAFETY: the caller holds the lock in shared mode, which is the mutex.
        unsafe { self.0.unlock() }
    }

    #[inline]
    fn lock_exclusive(&self) {
        self.0.lock();
    }

    #[inline]
    fn try_lock_exclusive(&self) -> bool {
        self.0.try_lock()
    }

    #[inline]
    unsafe fn unlock_exclusive(&self) {
        // SAFETY: the caller holds the lock in exclusive mode, which is the mutex.
        unsafe { self.0.unlock() }
    }
}

/// The locks a structure takes when its type names none: [`StdLocks`] with the `std` feature,
/// [`SpinLocks`] without.
///
/// ```
/// use core::any::TypeId;
/// use idspace::lock::{DefaultLocks, StdLocks};
/// use idspace::table::{IdTable, ScaledHash};
///
/// // `ScaledHash::new()` names no locks: its table is on the defaults, `std`'s here.
/// let timers: ScaledHash<&str, DefaultLocks> = ScaledHash::new();
/// assert_eq!(timers.create(3, "tick"), Ok(0));
/// assert_eq!(TypeId::of::<DefaultLocks>(), TypeId::of::<StdLocks>());
/// ```
#[cfg(feature = "std")]
pub type DefaultLocks = StdLocks;
/// The locks a structure takes when its type names none: [`StdLocks`] with the `std` feature,
/// [`SpinLocks`] without.
///
/// ```
/// use core::any::TypeId;
/// use idspace::lock::{DefaultLocks, SpinLocks};
/// use idspace::table::{IdTable, ScaledHash};
///
/// // `ScaledHash::new()` names no locks: without `std` its table spins on `spin`'s.
/// let timers: ScaledHash<&str, DefaultLocks> = ScaledHash::new();
/// assert_eq!(timers.create(3, "tick"), Ok(0));
/// assert_eq!(TypeId::of::<DefaultLocks>(), TypeId::of::<SpinLocks>());
/// ```
#[cfg(not(feature = "std"))]
pub type DefaultLocks = SpinLocks;

/// A mutex on `L`'s raw mutex.
pub(crate) type Mutex<L, T> = lock_api::Mutex<<L as Locks>::Mutex, T>;
/// A held [`Mutex`].
pub(crate) type MutexGuard<'a, L, T> = lock_api::MutexGuard<'a, <L as Locks>::Mutex, T>;
/// A reader-writer lock on `L`'s raw lock.
pub(crate) type RwLock<L, T> = lock_api::RwLock<<L as Locks>::RwLock, T>;
/// A [`RwLock`] held for reading.
#[allow(dead_code)] // Named by some builds only.
pub(crate) type RwLockReadGuard<'a, L, T> = lock_api::RwLockReadGuard<'a, <L as Locks>::RwLock, T>;
/// A [`RwLock`] held for writing.
pub(crate) type RwLockWriteGuard<'a, L, T> =
    lock_api::RwLockWriteGuard<'a, <L as Locks>::RwLock, T>;
