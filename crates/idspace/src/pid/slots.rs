//! [`Slots`]: a space's objects by ID, readable without any lock an allocation takes.
//!
//! `PerCpu` keeps its ranges under per-CPU locks, which every allocation on that CPU takes. A
//! lookup that went through those locks would wait behind allocations (and behind the space's
//! directory, which carving writes). The kernel looks PIDs up under RCU instead, and so do we:
//! each ID has a slot of its own, two atomic words (the object and its number of levels) that
//! only the holder of the ID's range writes (publishing the object, or taking it out to free
//! it) and that a lookup reads without writing, validating the pair by reading the pointer
//! again; its one write is the object's reference count. The slots of a range of IDs sit in one
//! *block*, found through a two-level table of atomic pointers (chunks of block pointers), so
//! reaching a slot takes no lock at all.
//!
//! # Reclamation
//!
//! A block exists while its range is held by a CPU: the holder creates it on the range's first
//! publish and unlinks it when it gives the range back (every slot empty by then). Creation,
//! unlinking, publishes and frees of one range all happen under its holder's CPU lock, and a
//! range has one holder at a time, so among themselves they never race. Lookups are what
//! freeing must wait for: a lookup runs in a read-side section (see [`Readers`]); an unlinked
//! block ([`RetiredBlock`]) and the slot's reference to an object taken out of it are dropped
//! only after a grace period, by the CPU's limbo (an allocation or a free never waits for a
//! lookup) or by `free_ns`. So a lookup that races the free of its ID, and even the ID's
//! reallocation, finds the old object, nothing, or the new one, as `find_pid_ns` under RCU
//! does; the object it returns may be one being freed, as in the kernel. Chunks (a KiB each,
//! one per 32,768 IDs) and the top table stay until the space is freed.
//!
//! [`Readers`]: crate::util::readers::Readers

use crate::prelude::*;
use core::ptr;

use super::object::Pid;
use super::percpu::RANGE;
use super::{NsId, PID_MAX_LIMIT};
#[cfg(loom)]
use crate::sync::UnsafeCell;
use crate::sync::{exclusive_load, AtomicPtr, AtomicUsize, Ordering};
use crate::util::readers::Section;

/// One ID's object, in two atomic words that lookups read without writing: the object's levels
/// (an `Arc<[(NsId, u32)]>`'s data, null while the ID has no published object) and their
/// count. The slot holds one reference to the object; a writer that empties the slot keeps
/// that reference alive until a grace period has passed (the CPU's limbo), as the kernel frees
/// a `struct pid` through `call_rcu`, so that a lookup may still take a reference of its own.
pub(crate) struct Slot {
    object: AtomicPtr<(NsId, u32)>,
    len: AtomicUsize,
    /// Under loom, lookups read it and freeing the slot writes it, so that a model reports a
    /// lookup not ordered before the block's freeing (a grace period too short).
    #[cfg(loom)]
    witness: UnsafeCell<()>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            object: AtomicPtr::new(ptr::null_mut()),
            len: AtomicUsize::new(0),
            #[cfg(loom)]
            witness: UnsafeCell::new(()),
        }
    }

    /// Stores `pid` in the empty slot. Only the holder of the slot's range writes it.
    fn store(&self, pid: Pid) {
        let (levels, len) = pid.into_raw();
        // Release pairs with the Acquire load of `len` in `read`: see there.
        self.len.store(len, Ordering::Release);
        // Relaxed: only the holder writes the slot (a plain store, no locked instruction).
        debug_assert!(
            self.object.load(Ordering::Relaxed).is_null(),
            "an ID is published only while its slot is empty"
        );
        // Release pairs with the Acquire loads of `object`: the object and its count are
        // written before a reader finds the pointer.
        self.object.store(levels.cast_mut(), Ordering::Release);
    }

    /// Empties the slot, returning its reference. Only the holder of the slot's range writes it.
    fn take(&self) -> Option<Pid> {
        // Relaxed: the holder is the only writer, so a load and a store do (no locked
        // instruction); the grace period that keeps the object alive for readers begins with a
        // `SeqCst` fence after the store (`Readers::snapshot`).
        let levels = self.object.load(Ordering::Relaxed);
        if levels.is_null() {
            return None;
        }
        self.object.store(ptr::null_mut(), Ordering::Relaxed);
        // Relaxed: written by this slot's writer (the holder, ordered by its lock) before the
        // pointer.
        let len = self.len.load(Ordering::Relaxed);
        // SAFETY: stored by `store` from `into_raw`, and the slot's reference is ours now.
        Some(unsafe { Pid::from_raw(levels, len) })
    }

    /// A handle on the object, for the holder of the slot's range (the slot's reference keeps
    /// it alive: only the holder takes it).
    fn read_owned(&self) -> Option<Pid> {
        // Relaxed: the holder is the only writer, ordered by its lock.
        let levels = self.object.load(Ordering::Relaxed);
        if levels.is_null() {
            return None;
        }
        // Relaxed, as above.
        let len = self.len.load(Ordering::Relaxed);
        // SAFETY: stored by `store` from `into_raw`; alive, since the slot holds a reference.
        Some(unsafe { Pid::clone_raw(levels, len) })
    }

    /// A handle on the object, from a lookup in a read-side section entered before its block
    /// was loaded: the object it finds is freed only after the section ends.
    #[inline]
    fn read(&self, _section: &Section<'_>) -> Option<Pid> {
        #[cfg(loom)]
        self.witness.with(|_| ());
        loop {
            // Acquire pairs with the Release store in `store`: the object and its count are
            // visible.
            let levels = self.object.load(Ordering::Acquire);
            if levels.is_null() {
                return None;
            }
            // Acquire pairs with the Release store in `store` of a later object: if the count
            // read is a later object's, the emptying of the slot before it happens before the
            // load below, which then cannot return `levels` again.
            let len = self.len.load(Ordering::Acquire);
            // Relaxed: only compared; see the line above.
            if self.object.load(Ordering::Relaxed) == levels {
                // The pointer did not change around the count, so the count is `levels`' own:
                // a later object has another address, since `levels` cannot be freed (hence
                // reused) before our section ends.
                // SAFETY: stored by `store` from `into_raw`, and alive: the slot's reference,
                // or the limbo's after a take, lasts until our section ends.
                return Some(unsafe { Pid::clone_raw(levels, len) });
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        #[cfg(loom)]
        self.witness.with_mut(|_| ());
        // Exclusive access: an allocator being dropped, or a block freed after a grace period.
        let levels = exclusive_load(&mut self.object);
        if !levels.is_null() {
            // Relaxed: exclusive access, as above.
            let len = self.len.load(Ordering::Relaxed);
            // SAFETY: stored by `store` from `into_raw`; the slot's reference goes with it.
            drop(unsafe { Pid::from_raw(levels, len) });
        }
    }
}

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
}

// SAFETY: the raw pointers own chunks of `AtomicPtr`s and blocks of `Slot`s, whose objects are
// only reached under their slot's lock; chunk pointers are written once and freed only in
// `drop` (with `&mut self`), and blocks are freed only after a grace period (see the module
// docs).
unsafe impl Send for Slots {}
// SAFETY: see `Send`.
unsafe impl Sync for Slots {}

/// A block unlinked from its space's table: freed when dropped, which the owner does only once
/// no lookup can still read it (after a grace period).
pub(crate) struct RetiredBlock(*mut Slot);

// SAFETY: the block is owned (unlinked, and no longer written by anyone), and its slots hold
// `Pid`s, which are `Send`.
unsafe impl Send for RetiredBlock {}

impl RetiredBlock {
    /// Bytes the block holds.
    pub(crate) const BYTES: usize = RANGE as usize * core::mem::size_of::<Slot>();
}

impl Drop for RetiredBlock {
    fn drop(&mut self) {
        // `self.0` came from `install` with `RANGE` slots, and whoever drops a retired block
        // has waited for a grace period since it was unlinked (see the type's docs).
        // SAFETY: so we own the block and free it once.
        drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(self.0, RANGE as usize)) });
    }
}

impl Slots {
    pub(crate) fn new() -> Slots {
        Slots {
            chunks: (0..CHUNKS)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
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
    /// reference lives: the caller holds the range's holder lock, or is in a read-side section
    /// that began before it loaded `block` from the table.
    #[inline]
    unsafe fn slot(&self, block: *mut Slot, id: u32) -> &Slot {
        // SAFETY: the caller's contract; `id % RANGE` is within the block.
        unsafe { &*block.add((id % RANGE) as usize) }
    }

    /// The slot of `id` for a caller that holds the lock of the CPU holding `id`'s range: no
    /// unlinking can run meanwhile.
    fn owned(&self, id: u32) -> Option<&Slot> {
        // Acquire pairs with the Release half of the compare-exchange in `install` (the block's
        // initialisation); under the holder's lock it is also ordered by that lock.
        let block = self.entry((id / RANGE) as usize)?.load(Ordering::Acquire);
        if block.is_null() {
            return None;
        }
        // SAFETY: installed for this range, and unlinked only under the lock the caller holds.
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
        let block = install(entry, RANGE as usize, Slot::new);
        // SAFETY: installed for this range just now, unlinked only under the lock we hold.
        unsafe { self.slot(block, id) }.store(pid);
    }

    /// Takes the object out of the slot of `id`, with the slot's reference, which the caller
    /// keeps alive until a grace period has passed (lookups may still be taking references of
    /// their own). The caller holds the lock of the CPU holding `id`'s range.
    pub(crate) fn take(&self, id: u32) -> Option<Pid> {
        self.owned(id).and_then(Slot::take)
    }

    /// A handle on the object in the slot of `id`, for a caller holding the lock of the CPU
    /// holding `id`'s range.
    pub(crate) fn read_owned(&self, id: u32) -> Option<Pid> {
        self.owned(id).and_then(Slot::read_owned)
    }

    /// A handle on the object in the slot of `id`, from any thread, in a read-side section
    /// entered before this call: no lock, and no write but the object's reference count.
    #[inline]
    pub(crate) fn read(&self, id: u32, section: &Section<'_>) -> Option<Pid> {
        // Acquire pairs with the Release half of the compare-exchange in `install`, for the
        // block's initialisation. Loaded inside the section, after its fence: a block unlinked
        // before that fence reads as null here, and one unlinked after it is freed only once
        // the section has ended.
        let block = self.entry((id / RANGE) as usize)?.load(Ordering::Acquire);
        if block.is_null() {
            return None;
        }
        // SAFETY: installed for this range, and not freed before the section ends (see above).
        unsafe { self.slot(block, id) }.read(section)
    }

    /// Unlinks the block of range `range`, whose slots are all empty, for the caller to free
    /// after a grace period. The caller holds the lock of the CPU giving the range back.
    pub(crate) fn retire(&self, range: u32) -> Option<RetiredBlock> {
        let entry = self.entry(range as usize)?;
        // SeqCst: the writer's half of the pattern in `Readers` (with the `SeqCst` fence of the
        // grace period's snapshot, taken after this unlink).
        let block = entry.swap(ptr::null_mut(), Ordering::SeqCst);
        // Not `bool::then_some`: it would build (and drop, freeing) the block for a null one.
        if block.is_null() {
            None
        } else {
            Some(RetiredBlock(block))
        }
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
    // Release pairs with the Acquire loads in `entry`, `owned`, `read` and above: the array's
    // initialisation happens before anyone reads it through the pointer.
    match pointer.compare_exchange(ptr::null_mut(), fresh, Ordering::Release, Ordering::Acquire) {
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
