//! Per-CID data: counters, slots and object caches indexed by the running thread's
//! concurrency ID, so that memory follows the CPUs, not the threads.
//!
//! A concurrency ID (see [`cid`](crate::cid)) is unique among the threads of the process that
//! run at one instant, and below the number of possible CPUs. Data with one slot per ID is
//! then as small as per-CPU data and, written only by the one thread holding the ID at a time,
//! needs no atomic read-modify-write, as long as the write cannot be torn apart by the thread
//! losing its ID half-way. Restartable sequences (rseq) give exactly that: a short section of
//! loads and stores, ended by one commit store, that the kernel aborts if the thread is
//! preempted, migrated or signalled inside it.
//!
//! * [`PerCidCounter`]: `add(n)` and `sum()`; the fast path is a plain add committed by an rseq
//!   section (no `lock` prefix). `add_if(n, guard, expected)` also compares a guard word inside
//!   the section; with [`restart_sections`] (the kernel's membarrier RSEQ command, which
//!   restarts every section in flight) that retires a counter whose adds hold no reference: the
//!   way the kernel's per-CPU allocators reclaim memory, and how the C interface checks a
//!   counter handle at no cost beyond one compare.
//! * [`PerCid<T>`]: one cache-padded `T` for every possible index.
//! * [`PerCidPool<T>`]: a per-index object cache (the shape of tcmalloc's per-CPU caches):
//!   push and pop on the current index's bounded list are rseq sections; a full list spills
//!   half to a shared list, an empty one refills from it.
//! * [`PerIndex<T>`]: the same slots reached by an index the caller names (a CPU's number, a
//!   CID its scheduler gave the running task): the kernel's `per_cpu_ptr(ptr, cpu)`. It needs
//!   nothing from an operating system, so it is the part of this module that builds without
//!   `std`; the others find the index themselves (rseq, a thread registry, the runtime's
//!   task), which takes one.
//!
//! # Index sources
//!
//! Each structure is built for one [`IndexSource`], chosen at construction and visible with
//! `source()`:
//!
//! * [`IndexSource::MmCid`], the kernel's concurrency ID (Linux 6.3 and later): the default
//!   where the kernel fills it, the most compact;
//! * [`IndexSource::CpuId`], the CPU the thread runs on;
//! * [`IndexSource::ThreadIds`], the fallback without rseq: small per-thread IDs (reused after
//!   a thread exits), folded onto the slots, with atomic read-modify-writes or a slot lock,
//!   since two threads may share a slot;
//! * [`IndexSource::TaskCid`], inside the idspace runtime with
//!   [`ProcessHooks`](crate::process::ProcessHooks): the running task's CID from its process's
//!   CID space ([`process::current`](crate::process::current)). A structure on it is built
//!   inside a task and bound to that task's process, with one slot per CID of the process's
//!   space; that process's running tasks use their slots with plain loads and stores (no
//!   atomic read-modify-write, no lock, no rseq), which is sound because a CID is exclusive
//!   among the process's running tasks and a task keeps it for a whole poll (the runtime does
//!   not preempt; see the `task` module for the whole argument). Any other caller (another
//!   process's task, a plain thread) takes the shared fallback: the counter's shared atomic,
//!   the pool's shared list, or for [`PerCid`] a folded thread ID (its slots synchronise
//!   themselves anyway). Building one outside a runtime task of a process is
//!   [`PerCidError::Unavailable`].
//!
//! The rseq sources need an rseq area for the calling thread: glibc's, or one this crate
//! registers when glibc did not ([`rseq_registration`]). A thread that has none still works
//! (its operations go to a shared atomic or the shared list), so nothing is lost or doubled.
//! Under Miri and loom only [`IndexSource::ThreadIds`] exists.
//!
//! # Where the time goes
//!
//! An rseq op (a counter's add, a pool's push or pop) under glibc's registration is, in order:
//!
//! 1. **which path**: one compare of what the structure chose when it was built (the counter
//!    keeps the rseq `cpu_id`/`mm_cid` field, whose value is its offset in the area; the pool
//!    keeps glibc's area offset with it, 0 for none; thread IDs and the task CID take a
//!    function of their own, never inlined);
//! 2. **the area**: glibc's `__rseq_offset` (the counter loads it from a plain static where it
//!    is published once, the pool from its own words, with no GOT load) plus the thread
//!    pointer, and one load of `cpu_id` to check that this thread's registration worked (a
//!    thread whose registration failed has a negative `cpu_id` for its whole life, and an
//!    `mm_cid` nobody maintains);
//! 3. **the slot**: a load of the index and a compare with the slot count (a thread whose
//!    index has no slot goes to the shared fallback);
//! 4. **the section**: one store arms it, one compare checks the index is still the one the
//!    addresses were computed from, then the body (an add; or a length load, a compare with
//!    the capacity, the item's load or store and the length store that commits). The
//!    assembly is given the area and the field's offset, and reaches `rseq_cs` and the index
//!    by addressing modes; a list section is given one pointer, to the list's header (length,
//!    capacity, the cells' address), and loads the rest itself;
//! 5. **the outcome**: one test of the status. The counter decodes aborts, moves and
//!    refusals out of line, into a type that cannot say "committed", and retries in a cold
//!    function of its own: a retry loop around the section, or a decoding that could yield a
//!    commit, would merge the committed path with the others and cost it a dozen
//!    instructions of enum shuffling. The pool does not even decode: whatever did not commit
//!    (no area, no slot, an abort, a move, a full or empty list) goes, undecoded, to one
//!    out-of-line function that counts an abort and starts over, which is safe because a
//!    section that did not commit changed nothing. On x86-64 the exits that do not commit sit
//!    in a section of their own, so a committed section runs straight through.
//!
//! About thirty instructions, no call, no atomic read-modify-write and no memory shared with
//! another running thread. What it no longer does: look glibc's answer up in a `OnceLock`
//! and match its enum (a GOT load, a state check and two compares), turn the
//! [`IndexSource`] into a field through a jump table, test for thread IDs and the task
//! binding, and decode the outcome in a loop, all on every op. On this project's 2-CPU
//! machine a single thread's take+give pair (bursts of 4 takes, then 4 gives of 64-byte boxes;
//! CPU time, median of 9 alternated runs) went from 10.8 to 6.2 ns, and an add from 3.4 to
//! 2.3 ns; a `std` `thread_local!` `RefCell<Vec>` cache's pair takes 4.4 ns there, the
//! difference being steps 2 to 4, which a per-thread cache does not need.
//!
//! The pool's path was then cut from 55 or 56 instructions per take or give (as the lab's
//! `percid` experiment calls them, through `&dyn Fn`, counted in the x86-64 build) to 32 or
//! 34, below the `thread_local` crate's cache (41 or 49 with its `get_or` lookup): the section's operands had taken ten
//! registers (the `rseq_cs` and index fields' addresses, the length's, the cells', the
//! capacity, two scratch words), so the inlined path saved six callee-saved registers on every
//! call, and the decoding of a miss was a call that kept the pool and the object live across
//! it. Now the section takes seven, the length doubles as the status register and the arming
//! scratch as the cells' address, and a miss is a tail call: the inlined take or give is a
//! leaf that pushes nothing.
//!
//! What is left is what the design needs. The index is read before the section so the list's
//! address can be computed in Rust and checked against the slot count; reading it inside the
//! section instead (as tcmalloc does) would save the second compare but tie the assembly to
//! the layout of the lists' array as well as to one list's header. The area is not cached in
//! a thread-local either: the offset is already one load, and a thread-local in a shared
//! library (the C interface's `cdylib`) is a call to `__tls_get_addr`. The status is a
//! register the caller tests after the section, a compare that `asm goto` (Rust 1.87, above
//! this crate's minimum version) would fold into the section's own exits. Beyond that a
//! structure must add nothing to its rseq path: the spill and refill to the shared list are
//! out of line and cold, and the locked and task-CID paths sit in functions of their own, so
//! that the rseq path is not a branch in a body too large to inline into the caller's loop
//! (which is where the pool's time once went: two calls and a frame per take or give).
//! Kernel aborts are rare (a section is a few instructions; the lab reports the count): the
//! time is in the path, not in retries.
//!
//! # Example
//!
//! Each structure says which source it runs on; whatever it is, nothing is lost or counted
//! twice, and the memory is one slot per possible CPU however many threads there are:
//!
//! ```
//! # #[cfg(not(feature = "std"))] fn main() {} // these find their index with `std`
//! # #[cfg(feature = "std")] fn main() {
//! use idspace::percid::{IndexSource, PerCid, PerCidCounter, PerCidPool};
//!
//! let counter = PerCidCounter::new();
//! let pool = PerCidPool::<[u8; 64]>::new();
//! let seen = PerCid::new(|_| std::sync::atomic::AtomicBool::new(false));
//! assert_eq!(counter.source(), IndexSource::best());
//! assert_eq!(counter.slots(), seen.len());
//! assert_eq!(pool.slots(), seen.len());
//!
//! std::thread::scope(|scope| {
//!     for _ in 0..32 {
//!         scope.spawn(|| {
//!             let buffer = pool.take_or_else(|| [0; 64]);
//!             counter.add(1);
//!             seen.current().store(true, std::sync::atomic::Ordering::Relaxed);
//!             pool.give(buffer);
//!         });
//!     }
//! });
//! assert_eq!(counter.sum(), 32);
//! // 32 threads, but no more buffers than threads ever ran at once, and at least one.
//! assert!((1..=32).contains(&pool.held()));
//! assert!(seen.iter().any(|slot| slot.load(std::sync::atomic::Ordering::Relaxed)));
//! # }
//! ```

#[cfg(feature = "std")]
mod counter;
#[cfg(feature = "std")]
mod error;
#[cfg(feature = "std")]
mod fast;
#[cfg(feature = "std")]
mod index;
#[cfg(feature = "std")]
mod list;
mod per_index;
#[cfg(feature = "std")]
mod pool;
#[cfg(feature = "std")]
mod slots;
#[cfg(feature = "std")]
mod task;

#[cfg(feature = "std")]
pub use counter::PerCidCounter;
#[cfg(feature = "std")]
pub use error::PerCidError;
pub use per_index::{NoSlots, PerIndex};
#[cfg(feature = "std")]
pub use pool::PerCidPool;
#[cfg(feature = "std")]
pub use slots::PerCid;

/// Where a per-CID structure takes the calling thread's index from.
///
/// [`ThreadIds`](Self::ThreadIds) is available everywhere; the rseq sources where the kernel
/// and the C library provide an rseq area for the thread; [`TaskCid`](Self::TaskCid) inside a
/// runtime task of a process only. Asking a structure for a source the thread cannot use is
/// refused, never a silent downgrade:
///
/// ```
/// use idspace::percid::{IndexSource, PerCidCounter, PerCidError};
///
/// assert!(IndexSource::ThreadIds.available());
/// // Not a runtime task of a process here.
/// assert!(!IndexSource::TaskCid.available());
/// assert_eq!(
///     PerCidCounter::with_source(IndexSource::TaskCid).err(),
///     Some(PerCidError::Unavailable(IndexSource::TaskCid)),
/// );
/// for source in [IndexSource::MmCid, IndexSource::CpuId, IndexSource::ThreadIds] {
///     match PerCidCounter::with_source(source) {
///         Ok(counter) => assert_eq!(counter.source().as_str(), source.as_str()),
///         Err(error) => assert_eq!(error, PerCidError::Unavailable(source)),
///     }
///     assert_eq!(PerCidCounter::with_source(source).is_ok(), source.available());
/// }
/// ```
///
/// Inside the runtime with [`ProcessHooks`](crate::process::ProcessHooks), a structure built by
/// a task on [`TaskCid`](Self::TaskCid) has one slot per CID of that task's process (one per
/// worker), and the process's tasks use them with plain loads and stores:
///
/// ```
/// use std::sync::Arc;
/// use idspace::percid::{IndexSource, PerCidCounter};
/// use idspace::pid::ROOT;
/// use idspace::process::ProcessHooks;
/// use idspace::sched::Builder;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
/// let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
/// let task = runtime.spawn_process(ROOT, async {
///     assert!(IndexSource::TaskCid.available());
///     let counter = PerCidCounter::with_source(IndexSource::TaskCid).expect("a process's task");
///     (0..1000).for_each(|_| counter.add(1));
///     (counter.slots(), counter.sum())
/// })?;
/// assert_eq!(task.join()?, (2, 1000));
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IndexSource {
    /// The kernel's `mm_cid` through rseq, compared inside every critical section.
    MmCid,
    /// The kernel's `cpu_id` through rseq, compared inside every critical section.
    CpuId,
    /// Compact per-thread IDs, without rseq: atomic operations or a slot lock.
    ThreadIds,
    /// The running runtime task's CID in its process (idspace's runtime with process hooks):
    /// plain loads and stores, exclusive while the task runs.
    TaskCid,
}

#[cfg(feature = "std")]
impl IndexSource {
    /// The source's name in reports.
    ///
    /// ```
    /// use idspace::percid::IndexSource;
    ///
    /// assert_eq!(IndexSource::MmCid.as_str(), "rseq mm_cid");
    /// assert_eq!(IndexSource::ThreadIds.as_str(), "thread IDs");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            IndexSource::MmCid => "rseq mm_cid",
            IndexSource::CpuId => "rseq cpu_id",
            IndexSource::ThreadIds => "thread IDs",
            IndexSource::TaskCid => "task CID",
        }
    }

    /// The best source the calling thread has: mm_cid, else cpu_id, else thread IDs. The task
    /// CID is never chosen here: it binds a structure to one process, so it is asked for by
    /// name.
    ///
    /// ```
    /// use idspace::percid::IndexSource;
    ///
    /// let best = IndexSource::best();
    /// assert!(best.available());
    /// assert_ne!(best, IndexSource::TaskCid);
    /// // mm_cid is preferred whenever the thread has it.
    /// assert_eq!(best == IndexSource::MmCid, IndexSource::MmCid.available());
    /// ```
    pub fn best() -> IndexSource {
        [IndexSource::MmCid, IndexSource::CpuId]
            .into_iter()
            .find(|source| source.available())
            .unwrap_or(IndexSource::ThreadIds)
    }

    /// Whether the calling thread can use this source (thread IDs always; the task CID inside
    /// a runtime task of a process).
    pub fn available(self) -> bool {
        match self {
            IndexSource::TaskCid => task::Binding::of_running_task().is_some(),
            _ => fast::available(self),
        }
    }

    /// What a structure built on this source by the calling thread is bound to, and how many
    /// slots it needs; [`PerCidError::Unavailable`] if the thread cannot use the source.
    fn prepare(self) -> Result<(Option<task::Binding>, usize), PerCidError> {
        if self == IndexSource::TaskCid {
            let binding = task::Binding::of_running_task().ok_or(PerCidError::Unavailable(self))?;
            return Ok((Some(binding), binding.slots()));
        }
        if !self.available() {
            return Err(PerCidError::Unavailable(self));
        }
        Ok((None, index::slot_count()))
    }
}

/// Who registered the calling thread's rseq area: see [`rseq_registration`].
///
/// glibc registers an area for every thread or for none, and this crate makes up for it thread
/// by thread, so every thread of a process answers the same:
///
/// ```
/// use idspace::percid::rseq_registration;
///
/// let here = rseq_registration();
/// let there = std::thread::spawn(rseq_registration).join().unwrap();
/// assert_eq!(here, there);
/// ```
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Registration {
    /// glibc, as it does for every thread since 2.35.
    Glibc,
    /// This crate, because glibc did not (e.g. `GLIBC_TUNABLES=glibc.pthread.rseq=0`).
    Own,
}

/// Who registered the calling thread's rseq area, registering one now if glibc did not;
/// `None` if the thread has no area (no rseq in the kernel, an unknown C library, Miri).
///
/// The rseq sources need an area: a thread that has one can index by its CPU.
///
/// ```
/// use idspace::percid::{rseq_registration, IndexSource, Registration};
///
/// match rseq_registration() {
///     Some(Registration::Glibc | Registration::Own) => assert!(IndexSource::CpuId.available()),
///     // No area: the structures fall back to thread IDs.
///     None => assert_eq!(IndexSource::best(), IndexSource::ThreadIds),
///     Some(_) => unreachable!("two registrars only"),
/// }
/// // Asking again registers nothing new: the thread keeps its area.
/// assert_eq!(rseq_registration(), rseq_registration());
/// ```
#[cfg(feature = "std")]
pub fn rseq_registration() -> Option<Registration> {
    fast::registration()
}

/// Restarts every rseq critical section that threads of this process are running now, on every
/// CPU (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)`, Linux 5.10): when it returns true,
/// each section that began before the call has committed (visibly to the caller) or will start
/// again and load afresh what it checks. With [`PerCidCounter::add_if`] this retires a counter
/// whose adds take no reference: change the guard, then restart the sections.
///
/// It interrupts the CPUs that run threads of the process, so it costs microseconds: a
/// retirement's price, not an add's. False, having done nothing, where the kernel has no such
/// command (before Linux 5.10, valgrind, seccomp), or the build has no critical sections.
///
/// ```
/// use idspace::percid::restart_sections;
///
/// // Twice: the first call also registers the process for the command.
/// let first = restart_sections();
/// assert_eq!(restart_sections(), first);
/// ```
#[cfg(feature = "std")]
pub fn restart_sections() -> bool {
    fast::restart_all()
}

/// How many rseq critical sections the kernel has aborted in this process so far (a thread
/// preempted, migrated or signalled inside one). Each abort is retried, so this counts work
/// redone, not work lost; tests use it to prove the abort path runs.
///
/// ```
/// use idspace::percid::{kernel_aborts, PerCidCounter};
///
/// let before = kernel_aborts();
/// let counter = PerCidCounter::new();
/// std::thread::scope(|scope| {
///     for _ in 0..4 {
///         scope.spawn(|| (0..10_000).for_each(|_| counter.add(1)));
///     }
/// });
/// // However many sections were aborted and retried, every add counted once.
/// assert_eq!(counter.sum(), 40_000);
/// assert!(kernel_aborts() >= before);
/// ```
#[cfg(feature = "std")]
pub fn kernel_aborts() -> u64 {
    fast::aborts()
}

/// How many rseq critical sections the kernel has aborted on the calling thread so far: the
/// per-thread part of [`kernel_aborts`], for tests that must tell their own threads' aborts
/// from those of code running beside them.
///
/// ```
/// use idspace::percid::{kernel_aborts, kernel_aborts_on_this_thread, PerCidCounter};
///
/// let counter = PerCidCounter::new();
/// let mine = kernel_aborts_on_this_thread();
/// (0..10_000).for_each(|_| counter.add(1));
/// assert_eq!(counter.sum(), 10_000);
/// // This thread's aborts only grow, and are part of the process's.
/// assert!(kernel_aborts_on_this_thread() >= mine);
/// assert!(kernel_aborts() >= kernel_aborts_on_this_thread());
/// ```
#[cfg(feature = "std")]
pub fn kernel_aborts_on_this_thread() -> u64 {
    fast::thread_aborts()
}
