//! A list of spaces that readers walk without any lock: chunks of atomic pointers. Values are
//! appended (their index never reused) and may be unlinked again; chunks are freed only when
//! the list is dropped. Whoever unlinks a value decides when it may be freed: `PerCpu` waits
//! until no hazard holds it (see `Hazards`) and for a grace period of its lookups (see
//! `Readers`).

use crate::prelude::*;
use core::ptr;

use crate::lock::{Locks, Mutex};
use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

const CHUNK: usize = 64;
#[cfg(not(loom))]
const CHUNKS: usize = 1024;
#[cfg(loom)]
const CHUNKS: usize = 2;

/// Spaces one list holds at most.
pub(crate) const CAPACITY: usize = CHUNK * CHUNKS;

type Chunk<T> = [AtomicPtr<T>; CHUNK];

pub(crate) struct SpaceList<T, L: Locks> {
    chunks: Box<[AtomicPtr<Chunk<T>>]>,
    len: AtomicUsize,
    /// Serialises appends.
    append: Mutex<L, ()>,
}

// SAFETY: the list owns its `T`s (boxed, published through atomics) and hands out only `&T`,
// so it is as thread-safe as `T` is `Send + Sync`.
unsafe impl<T: Send + Sync, L: Locks> Send for SpaceList<T, L> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync, L: Locks> Sync for SpaceList<T, L> {}

impl<T, L: Locks> SpaceList<T, L> {
    pub(crate) fn new() -> Self {
        SpaceList {
            chunks: (0..CHUNKS)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            len: AtomicUsize::new(0),
            append: crate::lock::mutex::<L, _>(()),
        }
    }

    /// Appends `value`; its index, or `None` when the list is full.
    pub(crate) fn push(&self, value: T) -> Option<usize> {
        let _appending = self.append.lock();
        let index = self.len.load(Ordering::Relaxed);
        if index >= CAPACITY {
            return None;
        }
        let slot = &self.chunks[index / CHUNK];
        let mut chunk = slot.load(Ordering::Acquire);
        if chunk.is_null() {
            let fresh: Box<Chunk<T>> =
                Box::new(core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())));
            chunk = Box::into_raw(fresh);
            // Release pairs with the Acquire load in `get`: the chunk's null slots are
            // initialised before anyone can reach them.
            slot.store(chunk, Ordering::Release);
        }
        // `chunk` was published by an append (under this lock) and is freed only in `drop`.
        // SAFETY: `chunk` is non-null and lives as long as `self`.
        let entry = unsafe { &(*chunk)[index % CHUNK] };
        // Release pairs with the Acquire load in `get`: the value is initialised before it is
        // reachable.
        entry.store(Box::into_raw(Box::new(value)), Ordering::Release);
        // Release pairs with the Acquire load in `len`.
        self.len.store(index + 1, Ordering::Release);
        Some(index)
    }

    /// Indices handed out so far: every index below it was appended (and may be unlinked).
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// The pointer cell of `index`, if its chunk exists. Null: not appended yet, or unlinked.
    #[inline]
    pub(crate) fn entry(&self, index: usize) -> Option<&AtomicPtr<T>> {
        // Acquire pairs with the Release stores in `push`.
        let chunk = self.chunks.get(index / CHUNK)?.load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: a published chunk lives until `drop`, which needs `&mut self`.
        Some(unsafe { &(*chunk)[index % CHUNK] })
    }

    /// The value at `index`, if appended and not unlinked.
    ///
    /// # Safety
    /// The value must not be freed while the returned reference lives: the caller holds a
    /// hazard on it, validated after publication, or holds what keeps it from being unlinked
    /// and freed (see the caller's comment).
    #[inline]
    pub(crate) unsafe fn get(&self, index: usize) -> Option<&T> {
        // Acquire pairs with the Release store in `push`: the value is initialised.
        let value = self.entry(index)?.load(Ordering::Acquire);
        // SAFETY: non-null values are live boxes; the caller keeps this one from being freed.
        (!value.is_null()).then(|| unsafe { &*value })
    }

    /// Unlinks the value at `index` and hands back its box pointer (null if none). The caller
    /// frees it once no reader can hold it.
    pub(crate) fn unlink(&self, index: usize) -> *mut T {
        match self.entry(index) {
            // SeqCst: the retirer's half of the hazard pattern (see `Hazards`) and of the grace
            // period's (see `Readers`), ordered before the caller's scans.
            Some(entry) => entry.swap(ptr::null_mut(), Ordering::SeqCst),
            None => ptr::null_mut(),
        }
    }
}

impl<T, L: Locks> Drop for SpaceList<T, L> {
    fn drop(&mut self) {
        for slot in self.chunks.iter() {
            let chunk = slot.load(Ordering::Acquire);
            if chunk.is_null() {
                continue;
            }
            // `&mut self` means no reference into the chunk remains.
            // SAFETY: `chunk` came from `Box::into_raw` in `push` and is reclaimed once, here.
            let chunk = unsafe { Box::from_raw(chunk) };
            for entry in chunk.iter() {
                let value = entry.load(Ordering::Acquire);
                if !value.is_null() {
                    // SAFETY: as above, for the value boxed in `push`.
                    drop(unsafe { Box::from_raw(value) });
                }
            }
        }
    }
}
