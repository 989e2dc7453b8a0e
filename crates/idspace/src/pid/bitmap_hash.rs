//! [`BitmapHash`]: FreeBSD's shape. Allocation is a few bit operations on flat bitmaps under one
//! lock; lookup goes through a hash table whose buckets are guarded by striped read-write locks
//! and never touches the allocation lock.

use crate::prelude::*;
use hashbrown::HashMap;

use super::level::IdSpace;
use super::object::Pid;
use super::spaces::{Spaces, Taken};
use super::{NsId, PidAllocator, PidError};
use crate::lock::{DefaultLocks, Locks, Mutex, RwLock};
use crate::sync::{AtomicUsize, Ordering};
use crate::util::hash::{mix, BuildIntHasher};
use crossbeam_utils::CachePadded;

/// A flat bitmap of taken IDs, grown to cover `pid_max` as IDs are reserved.
#[derive(Default)]
pub(crate) struct Bitmap {
    words: Vec<u64>,
}

impl IdSpace for Bitmap {
    fn is_taken(&self, id: u32) -> bool {
        self.words
            .get(id as usize / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }
    fn first_free(&self, from: u32, end: u32) -> Option<u32> {
        let mut id = from;
        while id < end {
            let word = self.words.get(id as usize / 64).copied().unwrap_or(0);
            // Bits below `id` in this word count as taken.
            let taken = word | ((1u64 << (id % 64)) - 1);
            if taken != u64::MAX {
                let found = (id / 64) * 64 + taken.trailing_ones();
                return (found < end).then_some(found);
            }
            id = (id / 64 + 1) * 64;
        }
        None
    }
    fn reserve(&mut self, id: u32) {
        let word = id as usize / 64;
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << (id % 64);
    }
    fn release(&mut self, id: u32) {
        if let Some(word) = self.words.get_mut(id as usize / 64) {
            *word &= !(1 << (id % 64));
        }
    }
    /// Reservations are made and published (or released) in one hold of the allocation lock,
    /// so a holder of the lock sees only the bits of published objects.
    fn holds_objects(&self) -> bool {
        !self.is_empty()
    }
}

impl Bitmap {
    fn is_empty(&self) -> bool {
        self.words.iter().all(|&word| word == 0)
    }
}

const STRIPES: usize = 64;

/// One stripe of the lookup hash: (space, ID) to object.
type Stripe<L> = RwLock<L, HashMap<(NsId, u32), Pid, BuildIntHasher>>;

/// FreeBSD's `pidhashtbl` with its array of `sx` locks: (space, ID) to object, striped.
struct Striped<L: Locks> {
    stripes: Box<[CachePadded<Stripe<L>>]>,
}

impl<L: Locks> Striped<L> {
    fn new() -> Self {
        Striped {
            stripes: (0..STRIPES)
                .map(|_| CachePadded::new(crate::lock::rwlock::<L, _>(HashMap::default())))
                .collect(),
        }
    }

    /// Removes (ns, id); a stripe that falls to a quarter full gives memory back, so that a
    /// table that once held many objects does not keep their space (an emptied stripe gives
    /// all of it back).
    fn remove(&self, ns: NsId, id: u32) -> Option<Pid> {
        let mut map = self.stripe(ns, id).write();
        let pid = map.remove(&(ns, id));
        if map.len() <= map.capacity() / 4 {
            let keep = map.len() * 2;
            map.shrink_to(keep);
        }
        pid
    }

    fn stripe(&self, ns: NsId, id: u32) -> &Stripe<L> {
        let hash = mix(u64::from(ns), id);
        &self.stripes[(hash >> 58) as usize % STRIPES]
    }
}

/// FreeBSD's design: flat bitmaps under one allocation lock, a striped hash for lookup.
///
/// Its numbers are the kernel's: the first free one at or after the cursor.
///
/// ```
/// use idspace::pid::{BitmapHash, PidAllocator, PidError, ROOT};
///
/// let pids = BitmapHash::new();
/// for expected in 1..=3 {
///     assert_eq!(pids.alloc(ROOT, &[], 0)?.ids(), [expected]);
/// }
/// pids.free(ROOT, 2, 0)?;
/// // Cyclic: the cursor goes on, 2 is not reused yet.
/// assert_eq!(pids.alloc(ROOT, &[], 0)?.ids(), [4]);
/// assert!(pids.lookup(ROOT, 2)?.is_none());
/// assert_eq!(pids.lookup(ROOT, 4)?.map(|p| p.ids()), Some(vec![4]));
/// assert!(pids.memory_bytes() > 0);
/// # Ok::<(), PidError>(())
/// ```
pub struct BitmapHash<L: Locks = DefaultLocks> {
    spaces: Mutex<L, Spaces<Bitmap>>,
    /// Spaces created so far: lookups check a space number without the allocation lock.
    count: AtomicUsize,
    hash: Striped<L>,
}

impl BitmapHash {
    /// An allocator with only the root space.
    pub fn new() -> Self {
        Self::with_locks()
    }
}

impl<L: Locks> BitmapHash<L> {
    /// An allocator with only the root space, on the locks `L` (see [`lock`](crate::lock)).
    pub fn with_locks() -> Self {
        BitmapHash {
            spaces: crate::lock::mutex::<L, _>(Spaces::new()),
            count: AtomicUsize::new(1),
            hash: Striped::new(),
        }
    }
}

impl Default for BitmapHash {
    fn default() -> Self {
        Self::new()
    }
}

impl<L: Locks> PidAllocator for BitmapHash<L> {
    fn name(&self) -> &'static str {
        "bitmap-hash"
    }

    fn new_ns(&self, parent: NsId) -> Result<NsId, PidError> {
        let ns = self.spaces.lock().add(parent)?;
        // Release pairs with the Acquire loads in `lookup` and `free`: a space is counted once
        // it exists. Numbers are never reused, so the count only grows.
        self.count.store(ns as usize + 1, Ordering::Release);
        Ok(ns)
    }

    fn set_pid_max(&self, ns: NsId, max: u32) -> Result<(), PidError> {
        self.spaces.lock().set_pid_max(ns, max)
    }

    fn alloc(&self, ns: NsId, set_tid: &[u32], _cpu: usize) -> Result<Pid, PidError> {
        let taken = {
            let mut spaces = self.spaces.lock();
            let chain = spaces.chain(ns, set_tid)?;
            let mut taken = Taken::new();
            for index in 0..chain.len() {
                if let Err(error) = spaces.alloc_at(&chain, index, set_tid, &mut taken) {
                    spaces.fail(ns, &taken);
                    return Err(error);
                }
            }
            spaces.finish(&taken)?;
            taken
        };
        // Publish outside the allocation lock: the bits keep the IDs reserved meanwhile.
        let pid = Pid::new(&taken);
        for &(space, id) in &taken {
            self.hash
                .stripe(space, id)
                .write()
                .insert((space, id), pid.clone());
        }
        Ok(pid)
    }

    fn alloc_refused(&self, ns: NsId, set_tid: &[u32], _cpu: usize) -> PidError {
        self.spaces.lock().refused(ns, set_tid)
    }

    fn free(&self, ns: NsId, id: u32, _cpu: usize) -> Result<(), PidError> {
        if ns as usize >= self.count.load(Ordering::Acquire) {
            return Err(PidError::UnknownNs);
        }
        // Whoever removes the entry named by the caller owns the free; a concurrent free of
        // the same object finds it gone.
        let Some(pid) = self.hash.remove(ns, id) else {
            // The error path may take the lock: a freed space says so.
            return match self.spaces.lock().get(ns) {
                Err(PidError::NamespaceFreed) => Err(PidError::NamespaceFreed),
                _ => Err(PidError::NotFound),
            };
        };
        for &(space, number) in pid.levels() {
            if (space, number) != (ns, id) {
                self.hash.remove(space, number);
            }
        }
        // Unpublished first, then the bits: an ID is never free while still in the hash.
        let mut spaces = self.spaces.lock();
        for &(space, number) in pid.levels() {
            spaces.at(space).ids.release(number);
            spaces.note_freed(space, number);
        }
        Ok(())
    }

    fn lookup(&self, ns: NsId, id: u32) -> Result<Option<Pid>, PidError> {
        // Acquire pairs with the Release store in `new_ns`.
        if ns as usize >= self.count.load(Ordering::Acquire) {
            return Err(PidError::UnknownNs);
        }
        // A freed space has no entries left: its lookups find nothing.
        Ok(self.hash.stripe(ns, id).read().get(&(ns, id)).cloned())
    }

    fn free_ns(&self, ns: NsId) -> Result<(), PidError> {
        // A free unpublishes before it clears the bits, and an allocation sets the bits before
        // it publishes: a space whose bitmap is clear has no entries in the hash either.
        self.spaces.lock().remove(ns, |bitmap| !bitmap.is_empty())
    }

    fn memory_bytes(&self) -> usize {
        let spaces = self.spaces.lock();
        let bitmaps: usize = spaces
            .live
            .values()
            .map(|s| s.ids.words.capacity() * 8)
            .sum();
        let mut hash = STRIPES * core::mem::size_of::<CachePadded<RwLock<L, ()>>>();
        for stripe in self.hash.stripes.iter() {
            let map = stripe.read();
            hash += map.capacity() * (core::mem::size_of::<((NsId, u32), Pid)>() + 1);
            hash += map
                .values()
                .map(|pid| super::idr::pid_bytes(pid.levels().len() as u32 - 1))
                .sum::<usize>();
        }
        core::mem::size_of::<Self>() + spaces.map_bytes() + bitmaps + hash
    }
}
