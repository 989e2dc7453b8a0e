//! [`Slots`]: a space's objects by ID, readable without any lock an allocation takes.
//!
//! `PerCpu` keeps its ranges under per-CPU locks, which every allocation on that CPU takes. A
//! lookup that went through those locks would wait behind allocations (and behind the space's
//! directory, which carving writes). The kernel looks PIDs up under RCU instead. Here each ID has
//! a slot of its own: a tiny lock around the object, taken only by the lookup, by the allocation
//! that publishes that very ID and by the free that takes it back. The slots of a range of IDs
//! sit in one *block*, found through a two-level table of atomic pointers (chunks of entries),
//! so reaching a slot takes no lock at all.
//!
//! # Reclamation
//!
//! A block exists while its range is held by a CPU: the holder creates it on the range's first
//! publish and retires it when it gives the range back (every slot empty by then). Both happen
//! under the holder's CPU lock, and a range has one holder at a time, so creation and
//! retirement of one block never race each other. Readers are what a retirement must wait for,
//! and each chunk entry counts its readers, Dekker style:
//!
//! * a reader increments the entry's count, *then* loads the block pointer (both `SeqCst`);
//! * the retirer swaps the pointer to null, *then* waits for the count to reach 0 (`SeqCst`).
//!
//! In the single order of `SeqCst` operations, either the reader's increment comes first (the
//! retirer waits for it) or the retirer's swap does (the reader sees null and reads nothing). A
//! reader holds its count only while it clones one object, so the wait is short; lookups never
//! wait at all. Chunks (a KiB each, one per 32,768 IDs) and the top table stay until the
//! allocator is dropped.

use core::ptr;

use super::object::Pid;
use super::percpu::RANGE;
use super::PID_MAX_LIMIT;
use crate::sync::{exclusive_load, lock, spin_wait, AtomicPtr, AtomicUsize, Mutex, Ordering};

/// One ID's object, behind the ID's own lock.
type Slot = Mutex<Option<Pid>>;

/// Entries per chunk: the top level then has 128 entries for the default `RANGE` (a KiB per
/// space), and a chunk covers 32,768 IDs.
#[cfg(not(loom))]
const CHUNK: usize = 128;
/// Entries per chunk under loom, where `RANGE` is 4: keeps the top level at 1,024 entries.
#[cfg(loom)]
const CHUNK: usize = 1024;

/// Range indices of the largest space.
const RANGES: usize = (PID_MAX_LIMIT as usize).div_ceil(RANGE as usize);
const CHUNKS: usize = RANGES.div_ceil(CHUNK);

/// A range's place in a chunk: its block of `RANGE` slots (null while no CPU holds the range
/// or before its first publish), and the readers using the block.
struct Entry {
    block: AtomicPtr<Slot>,
    readers: AtomicUsize,
}

impl Entry {
    fn new() -> Entry {
        Entry {
            block: AtomicPtr::new(ptr::null_mut()),
            readers: AtomicUsize::new(0),
        }
    }
}

/// A space's slots: a table of `CHUNKS` chunk pointers, each chunk `CHUNK` entries, each entry
/// one range's block of `RANGE` slots.
pub(crate) struct Slots {
    chunks: Box<[AtomicPtr<Entry>]>,
}

// SAFETY: the raw pointers own chunks of `Entry`s and blocks of `Mutex<Option<Pid>>`s, which are
// `Send + Sync` themselves; chunk pointers are written once and freed only in `drop` (with
// `&mut self`), and blocks are freed only after their readers are gone (see the module docs).
unsafe impl Send for Slots {}
// SAFETY: see `Send`.
unsafe impl Sync for Slots {}

impl Slots {
    pub(crate) fn new() -> Slots {
        Slots {
            chunks: (0..CHUNKS)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
        }
    }

    /// The entry of range `range`, if its chunk exists.
    #[inline]
    fn entry(&self, range: usize) -> Option<&Entry> {
        // Acquire pairs with the Release compare-exchange in `install`: the chunk's entries are
        // initialised before we read them.
        let chunk = self.chunks.get(range / CHUNK)?.load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // A non-null chunk pointer came from `install` with `CHUNK` initialised entries, freed
        // only in `drop`.
        // SAFETY: so entry `range % CHUNK` is live for as long as `self` is borrowed.
        Some(unsafe { &*chunk.add(range % CHUNK) })
    }

    /// The entry of range `range`, creating its chunk first if needed. `None` only for a range
    /// beyond `PID_MAX_LIMIT`, which no space hands out.
    fn entry_or_create(&self, range: usize) -> Option<&Entry> {
        let chunk = install(self.chunks.get(range / CHUNK)?, CHUNK, Entry::new);
        // As in `entry`: `install` returned a live chunk of `CHUNK` entries.
        // SAFETY: so entry `range % CHUNK` is live for as long as `self` is borrowed.
        Some(unsafe { &*chunk.add(range % CHUNK) })
    }

    /// Runs `f` on the slot of `id`, counted as a reader of its block; `None` if the block does
    /// not exist.
    #[inline]
    fn with_slot<R>(&self, id: u32, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let entry = self.entry((id / RANGE) as usize)?;
        // SeqCst: the reader's half of the Dekker pattern with `retire` (module docs): the
        // increment is ordered before the pointer load in the single SeqCst order.
        entry.readers.fetch_add(1, Ordering::SeqCst);
        let block = entry.block.load(Ordering::SeqCst);
        let result = if block.is_null() {
            None
        } else {
            // The block came from `install` with `RANGE` slots, and `retire` cannot free it
            // before our count is withdrawn below (module docs).
            // SAFETY: so slot `id % RANGE` is live during `f`.
            Some(f(unsafe { &*block.add((id % RANGE) as usize) }))
        };
        // Release pairs with the SeqCst (acquiring) loads of the count in `retire`: our use of
        // the block happens before its free.
        entry.readers.fetch_sub(1, Ordering::Release);
        result
    }

    /// Puts `pid` in the slot of `id`, creating its block on the range's first publish. The
    /// caller holds the lock of the CPU holding `id`'s range.
    pub(crate) fn publish(&self, id: u32, pid: Pid) {
        let Some(entry) = self.entry_or_create((id / RANGE) as usize) else {
            return;
        };
        install(&entry.block, RANGE as usize, || Mutex::new(None));
        self.with_slot(id, |slot| *lock(slot) = Some(pid));
    }

    /// Takes the object out of the slot of `id`.
    pub(crate) fn take(&self, id: u32) -> Option<Pid> {
        self.with_slot(id, |slot| lock(slot).take()).flatten()
    }

    /// A handle on the object in the slot of `id`.
    #[inline]
    pub(crate) fn read(&self, id: u32) -> Option<Pid> {
        self.with_slot(id, |slot| lock(slot).clone()).flatten()
    }

    /// Frees the block of range `range`, whose slots are all empty, once no reader uses it.
    /// The caller holds the lock of the CPU giving the range back.
    pub(crate) fn retire(&self, range: u32) {
        let Some(entry) = self.entry(range as usize) else {
            return;
        };
        // SeqCst: the retirer's half of the Dekker pattern (module docs): the swap is ordered
        // before the loads of the count below.
        let block = entry.block.swap(ptr::null_mut(), Ordering::SeqCst);
        if block.is_null() {
            return;
        }
        // SeqCst (acquiring) pairs with the readers' Release decrements: a reader that saw the
        // block is done with it once the count reads 0.
        while entry.readers.load(Ordering::SeqCst) != 0 {
            spin_wait();
        }
        // Unreachable for new readers (null), left by old ones (count 0), and `block` came from
        // `install` with `RANGE` slots.
        // SAFETY: so we own the block and may free it.
        drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(block, RANGE as usize)) });
    }

    /// Bytes of the table, its chunks and its blocks.
    pub(crate) fn memory_bytes(&self) -> usize {
        let mut bytes = self.chunks.len() * core::mem::size_of::<AtomicPtr<Entry>>();
        for (index, chunk) in self.chunks.iter().enumerate() {
            // Acquire: as in `entry`.
            if chunk.load(Ordering::Acquire).is_null() {
                continue;
            }
            bytes += CHUNK * core::mem::size_of::<Entry>();
            for range in index * CHUNK..(index + 1) * CHUNK {
                let first = range as u32 * RANGE;
                if self.with_slot(first, |_| ()).is_some() {
                    bytes += RANGE as usize * core::mem::size_of::<Slot>();
                }
            }
        }
        bytes
    }
}

/// The array `pointer` points at, first allocating `len` elements made by `make` and installing
/// them if it is null. Of two racing installers one wins; the other frees its array.
fn install<E>(pointer: &AtomicPtr<E>, len: usize, make: impl Fn() -> E) -> *mut E {
    // Acquire pairs with the Release half of the compare-exchange below, of whoever installed.
    let current = pointer.load(Ordering::Acquire);
    if !current.is_null() {
        return current;
    }
    let fresh: Box<[E]> = (0..len).map(|_| make()).collect();
    let fresh = Box::into_raw(fresh).cast::<E>();
    // Release pairs with the Acquire loads in `entry`, `with_slot` and above: the array's
    // initialisation happens before anyone reads it through the pointer. SeqCst (which is
    // both) because blocks take part in the Dekker pattern of `with_slot` and `retire`.
    match pointer.compare_exchange(ptr::null_mut(), fresh, Ordering::SeqCst, Ordering::Acquire) {
        Ok(_) => fresh,
        Err(winner) => {
            // Our array was never shared.
            // SAFETY: `fresh` came from `Box::<[E]>::into_raw` with exactly `len` elements.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, len)) });
            winner
        }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // `&mut self`: no reader is left, so the pointers are read without atomic operations.
        for chunk in self.chunks.iter_mut() {
            let chunk = exclusive_load(chunk);
            if chunk.is_null() {
                continue;
            }
            for offset in 0..CHUNK {
                // SAFETY: a non-null chunk holds `CHUNK` live entries until freed below, and
                // `&mut self` makes this the only reference to them.
                let block = exclusive_load(unsafe { &mut (*chunk.add(offset)).block });
                if !block.is_null() {
                    // SAFETY: `block` came from `Box::<[Slot]>::into_raw` with `RANGE` slots.
                    drop(unsafe {
                        Box::from_raw(ptr::slice_from_raw_parts_mut(block, RANGE as usize))
                    });
                }
            }
            // SAFETY: `chunk` came from `Box::<[Entry]>::into_raw` with `CHUNK` entries.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(chunk, CHUNK)) });
        }
    }
}
