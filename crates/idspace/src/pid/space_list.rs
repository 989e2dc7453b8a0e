//! An append-only list of spaces that readers walk without any lock: chunks of atomic
//! pointers, each published once and freed only when the list is dropped.

use core::ptr;

use crate::sync::{lock, AtomicPtr, AtomicUsize, Mutex, Ordering};

const CHUNK: usize = 64;
#[cfg(not(loom))]
const CHUNKS: usize = 1024;
#[cfg(loom)]
const CHUNKS: usize = 2;

/// Spaces one list holds at most.
pub(crate) const CAPACITY: usize = CHUNK * CHUNKS;

type Chunk<T> = [AtomicPtr<T>; CHUNK];

pub(crate) struct SpaceList<T> {
    chunks: Box<[AtomicPtr<Chunk<T>>]>,
    len: AtomicUsize,
    /// Serialises appends.
    append: Mutex<()>,
}

// SAFETY: the list owns its `T`s (boxed, published through atomics) and hands out only `&T`,
// so it is as thread-safe as `T` is `Send + Sync`.
unsafe impl<T: Send + Sync> Send for SpaceList<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for SpaceList<T> {}

impl<T> SpaceList<T> {
    pub(crate) fn new() -> Self {
        SpaceList {
            chunks: (0..CHUNKS)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            len: AtomicUsize::new(0),
            append: Mutex::new(()),
        }
    }

    /// Appends `value`; its index, or `None` when the list is full.
    pub(crate) fn push(&self, value: T) -> Option<usize> {
        let _appending = lock(&self.append);
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

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// The value at `index`, if appended.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        // Acquire pairs with the Release stores in `push`.
        let chunk = self.chunks.get(index / CHUNK)?.load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: a published chunk lives until `drop`, which needs `&mut self`.
        let value = unsafe { &(*chunk)[index % CHUNK] }.load(Ordering::Acquire);
        // SAFETY: a published value lives until `drop`; it is never mutated through the list.
        (!value.is_null()).then(|| unsafe { &*value })
    }
}

impl<T> Drop for SpaceList<T> {
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
