//! The rseq fast paths of the per-CID structures, where critical sections exist; elsewhere a
//! [`Fast`] cannot be made and every caller takes its fallback.

use crossbeam_utils::CachePadded;

use super::list::{List, Popped, Pushed};
use super::{IndexSource, Registration};
use crate::sync::AtomicU64;
use crate::sys::rseq::Field;

#[cfg(all(
    not(miri),
    not(loom),
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod imp {
    use super::*;
    use crate::sys::rseq::{self, mm_cid_filled, Area, Registrar};
    use crate::sys::rseq_cs::{self, Outcome, Status};

    /// The calling thread's area and the field it indexes by. Not `Send`: made for one thread.
    /// Two words, passed by value (also to the out-of-line retries, so nothing is spilled).
    #[derive(Clone, Copy)]
    pub(crate) struct Fast {
        area: Area,
        field: Field,
    }

    /// The field a structure on `source` indexes its fast path by; `None` for the sources
    /// without one. Structures ask once, when they are built, and keep the answer.
    pub(crate) fn field(source: IndexSource) -> Option<Field> {
        match source {
            IndexSource::MmCid => Some(Field::MmCid),
            IndexSource::CpuId => Some(Field::CpuId),
            IndexSource::ThreadIds | IndexSource::TaskCid => None,
        }
    }

    /// The calling thread's fast path by `field`, if the thread has an area. Whether the
    /// kernel fills mm_cid is not checked again here: the structures are built only for
    /// available sources, and the kernel's feature size does not change while the process
    /// runs.
    #[inline(always)]
    pub(crate) fn current(field: Field) -> Option<Fast> {
        Area::this_thread().map(|area| Fast { area, field })
    }

    /// [`current`] where glibc registered the thread's area; `None` otherwise, with no call.
    #[inline(always)]
    pub(crate) fn current_quick(field: Field) -> Option<Fast> {
        Area::this_thread_quick().map(|area| Fast { area, field })
    }

    /// A structure's quick path, decided when it is built: glibc's area offset and the field
    /// it indexes by, or nothing (no rseq source, or glibc registered no areas). Kept in the
    /// structure, it is read with the structure's other words: no load of the published
    /// offset through the GOT, and no separate check of the source.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Quick {
        /// glibc's `__rseq_offset`, or 0 (which it never is) for no quick path.
        offset: isize,
        field: Field,
    }

    impl Quick {
        /// The quick path of a structure on `source`.
        pub(crate) fn new(source: IndexSource) -> Quick {
            match (field(source), rseq::glibc_offset()) {
                (Some(field), Some(offset)) => Quick { offset, field },
                _ => Quick {
                    offset: 0,
                    field: Field::MmCid,
                },
            }
        }

        /// The calling thread's fast path, as [`current_quick`]; `None` also where the
        /// structure has no quick path.
        #[inline(always)]
        pub(crate) fn current(self) -> Option<Fast> {
            if self.offset == 0 {
                return None;
            }
            Area::at_glibc_offset(self.offset).map(|area| Fast {
                area,
                field: self.field,
            })
        }
    }

    pub(crate) fn available(source: IndexSource) -> bool {
        match source {
            // The task CID is decided by the caller (`IndexSource::available`).
            IndexSource::ThreadIds | IndexSource::TaskCid => true,
            IndexSource::MmCid => mm_cid_filled() && current(Field::MmCid).is_some(),
            IndexSource::CpuId => current(Field::CpuId).is_some(),
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

    pub(crate) fn restart_all() -> bool {
        rseq_cs::restart_all()
    }

    impl Fast {
        /// The thread's index now (it may change at any moment; sections check it again).
        #[inline]
        pub(crate) fn index(self) -> usize {
            self.area.index(self.field) as usize
        }

        // Each operation is one attempt; its caller retries out of line, in a function of its
        // own that rebuilds the arguments from the structure. An abort or a move is rare, and
        // a retry loop inlined around the section merges the committed path with the
        // retries' (a dozen instructions of decoding), while a retry closure built inline
        // keeps the section's arguments live past it (spilled to the stack in a function as
        // large as a C ABI entry point).

        /// Adds `n` to the current index's slot with one section: `Some(true)` if it
        /// committed, `Some(false)` if the index has no slot (then nothing was added), `None`
        /// if the section was aborted or the thread moved (then nothing was added, and the
        /// caller tries again with the index read afresh).
        #[inline(always)]
        pub(crate) fn add(self, slots: &[CachePadded<AtomicU64>], n: u64) -> Option<bool> {
            let index = self.area.index(self.field);
            let Some(slot) = slots.get(index as usize) else {
                return Some(false);
            };
            // Every store to a counter's slots is such a section indexed by the slot's own
            // index (the owner builds them so); readers only load them atomically.
            // SAFETY: the slot is a live, aligned u64 borrowed for the call.
            match unsafe { self.area.add(self.field, index, slot.as_ptr(), n) } {
                Outcome::Committed(()) => Some(true),
                // An add refuses nothing.
                Outcome::Aborted | Outcome::Moved | Outcome::Refused => None,
            }
        }

        /// [`add`](Self::add) with a guard: `Some(true)` if the section committed,
        /// `Some(false)` if it found `*guard != expected` (compared inside it), `None` if it
        /// was aborted, the thread moved, or the index has no slot (the caller tells the last
        /// apart by the index).
        #[inline(always)]
        pub(crate) fn add_if(
            self,
            slots: &[CachePadded<AtomicU64>],
            n: u64,
            guard: &core::sync::atomic::AtomicU32,
            expected: u32,
        ) -> Option<bool> {
            let index = self.area.index(self.field);
            let slot = slots.get(index as usize)?;
            // SAFETY: as in `add`; the guard is a live, aligned u32 borrowed for the call,
            // which the section only loads.
            match unsafe {
                self.area.add_if(
                    self.field,
                    index,
                    guard.as_ptr(),
                    expected,
                    slot.as_ptr(),
                    n,
                )
            } {
                Outcome::Committed(()) => Some(true),
                Outcome::Refused => Some(false),
                Outcome::Aborted | Outcome::Moved => None,
            }
        }

        /// Pushes `item` onto the current index's list with one section: `None` if it was
        /// aborted or the thread moved (nothing pushed; the caller retries, as for `add`).
        #[inline(always)]
        pub(crate) fn push(self, lists: &[CachePadded<List>], item: *mut ()) -> Option<Pushed> {
            let index = self.area.index(self.field);
            let Some(list) = lists.get(index as usize) else {
                return Some(Pushed::NoSlot);
            };
            // SAFETY: as in `push_quick`.
            let status = unsafe {
                self.area
                    .push(self.field, index, list.header(), item as usize)
            };
            match status.outcome(()) {
                Outcome::Committed(()) => Some(Pushed::Done),
                Outcome::Refused => Some(Pushed::Full),
                Outcome::Aborted | Outcome::Moved => None,
            }
        }

        /// [`push`](Self::push) for the inlined fast path: `Ok` if it committed, else how it
        /// missed (also for no slot), which the caller hands to its out-of-line path with
        /// nothing decoded and no call made here.
        #[inline(always)]
        pub(crate) fn push_quick(
            self,
            lists: &[CachePadded<List>],
            item: *mut (),
        ) -> Result<(), Missed> {
            let index = self.area.index(self.field);
            let Some(list) = lists.get(index as usize) else {
                return Err(Missed::UNTRIED);
            };
            // Under an rseq source every store to a list's length and cells is such a section
            // or a pop, indexed by the list's own index; `len <= capacity`.
            // SAFETY: the list's header and cells are live and aligned, borrowed for the call;
            // the assembly moves the pointer as a word (`pop` turns it back).
            let status = unsafe {
                self.area
                    .push(self.field, index, list.header(), item as usize)
            };
            if status.committed() {
                return Ok(());
            }
            Err(Missed(status))
        }

        /// Pops an item from the current index's list with one section: `None` if it was
        /// aborted or the thread moved (nothing popped; the caller retries, as for `add`).
        #[inline(always)]
        pub(crate) fn pop(self, lists: &[CachePadded<List>]) -> Option<Popped> {
            let index = self.area.index(self.field);
            let Some(list) = lists.get(index as usize) else {
                return Some(Popped::NoSlot);
            };
            // SAFETY: as in `push_quick`.
            let (status, item) = unsafe { self.area.pop(self.field, index, list.header()) };
            match status.outcome(item) {
                // The word a committed `push` stored, from a pointer the pool owns.
                Outcome::Committed(item) => Some(Popped::Item(item as *mut ())),
                Outcome::Refused => Some(Popped::Empty),
                Outcome::Aborted | Outcome::Moved => None,
            }
        }

        /// [`pop`](Self::pop) for the inlined fast path, as [`push_quick`](Self::push_quick):
        /// the item if it committed, else how it missed (also for an empty list).
        #[inline(always)]
        pub(crate) fn pop_quick(self, lists: &[CachePadded<List>]) -> Result<*mut (), Missed> {
            let index = self.area.index(self.field);
            let Some(list) = lists.get(index as usize) else {
                return Err(Missed::UNTRIED);
            };
            // SAFETY: as in `push_quick`.
            let (status, item) = unsafe { self.area.pop(self.field, index, list.header()) };
            if status.committed() {
                // The word a committed `push` stored, from a pointer the pool owns.
                return Ok(item as *mut ());
            }
            Err(Missed(status))
        }
    }

    /// How a quick attempt ([`Fast::push_quick`], [`Fast::pop_quick`]) missed: a section's
    /// status, undecoded, or none if no section ran. The out-of-line path that takes over
    /// [`settle`](Self::settle)s it first, so that a kernel abort is still counted.
    #[derive(Clone, Copy)]
    pub(crate) struct Missed(Status);

    impl Missed {
        /// No section ran (no area, no rseq source, no slot for the index).
        pub(crate) const UNTRIED: Missed = Missed(Status::NOT_STARTED);

        /// Counts a kernel abort, if the section was aborted.
        pub(crate) fn settle(self) {
            self.0.settle();
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// A structure's kept quick path finds the area the full lookup finds, on this thread
        /// and on another (the offset is glibc's, the same for every thread); a source without
        /// rseq has none.
        #[test]
        fn the_quick_path_finds_the_area_the_full_lookup_finds() {
            let check = || {
                for source in [IndexSource::MmCid, IndexSource::CpuId] {
                    let (Some(field), true) = (field(source), available(source)) else {
                        continue;
                    };
                    let full = current(field).map(|fast| fast.area.base());
                    let kept = Quick::new(source).current().map(|fast| fast.area.base());
                    match registration() {
                        Some(Registration::Glibc) => assert_eq!(kept, full, "{source:?}"),
                        // Our own areas are not at glibc's offset: no quick path.
                        _ => assert_eq!(kept, None, "{source:?}"),
                    }
                }
                assert!(Quick::new(IndexSource::ThreadIds).current().is_none());
            };
            check();
            std::thread::spawn(check)
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
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
    #[derive(Clone, Copy)]
    pub(crate) enum Fast {}

    /// No source has a fast path in this build.
    pub(crate) fn field(_source: IndexSource) -> Option<Field> {
        None
    }

    #[inline]
    pub(crate) fn current(_field: Field) -> Option<Fast> {
        None
    }

    pub(crate) fn current_quick(_field: Field) -> Option<Fast> {
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

    pub(crate) fn restart_all() -> bool {
        false
    }

    impl Fast {
        pub(crate) fn index(self) -> usize {
            match self {}
        }

        pub(crate) fn add(self, _slots: &[CachePadded<AtomicU64>], _n: u64) -> Option<bool> {
            match self {}
        }

        pub(crate) fn add_if(
            self,
            _slots: &[CachePadded<AtomicU64>],
            _n: u64,
            _guard: &core::sync::atomic::AtomicU32,
            _expected: u32,
        ) -> Option<bool> {
            match self {}
        }

        pub(crate) fn push(self, _lists: &[CachePadded<List>], _item: *mut ()) -> Option<Pushed> {
            match self {}
        }

        pub(crate) fn pop(self, _lists: &[CachePadded<List>]) -> Option<Popped> {
            match self {}
        }

        pub(crate) fn push_quick(
            self,
            _lists: &[CachePadded<List>],
            _item: *mut (),
        ) -> Result<(), Missed> {
            match self {}
        }

        pub(crate) fn pop_quick(self, _lists: &[CachePadded<List>]) -> Result<*mut (), Missed> {
            match self {}
        }
    }

    /// No structure has a quick path in this build.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Quick;

    impl Quick {
        pub(crate) fn new(_source: IndexSource) -> Quick {
            Quick
        }

        #[inline]
        pub(crate) fn current(self) -> Option<Fast> {
            None
        }
    }

    /// No section ever runs in this build, so none ever misses.
    #[derive(Clone, Copy)]
    pub(crate) struct Missed;

    impl Missed {
        pub(crate) const UNTRIED: Missed = Missed;

        pub(crate) fn settle(self) {}
    }
}

pub(crate) use imp::{
    aborts, available, current, current_quick, field, registration, restart_all, thread_aborts,
    Missed, Quick,
};
