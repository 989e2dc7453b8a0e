//! [`ScaledHash`]: the 6.15 kernel table, a lock per bucket, sized from the CPU count; and our
//! growing variant of it (its design is documented on the type).

use crate::prelude::*;
use core::ptr;

use core::ptr::NonNull;

use super::chain::{
    delegate_chained_table, empty_head, find_unlocked, release_chain, ChainGuard, ChainedTable,
    Chains, Head,
};
use super::node::Node;
use super::Entry;
use super::{Id, Owner, OwnerHandle, Rejected, SizingError, TableError, MAX_ID};
use crate::util::hash::mix;
use crate::util::readers::Section;

use crate::lock::{DefaultLocks, Locks, Mutex};
use crate::sync::{exclusive_load, fence, spin_wait, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// Buckets per CPU in the kernel's sizing (`512 × num_possible_cpus()`).
pub const BUCKETS_PER_CPU: usize = 512;

/// Chain length above which an insert splits a bucket. Three keeps sequential IDs near 2.3
/// entries per bucket and random ones (restore mode's sparse IDs) near 1.5; two grew the table
/// to 1.2 entries per bucket on sparse IDs, whose buckets then outweighed the 100 KB goal.
pub const DEFAULT_MAX_LOAD: usize = 3;

/// The most buckets a [`Sizing`] may ask for, fixed or to start with: 2^24 (256 MiB of
/// 16-byte buckets, 4 times the kernel's table on its largest machines). A growing table
/// grows beyond it as it fills.
pub const MAX_SIZED_BUCKETS: usize = 1 << 24;

/// Buckets split per overflow, on average. Two measured no faster and cost 40% more buckets.
const SPLITS_PER_OVERFLOW: usize = 1;
/// Buckets one growth step splits under one publication of the bucket count.
const GROWTH_SPAN: usize = 64;
/// Segments available: segment `k` holds `B·2^(k-1)` buckets, far more than memory allows.
#[cfg(not(loom))]
const MAX_SEGMENTS: usize = 40;
#[cfg(loom)]
const MAX_SEGMENTS: usize = 4;

/// How a [`ScaledHash`] is sized.
///
/// Bucket counts are rounded up to a power of two and must lie in `1..=`[`MAX_SIZED_BUCKETS`],
/// and a growing table's `max_load` must be at least 1:
/// [`ScaledHash::with_sizing`] refuses anything else with a [`SizingError`].
///
/// ```
/// use idspace::table::{IdTable, ScaledHash, Sizing, SizingError};
///
/// // The kernel's count: 512 per CPU, rounded up to a power of two.
/// assert_eq!(Sizing::kernel_buckets(2), 1024);
/// assert_eq!(Sizing::kernel_buckets(3), 2048);
///
/// // A fixed table never grows; its chains lengthen instead.
/// let fixed = ScaledHash::with_sizing(Sizing::Fixed { buckets: 100 })?;
/// assert_eq!(fixed.buckets(), 128);
/// // A growing one splits buckets as its chains overflow.
/// let growing = ScaledHash::with_sizing(Sizing::Growing { initial: 4, max_load: 2 })?;
/// for table in [&fixed, &growing] {
///     for n in 0..1000u32 {
///         assert_eq!(table.create(1, n), Ok(n));
///     }
/// }
/// assert_eq!(fixed.buckets(), 128);
/// assert!(growing.buckets() > 4);
/// assert_eq!(growing.sizing(), Sizing::Growing { initial: 4, max_load: 2 });
/// # Ok::<(), SizingError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sizing {
    /// A fixed number of buckets, like the kernel's table (rounded up to a power of two).
    Fixed {
        /// Number of buckets, `1..=MAX_SIZED_BUCKETS`.
        buckets: usize,
    },
    /// Start with `initial` buckets (rounded up to a power of two) and split the next bucket
    /// whenever an insert leaves a chain longer than `max_load`.
    Growing {
        /// Number of buckets to start with, `1..=MAX_SIZED_BUCKETS`.
        initial: usize,
        /// Chain length (at least 1) above which an insert splits a bucket.
        max_load: usize,
    },
}

impl Sizing {
    /// The kernel's bucket count for `cpus` CPUs: `roundup_pow_of_two(512 × cpus)`, at most
    /// [`MAX_SIZED_BUCKETS`].
    pub fn kernel_buckets(cpus: usize) -> usize {
        BUCKETS_PER_CPU
            .saturating_mul(cpus.max(1))
            .min(MAX_SIZED_BUCKETS)
            .next_power_of_two()
    }

    /// The kernel's fixed table for this machine's CPU count.
    pub fn kernel() -> Sizing {
        Sizing::Fixed {
            buckets: Self::kernel_buckets(available_cpus()),
        }
    }

    /// Our default: the kernel's initial size for this machine, splitting whenever a chain
    /// outgrows [`DEFAULT_MAX_LOAD`] entries.
    pub fn growing() -> Sizing {
        Sizing::Growing {
            initial: Self::kernel_buckets(available_cpus()),
            max_load: DEFAULT_MAX_LOAD,
        }
    }

    /// The sizing's (bucket count rounded up to a power of two, `max_load`, 0 for a fixed
    /// table), if its parameters are in range.
    fn checked(self) -> Result<(usize, usize), SizingError> {
        let (buckets, max_load) = match self {
            Sizing::Fixed { buckets } => (buckets, 0),
            Sizing::Growing { max_load: 0, .. } => return Err(SizingError::NoLoad),
            Sizing::Growing { initial, max_load } => (initial, max_load),
        };
        match buckets {
            0 => Err(SizingError::NoBuckets),
            // MAX_SIZED_BUCKETS is a power of two, so rounding up stays within it.
            1..=MAX_SIZED_BUCKETS => Ok((buckets.next_power_of_two(), max_load)),
            _ => Err(SizingError::TooManyBuckets { buckets }),
        }
    }
}

fn available_cpus() -> usize {
    crate::host::cpus()
}

/// One bucket, as the kernel's `timer_hash_bucket`: a lock and the head of its chain, and in
/// the lock's padding a count of the splits that moved nodes out of it; 16 bytes (four to a
/// cache line).
pub(crate) struct Bucket<T, L: Locks> {
    lock: Mutex<L, ()>,
    /// Odd while a split moves nodes out of the bucket (a seqcount): a lookup that walked the
    /// chain meanwhile may have followed a moved node into another chain, and walks again.
    splits: AtomicU32,
    head: Head<T>,
}

impl<T, L: Locks> Bucket<T, L> {
    fn new() -> Self {
        Bucket {
            lock: crate::lock::mutex::<L, _>(()),
            splits: AtomicU32::new(0),
            head: empty_head(),
        }
    }

    #[inline]
    fn chain(&self) -> ChainGuard<'_, T, L> {
        ChainGuard::new(self.lock.lock(), &self.head)
    }
}

/// A block of buckets allocated at once: `len` of them.
fn alloc_buckets<T, L: Locks>(len: usize) -> *mut Bucket<T, L> {
    let buckets: Box<[Bucket<T, L>]> = (0..len).map(|_| Bucket::new()).collect();
    Box::into_raw(buckets).cast::<Bucket<T, L>>()
}

/// Frees a block from [`alloc_buckets`], dropping the chains' references to their nodes.
///
/// # Safety
/// `start` came from `alloc_buckets(len)` and nothing refers to its buckets any more.
unsafe fn free_buckets<T, L: Locks>(start: *mut Bucket<T, L>, len: usize) {
    // SAFETY: by the caller's promise, the block's own allocation, unshared.
    let mut buckets = unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(start, len)) };
    for bucket in buckets.iter_mut() {
        release_chain(&mut bucket.head);
    }
}

/// A segment's directory: pointers to its blocks of buckets (see `ScaledChains::directories`).
type Directory<T, L> = AtomicPtr<Bucket<T, L>>;

pub(crate) struct ScaledChains<T, L: Locks> {
    /// log2 of the initial bucket count `B`.
    base_shift: u32,
    /// Chain length above which an insert splits a bucket; 0 for a fixed table.
    max_load: usize,
    /// Buckets in use (`n`). Stored only by a splitter holding `grow_lock` and the lock of the
    /// bucket being split.
    buckets: AtomicUsize,
    /// Segment 0: the initial `B` buckets, allocated with the table.
    first: *mut Bucket<T, L>,
    /// Segment `k ≥ 1` (at index `k`; index 0 is unused): a directory of `pieces(k)` pointers
    /// to blocks of `piece_len(k)` buckets, null until the split reaches the segment, each
    /// block null until the split reaches it.
    directories: Box<[AtomicPtr<Directory<T, L>>]>,
    /// Serialises splitters; taken with `try_lock` only.
    grow_lock: Mutex<L, ()>,
}

// SAFETY: the raw pointers own the buckets, whose chains hold nodes with `T`s that any thread
// may read or drop, as `Arc<T>`s would be; links change only under their bucket's lock.
unsafe impl<T: Send + Sync, L: Locks> Send for ScaledChains<T, L> {}
// SAFETY: see `Send`: every change to a chain goes through its bucket's mutex.
unsafe impl<T: Send + Sync, L: Locks> Sync for ScaledChains<T, L> {}

impl<T: Send + Sync, L: Locks> ScaledChains<T, L> {
    fn new(sizing: Sizing) -> Result<Self, SizingError> {
        let (initial, max_load) = sizing.checked()?;
        let base_shift = initial.trailing_zeros();
        let directories = (0..MAX_SEGMENTS)
            .map(|_| AtomicPtr::new(ptr::null_mut()))
            .collect();
        Ok(ScaledChains {
            base_shift,
            max_load,
            buckets: AtomicUsize::new(initial),
            first: alloc_buckets(initial),
            directories,
            grow_lock: crate::lock::mutex::<L, _>(()),
        })
    }
}

impl<T, L: Locks> ScaledChains<T, L> {
    #[inline]
    fn base(&self) -> usize {
        1 << self.base_shift
    }

    fn seg_len(&self, segment: usize) -> usize {
        if segment == 0 {
            self.base()
        } else {
            self.base() << (segment - 1)
        }
    }

    /// log2 of the buckets in one block of segment `segment ≥ 1`: a growth step's span, so
    /// that a table allocates buckets only as its splits reach them.
    #[inline]
    fn piece_shift(&self, segment: usize) -> u32 {
        (self.base_shift + segment as u32 - 1).min(GROWTH_SPAN.trailing_zeros())
    }

    /// Blocks in segment `segment ≥ 1`.
    fn pieces(&self, segment: usize) -> usize {
        self.seg_len(segment) >> self.piece_shift(segment)
    }

    /// (segment, offset) of bucket `index`.
    #[inline]
    fn locate(&self, index: usize) -> (usize, usize) {
        let quotient = index >> self.base_shift;
        if quotient == 0 {
            (0, index)
        } else {
            let segment = (usize::BITS - quotient.leading_zeros()) as usize;
            (segment, index - (self.base() << (segment - 1)))
        }
    }

    /// `m`: the largest `B·2^L` at or below `n` (`n ≥ B`): as `B` is a power of two, the
    /// largest power of two at or below `n`.
    #[inline]
    fn level_size(&self, n: usize) -> usize {
        debug_assert!(
            n >= self.base(),
            "a table holds at least its initial buckets"
        );
        1 << (usize::BITS - 1 - n.leading_zeros())
    }

    /// The bucket of `hash` when `n` buckets are in use.
    #[inline]
    fn address(&self, hash: u64, n: usize) -> usize {
        let m = self.level_size(n);
        let low = hash as usize & (m - 1);
        if low < n - m {
            hash as usize & (2 * m - 1)
        } else {
            low
        }
    }

    /// Bucket `index`, which must be below a bucket count this thread has read.
    #[inline]
    fn bucket(&self, index: usize) -> &Bucket<T, L> {
        // SAFETY: `bucket_at` points at a live bucket that outlives `&self`.
        unsafe { &*self.bucket_at(index) }
    }

    /// Bucket `index`, as [`bucket`](Self::bucket) finds it, as a pointer with its block's
    /// provenance: the buckets after it in its block may be reached from it (see `run`).
    #[inline]
    fn bucket_at(&self, index: usize) -> *const Bucket<T, L> {
        let (segment, offset) = self.locate(index);
        if segment == 0 {
            // SAFETY: `first` holds `B` buckets for the table's life, and `offset < B`.
            return unsafe { self.first.add(offset) };
        }
        // Acquire (both loads) pairs with the Release stores in `grow` that published the
        // directory and the block, so that their initialisation is visible. (The Acquire load
        // of `buckets` that gave us `index` already orders this; the loads state it locally.)
        let directory = self.directories[segment].load(Ordering::Acquire);
        debug_assert!(
            !directory.is_null(),
            "bucket {index} read before its segment"
        );
        let shift = self.piece_shift(segment);
        // `index` is below a bucket count read from `buckets`, and every directory and block
        // that holds a bucket below that count was allocated and published before the count
        // (see `grow`); they are freed only in `drop`, which has `&mut self`.
        // SAFETY: so the directory has `pieces(segment) > offset >> shift` entries ...
        let block = unsafe { &*directory.add(offset >> shift) }.load(Ordering::Acquire);
        debug_assert!(!block.is_null(), "bucket {index} read before its block");
        // SAFETY: ... and the block holds `1 << shift` live buckets that outlive `&self`.
        unsafe { block.add(offset & ((1 << shift) - 1)) }
    }

    /// Buckets the next growth step splits when `n` buckets are in use.
    #[inline]
    fn span(&self, n: usize) -> usize {
        self.level_size(n).min(GROWTH_SPAN)
    }

    pub(crate) fn bucket_count(&self) -> usize {
        self.buckets.load(Ordering::Acquire)
    }

    /// Allocates the block (and if need be the directory) that holds the new buckets
    /// `n .. n + span`, publishing both with Release.
    fn alloc_block(&self, n: usize) -> bool {
        // The new buckets lie in one block: segment k holds level k - 1's new half, blocks are
        // a step's span long, and steps start at multiples of their span.
        let (segment, offset) = self.locate(n);
        if segment >= self.directories.len() {
            return false;
        }
        let slot = &self.directories[segment];
        // Only splitters store directories and blocks, and we are the only splitter.
        if slot.load(Ordering::Relaxed).is_null() {
            let directory: Box<[AtomicPtr<Bucket<T, L>>]> = (0..self.pieces(segment))
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect();
            // Release pairs with the Acquire loads in `bucket`.
            slot.store(
                Box::into_raw(directory).cast::<AtomicPtr<Bucket<T, L>>>(),
                Ordering::Release,
            );
        }
        let shift = self.piece_shift(segment);
        debug_assert_eq!(offset & ((1 << shift) - 1), 0, "a step starts a block");
        // SAFETY: the directory just checked or made has `pieces(segment)` entries, and
        // `offset >> shift` is below that; directories live until `drop`.
        let block = unsafe { &*slot.load(Ordering::Relaxed).add(offset >> shift) };
        if block.load(Ordering::Relaxed).is_null() {
            // Release pairs with the Acquire loads in `bucket`.
            block.store(alloc_buckets(1 << shift), Ordering::Release);
        }
        true
    }
}

impl<T: Send + Sync, L: Locks> ScaledChains<T, L> {
    /// Splits the next `span` buckets (`n - m ..`) into the new buckets `n ..`, unless another
    /// thread is already splitting or the table cannot grow further.
    #[cold]
    fn grow(&self) {
        let Some(_splitting) = self.grow_lock.try_lock() else {
            return; // another thread is splitting; a later overflow catches up
        };
        // Only splitters store `buckets`, and we are the only splitter.
        let n = self.buckets.load(Ordering::Relaxed);
        let m = self.level_size(n);
        let span = self.span(n);
        if !self.alloc_block(n) {
            return;
        }
        // Lock order: ascending bucket index. The sources (`n - m ..`) are all below the new
        // buckets (`n ..`), and every other thread locks one bucket at a time.
        let sources = self.run(n - m, span);
        let sources = &sources[..span];
        let mut guards: [Option<ChainGuard<'_, T, L>>; GROWTH_SPAN] = [const { None }; GROWTH_SPAN];
        for (guard, source) in guards.iter_mut().zip(sources) {
            *guard = Some(source.chain());
        }
        for source in sources {
            // Relaxed: ordered before the moves by the fence below.
            source.splits.fetch_add(1, Ordering::Relaxed);
        }
        // Release pairs with the Acquire fence in `find`: a lookup that sees a moved link sees
        // its bucket's split count odd, or moved on.
        fence(Ordering::Release);
        let mask = 2 * m - 1;
        let targets = self.run(n, span);
        for ((guard, target), index) in guards.iter_mut().zip(&targets[..span]).zip(n..) {
            let Some(source) = guard else { break };
            // No other thread can address `target` before the count below is published, so
            // this lock is uncontended; it is taken for the guard it gives.
            let mut new = target.chain();
            source.split_into(&mut new, |node| {
                mix(node.owner, node.id) as usize & mask == index
            });
        }
        // Release pairs with the Acquire loads in `lock`: whoever sees the new count also sees
        // the new block. Stored while every source is still locked: a thread that locks a
        // source after us re-reads the count and learns that its key may have moved.
        self.buckets.store(n + span, Ordering::Release);
        for source in sources {
            // Release pairs with the Acquire load in `find`: a lookup that sees the split over
            // sees the new count, and with it the key's new home.
            source.splits.fetch_add(1, Ordering::Release);
        }
        drop(guards);
    }

    /// Buckets `start .. start + len` (`1 ≤ len ≤ GROWTH_SPAN`) in the first `len` places
    /// (the rest repeat the first): found through [`bucket`](Self::bucket) once per block and
    /// by the next address within one, so that a growth step pays for the segment arithmetic
    /// once rather than for each of its buckets three times.
    #[inline]
    fn run(&self, start: usize, len: usize) -> [&Bucket<T, L>; GROWTH_SPAN] {
        // Every segment and block starts at a multiple of `min(B, GROWTH_SPAN)`: segment `k`
        // at `B·2^(k-1)`, and its blocks, of `min(B·2^(k-1), GROWTH_SPAN)` buckets, after it.
        let block_mask = self.base().min(GROWTH_SPAN) - 1;
        let mut at = self.bucket_at(start);
        // SAFETY: a live bucket of a block that lives as long as `self` (see `bucket`).
        let mut run = [unsafe { &*at }; GROWTH_SPAN];
        for (slot, index) in run[..len].iter_mut().zip(start..).skip(1) {
            at = if index & block_mask == 0 {
                self.bucket_at(index)
            } else {
                // SAFETY: `index - 1` and `index` lie in one block (no block starts at `index`),
                // and `at`, from `bucket_at`, has the provenance of that block's allocation.
                unsafe { at.add(1) }
            };
            // SAFETY: as for the first.
            *slot = unsafe { &*at };
        }
        run
    }
}

impl<T: Send + Sync, L: Locks> Chains<T, L> for ScaledChains<T, L> {
    // Always inline: out of line, its saving and restoring of registers cost each create and
    // each remove about 15 instructions of the 60 it takes.
    #[inline(always)]
    fn lock(&self, hash: u64) -> ChainGuard<'_, T, L> {
        loop {
            // Acquire pairs with the Release stores in `grow`.
            let n = self.buckets.load(Ordering::Acquire);
            let index = self.address(hash, n);
            let guard = self.bucket(index).chain();
            if self.max_load == 0 {
                return guard;
            }
            // Re-read under the lock: a split of `index` that finished before we locked is
            // visible now (its store happened before its unlock, which happened before our
            // lock). Relaxed suffices for that, Acquire keeps the segment reasoning local.
            let now = self.buckets.load(Ordering::Acquire);
            if now == n || self.address(hash, now) == index {
                return guard;
            }
            // A split moved our key's home between the read and the lock: go again.
        }
    }

    #[inline]
    fn find(
        &self,
        section: &Section<'_>,
        hash: u64,
        owner: Owner,
        id: Id,
    ) -> Option<NonNull<Node<T>>> {
        loop {
            // Acquire pairs with the Release stores in `grow`.
            let n = self.buckets.load(Ordering::Acquire);
            let index = self.address(hash, n);
            let bucket = self.bucket(index);
            // Acquire pairs with the Release increment that ends a split: if it ended before
            // this load, the count below shows where our key went.
            let splits = bucket.splits.load(Ordering::Acquire);
            if splits % 2 == 1 {
                spin_wait(); // the bucket is being split: its new count comes soon
                continue;
            }
            if self.max_load != 0 {
                let now = self.buckets.load(Ordering::Acquire);
                if now != n && self.address(hash, now) != index {
                    continue; // split since we read the count: our key may have moved
                }
            }
            let found = find_unlocked(section, &bucket.head, owner, id);
            // Acquire pairs with the Release fence in `grow`: if the walk saw a link a split
            // stored, the load below sees that split's odd count or later.
            fence(Ordering::Acquire);
            if bucket.splits.load(Ordering::Relaxed) == splits {
                return found;
            }
        }
    }

    #[inline]
    fn inserted(&self, hash: u64, len: usize) {
        if self.max_load == 0 || len <= self.max_load {
            return;
        }
        // A step splits `span` buckets; taking it with probability SPLITS_PER_OVERFLOW / span
        // (the hash's low bits are uniform) splits SPLITS_PER_OVERFLOW buckets per overflow on
        // average. Relaxed: the count only steers this coin.
        let span = self.span(self.buckets.load(Ordering::Relaxed));
        if (hash as usize & (span - 1)) < SPLITS_PER_OVERFLOW {
            self.grow();
        }
    }

    fn memory_bytes(&self) -> usize {
        let bucket = core::mem::size_of::<Bucket<T, L>>();
        let pointer = core::mem::size_of::<usize>();
        let mut bytes = core::mem::size_of::<Self>() + self.directories.len() * pointer;
        bytes += self.base() * bucket;
        for segment in 1..self.directories.len() {
            let directory = self.directories[segment].load(Ordering::Acquire);
            if directory.is_null() {
                continue;
            }
            bytes += self.pieces(segment) * pointer;
            for piece in 0..self.pieces(segment) {
                // SAFETY: a published directory has `pieces(segment)` entries and lives until
                // `drop`.
                let block = unsafe { &*directory.add(piece) };
                if !block.load(Ordering::Acquire).is_null() {
                    bytes += (1 << self.piece_shift(segment)) * bucket;
                }
            }
        }
        for index in 0..self.bucket_count() {
            bytes += self.bucket(index).chain().node_bytes();
        }
        bytes
    }
}

impl<T, L: Locks> Drop for ScaledChains<T, L> {
    fn drop(&mut self) {
        // `&mut self`: no reference to a bucket or node of the table remains, except the
        // `Entry`s, which hold references of their own.
        // SAFETY: `first` came from `alloc_buckets(B)`.
        unsafe { free_buckets(self.first, self.base()) };
        for segment in 1..self.directories.len() {
            let directory = exclusive_load(&mut self.directories[segment]);
            if directory.is_null() {
                continue;
            }
            let pieces = self.pieces(segment);
            // SAFETY: a published directory came from a boxed slice of `pieces` entries.
            let mut directory =
                unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(directory, pieces)) };
            let len = 1 << self.piece_shift(segment);
            for block in directory.iter_mut() {
                let block = exclusive_load(block);
                if !block.is_null() {
                    // SAFETY: a published block came from `alloc_buckets(len)`.
                    unsafe { free_buckets(block, len) };
                }
            }
        }
    }
}

/// The 6.15 kernel table: `512 × CPUs` buckets of 16 bytes (a lock and a chain head), growing
/// by default (see [`Sizing`]).
///
/// Lookups take no lock (see "Lookups without locks" below); creates claim an ID from the
/// owner's atomic cursor and, holding the ID's stripe of the owner's list, insert under one
/// bucket's lock and record the ID in the stripe; removes forget the ID in its stripe, then
/// take it out of its bucket under the same stripe. A create or a remove through an owner
/// handle ([`ScaledHash::owner_handle`]) takes no lock of the owner registry. With
/// [`Sizing::Growing`] the table splits buckets as it fills, keeping chains short without ever
/// stopping other threads. This is the recommended table design.
///
/// ```
/// use idspace::table::{IdTable, ScaledHash, TableError};
///
/// let timers = ScaledHash::new();
/// // Each owner (a process) has its own IDs, handed out from its cursor.
/// assert_eq!(timers.create(7, "tick"), Ok(0));
/// assert_eq!(timers.create(7, "tock"), Ok(1));
/// assert_eq!(timers.create(8, "alarm"), Ok(0));
/// assert_eq!(timers.get(7, 1).as_deref(), Some(&"tock"));
///
/// // Restore mode creates exact IDs (checkpoint/restore).
/// assert_eq!(timers.create_at(8, 40, "restored").map_err(|r| r.error), Err(TableError::NotRestoring));
/// timers.set_restore(8, true);
/// assert_eq!(timers.create_at(8, 40, "restored").map_err(|r| r.error), Ok(40));
/// assert_eq!(timers.ids(8), [0, 40]);
///
/// assert_eq!(timers.remove(7, 0).as_deref(), Ok(&"tick"));
/// assert_eq!(timers.remove_owner(8), 2);
/// ```
///
/// # Growth by linear hashing
///
/// The kernel sizes the table once at boot, so chains lengthen as timers accumulate. Our default
/// grows instead, a block of buckets at a time, with no step that stops other threads:
///
/// * Buckets live in *segments* that are never moved or freed while the table lives: segment 0
///   holds the initial `B` buckets, segment `k ≥ 1` the next `B·2^(k-1)`, allocated in blocks
///   of a growth step's `span` buckets as the splits reach them (a directory per segment
///   points at its blocks), so that a table that just outgrew its initial size pays for the
///   buckets it uses, not for a whole new segment. A bucket's address is therefore stable, and
///   a thread that found a bucket can lock it without fear that the memory goes away.
/// * One atomic word, `buckets`, is the number of buckets in use, `n = m + split` with
///   `m = B·2^L` the largest such power at or below `n`. A hash `h` lives in bucket
///   `h mod m`, or in `h mod 2m` if `h mod m < split` (that bucket was already split).
/// * A *growth step* splits the next `span` buckets, `span = min(64, m)` (64 is the hash's
///   locality block, see the table module docs): for each source bucket `split + k` it moves
///   the entries whose `h mod 2m` is `m + split + k` into that new bucket. The splitter locks
///   all the sources, in ascending order, then each new bucket (all above the sources, so the
///   order is ascending throughout and cannot deadlock with anyone, who all lock one bucket),
///   moves the entries, and stores `n + span` *while still holding every source's lock*.
/// * Every operation reads `n`, computes the bucket, locks it, and reads `n` again. If the bucket
///   for its hash under the new count is a different one, a split moved its key away between the
///   read and the lock: it unlocks and retries. Otherwise its key's home cannot change while it
///   holds the lock, because moving a key out of a bucket needs that bucket's lock, and any split
///   that already happened is visible (the splitter's store happens before its unlock, which
///   happens before our lock).
/// * Growth is triggered the classic linear-hashing way, by overflow: an insert that leaves its
///   chain longer than `max_load` entries ([`DEFAULT_MAX_LOAD`] by default) takes a
///   growth step with probability `1 / span`, decided by the key's hash, so each overflow
///   splits one bucket on average: the next in order, not necessarily its own (the overflowing
///   chain's turn comes). No entry count is kept, so inserts and removes share no counter
///   cache line; the average load settles near 2.3 entries per bucket for IDs created in
///   sequence, 1.5 for random ones.
/// * Publishing 64 splits at once means the shared count and the splitter's `try_lock` are
///   written once per 64 splits instead of once per split: on two cores that removed most of
///   the cost of growing, which is otherwise dominated by that cache line moving between
///   cores.
/// * A step finds its sources and its new buckets once per block and walks each block by
///   address (`ScaledChains::run`), and keeps the sources' guards in an array on its stack:
///   finding every bucket through the segment arithmetic, three times per source, and keeping
///   the guards in a `SmallVec` (which checks whether it spilled on every access) made the
///   splits cost a one-owner create about 115 instructions of its 600; they now cost about 80,
///   for the same splits in the same order (most of the rest is re-hashing each node a split
///   looks at, which a node has no room to remember).
/// * A step runs only if no other thread is splitting (a `try_lock`, never a wait): a
///   descheduled splitter delays growth but never blocks an insert. Directories and blocks are
///   allocated by the splitter when the split reaches them.
///
/// The table never shrinks: a table that once held many entries keeps its buckets (the kernel's
/// never shrinks either).
///
/// # Lookups without locks
///
/// A lookup walks its chain without the bucket's lock inside a read-side section of the table,
/// which keeps every node it can reach allocated (see the table module docs). Inserts link a
/// node at the head and removes unlink one; either way a walker sees the chain before or
/// after, and an unlinked node keeps its link, so a walker standing on it goes on along the
/// chain. A split is different: it relinks the nodes it moves into the new bucket's chain, so
/// a walker standing on a moved node would continue in the wrong chain and could miss its key.
/// Each bucket therefore counts its splits, a seqcount in the lock's padding:
///
/// * The splitter makes the count of each source odd, then a Release fence, then moves the
///   nodes, publishes the new bucket count, and makes each source's count even again
///   (Release).
/// * A lookup reads the bucket count, computes its bucket, reads that bucket's split count
///   (Acquire; if odd, it waits for the split to finish), reads the bucket count again (if the
///   key's bucket changed, it starts over), walks, then an Acquire fence and the split count
///   again: if it changed, it starts over.
/// * If the walk saw any link a split stored, the fences make the second read see that split's
///   odd count or a later one, so a walk that crossed a split never counts. If a split of the
///   bucket ended before the first read of its count, that read synchronises with its end, so
///   the second read of the bucket count shows the key's new home. Otherwise the walk saw the
///   chain as no split changed it, and the lookup's answer is that chain's.
pub struct ScaledHash<T, L: Locks = DefaultLocks> {
    table: ChainedTable<ScaledChains<T, L>, L>,
    sizing: Sizing,
}

impl<T: Send + Sync> ScaledHash<T> {
    /// Our default: the kernel's initial size for this machine, growing (see [`Sizing::growing`]).
    pub fn new() -> Self {
        Self::with_valid_sizing(Sizing::growing())
    }

    /// The kernel's fixed table for this machine (see [`Sizing::kernel`]).
    ///
    /// ```
    /// use idspace::table::{ScaledHash, Sizing};
    ///
    /// let table = ScaledHash::<u64>::kernel_sized();
    /// let cpus = idspace::host::cpus(); // `available_parallelism` with `std`
    /// assert_eq!(table.buckets(), Sizing::kernel_buckets(cpus));
    /// assert_eq!(table.sizing(), Sizing::kernel());
    /// // The default starts at the same size, and grows.
    /// assert_eq!(ScaledHash::<u64>::new().sizing(), Sizing::growing());
    /// ```
    pub fn kernel_sized() -> Self {
        Self::with_valid_sizing(Sizing::kernel())
    }

    /// A table sized as asked, with the kernel's ID range.
    ///
    /// # Errors
    /// A [`SizingError`] if a bucket count is outside `1..=`[`MAX_SIZED_BUCKETS`] or a growing
    /// table's `max_load` is 0.
    pub fn with_sizing(sizing: Sizing) -> Result<Self, SizingError> {
        Self::with_sizing_and_max_id(sizing, MAX_ID)
    }

    /// A table sized as asked whose IDs run `0..=max_id` (`max_id` is capped at [`MAX_ID`]).
    ///
    /// # Errors
    /// As [`ScaledHash::with_sizing`].
    ///
    /// ```
    /// use idspace::table::{IdTable, ScaledHash, Sizing, SizingError, MAX_ID};
    ///
    /// let table = ScaledHash::with_sizing_and_max_id(Sizing::growing(), 1)?;
    /// assert_eq!((table.create(7, 'a'), table.create(7, 'b')), (Ok(0), Ok(1)));
    /// assert!(table.create(7, 'c').is_err());
    /// // No table goes beyond the kernel's range.
    /// let wide = ScaledHash::<char>::with_sizing_and_max_id(Sizing::growing(), u32::MAX)?;
    /// assert_eq!(wide.max_id(), MAX_ID);
    /// # Ok::<(), SizingError>(())
    /// ```
    pub fn with_sizing_and_max_id(sizing: Sizing, max_id: Id) -> Result<Self, SizingError> {
        Self::with_locks_and_sizing(sizing, max_id)
    }
}

impl<T: Send + Sync, L: Locks> ScaledHash<T, L> {
    /// Our default table ([`ScaledHash::new`]) on the locks `L` (see [`lock`](crate::lock)).
    pub fn with_locks() -> Self {
        Self::with_valid_sizing(Sizing::growing())
    }

    /// A table on the locks `L` sized as asked whose IDs run `0..=max_id`
    /// ([`ScaledHash::with_sizing_and_max_id`] on other locks).
    ///
    /// # Errors
    /// As [`ScaledHash::with_sizing`].
    pub fn with_locks_and_sizing(sizing: Sizing, max_id: Id) -> Result<Self, SizingError> {
        Ok(ScaledHash {
            table: ChainedTable::new(ScaledChains::new(sizing)?, max_id.min(MAX_ID)),
            sizing,
        })
    }

    /// A table with a sizing that [`Sizing::kernel_buckets`] keeps in range.
    fn with_valid_sizing(sizing: Sizing) -> Self {
        match Self::with_locks_and_sizing(sizing, MAX_ID) {
            Ok(table) => table,
            Err(error) => unreachable!("the kernel's sizing is in range: {error}"),
        }
    }

    /// Buckets currently in use.
    pub fn buckets(&self) -> usize {
        self.table.chains().bucket_count()
    }

    /// How the table was sized.
    pub fn sizing(&self) -> Sizing {
        self.sizing
    }

    /// The largest ID this table hands out.
    pub fn max_id(&self) -> Id {
        self.table.max_id()
    }

    /// A handle on the owner's state, made if the owner has none, for
    /// [`create_in`](Self::create_in): what a caller keeps that creates for one owner often (a
    /// process its own timers, as the kernel reaches them through `current->signal`).
    ///
    /// # Errors
    /// [`TableError::NoMemory`] if there is no memory for a new owner's state.
    ///
    /// ```
    /// use idspace::table::{IdTable, ScaledHash};
    ///
    /// let timers = ScaledHash::new();
    /// let process = timers.owner_handle(7)?;
    /// assert_eq!(timers.create_in(&process, "tick"), Ok(0));
    /// assert_eq!(timers.create(7, "tock"), Ok(1)); // the same owner, through the registry
    /// assert_eq!(timers.ids(7), [0, 1]);
    /// // After the owner's removal the handle creates as `create(7, ..)` would: afresh.
    /// assert_eq!(timers.remove_owner(7), 2);
    /// assert_eq!(timers.create_in(&process, "again"), Ok(0));
    /// assert_eq!(timers.ids(7), [0]);
    /// # Ok::<(), idspace::table::TableError>(())
    /// ```
    pub fn owner_handle(&self, owner: Owner) -> Result<OwnerHandle<L>, TableError> {
        self.table.owner_handle(owner)
    }

    /// [`IdTable::create`](super::IdTable::create) for the handle's owner, without the owner registry's lock: the
    /// same ID, cursor and errors as `create(handle.owner(), value)`. A handle of another
    /// table creates through this table's registry.
    ///
    /// # Errors
    /// As [`IdTable::create`](super::IdTable::create).
    #[inline]
    pub fn create_in(&self, handle: &OwnerHandle<L>, value: T) -> Result<Id, Rejected<T>> {
        self.table.create_in(handle, value)
    }

    /// [`IdTable::remove`](super::IdTable::remove) for the handle's owner, without the owner
    /// registry's lock: the same answer as `remove(handle.owner(), id)`. A handle of another
    /// table removes through this table's registry.
    ///
    /// # Errors
    /// As [`IdTable::remove`](super::IdTable::remove): [`TableError::NotFound`] if the owner
    /// holds no such ID.
    ///
    /// ```
    /// use idspace::table::{IdTable, ScaledHash, TableError};
    ///
    /// let timers = ScaledHash::new();
    /// let process = timers.owner_handle(7)?;
    /// let id = timers.create_in(&process, "tick").map_err(|r| r.error)?;
    /// assert_eq!(timers.remove_in(&process, id).map(|e| *e), Ok("tick"));
    /// assert_eq!(timers.remove_in(&process, id).map(|e| *e), Err(TableError::NotFound));
    /// # Ok::<(), idspace::table::TableError>(())
    /// ```
    #[inline]
    pub fn remove_in(&self, handle: &OwnerHandle<L>, id: Id) -> Result<Entry<T>, TableError> {
        self.table.remove_in(handle, id)
    }
}

impl<T: Send + Sync> Default for ScaledHash<T> {
    fn default() -> Self {
        Self::new()
    }
}

delegate_chained_table!(ScaledHash, "scaled");

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::table::IdTable;

    #[test]
    fn addressing_covers_every_bucket_once() {
        let chains = ScaledChains::<(), DefaultLocks>::new(Sizing::Growing {
            initial: 4,
            max_load: 1,
        })
        .unwrap();
        // Fewer sizes under Miri, which interprets every addressing step.
        let top = if cfg!(miri) { 12 } else { 64 };
        for n in 4..top {
            let mut seen = vec![false; n];
            for hash in 0..256u64 {
                let index = chains.address(hash, n);
                assert!(index < n, "hash {hash} addressed bucket {index} of {n}");
                seen[index] = true;
            }
            assert!(
                seen.iter().all(|&s| s),
                "some bucket unreachable at n = {n}"
            );
        }
    }

    // The model lock used under Miri is larger than the default mutex's 32-bit word.
    #[cfg(not(miri))]
    #[test]
    fn a_bucket_is_a_lock_and_a_head_as_in_the_kernel() {
        assert_eq!(core::mem::size_of::<Bucket<u64, DefaultLocks>>(), 16);
    }

    #[test]
    fn blocks_are_allocated_as_the_splits_reach_them() {
        let table = ScaledHash::<u64>::with_sizing(Sizing::Growing {
            initial: 256,
            max_load: 1,
        })
        .unwrap();
        let chains = table.table.chains();
        let empty = chains.memory_bytes();
        let mut id = 0;
        while chains.bucket_count() == 256 {
            table.create(1, id).unwrap();
            id += 1;
        }
        assert_eq!(chains.bucket_count(), 256 + GROWTH_SPAN);
        // One block of the new segment and its directory, not the whole segment.
        let bucket = core::mem::size_of::<Bucket<u64, DefaultLocks>>();
        let nodes = id as usize * core::mem::size_of::<crate::table::node::Node<u64>>();
        let directory = chains.pieces(1) * core::mem::size_of::<usize>();
        assert_eq!(
            chains.memory_bytes(),
            empty + nodes + directory + GROWTH_SPAN * bucket
        );
    }

    #[test]
    fn segments_tile_the_bucket_indices() {
        let chains = ScaledChains::<(), DefaultLocks>::new(Sizing::Fixed { buckets: 8 }).unwrap();
        let mut expected = (0, 0);
        for index in 0..1000 {
            assert_eq!(chains.locate(index), expected, "bucket {index}");
            expected.1 += 1;
            if expected.1 == chains.seg_len(expected.0) {
                expected = (expected.0 + 1, 0);
            }
        }
    }
}
