//! [`Slots`]: a space's objects by ID, readable without any lock an allocation takes.
//!
//! `PerCpu` keeps its ranges under per-CPU locks, which every allocation on that CPU takes. A
//! lookup that went through those locks would wait behind allocations (and behind the space's
//! directory, which carving writes). The kernel looks PIDs up under RCU instead. Here each ID has
//! a slot of its own: a tiny lock around the object, taken only by the lookup, by the allocation
//! that publishes that very ID and by the free that takes it back. The slots of a range of IDs
//! sit in one *block*, found through a two-level table of atomic pointers (chunks of block
//! pointers), so reaching a slot takes no lock at all.
//!
//! # Reclamation
//!
//! A block exists while its range is held by a CPU: the holder creates it on the range's first
//! publish and retires it when it gives the range back (every slot empty by then). Creation,
//! retirement, publishes and frees of one range all happen under its holder's CPU lock, and a
//! range has one holder at a time, so among themselves they never race. Lookups are what a
//! retirement must wait for: a lookup protects the block it reads with a hazard pointer (see
//! [`Hazards`]), and the retirer frees the block only once no hazard holds it. Chunks (a KiB
//! each, one per 32,768 IDs) and the top table stay until the allocator is dropped.

use core::ptr;

use super::hazards::Hazards;
use super::object::Pid;
use super::percpu::RANGE;
use super::PID_MAX_LIMIT;
use crate::sync::{exclusive_load, lock, Arc, AtomicPtr, Mutex, Ordering};

/// One ID's object, behind the ID's own lock.
pub(crate) type Slot = Mutex<Option<Pid>>;

/// Block pointers per chunk: the top level then has 128 entries for the default `RANGE` (a KiB
/// per space), and a chunk covers 32,768 IDs.
#[cfg(not(loom))]
const CHUNK: usize = 128;
/// Block pointers per chunk under loom, where `RANGE` is 4: keeps the top level at 1,024.
#[cfg(loom)]
const CHUNK: usize = 1024;

/// Range indices of the largest space.
const RANGES: usize = (PID_MAX_LIMIT as usize).div_ceil(RANGE as usize);
const CHUNKS: usize = RANGES.div_ceil(CHUNK);

/// A space's slots: a table of `CHUNKS` chunk pointers, each chunk `CHUNK` block pointers, each
/// block `RANGE` slots (a block pointer is null while no CPU holds the range, or before its
/// first publish).
pub(crate) struct Slots {
    chunks: Box<[AtomicPtr<AtomicPtr<Slot>>]>,
    /// The allocator's hazard pointers, shared by all its spaces.
    hazards: Arc<Hazards<Slot>>,
}

// SAFETY: the raw pointers own chunks of `AtomicPtr`s and blocks of `Mutex<Option<Pid>>`s, which
// are `Send + Sync` themselves; chunk pointers are written once and freed only in `drop` (with
// `&mut self`), and blocks are freed only when no lookup reads them (see the module docs).
unsafe impl Send for Slots {}
// SAFETY: see `Send`.
unsafe impl Sync for Slots {}

impl Slots {
    pub(crate) fn new(hazards: Arc<Hazards<Slot>>) -> Slots {
        Slots {
            chunks: (0..CHUNKS)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            hazards,
        }
    }

    /// The block pointer of range `range`, if its chunk exists.
    #[inline]
    fn entry(&self, range: usize) -> Option<&AtomicPtr<Slot>> {
        // Acquire pairs with the Release half of the compare-exchange in `install`: the chunk's
        // pointers are initialised before we read them.
        let chunk = self.chunks.get(range / CHUNK)?.load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // A non-null chunk pointer came from `install` with `CHUNK` initialised pointers, freed
        // only in `drop`.
        // SAFETY: so pointer `range % CHUNK` is live for as long as `self` is borrowed.
        Some(unsafe { &*chunk.add(range % CHUNK) })
    }

    /// The slot of `id` in `block`, a block installed for `id`'s range.
    ///
    /// # Safety
    /// `block` came from `install` with `RANGE` slots and is not freed while the returned
    /// reference lives: the caller holds the range's holder lock, or a hazard on `block`
    /// validated after publication.
    #[inline]
    unsafe fn slot(&self, block: *mut Slot, id: u32) -> &Slot {
        // SAFETY: the caller's contract; `id % RANGE` is within the block.
        unsafe { &*block.add((id % RANGE) as usize) }
    }

    /// The slot of `id` for a caller that holds the lock of the CPU holding `id`'s range: no
    /// retirement can run meanwhile.
    fn owned(&self, id: u32) -> Option<&Slot> {
        // Acquire pairs with the Release half of the compare-exchange in `install` (the block's
        // initialisation); under the holder's lock it is also ordered by that lock.
        let block = self.entry((id / RANGE) as usize)?.load(Ordering::Acquire);
        if block.is_null() {
            return None;
        }
        // SAFETY: installed for this range, and retired only under the lock the caller holds.
        Some(unsafe { self.slot(block, id) })
    }

    /// Puts `pid` in the slot of `id`, creating its block on the range's first publish. The
    /// caller holds the lock of the CPU holding `id`'s range.
    pub(crate) fn publish(&self, id: u32, pid: Pid) {
        let range = (id / RANGE) as usize;
        let Some(chunk) = self.chunks.get(range / CHUNK) else {
            return;
        };
        let chunk = install(chunk, CHUNK, || AtomicPtr::new(ptr::null_mut()));
        // As in `entry`: `install` returned a live chunk of `CHUNK` pointers.
        // SAFETY: so pointer `range % CHUNK` is live for as long as `self` is borrowed.
        let entry = unsafe { &*chunk.add(range % CHUNK) };
        let block = install(entry, RANGE as usize, || Mutex::new(None));
        // SAFETY: installed for this range just now, retired only under the lock we hold.
        *lock(unsafe { self.slot(block, id) }) = Some(pid);
    }

    /// Takes the object out of the slot of `id`. The caller holds the lock of the CPU holding
    /// `id`'s range.
    pub(crate) fn take(&self, id: u32) -> Option<Pid> {
        self.owned(id).and_then(|slot| lock(slot).take())
    }

    /// A handle on the object in the slot of `id`, for a caller holding the lock of the CPU
    /// holding `id`'s range.
    pub(crate) fn read_owned(&self, id: u32) -> Option<Pid> {
        self.owned(id).and_then(|slot| lock(slot).clone())
    }

    /// A handle on the object in the slot of `id`, from any thread, holding no lock but the
    /// slot's own.
    #[inline]
    pub(crate) fn read(&self, id: u32) -> Option<Pid> {
        let entry = self.entry((id / RANGE) as usize)?;
        // Relaxed: only a hint to skip the hazard for ranges without a block; the SeqCst load
        // below decides.
        let block = entry.load(Ordering::Relaxed);
        if block.is_null() {
            return None;
        }
        let hazard = self.hazards.protect(block);
        // SeqCst: after the hazard's publication in the single order (see `Hazards`), so a
        // retirer that uninstalled `block` before this load makes it fail, and one that does so
        // after it sees the hazard and waits. Also acquiring, for the block's initialisation.
        if entry.load(Ordering::SeqCst) != block {
            drop(hazard);
            // Retired meanwhile (or retired and replaced): the range was given back during the
            // lookup, with this ID free at that point.
            return None;
        }
        // SAFETY: installed for this range, and protected by the validated hazard until it is
        // withdrawn below, after the slot's lock is released.
        let slot = unsafe { self.slot(block, id) };
        let pid = lock(slot).clone();
        drop(hazard);
        pid
    }

    /// Frees the block of range `range`, whose slots are all empty, once no lookup reads it.
    /// The caller holds the lock of the CPU giving the range back.
    pub(crate) fn retire(&self, range: u32) {
        let Some(entry) = self.entry(range as usize) else {
            return;
        };
        // SeqCst: the retirer's half of the pattern in `Hazards`, ordered before its scan.
        let block = entry.swap(ptr::null_mut(), Ordering::SeqCst);
        if block.is_null() {
            return;
        }
        self.hazards.wait_unused(block);
        // Unreachable for new lookups (null), left by old ones (no hazard holds it), and
        // `block` came from `install` with `RANGE` slots.
        // SAFETY: so we own the block and may free it.
        drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(block, RANGE as usize)) });
    }

    /// Bytes of the table, its chunks and its blocks (counted, never read).
    pub(crate) fn memory_bytes(&self) -> usize {
        let mut bytes = self.chunks.len() * core::mem::size_of::<AtomicPtr<AtomicPtr<Slot>>>();
        for (index, chunk) in self.chunks.iter().enumerate() {
            // Relaxed: only whether it exists is counted.
            if chunk.load(Ordering::Relaxed).is_null() {
                continue;
            }
            bytes += CHUNK * core::mem::size_of::<AtomicPtr<Slot>>();
            for range in index * CHUNK..(index + 1) * CHUNK {
                // Relaxed, as above.
                if self
                    .entry(range)
                    .is_some_and(|entry| !entry.load(Ordering::Relaxed).is_null())
                {
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
    // Release pairs with the Acquire loads in `entry`, `owned` and above, and with the SeqCst
    // load in `read`: the array's initialisation happens before anyone reads it through the
    // pointer. SeqCst, since block pointers take part in the hazard pattern.
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
                // SAFETY: a non-null chunk holds `CHUNK` live pointers until freed below, and
                // `&mut self` makes this the only reference to them.
                let block = exclusive_load(unsafe { &mut *chunk.add(offset) });
                if !block.is_null() {
                    // SAFETY: `block` came from `Box::<[Slot]>::into_raw` with `RANGE` slots.
                    drop(unsafe {
                        Box::from_raw(ptr::slice_from_raw_parts_mut(block, RANGE as usize))
                    });
                }
            }
            // SAFETY: `chunk` came from `Box::<[AtomicPtr<Slot>]>::into_raw` with `CHUNK`
            // pointers.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(chunk, CHUNK)) });
        }
    }
}
