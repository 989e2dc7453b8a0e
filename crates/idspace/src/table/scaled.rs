//! [`ScaledHash`]: the 6.15 kernel table, a lock per bucket, sized from the CPU count; and our
//! growing variant of it (its design is documented on the type).

use core::ptr;

use super::chain::{delegate_chained_table, Chain, ChainGuard, ChainedTable, Chains};
use super::Entry;
use super::{Id, Owner, Rejected, SizingError, TableError, MAX_ID};
use crate::util::hash::mix;
use smallvec::SmallVec;

use super::lock::{lock, try_lock, Mutex, MutexGuard};
use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

/// Buckets per CPU in the kernel's sizing (`512 × num_possible_cpus()`).
pub const BUCKETS_PER_CPU: usize = 512;

/// Chain length above which an insert splits a bucket: the entries a bucket holds inline.
pub const DEFAULT_MAX_LOAD: usize = 2;

/// The most buckets a [`Sizing`] may ask for, fixed or to start with: 2^24 (a GiB of
/// cache-line buckets, 4 times the kernel's table on its largest machines). A growing table
/// grows beyond it as it fills.
pub const MAX_SIZED_BUCKETS: usize = 1 << 24;

/// Buckets split per overflow, on average. One keeps the load near 1.8 entries per bucket; two
/// measured no faster and cost 40% more buckets.
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
    /// outgrows the two entries a bucket holds inline.
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
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One bucket: a lock and its chain, alone on its cache line so that two CPUs working on
/// neighbouring buckets do not share a line.
#[repr(align(64))]
struct Bucket<T> {
    chain: Mutex<Chain<T>>,
}

impl<T> Bucket<T> {
    fn new() -> Self {
        Bucket {
            chain: Mutex::new(Chain::default()),
        }
    }
}

pub(crate) struct ScaledChains<T> {
    /// log2 of the initial bucket count `B`.
    base_shift: u32,
    /// Chain length above which an insert splits a bucket; 0 for a fixed table.
    max_load: usize,
    /// Buckets in use (`n`). Stored only by a splitter holding `grow_lock` and the lock of the
    /// bucket being split.
    buckets: AtomicUsize,
    /// Segment `k` points at `seg_len(k)` buckets, or is null until the split reaches it.
    segments: Box<[AtomicPtr<Bucket<T>>]>,
    /// Serialises splitters; taken with `try_lock` only.
    grow_lock: Mutex<()>,
}

// SAFETY: the raw segment pointers own `Bucket<T>`s, which hold `Arc<T>`s behind mutexes;
// sharing the table shares those `Arc`s only through the mutexes, and an `Arc<T>` may move to
// and be shared with other threads when `T: Send + Sync`, as for `Mutex<Arc<T>>`.
unsafe impl<T: Send + Sync> Send for ScaledChains<T> {}
// SAFETY: see `Send`: every access to a chain goes through its bucket's mutex.
unsafe impl<T: Send + Sync> Sync for ScaledChains<T> {}

impl<T: Send + Sync> ScaledChains<T> {
    fn new(sizing: Sizing) -> Result<Self, SizingError> {
        let (initial, max_load) = sizing.checked()?;
        let base_shift = initial.trailing_zeros();
        let segments: Box<[AtomicPtr<Bucket<T>>]> = (0..MAX_SEGMENTS)
            .map(|_| AtomicPtr::new(ptr::null_mut()))
            .collect();
        let chains = ScaledChains {
            base_shift,
            max_load,
            buckets: AtomicUsize::new(initial),
            segments,
            grow_lock: Mutex::new(()),
        };
        // Not yet shared: the store needs no ordering beyond the one that publishes `chains`.
        chains.segments[0].store(chains.alloc_segment(0), Ordering::Relaxed);
        Ok(chains)
    }

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

    /// `m`: the largest `B·2^L` at or below `n`.
    #[inline]
    fn level_size(&self, n: usize) -> usize {
        let quotient = n >> self.base_shift;
        self.base() << (usize::BITS - 1 - quotient.leading_zeros())
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
    fn bucket(&self, index: usize) -> &Bucket<T> {
        let (segment, offset) = self.locate(index);
        // Acquire pairs with the Release store in `grow` that published the segment, so the
        // buckets' initialisation is visible. (The Acquire load of `buckets` that gave us
        // `index` already orders this; the load states it locally.)
        let base = self.segments[segment].load(Ordering::Acquire);
        debug_assert!(
            !base.is_null(),
            "bucket {index} read before its segment exists"
        );
        // `index` is below a bucket count read from `buckets`, and every segment that holds a
        // bucket below that count was allocated and published before the count (see `grow`),
        // so `base` points at `seg_len(segment)` initialised buckets and `offset` is below
        // that. Segments are freed only in `drop`, which has `&mut self`.
        // SAFETY: so `base + offset` is a live bucket that outlives the returned reference.
        unsafe { &*base.add(offset) }
    }

    fn alloc_segment(&self, segment: usize) -> *mut Bucket<T> {
        let buckets: Box<[Bucket<T>]> = (0..self.seg_len(segment)).map(|_| Bucket::new()).collect();
        Box::into_raw(buckets).cast::<Bucket<T>>()
    }

    /// Buckets the next growth step splits when `n` buckets are in use.
    #[inline]
    fn span(&self, n: usize) -> usize {
        self.level_size(n).min(GROWTH_SPAN)
    }

    /// Splits the next `span` buckets (`n - m ..`) into the new buckets `n ..`, unless another
    /// thread is already splitting or the table cannot grow further.
    #[cold]
    fn grow(&self) {
        let Some(_splitting) = try_lock(&self.grow_lock) else {
            return; // another thread is splitting; a later overflow catches up
        };
        // Only splitters store `buckets`, and we are the only splitter.
        let n = self.buckets.load(Ordering::Relaxed);
        let m = self.level_size(n);
        let span = self.span(n);
        // The new buckets `n .. n + span` lie in one segment: segment k holds level k - 1's
        // new half, and spans divide levels.
        let (segment, offset) = self.locate(n);
        if segment >= self.segments.len() {
            return;
        }
        if offset == 0 && self.segments[segment].load(Ordering::Relaxed).is_null() {
            // Release pairs with the Acquire loads in `bucket`: the new buckets' initialisation
            // happens before anyone can reach them.
            self.segments[segment].store(self.alloc_segment(segment), Ordering::Release);
        }
        // Lock order: ascending bucket index. The sources (`n - m ..`) are all below the new
        // buckets (`n ..`), and every other thread locks one bucket at a time.
        let mut sources: SmallVec<[MutexGuard<'_, Chain<T>>; GROWTH_SPAN]> = (n - m..n - m + span)
            .map(|index| lock(&self.bucket(index).chain))
            .collect();
        let mask = 2 * m - 1;
        for (offset, source) in sources.iter_mut().enumerate() {
            let target = n + offset;
            // No other thread can address `target` before the count below is published, so
            // this lock is uncontended; it is taken for the `&mut` it gives.
            let mut new = lock(&self.bucket(target).chain);
            source.split_into(&mut new, |node| {
                mix(node.owner, node.id) as usize & mask == target
            });
        }
        // Release pairs with the Acquire loads in `lock`: whoever sees the new count also sees
        // the new segment. Stored while every source is still locked: a thread that locks a
        // source after us re-reads the count and learns that its key may have moved.
        self.buckets.store(n + span, Ordering::Release);
        drop(sources);
    }

    pub(crate) fn bucket_count(&self) -> usize {
        self.buckets.load(Ordering::Acquire)
    }
}

impl<T: Send + Sync> Chains<T> for ScaledChains<T> {
    #[inline]
    fn lock(&self, hash: u64) -> ChainGuard<'_, T> {
        loop {
            // Acquire pairs with the Release stores in `grow`.
            let n = self.buckets.load(Ordering::Acquire);
            let index = self.address(hash, n);
            let guard = lock(&self.bucket(index).chain);
            if self.max_load == 0 {
                return ChainGuard::Own(guard);
            }
            // Re-read under the lock: a split of `index` that finished before we locked is
            // visible now (its store happened before its unlock, which happened before our
            // lock). Relaxed suffices for that, Acquire keeps the segment reasoning local.
            let now = self.buckets.load(Ordering::Acquire);
            if now == n || self.address(hash, now) == index {
                return ChainGuard::Own(guard);
            }
            // A split moved our key's home between the read and the lock: go again.
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
        let mut bytes = core::mem::size_of::<Self>()
            + self.segments.len() * core::mem::size_of::<AtomicPtr<Bucket<T>>>();
        for index in 0..self.bucket_count() {
            bytes += lock(&self.bucket(index).chain).heap_bytes();
        }
        for segment in 0..self.segments.len() {
            if !self.segments[segment].load(Ordering::Acquire).is_null() {
                bytes += self.seg_len(segment) * core::mem::size_of::<Bucket<T>>();
            }
        }
        bytes
    }
}

impl<T> Drop for ScaledChains<T> {
    fn drop(&mut self) {
        let base = 1usize << self.base_shift;
        for (segment, slot) in self.segments.iter().enumerate() {
            let start = slot.load(Ordering::Acquire);
            if start.is_null() {
                continue;
            }
            let len = if segment == 0 {
                base
            } else {
                base << (segment - 1)
            };
            // `&mut self` means no reference to a bucket remains.
            // SAFETY: `start` came from `Box::<[Bucket<T>]>::into_raw` with exactly `len` buckets.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(start, len)) });
        }
    }
}

/// The 6.15 kernel table: a mutex per cache-line-aligned bucket, `512 × CPUs` buckets, growing
/// by default (see [`Sizing`]).
///
/// Lookups lock one bucket; creates claim an ID from the owner's atomic cursor, insert under
/// one bucket's lock and then record the ID under one stripe of the owner's list; removes forget
/// the ID in its stripe, then take it out of its bucket. No two of these locks are held at once. With
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
///   holds the initial `B` buckets, segment `k ≥ 1` the next `B·2^(k-1)`. A bucket's address is
///   therefore stable, and a thread that found a bucket can lock it without fear that the memory
///   goes away.
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
///   chain longer than `max_load` entries (the two a bucket holds inline, by default) takes a
///   growth step with probability `1 / span`, decided by the key's hash, so each overflow
///   splits one bucket on average: the next in order, not necessarily its own (the overflowing
///   chain's turn comes). No entry count is kept, so inserts and removes share no counter
///   cache line; the average load settles near 1.8 entries per bucket.
/// * Publishing 64 splits at once means the shared count and the splitter's `try_lock` are
///   written once per 64 splits instead of once per split: on two cores that removed most of
///   the cost of growing, which is otherwise dominated by that cache line moving between
///   cores.
/// * A step runs only if no other thread is splitting (a `try_lock`, never a wait): a
///   descheduled splitter delays growth but never blocks an insert. Segments are allocated by
///   the splitter when the split reaches them.
///
/// The table never shrinks: a table that once held many entries keeps its buckets (the kernel's
/// never shrinks either).
pub struct ScaledHash<T> {
    table: ChainedTable<ScaledChains<T>>,
    sizing: Sizing,
}

impl<T: Send + Sync> ScaledHash<T> {
    /// Our default: the kernel's initial size for this machine, growing (see [`Sizing::growing`]).
    pub fn new() -> Self {
        Self::with_valid_sizing(Sizing::growing())
    }

    /// The kernel's fixed table for this machine (see [`Sizing::kernel`]).
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
    pub fn with_sizing_and_max_id(sizing: Sizing, max_id: Id) -> Result<Self, SizingError> {
        Ok(ScaledHash {
            table: ChainedTable::new(ScaledChains::new(sizing)?, max_id.min(MAX_ID)),
            sizing,
        })
    }

    /// A table with a sizing that [`Sizing::kernel_buckets`] keeps in range.
    fn with_valid_sizing(sizing: Sizing) -> Self {
        match Self::with_sizing(sizing) {
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

    #[test]
    fn addressing_covers_every_bucket_once() {
        let chains = ScaledChains::<()>::new(Sizing::Growing {
            initial: 4,
            max_load: 1,
        })
        .unwrap();
        for n in 4..64 {
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

    #[test]
    fn segments_tile_the_bucket_indices() {
        let chains = ScaledChains::<()>::new(Sizing::Fixed { buckets: 8 }).unwrap();
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
