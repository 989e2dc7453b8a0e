//! The rseq fast paths of the per-CID structures, where critical sections exist; elsewhere a
//! [`Fast`] cannot be made and every caller takes its fallback.

use crossbeam_utils::CachePadded;

use super::list::{List, Popped, Pushed};
use super::{IndexSource, Registration};
use crate::sync::AtomicU64;

#[cfg(all(
    not(miri),
    not(loom),
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod imp {
    use super::*;
    use crate::sys::rseq::{mm_cid_filled, Area, Field, Registrar};
    use crate::sys::rseq_cs::{self, Outcome};

    /// The calling thread's area and the field it indexes by. Not `Send`: made for one thread.
    pub(crate) struct Fast {
        area: Area,
        field: Field,
    }

    /// The calling thread's fast path for `source`, if it has one. Whether the kernel fills
    /// mm_cid is not checked again here: the structures are built only for available
    /// sources, and the kernel's feature size does not change while the process runs.
    #[inline]
    pub(crate) fn current(source: IndexSource) -> Option<Fast> {
        let field = match source {
            IndexSource::MmCid => Field::MmCid,
            IndexSource::CpuId => Field::CpuId,
            IndexSource::ThreadIds | IndexSource::TaskCid => return None,
        };
        Area::registered().map(|(area, _)| Fast { area, field })
    }

    pub(crate) fn available(source: IndexSource) -> bool {
        match source {
            // The task CID is decided by the caller (`IndexSource::available`).
            IndexSource::ThreadIds | IndexSource::TaskCid => true,
            IndexSource::MmCid => mm_cid_filled() && current(source).is_some(),
            IndexSource::CpuId => current(source).is_some(),
        }
    }

    pub(crate) fn registration() -> Option<Registration> {
        Area::registered().map(|(_, registrar)| match registrar {
            Registrar::Glibc => Registration::Glibc,
            Registrar::Own => Registration::Own,
        })
    }

    pub(crate) fn aborts() -> u64 {
        rseq_cs::aborts()
    }

    pub(crate) fn thread_aborts() -> u64 {
        rseq_cs::thread_aborts()
    }

    impl Fast {
        /// The thread's index now (it may change at any moment; sections check it again).
        #[inline]
        pub(crate) fn index(&self) -> usize {
            self.area.index(self.field) as usize
        }

        /// Adds `n` to the current index's slot with a section; false if the index has no
        /// slot (then nothing was added).
        #[inline]
        pub(crate) fn add(&self, slots: &[CachePadded<AtomicU64>], n: u64) -> bool {
            loop {
                let index = self.area.index(self.field);
                let Some(slot) = slots.get(index as usize) else {
                    return false;
                };
                // Every store to a counter's slots is such a section indexed by the slot's own
                // index (the owner builds them so); readers only load them atomically.
                // SAFETY: the slot is a live, aligned u64 borrowed for the call.
                match unsafe { self.area.add(self.field, index, slot.as_ptr(), n) } {
                    Outcome::Committed(()) => return true,
                    Outcome::Aborted | Outcome::Moved | Outcome::Refused => continue,
                }
            }
        }

        /// Pushes `item` onto the current index's list with a section.
        #[inline]
        pub(crate) fn push(&self, lists: &[CachePadded<List>], item: *mut ()) -> Pushed {
            loop {
                let index = self.area.index(self.field);
                let Some(list) = lists.get(index as usize) else {
                    return Pushed::NoSlot;
                };
                // Under an rseq source every store to a list's length and cells is such a
                // section or a pop, indexed by the list's own index; `len <= items.len()`.
                // SAFETY: the list's words are live and aligned, borrowed for the call.
                let outcome = unsafe {
                    self.area.push(
                        self.field,
                        index,
                        list.len.as_ptr(),
                        list.items.as_ptr().cast_mut().cast(),
                        list.items.len(),
                        // The assembly moves the pointer as a word; `pop` turns it back.
                        item as usize,
                    )
                };
                match outcome {
                    Outcome::Committed(()) => return Pushed::Done,
                    Outcome::Refused => return Pushed::Full,
                    Outcome::Aborted | Outcome::Moved => continue,
                }
            }
        }

        /// Pops an item from the current index's list with a section.
        #[inline]
        pub(crate) fn pop(&self, lists: &[CachePadded<List>]) -> Popped {
            loop {
                let index = self.area.index(self.field);
                let Some(list) = lists.get(index as usize) else {
                    return Popped::NoSlot;
                };
                // As in `push`.
                // SAFETY: the list's words are live and aligned, borrowed for the call.
                let outcome = unsafe {
                    self.area.pop(
                        self.field,
                        index,
                        list.len.as_ptr(),
                        list.items.as_ptr().cast(),
                    )
                };
                match outcome {
                    // The word a committed `push` stored, from a pointer the pool owns.
                    Outcome::Committed(item) => return Popped::Item(item as *mut ()),
                    Outcome::Refused => return Popped::Empty,
                    Outcome::Aborted | Outcome::Moved => continue,
                }
            }
        }
    }
}

#[cfg(not(all(
    not(miri),
    not(loom),
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod imp {
    use super::*;

    /// No fast path exists in this build: this type has no values.
    pub(crate) enum Fast {}

    #[inline]
    pub(crate) fn current(_source: IndexSource) -> Option<Fast> {
        None
    }

    pub(crate) fn available(source: IndexSource) -> bool {
        source == IndexSource::ThreadIds
    }

    pub(crate) fn registration() -> Option<Registration> {
        None
    }

    pub(crate) fn aborts() -> u64 {
        0
    }

    pub(crate) fn thread_aborts() -> u64 {
        0
    }

    impl Fast {
        pub(crate) fn index(&self) -> usize {
            match *self {}
        }

        pub(crate) fn add(&self, _slots: &[CachePadded<AtomicU64>], _n: u64) -> bool {
            match *self {}
        }

        pub(crate) fn push(&self, _lists: &[CachePadded<List>], _item: *mut ()) -> Pushed {
            match *self {}
        }

        pub(crate) fn pop(&self, _lists: &[CachePadded<List>]) -> Popped {
            match *self {}
        }
    }
}

pub(crate) use imp::{aborts, available, current, registration, thread_aborts};
