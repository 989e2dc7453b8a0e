//! One slot's bounded list of a [`PerCidPool`](super::PerCidPool): items (type-erased pointers) in an
//! array under a length, the shape tcmalloc's per-CPU caches have, so that a push or a pop
//! commits with one store of the length.

use crate::sync::{AtomicPtr, AtomicUsize, Mutex};

/// A bounded list of items, type-erased pointers that the pool owns.
///
/// Under an rseq source only critical sections indexed by this slot's index touch `len` and
/// `items`; under thread IDs only holders of `lock` do. The words are atomics so that both kinds
/// of access are plain aligned loads and stores the compiler cannot tear or merge.
pub(crate) struct List {
    /// How many of `items` hold items, at most `items.len()`.
    pub(crate) len: AtomicUsize,
    /// The items, `items[..len]`; the cells above `len` hold nothing that matters.
    pub(crate) items: Box<[AtomicPtr<()>]>,
    /// Serialises the thread-ID fallback, where several threads share a slot.
    pub(crate) lock: Mutex<()>,
}

impl List {
    /// An empty list with room for `capacity` items.
    pub(crate) fn new(capacity: usize) -> List {
        List {
            len: AtomicUsize::new(0),
            items: (0..capacity)
                .map(|_| AtomicPtr::new(core::ptr::null_mut()))
                .collect(),
            lock: Mutex::new(()),
        }
    }
}

/// How a push onto a slot's list ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// The item is on the list.
    Done,
    /// The list is full; the caller still holds the item.
    Full,
    /// The thread has no slot (no area, or an index beyond the slots); the caller still holds
    /// the item.
    NoSlot,
}

/// How a pop from a slot's list ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Popped {
    /// An item, now the caller's.
    Item(*mut ()),
    /// The list is empty.
    Empty,
    /// The thread has no slot.
    NoSlot,
}
