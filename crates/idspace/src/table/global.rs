//! [`GlobalHash`]: the kernel's table before 6.15, 512 chains behind one global lock.

use super::chain::{delegate_chained_table, Chain, ChainGuard, ChainedTable, Chains};
use super::lock::{lock, Mutex};
use super::Entry;
use super::{Id, Owner, Rejected, TableError, MAX_ID};

/// Chains in the global design: `DEFINE_HASHTABLE(posix_timers_hashtable, 9)`.
pub const GLOBAL_BUCKETS: usize = 512;

pub(crate) struct GlobalChains<T> {
    chains: Mutex<Box<[Chain<T>]>>,
}

impl<T: Send + Sync> Chains<T> for GlobalChains<T> {
    #[inline]
    fn lock(&self, hash: u64) -> ChainGuard<'_, T> {
        ChainGuard::Shared {
            all: lock(&self.chains),
            index: hash as usize & (GLOBAL_BUCKETS - 1),
        }
    }

    fn memory_bytes(&self) -> usize {
        let chains = lock(&self.chains);
        core::mem::size_of::<Self>()
            + chains.len() * core::mem::size_of::<Chain<T>>()
            + chains.iter().map(Chain::heap_bytes).sum::<usize>()
    }
}

/// The pre-6.15 kernel table: 512 chains, every operation under one global mutex.
///
/// Kept as the baseline the rework is measured against: with many entries the chains grow long
/// (~200 entries each at 100,000) and every thread waits for the one lock.
pub struct GlobalHash<T> {
    table: ChainedTable<GlobalChains<T>>,
}

impl<T: Send + Sync> GlobalHash<T> {
    /// An empty table with the kernel's ID range (`0..=i32::MAX`).
    pub fn new() -> Self {
        Self::with_max_id(MAX_ID)
    }

    /// An empty table whose IDs run `0..=max_id` (a smaller space wraps and fills sooner).
    pub fn with_max_id(max_id: Id) -> Self {
        let chains = (0..GLOBAL_BUCKETS).map(|_| Chain::default()).collect();
        GlobalHash {
            table: ChainedTable::new(
                GlobalChains {
                    chains: Mutex::new(chains),
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
