//! General data with one cache-padded slot per possible index.

use super::task::Binding;
use super::{fast, index, IndexSource, PerCidError, PerIndex};

/// One cache-padded `T` for every index the source can give (as many as the possible CPUs,
/// never one per thread).
///
/// [`current`](Self::current) picks the calling thread's slot. The thread may lose its index
/// right after (preemption), and another thread may then be given the same slot, so a slot is
/// shared data: `T` does its own synchronisation (atomics, a lock), and the index only keeps
/// threads that run at the same time apart, so that they rarely contend.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use idspace::percid::PerCid;
///
/// let hits = PerCid::new(|_| AtomicUsize::new(0));
/// hits.current().fetch_add(1, Ordering::Relaxed);
/// assert_eq!(hits.iter().map(|h| h.load(Ordering::Relaxed)).sum::<usize>(), 1);
/// ```
pub struct PerCid<T> {
    source: IndexSource,
    /// The process whose running tasks' CIDs index the slots, under the task CID.
    binding: Option<Binding>,
    /// The slots themselves: a [`PerIndex`] that this type reaches by the caller's own index.
    slots: PerIndex<T>,
}

impl<T> PerCid<T> {
    /// Slots made by `init(index)`, on the best source the calling thread has.
    pub fn new(init: impl FnMut(usize) -> T) -> PerCid<T> {
        PerCid::build(IndexSource::best(), None, index::slot_count(), init)
    }

    /// Slots made by `init(index)`, on `source`; [`PerCidError::Unavailable`] if the calling
    /// thread cannot use it (for [`IndexSource::TaskCid`]: if it is not a runtime task of a
    /// process; the slots are then one per CID of that process's space, and its running tasks
    /// get the slot of their CID).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use idspace::percid::{IndexSource, PerCid};
    ///
    /// // Per-slot logs, each under its own lock: threads that run at once rarely share one.
    /// let logs = PerCid::with_source(IndexSource::ThreadIds, |_| Mutex::new(Vec::new())).unwrap();
    /// std::thread::scope(|scope| {
    ///     for n in 0..4 {
    ///         let logs = &logs;
    ///         scope.spawn(move || logs.current().lock().unwrap().push(n));
    ///     }
    /// });
    /// let mut all: Vec<i32> = logs.iter().flat_map(|log| log.lock().unwrap().clone()).collect();
    /// all.sort();
    /// assert_eq!(all, [0, 1, 2, 3]);
    /// ```
    pub fn with_source(
        source: IndexSource,
        init: impl FnMut(usize) -> T,
    ) -> Result<PerCid<T>, PerCidError> {
        let (binding, slots) = source.prepare()?;
        Ok(PerCid::build(source, binding, slots, init))
    }

    fn build(
        source: IndexSource,
        binding: Option<Binding>,
        slots: usize,
        init: impl FnMut(usize) -> T,
    ) -> PerCid<T> {
        PerCid {
            source,
            binding,
            slots: PerIndex::build(slots, init),
        }
    }

    /// Where the slots take the calling thread's index from.
    pub fn source(&self) -> IndexSource {
        self.source
    }

    /// The calling thread's index now, folded onto the slots.
    ///
    /// ```
    /// use idspace::percid::PerCid;
    ///
    /// // Each slot knows its index.
    /// let slots = PerCid::new(|index| index);
    /// let index = slots.current_index();
    /// assert!(index < slots.len());
    /// assert_eq!(slots.get(index), Some(&index));
    /// assert_eq!(slots.get(slots.len()), None);
    /// assert!(!slots.is_empty());
    /// ```
    pub fn current_index(&self) -> usize {
        if let Some(cid) = self.binding.and_then(Binding::cid) {
            return cid % self.slots.len();
        }
        let index = match fast::field(self.source).and_then(fast::current) {
            Some(fast) => fast.index(),
            None => index::thread_id(),
        };
        index % self.slots.len()
    }

    /// The calling thread's slot.
    pub fn current(&self) -> &T {
        self.slots.folded(self.current_index())
    }

    /// The slot of `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&T> {
        self.slots.get(index)
    }

    /// The number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are no slots (never: there is at least one CPU).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Every slot, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter()
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for PerCid<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PerCid")
            .field("source", &self.source)
            .field("slots", &self.slots)
            .finish()
    }
}
