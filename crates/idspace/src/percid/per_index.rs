//! [`PerIndex`]: one cache-padded slot per index the caller names (a CPU's number, a CID from
//! a [`cid`](crate::cid) design), the part of per-CID data that needs nothing from an
//! operating system and so builds without `std`.
//!
//! # Design
//!
//! The kernel's per-CPU data (`DEFINE_PER_CPU`, `per_cpu_ptr(ptr, cpu)`) is one copy of a
//! variable per possible CPU, reached by the CPU's number; the scheduler's per-mm CID data is
//! the same shape indexed by the task's `mm_cid`. [`PerCid`](super::PerCid) finds the index
//! itself (rseq's `mm_cid` or `cpu_id`, a thread registry, the running task's CID), which takes
//! an operating system. A kernel already knows its CPU, and its scheduler the CID it gave the
//! running task (see [`CidAllocator::switch`](crate::cid::CidAllocator::switch)), so here the
//! caller passes the index and the structure is only the slots.
//!
//! # Where we differ from the kernel
//!
//! * The kernel lays per-CPU copies out in per-CPU areas at a fixed offset each; here the
//!   slots are one allocation, each on its own cache line (as [`PerCid`](super::PerCid)'s),
//!   so that CPUs writing their own slots share no line.
//! * `this_cpu_add` and friends run with preemption disabled, so a plain store suffices. A
//!   slot here is shared data: the index keeps the callers that run at the same time apart
//!   (so they rarely contend), but nothing stops two callers naming the same index, so `T`
//!   synchronises itself (an atomic, a lock of the caller's).

use crossbeam_utils::CachePadded;

use crate::prelude::*;

/// One cache-padded `T` per index `0..len`, reached by an index the caller supplies.
///
/// A kernel-style per-CPU counter: one atomic per CPU, each CPU adding to its own, summed on
/// demand.
///
/// ```
/// use core::sync::atomic::{AtomicU64, Ordering};
/// use idspace::percid::PerIndex;
///
/// let events = PerIndex::new(4, |_| AtomicU64::new(0))?;
/// for cpu in [0, 1, 1, 3] {
///     events.get(cpu).expect("a CPU below 4").fetch_add(1, Ordering::Relaxed);
/// }
/// let total: u64 = events.iter().map(|c| c.load(Ordering::Relaxed)).sum();
/// assert_eq!(total, 4);
/// assert!(events.get(4).is_none(), "no slot for a fifth CPU");
/// // A CID or CPU number from a wider space folds onto the slots.
/// assert!(core::ptr::eq(events.folded(5), events.get(1).unwrap()));
/// # Ok::<(), idspace::percid::NoSlots>(())
/// ```
pub struct PerIndex<T> {
    slots: Box<[CachePadded<T>]>,
}

/// [`PerIndex::new`] was asked for no slots: there is always at least one CPU.
///
/// ```
/// use idspace::percid::{NoSlots, PerIndex};
///
/// // A CPU count read from a configuration that may say 0.
/// let configured = 0;
/// let slots = PerIndex::new(configured, |cpu| cpu);
/// assert_eq!(slots.err(), Some(NoSlots));
/// let slots = PerIndex::new(configured.max(1), |cpu| cpu).map_err(|e| e.to_string())?;
/// assert_eq!(slots.get(0), Some(&0));
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSlots;

impl core::fmt::Display for NoSlots {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("a per-index structure needs at least one slot")
    }
}

impl core::error::Error for NoSlots {}

impl<T> PerIndex<T> {
    /// `len` slots, slot `i` made by `init(i)`; [`NoSlots`] if `len` is 0.
    pub fn new(len: usize, init: impl FnMut(usize) -> T) -> Result<PerIndex<T>, NoSlots> {
        if len == 0 {
            return Err(NoSlots);
        }
        Ok(PerIndex::build(len, init))
    }

    /// One slot per CPU of the [`host`](crate::host) (its [`cpus`](crate::host::cpus), at
    /// least 1), slot `i` made by `init(i)`.
    ///
    /// ```
    /// use idspace::percid::PerIndex;
    ///
    /// let names = PerIndex::for_cpus(|cpu| cpu);
    /// assert_eq!(names.len(), idspace::host::cpus());
    /// assert_eq!(names.get(0), Some(&0));
    /// ```
    pub fn for_cpus(init: impl FnMut(usize) -> T) -> PerIndex<T> {
        PerIndex::build(crate::host::cpus(), init)
    }

    /// `len` slots (at least 1, which the caller guarantees), slot `i` made by `init(i)`.
    pub(super) fn build(len: usize, mut init: impl FnMut(usize) -> T) -> PerIndex<T> {
        PerIndex {
            slots: (0..len).map(|i| CachePadded::new(init(i))).collect(),
        }
    }

    /// The slot of `index`, if there is one.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        self.slots.get(index).map(|slot| &**slot)
    }

    /// The slot of `index` folded onto the slots (`index % len`): for an index from a space
    /// that may be wider than the slots (a CPU number beyond the count the slots were made
    /// for), at the price of two indexes sharing a slot.
    #[inline]
    pub fn folded(&self, index: usize) -> &T {
        &self.slots[index % self.slots.len()]
    }

    /// The number of slots (at least 1).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are no slots (never: [`PerIndex::new`] refuses none).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Every slot, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().map(|slot| &**slot)
    }

    /// Every slot, mutably (no other reference exists: the kernel's `for_each_possible_cpu`
    /// walk at teardown or reset).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().map(|slot| &mut **slot)
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for PerIndex<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{AtomicU64, Ordering};

    #[test]
    fn zero_slots_are_refused_and_every_index_reaches_its_own_slot() {
        assert_eq!(PerIndex::new(0, |i| i).err(), Some(NoSlots));
        let mut slots = PerIndex::new(3, |i| i * 10).expect("three slots");
        assert_eq!((slots.len(), slots.is_empty()), (3, false));
        assert_eq!(slots.iter().copied().collect::<Vec<_>>(), [0, 10, 20]);
        assert_eq!((slots.get(2), slots.get(3)), (Some(&20), None));
        assert_eq!(*slots.folded(7), 10);
        slots.iter_mut().for_each(|slot| *slot += 1);
        assert_eq!(slots.iter().copied().collect::<Vec<_>>(), [1, 11, 21]);
    }

    #[test]
    fn slots_sit_on_lines_of_their_own() {
        let slots = PerIndex::new(2, |_| AtomicU64::new(0)).expect("two slots");
        let (a, b) = (slots.folded(0), slots.folded(1));
        let distance = (b as *const AtomicU64 as usize) - (a as *const AtomicU64 as usize);
        assert!(distance >= 64, "slots {distance} bytes apart");
        a.fetch_add(2, Ordering::Relaxed);
        assert_eq!(b.load(Ordering::Relaxed), 0);
    }
}
