//! One slot's bounded list of a [`PerCidPool`](super::PerCidPool): items (type-erased pointers) in an
//! array under a length, the shape tcmalloc's per-CPU caches have, so that a push or a pop
//! commits with one store of the length.

use core::ptr::NonNull;

use crate::sync::{AtomicPtr, AtomicUsize, Mutex};

/// A bounded list of items, type-erased pointers that the pool owns.
///
/// Under an rseq source only critical sections indexed by this slot's index touch `len` and
/// the items; under thread IDs only holders of `lock` do. The words are atomics so that both
/// kinds of access are plain aligned loads and stores the compiler cannot tear or merge.
///
/// The first three words are the header the sections read (`sys::rseq_cs`'s list layout):
/// the length, the capacity and the items' address, so that a section is handed one pointer
/// and reaches all three from it. Fewer operands leave the inlined fast path enough
/// caller-saved registers that it pushes none (a `Box<[_]>` would give no layout to rely on).
#[repr(C)]
pub(crate) struct List {
    /// How many of the items hold items, at most `capacity`.
    pub(crate) len: AtomicUsize,
    /// How many cells `items` has (at least 1).
    capacity: usize,
    /// The cells, `capacity` of them, from a leaked `Box<[AtomicPtr<()>]>` this list owns;
    /// `items()[..len]` hold items, the cells above `len` nothing that matters.
    items: NonNull<AtomicPtr<()>>,
    /// Serialises the thread-ID fallback, where several threads share a slot.
    pub(crate) lock: Mutex<()>,
}

// The sections' layout of a list header (see `sys::rseq_cs`), where they exist.
#[cfg(all(
    not(miri),
    not(loom),
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
const _: () = {
    assert!(core::mem::offset_of!(List, len) == 0);
    assert!(core::mem::offset_of!(List, capacity) == 8);
    assert!(core::mem::offset_of!(List, items) == 16);
};

impl List {
    /// An empty list with room for `capacity` items.
    pub(crate) fn new(capacity: usize) -> List {
        let items: Box<[AtomicPtr<()>]> = (0..capacity)
            .map(|_| AtomicPtr::new(core::ptr::null_mut()))
            .collect();
        List {
            len: AtomicUsize::new(0),
            capacity,
            items: NonNull::from(Box::leak(items)).cast(),
            lock: Mutex::new(()),
        }
    }

    /// The cells.
    #[inline]
    pub(crate) fn items(&self) -> &[AtomicPtr<()>] {
        // SAFETY: `items` is the start of the leaked `capacity` cells, which live until `drop`
        // and are only ever accessed shared (they are atomics).
        unsafe { core::slice::from_raw_parts(self.items.as_ptr(), self.capacity) }
    }

    /// How many items the list holds at most.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The header's address, which the sections read the length, capacity and items through.
    // Only the rseq fast paths use it, and builds without sections (Miri, loom, other
    // architectures) have none.
    #[cfg_attr(
        not(all(
            not(miri),
            not(loom),
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )]
    #[inline]
    pub(crate) fn header(&self) -> *mut usize {
        (self as *const List).cast_mut().cast()
    }
}

impl Drop for List {
    fn drop(&mut self) {
        let cells = core::ptr::slice_from_raw_parts_mut(self.items.as_ptr(), self.capacity);
        // SAFETY: the cells came from `Box::leak` in `new`, with this length, and are freed
        // once, here.
        drop(unsafe { Box::from_raw(cells) });
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
