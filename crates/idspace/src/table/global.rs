//! [`GlobalHash`]: the kernel's table before 6.15, 512 chains behind one global lock.

use crate::prelude::*;
use core::ptr::NonNull;

use super::chain::{
    delegate_chained_table, empty_head, find_unlocked, release_chain, ChainGuard, ChainedTable,
    Chains, Head,
};
use super::node::Node;
use super::Entry;
use super::{Id, Owner, Rejected, TableError, MAX_ID};
use crate::lock::{DefaultLocks, Locks, Mutex};
use crate::util::readers::Section;

/// Chains in the global design: `DEFINE_HASHTABLE(posix_timers_hashtable, 9)`.
pub const GLOBAL_BUCKETS: usize = 512;

/// The chains' heads, all behind one lock (`hash_lock`).
pub(crate) struct GlobalChains<T, L: Locks> {
    lock: Mutex<L, ()>,
    heads: Box<[Head<T>]>,
}

// SAFETY: the heads point at nodes holding `T`s that any thread may read or drop, as
// `Arc<T>`s would be; links change only under `lock`.
unsafe impl<T: Send + Sync, L: Locks> Send for GlobalChains<T, L> {}
// SAFETY: see `Send`.
unsafe impl<T: Send + Sync, L: Locks> Sync for GlobalChains<T, L> {}

impl<T: Send + Sync, L: Locks> Chains<T, L> for GlobalChains<T, L> {
    #[inline]
    fn lock(&self, hash: u64) -> ChainGuard<'_, T, L> {
        let head = &self.heads[hash as usize & (GLOBAL_BUCKETS - 1)];
        ChainGuard::new(self.lock.lock(), head)
    }

    #[inline]
    fn find(
        &self,
        section: &Section<'_>,
        hash: u64,
        owner: Owner,
        id: Id,
    ) -> Option<NonNull<Node<T>>> {
        // The chains never move: nothing to validate.
        find_unlocked(
            section,
            &self.heads[hash as usize & (GLOBAL_BUCKETS - 1)],
            owner,
            id,
        )
    }

    fn memory_bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + self.heads.len() * core::mem::size_of::<Head<T>>()
            + self
                .heads
                .iter()
                .map(|head| ChainGuard::<T, L>::new(self.lock.lock(), head).node_bytes())
                .sum::<usize>()
    }
}

impl<T, L: Locks> Drop for GlobalChains<T, L> {
    fn drop(&mut self) {
        self.heads.iter_mut().for_each(release_chain);
    }
}

/// The pre-6.15 kernel table: 512 chains, every create and remove under one global mutex;
/// lookups walk their chain without it, as the kernel's did under RCU.
///
/// Kept as the baseline the rework is measured against: with many entries the chains grow long
/// (~200 entries each at 100,000), every lookup walks one, and every create and remove waits
/// for the one lock.
///
/// ```
/// use idspace::table::{GlobalHash, IdTable, TableError};
///
/// // IDs 0..=2 only: a small space fills and wraps sooner.
/// let timers = GlobalHash::with_max_id(2);
/// assert_eq!(timers.max_id(), 2);
/// for id in 0..=2 {
///     assert_eq!(timers.create(1, id * 10), Ok(id));
/// }
/// let rejected = timers.create(1, 99).unwrap_err();
/// assert_eq!((rejected.error, rejected.value), (TableError::Full, 99));
/// // Owners are independent spaces.
/// assert_eq!(timers.create(2, 0), Ok(0));
/// // A freed ID is found again once the cursor has wrapped.
/// assert_eq!(timers.remove(1, 1).as_deref(), Ok(&10));
/// assert_eq!(timers.create(1, 11), Ok(1));
/// assert_eq!(timers.len(), 4);
/// ```
pub struct GlobalHash<T, L: Locks = DefaultLocks> {
    table: ChainedTable<GlobalChains<T, L>, L>,
}

impl<T: Send + Sync> GlobalHash<T> {
    /// An empty table with the kernel's ID range (`0..=i32::MAX`).
    pub fn new() -> Self {
        Self::with_max_id(MAX_ID)
    }

    /// An empty table whose IDs run `0..=max_id` (a smaller space wraps and fills sooner).
    pub fn with_max_id(max_id: Id) -> Self {
        Self::with_locks_and_max_id(max_id)
    }
}

impl<T: Send + Sync, L: Locks> GlobalHash<T, L> {
    /// An empty table on the locks `L` (see [`lock`](crate::lock)), with the kernel's ID
    /// range.
    pub fn with_locks() -> Self {
        Self::with_locks_and_max_id(MAX_ID)
    }

    /// An empty table on the locks `L` whose IDs run `0..=max_id`.
    pub fn with_locks_and_max_id(max_id: Id) -> Self {
        let heads = (0..GLOBAL_BUCKETS).map(|_| empty_head()).collect();
        GlobalHash {
            table: ChainedTable::new(
                GlobalChains {
                    lock: crate::lock::mutex::<L, _>(()),
                    heads,
                },
                max_id.min(MAX_ID),
            ),
        }
    }

    /// The largest ID this table hands out.
    pub fn max_id(&self) -> Id {
        self.table.max_id()
    }
}

impl<T: Send + Sync> Default for GlobalHash<T> {
    fn default() -> Self {
        Self::new()
    }
}

delegate_chained_table!(GlobalHash, "global");
