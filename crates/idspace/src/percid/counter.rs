//! A counter sharded by concurrency ID.

use crossbeam_utils::CachePadded;

use super::task::Binding;
use super::{fast, index, IndexSource, PerCidError};
use crate::sync::{AtomicU64, Ordering};
use crate::sys::rseq::Field;

/// A counter with one cache-padded slot per possible index: `add` touches the calling
/// thread's slot only, `sum` adds all slots up.
///
/// Under an rseq source an add is a plain load, add and store of the slot, committed by a
/// critical section that aborts if the thread loses its index half-way: no `lock` prefix, no
/// cache line shared with another running thread. Under thread IDs it is an atomic add on the
/// thread's slot (threads may share one).
///
/// Under the task CID ([`IndexSource::TaskCid`]) an add by a running task of the counter's
/// process is a plain load and store of its CID's slot (the CID is the task's alone for the
/// whole poll, see the module docs of [`percid`](super)).
///
/// Memory is one cache line per possible CPU (per CID of the process's space under the task
/// CID), whatever the number of threads.
///
/// ```
/// use idspace::percid::PerCidCounter;
///
/// let counter = PerCidCounter::new();
/// std::thread::scope(|scope| {
///     for _ in 0..8 {
///         scope.spawn(|| (0..1000).for_each(|_| counter.add(1)));
///     }
/// });
/// assert_eq!(counter.sum(), 8000);
/// ```
pub struct PerCidCounter {
    source: IndexSource,
    /// The rseq field the source indexes by, if it has a fast path (decided once, at build).
    rseq: Option<Field>,
    /// The process whose running tasks own the slots, under the task CID.
    binding: Option<Binding>,
    slots: Box<[CachePadded<AtomicU64>]>,
    /// Adds of threads that have no slot under an rseq source (no area on that thread) or under
    /// the task CID (not a running task of the process): kept apart, because an atomic add and
    /// a plain store on one word could lose one.
    stray: CachePadded<AtomicU64>,
}

impl PerCidCounter {
    /// A counter at 0 on the best source the calling thread has ([`IndexSource::best`]).
    pub fn new() -> PerCidCounter {
        PerCidCounter::build(IndexSource::best(), None, index::slot_count())
    }

    /// A counter at 0 on `source`; [`PerCidError::Unavailable`] if the calling thread cannot
    /// use it (for [`IndexSource::TaskCid`]: if it is not a runtime task of a process, whose
    /// process the counter is then bound to).
    ///
    /// ```
    /// use idspace::percid::{IndexSource, PerCidCounter};
    ///
    /// // Thread IDs work everywhere: atomic adds on the thread's slot.
    /// let counter = PerCidCounter::with_source(IndexSource::ThreadIds).unwrap();
    /// counter.add(40);
    /// counter.add(2);
    /// assert_eq!(counter.sum(), 42);
    /// assert_eq!(counter.source(), IndexSource::ThreadIds);
    /// // One cache line per possible CPU, whatever the number of threads.
    /// assert!(counter.slots() >= 1);
    /// assert!(counter.slot_bytes() >= counter.slots() * 8);
    /// ```
    pub fn with_source(source: IndexSource) -> Result<PerCidCounter, PerCidError> {
        let (binding, slots) = source.prepare()?;
        Ok(PerCidCounter::build(source, binding, slots))
    }

    fn build(source: IndexSource, binding: Option<Binding>, slots: usize) -> PerCidCounter {
        PerCidCounter {
            source,
            rseq: fast::field(source),
            binding,
            slots: (0..slots)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            stray: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Where the counter takes the calling thread's index from.
    pub fn source(&self) -> IndexSource {
        self.source
    }

    /// The number of slots (the possible CPUs); the memory is this many cache lines.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The bytes the slots take.
    pub fn slot_bytes(&self) -> usize {
        core::mem::size_of_val(&*self.slots) + core::mem::size_of_val(&self.stray)
    }

    /// Adds `n` (wrapping at 2^64). The rseq sources' path comes first and is all that is
    /// inlined; the thread-ID and task-CID paths sit in `add_other`.
    #[inline]
    pub fn add(&self, n: u64) {
        let Some(field) = self.rseq else {
            return self.add_other(n);
        };
        if let Some(fast) = fast::current(field) {
            if fast.add(&self.slots, n) == Some(true) {
                return;
            }
        }
        self.add_again(n);
    }

    /// `add` after its one inline attempt did not commit: retries while sections abort or the
    /// thread moves, and counts in `stray` when the thread has no area or its index no slot.
    /// Out of line with only `self` and `n` live, so that the inline attempt needs to keep
    /// nothing else for it (an inline retry loop kept five values, and spilled some of them to
    /// the stack on every call through the C ABI).
    #[cold]
    #[inline(never)]
    fn add_again(&self, n: u64) {
        while let Some(fast) = self.rseq.and_then(fast::current) {
            match fast.add(&self.slots, n) {
                Some(true) => return,
                Some(false) => break,
                None => continue,
            }
        }
        self.add_stray(n);
    }

    /// Adds `n` (wrapping) only if `guard` holds `expected`, compared inside the same rseq
    /// critical section as the add: `Ok(true)` if it added, `Ok(false)` if the guard differs.
    ///
    /// This is how a counter is retired without a reference count or hazard on the add path:
    /// the retiring thread changes the guard (any ordering), then calls
    /// [`restart_sections`](super::restart_sections). From then on no `add_if` that compared
    /// the old value can still commit, so the counter can be reset or handed to a new owner
    /// while late callers are refused. The guard is typically a generation that a handle
    /// carries, and the counter's memory must stay valid for late callers (recycled, never
    /// freed).
    ///
    /// [`PerCidError::Unavailable`] without adding where the add is not a critical section: a
    /// counter on thread IDs or the task CID, or a thread without an rseq area.
    ///
    /// ```
    /// use core::sync::atomic::{AtomicU32, Ordering};
    /// use idspace::percid::{restart_sections, PerCidCounter, PerCidError};
    ///
    /// let counter = PerCidCounter::new();
    /// let generation = AtomicU32::new(1);
    /// match counter.add_if(5, &generation, 1) {
    ///     Ok(added) => {
    ///         assert!(added);
    ///         // Retire generation 1: change the guard, then restart every section in flight.
    ///         generation.store(2, Ordering::Relaxed);
    ///         let fenced = restart_sections();
    ///         assert_eq!(counter.add_if(5, &generation, 1), Ok(false));
    ///         assert_eq!(counter.sum(), 5);
    ///         // Without the kernel's command, late adds are refused only once they load the
    ///         // new guard; with it, none that loaded the old one is still to commit.
    ///         let _ = fenced;
    ///     }
    ///     // No rseq on this thread (valgrind, an old kernel): no section to check a guard in.
    ///     Err(error) => assert!(matches!(error, PerCidError::Unavailable(_))),
    /// }
    /// ```
    #[inline]
    pub fn add_if(
        &self,
        n: u64,
        guard: &core::sync::atomic::AtomicU32,
        expected: u32,
    ) -> Result<bool, PerCidError> {
        let Some(field) = self.rseq else {
            return Err(PerCidError::Unavailable(self.source));
        };
        if let Some(Some(added)) =
            fast::current(field).map(|fast| fast.add_if(&self.slots, n, guard, expected))
        {
            return Ok(added);
        }
        self.add_if_again(n, guard, expected)
    }

    /// The first attempt of [`add_if`](Self::add_if) alone, for callers that keep their own
    /// slow path out of line (the C ABI's add): `Some(true)` if it added, `Some(false)` if the
    /// guard differs, `None` if it could not decide in one section without calling anything
    /// (an aborted section, a thread that moved or whose area glibc did not register, a
    /// counter off rseq). Then nothing was added; call `add_if`.
    ///
    /// ```
    /// use core::sync::atomic::AtomicU32;
    /// use idspace::percid::PerCidCounter;
    ///
    /// let counter = PerCidCounter::new();
    /// let generation = AtomicU32::new(7);
    /// let added = match counter.add_if_once(1, &generation, 7) {
    ///     Some(added) => added,
    ///     None => counter.add_if(1, &generation, 7).unwrap_or(false),
    /// };
    /// assert_eq!(counter.sum(), u64::from(added));
    /// // Another generation never adds.
    /// assert_ne!(counter.add_if_once(1, &generation, 8), Some(true));
    /// assert_eq!(counter.sum(), u64::from(added));
    /// ```
    #[inline(always)]
    pub fn add_if_once(
        &self,
        n: u64,
        guard: &core::sync::atomic::AtomicU32,
        expected: u32,
    ) -> Option<bool> {
        fast::current_quick(self.rseq?)?.add_if(&self.slots, n, guard, expected)
    }

    /// `add_if` after its inline attempt did not decide, as [`add_again`](Self::add_again).
    #[cold]
    #[inline(never)]
    fn add_if_again(
        &self,
        n: u64,
        guard: &core::sync::atomic::AtomicU32,
        expected: u32,
    ) -> Result<bool, PerCidError> {
        while let Some(fast) = self.rseq.and_then(fast::current) {
            let index = fast.index();
            if let Some(added) = fast.add_if(&self.slots, n, guard, expected) {
                return Ok(added);
            }
            if index >= self.slots.len() {
                break;
            }
        }
        Err(PerCidError::Unavailable(self.source))
    }

    /// `add` under thread IDs (an atomic add on a slot threads may share) or the task CID
    /// (plain accesses).
    #[inline(never)]
    fn add_other(&self, n: u64) {
        if self.source == IndexSource::ThreadIds {
            let slot = &self.slots[index::thread_id() % self.slots.len()];
            // Relaxed: a statistic; `sum` promises no ordering with other memory.
            slot.fetch_add(n, Ordering::Relaxed);
            return;
        }
        if let Some(slot) = self
            .binding
            .and_then(|binding| binding.cid())
            .and_then(|cid| self.slots.get(cid))
        {
            // The slot is this task's alone until it next yields, and the previous holder's
            // stores happen before these accesses (see `percid`'s `task` module): a plain load
            // and store, Relaxed because the CID's hand-off orders them.
            let value = slot.load(Ordering::Relaxed);
            slot.store(value.wrapping_add(n), Ordering::Relaxed);
            return;
        }
        self.add_stray(n);
    }

    /// An add by a thread without a slot (no area under an rseq source, not a running task of
    /// the process under the task CID).
    #[cold]
    fn add_stray(&self, n: u64) {
        // Relaxed: a statistic, as in `add_other`.
        self.stray.fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of all adds that completed before the call (wrapping); adds running during the
    /// call may or may not be in it.
    pub fn sum(&self) -> u64 {
        // Relaxed: each slot is read whole (sections commit with one aligned store), and a sum
        // promises nothing about other memory.
        self.slots
            .iter()
            .chain(core::iter::once(&self.stray))
            .fold(0u64, |sum, slot| {
                sum.wrapping_add(slot.load(Ordering::Relaxed))
            })
    }
}

impl Default for PerCidCounter {
    fn default() -> Self {
        PerCidCounter::new()
    }
}

impl core::fmt::Debug for PerCidCounter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PerCidCounter")
            .field("source", &self.source)
            .field("slots", &self.slots.len())
            .field("sum", &self.sum())
            .finish()
    }
}
