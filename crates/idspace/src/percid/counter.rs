//! A counter sharded by concurrency ID.

use crossbeam_utils::CachePadded;

use super::{fast, index, IndexSource, PerCidError};
use crate::sync::{AtomicU64, Ordering};

/// A counter with one cache-padded slot per possible index: `add` touches the calling
/// thread's slot only, `sum` adds all slots up.
///
/// Under an rseq source an add is a plain load, add and store of the slot, committed by a
/// critical section that aborts if the thread loses its index half-way: no `lock` prefix, no
/// cache line shared with another running thread. Under thread IDs it is an atomic add on the
/// thread's slot (threads may share one).
///
/// Memory is one cache line per possible CPU, whatever the number of threads.
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
    slots: Box<[CachePadded<AtomicU64>]>,
    /// Adds of threads that have no slot under an rseq source (no area on that thread): kept
    /// apart, because an atomic add and a section's plain store on one word could lose one.
    stray: CachePadded<AtomicU64>,
}

impl PerCidCounter {
    /// A counter at 0 on the best source the calling thread has ([`IndexSource::best`]).
    pub fn new() -> PerCidCounter {
        PerCidCounter::build(IndexSource::best())
    }

    /// A counter at 0 on `source`; [`PerCidError::Unavailable`] if the calling thread cannot
    /// use it.
    pub fn with_source(source: IndexSource) -> Result<PerCidCounter, PerCidError> {
        if !source.available() {
            return Err(PerCidError::Unavailable(source));
        }
        Ok(PerCidCounter::build(source))
    }

    fn build(source: IndexSource) -> PerCidCounter {
        PerCidCounter {
            source,
            slots: (0..index::slot_count())
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

    /// Adds `n` (wrapping at 2^64).
    #[inline]
    pub fn add(&self, n: u64) {
        if self.source == IndexSource::ThreadIds {
            let slot = &self.slots[index::thread_id() % self.slots.len()];
            // Relaxed: a statistic; `sum` promises no ordering with other memory.
            slot.fetch_add(n, Ordering::Relaxed);
            return;
        }
        if let Some(fast) = fast::current(self.source) {
            if fast.add(&self.slots, n) {
                return;
            }
        }
        // Relaxed: as above.
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
