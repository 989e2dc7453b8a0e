//! An object cache with one bounded list per concurrency ID and a shared list behind them.

use core::marker::PhantomData;

use crossbeam_utils::CachePadded;

use super::list::{List, Popped, Pushed};
use super::task::Binding;
use super::{fast, index, IndexSource, PerCidError};
use crate::sync::{lock, Mutex, Ordering};
use crate::sys::rseq::Field;

/// Items a slot's list holds unless told otherwise.
const DEFAULT_CAPACITY: usize = 64;

/// A cache of boxed objects (the shape of tcmalloc's per-CPU caches and librseq's per-CPU
/// pools): [`give`](Self::give) puts an object on the calling thread's slot's list,
/// [`take`](Self::take) takes one from it.
///
/// Under an rseq source, a push or a pop is one critical section on the current index's list:
/// the item moves in or out and one store of the list's length commits it; a thread that loses
/// its index half-way is sent back to the start by the kernel, so an object is never handed to
/// two holders and never lost. A full list spills half of itself to a shared list (under a
/// lock), an empty one refills from it, so each slot holds at most `capacity` objects. Under
/// thread IDs the lists are the same, each under its own lock.
///
/// Objects on the lists are dropped with the pool.
///
/// ```
/// use idspace::percid::PerCidPool;
///
/// let pool = PerCidPool::new();
/// let buffer = pool.take_or_else(|| Vec::<u8>::with_capacity(4096));
/// pool.give(buffer);
/// assert_eq!(pool.take().map(|b| b.capacity()), Some(4096));
/// ```
pub struct PerCidPool<T> {
    source: IndexSource,
    /// The rseq field the source indexes by, if it has a fast path (decided once, at build).
    rseq: Option<Field>,
    /// The inlined path's area offset and field, if glibc registered the areas (at build).
    quick: fast::Quick,
    /// The process whose running tasks own the lists, under the task CID.
    binding: Option<Binding>,
    lists: Box<[CachePadded<List>]>,
    /// Objects that spilled, or were given by threads without a slot.
    shared: Mutex<Vec<*mut ()>>,
    /// The lists and `shared` own `Box<T>`s, as type-erased pointers.
    owns: PhantomData<Box<T>>,
}

// SAFETY: the pool owns its objects (as `Box<T>` would) through its raw pointers, so it may move
// to another thread with them when `T: Send`.
unsafe impl<T: Send> Send for PerCidPool<T> {}
// SAFETY: shared access moves objects between threads but never gives out `&T`, only whole
// objects to one holder each, so `T: Send` suffices.
unsafe impl<T: Send> Sync for PerCidPool<T> {}

impl<T> PerCidPool<T> {
    /// The largest per-slot capacity a pool accepts: 65,536 objects. Every slot's list is an
    /// array of `capacity` pointers allocated up front (512 KiB a slot at this bound, for each
    /// possible CPU), and a cache deeper than that holds memory no workload reuses in time.
    pub const MAX_CAPACITY: usize = 1 << 16;

    /// A pool on the best source the calling thread has, with room for 64 objects per slot.
    pub fn new() -> PerCidPool<T> {
        PerCidPool::build(
            IndexSource::best(),
            None,
            index::slot_count(),
            DEFAULT_CAPACITY,
        )
    }

    /// A pool on `source` with room for `capacity` objects per slot.
    ///
    /// # Errors
    /// [`PerCidError::ZeroCapacity`] for a capacity of 0, [`PerCidError::CapacityTooLarge`]
    /// above [`MAX_CAPACITY`](Self::MAX_CAPACITY) (both checked before anything is allocated),
    /// [`PerCidError::Unavailable`] if the source is not available to the calling thread.
    ///
    /// A slot holds at most `capacity` objects; a full one spills half of itself to the shared
    /// list, where every slot can find them:
    ///
    /// ```
    /// use idspace::percid::{IndexSource, PerCidPool};
    ///
    /// let pool = PerCidPool::with_source(IndexSource::ThreadIds, 4).unwrap();
    /// assert_eq!(pool.capacity(), 4);
    /// for n in 0..10u32 {
    ///     pool.give(Box::new(n));
    /// }
    /// assert_eq!(pool.held(), 10);
    /// let mut back: Vec<u32> = std::iter::from_fn(|| pool.take().map(|n| *n)).collect();
    /// back.sort();
    /// assert_eq!(back, (0..10).collect::<Vec<_>>());
    /// assert_eq!(pool.held(), 0);
    /// ```
    pub fn with_source(source: IndexSource, capacity: usize) -> Result<PerCidPool<T>, PerCidError> {
        if capacity == 0 {
            return Err(PerCidError::ZeroCapacity);
        }
        if capacity > Self::MAX_CAPACITY {
            return Err(PerCidError::CapacityTooLarge { capacity });
        }
        let (binding, slots) = source.prepare()?;
        Ok(PerCidPool::build(source, binding, slots, capacity))
    }

    fn build(
        source: IndexSource,
        binding: Option<Binding>,
        slots: usize,
        capacity: usize,
    ) -> PerCidPool<T> {
        PerCidPool {
            source,
            rseq: fast::field(source),
            quick: fast::Quick::new(source),
            binding,
            lists: (0..slots)
                .map(|_| CachePadded::new(List::new(capacity)))
                .collect(),
            shared: Mutex::new(Vec::new()),
            owns: PhantomData,
        }
    }

    /// Where the pool takes the calling thread's index from.
    pub fn source(&self) -> IndexSource {
        self.source
    }

    /// The number of slots (the possible CPUs).
    pub fn slots(&self) -> usize {
        self.lists.len()
    }

    /// The most objects one slot's list holds.
    pub fn capacity(&self) -> usize {
        self.lists[0].capacity()
    }

    /// An object from the pool, if it has one at hand: from the current slot's list, else a
    /// batch from the shared list (the rest of which goes onto the slot's list).
    #[inline(always)]
    pub fn take(&self) -> Option<Box<T>> {
        let object = match self.pop_quick() {
            Ok(object) => object,
            Err(missed) => self.take_slowly(missed)?,
        };
        // SAFETY: every pointer on a list came from `Box::into_raw` in `give`, and a pop hands
        // each to exactly one caller (a committed section or a locked list), which now owns it.
        Some(unsafe { Box::from_raw(object.cast::<T>()) })
    }

    /// An object from the pool, or `make()` if it has none at hand.
    #[inline]
    pub fn take_or_else(&self, make: impl FnOnce() -> T) -> Box<T> {
        self.take().unwrap_or_else(|| Box::new(make()))
    }

    /// Puts `object` into the pool: onto the current slot's list, spilling half of a full list
    /// to the shared list.
    #[inline(always)]
    pub fn give(&self, object: Box<T>) {
        let object = Box::into_raw(object).cast::<()>();
        if let Err(missed) = self.push_quick(object) {
            self.give_slowly(object, missed);
        }
    }

    /// The inlined part of `take`: one pop section under an rseq source, where glibc
    /// registered the area. Everything else (no such source or area, an abort, a move, an
    /// empty list) is `take_slowly`'s, which starts over; a section that did not commit
    /// changed nothing, so starting over is safe. No call on any path keeps everything in
    /// caller-saved registers: the inlined code pushes and pops none.
    #[inline(always)]
    fn pop_quick(&self) -> Result<*mut (), fast::Missed> {
        let Some(fast) = self.quick.current() else {
            return Err(fast::Missed::UNTRIED);
        };
        fast.pop_quick(&self.lists)
    }

    /// The inlined part of `give`, as `pop_quick` is `take`'s.
    #[inline(always)]
    fn push_quick(&self, object: *mut ()) -> Result<(), fast::Missed> {
        let Some(fast) = self.quick.current() else {
            return Err(fast::Missed::UNTRIED);
        };
        fast.push_quick(&self.lists, object)
    }

    /// `take` after `pop_quick` missed: counts a kernel abort, then pops again from the
    /// current slot's list (any source), refilling from the shared list when it is empty.
    #[cold]
    #[inline(never)]
    fn take_slowly(&self, missed: fast::Missed) -> Option<*mut ()> {
        missed.settle();
        match self.pop_local() {
            Popped::Item(object) => Some(object),
            Popped::Empty => self.refill(),
            Popped::NoSlot => lock(&self.shared).pop(),
        }
    }

    /// `give` after `push_quick` missed, as `take_slowly` is `take`'s: spills a full list.
    #[cold]
    #[inline(never)]
    fn give_slowly(&self, object: *mut (), missed: fast::Missed) {
        missed.settle();
        match self.push_local(object) {
            Pushed::Done => {}
            Pushed::Full => self.spill(object),
            Pushed::NoSlot => lock(&self.shared).push(object),
        }
    }

    /// How many objects the pool holds now (on the lists and the shared list); exact only when
    /// no other thread takes or gives.
    pub fn held(&self) -> usize {
        let local: usize = self
            .lists
            .iter()
            // Relaxed: a snapshot of each length, no other memory read through it.
            .map(|list| list.len.load(Ordering::Relaxed))
            .sum();
        local + lock(&self.shared).len()
    }

    /// Moves up to half a list from the shared list: one object for the caller, the rest
    /// onto the current slot's list (back to the shared list if that fills meanwhile).
    #[cold]
    fn refill(&self) -> Option<*mut ()> {
        let batch: Vec<*mut ()> = {
            let mut shared = lock(&self.shared);
            let keep = shared.len().saturating_sub(self.capacity() / 2 + 1);
            shared.split_off(keep)
        };
        let mut batch = batch.into_iter();
        let first = batch.next()?;
        let mut left = Vec::new();
        for object in batch {
            if self.push_local(object) != Pushed::Done {
                left.push(object);
            }
        }
        if !left.is_empty() {
            lock(&self.shared).extend(left);
        }
        Some(first)
    }

    /// Moves half of the current slot's full list, and `object`, to the shared list.
    #[cold]
    fn spill(&self, object: *mut ()) {
        let mut moving = vec![object];
        for _ in 0..self.capacity().div_ceil(2) {
            match self.pop_local() {
                Popped::Item(object) => moving.push(object),
                Popped::Empty | Popped::NoSlot => break,
            }
        }
        lock(&self.shared).extend(moving);
    }

    /// Pushes onto the current slot's list, retrying a section until it commits or is
    /// refused.
    fn push_local(&self, object: *mut ()) -> Pushed {
        let Some(field) = self.rseq else {
            return self.push_other(object);
        };
        loop {
            let Some(fast) = fast::current(field) else {
                return Pushed::NoSlot;
            };
            if let Some(pushed) = fast.push(&self.lists, object) {
                return pushed;
            }
        }
    }

    /// `push_local` under thread IDs (a slot lock) or the task CID (plain accesses).
    fn push_other(&self, object: *mut ()) -> Pushed {
        if self.source == IndexSource::ThreadIds {
            let list = &self.lists[index::thread_id() % self.lists.len()];
            let _held = lock(&list.lock);
            // Relaxed throughout: the list lock orders every access to the list.
            let len = list.len.load(Ordering::Relaxed);
            if len == list.capacity() {
                return Pushed::Full;
            }
            list.items()[len].store(object, Ordering::Relaxed);
            list.len.store(len + 1, Ordering::Relaxed);
            return Pushed::Done;
        }
        if let Some(binding) = self.binding {
            let Some(list) = binding.cid().and_then(|cid| self.lists.get(cid)) else {
                return Pushed::NoSlot;
            };
            // The list is this task's alone until it next yields, and the previous holder's
            // accesses happen before these (see `percid`'s `task` module): plain loads and
            // stores, Relaxed because the CID's hand-off orders them.
            let len = list.len.load(Ordering::Relaxed);
            if len == list.capacity() {
                return Pushed::Full;
            }
            list.items()[len].store(object, Ordering::Relaxed);
            list.len.store(len + 1, Ordering::Relaxed);
            return Pushed::Done;
        }
        Pushed::NoSlot
    }

    /// Pops from the current slot's list, retrying as `push_local` does.
    fn pop_local(&self) -> Popped {
        let Some(field) = self.rseq else {
            return self.pop_other();
        };
        loop {
            let Some(fast) = fast::current(field) else {
                return Popped::NoSlot;
            };
            if let Some(popped) = fast.pop(&self.lists) {
                return popped;
            }
        }
    }

    /// `pop_local` under thread IDs or the task CID.
    fn pop_other(&self) -> Popped {
        if self.source == IndexSource::ThreadIds {
            let list = &self.lists[index::thread_id() % self.lists.len()];
            let _held = lock(&list.lock);
            // Relaxed throughout: the list lock orders every access to the list.
            let len = list.len.load(Ordering::Relaxed);
            if len == 0 {
                return Popped::Empty;
            }
            list.len.store(len - 1, Ordering::Relaxed);
            return Popped::Item(list.items()[len - 1].load(Ordering::Relaxed));
        }
        if let Some(binding) = self.binding {
            let Some(list) = binding.cid().and_then(|cid| self.lists.get(cid)) else {
                return Popped::NoSlot;
            };
            // As in `push_local`: the list is this task's alone for the poll.
            let len = list.len.load(Ordering::Relaxed);
            if len == 0 {
                return Popped::Empty;
            }
            list.len.store(len - 1, Ordering::Relaxed);
            return Popped::Item(list.items()[len - 1].load(Ordering::Relaxed));
        }
        Popped::NoSlot
    }
}

impl<T> Default for PerCidPool<T> {
    fn default() -> Self {
        PerCidPool::new()
    }
}

impl<T> Drop for PerCidPool<T> {
    fn drop(&mut self) {
        let shared = core::mem::take(&mut *lock(&self.shared));
        let on_lists = self.lists.iter().flat_map(|list| {
            // Relaxed: `&mut self` means no other thread touches the lists any more.
            let len = list.len.load(Ordering::Relaxed);
            list.items()[..len]
                .iter()
                .map(|item| item.load(Ordering::Relaxed))
        });
        for object in on_lists.chain(shared) {
            // SAFETY: each pointer on a list is an object the pool owns, from `Box::into_raw`,
            // on exactly one list; the pool is going away, so it is dropped exactly once.
            drop(unsafe { Box::from_raw(object.cast::<T>()) });
        }
    }
}

impl<T> core::fmt::Debug for PerCidPool<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PerCidPool")
            .field("source", &self.source)
            .field("slots", &self.lists.len())
            .field("capacity", &self.capacity())
            .field("held", &self.held())
            .finish()
    }
}
