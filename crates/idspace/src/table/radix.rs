//! [`Radix`]: a radix tree per owner, the per-process xarray the seed measured and rejected for
//! its memory on sparse IDs.

use super::chain::{Entry, EntryInner};
use super::owners::{Owners, Shard};
use super::{exact_id_refusal, next_id, Id, IdTable, Owner, Rejected, TableError, MAX_ID};
use crate::sync::{read, write, RwLock, RwLockReadGuard};
use crate::util::radix::RadixTree;

/// One owner's tree with its cursor and restore flag, behind the owner's lock (the xarray's
/// `xa_lock`, which the kernel would take on insertion; readers share it here where the kernel
/// uses RCU).
struct TreeState<T> {
    cursor: Id,
    restoring: bool,
    tree: RadixTree<T>,
}

pub(crate) struct RadixOwner<T> {
    state: RwLock<TreeState<T>>,
}

impl<T> Default for RadixOwner<T> {
    fn default() -> Self {
        RadixOwner {
            state: RwLock::new(TreeState {
                cursor: 0,
                restoring: false,
                tree: RadixTree::default(),
            }),
        }
    }
}

/// A per-owner radix tree of 64-slot nodes (the xarray design).
///
/// Lookups are one descent of at most six levels; IDs come out ascending for free. The cost is
/// memory on sparse IDs: every occupied 64-ID window costs a whole leaf, so 2048 IDs spaced 512
/// apart need 2048 leaves.
pub struct Radix<T> {
    owners: Owners<RadixOwner<T>>,
    max_id: Id,
}

impl<T: Send + Sync> Radix<T> {
    /// An empty table with the kernel's ID range.
    pub fn new() -> Self {
        Self::with_max_id(MAX_ID)
    }

    /// An empty table whose IDs run `0..=max_id`.
    pub fn with_max_id(max_id: Id) -> Self {
        Radix {
            owners: Owners::new(),
            max_id: max_id.min(MAX_ID),
        }
    }

    /// The largest ID this table hands out.
    pub fn max_id(&self) -> Id {
        self.max_id
    }
}

impl<T: Send + Sync> Default for Radix<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send + Sync> IdTable<T> for Radix<T> {
    fn name(&self) -> &'static str {
        "radix"
    }

    fn create(&self, owner: Owner, value: T) -> Result<Id, Rejected<T>> {
        let max = u64::from(self.max_id);
        self.owners.with(owner, |slot| {
            let mut state = write(&slot.state);
            let cursor = u64::from(state.cursor);
            let free = state
                .tree
                .first_free(cursor, max)
                .or_else(|| state.tree.first_free(0, max));
            let Some(id) = free else {
                return Err(Rejected {
                    error: TableError::Full,
                    value,
                });
            };
            let id = id as Id; // at most max_id
            match state.tree.insert(u64::from(id), value) {
                Ok(()) => {
                    state.cursor = next_id(id, self.max_id);
                    Ok(id)
                }
                // first_free said the index is free, and we hold the lock: unreachable, but
                // handing the value back beats a panic.
                Err(value) => Err(Rejected {
                    error: TableError::Busy,
                    value,
                }),
            }
        })
    }

    fn create_at(&self, owner: Owner, id: Id, value: T) -> Result<Id, Rejected<T>> {
        let max_id = self.max_id;
        self.owners.with_existing_or(
            owner,
            value,
            |slot, value| {
                let mut state = write(&slot.state);
                if let Some(error) = exact_id_refusal(state.restoring, id, max_id) {
                    return Err(Rejected { error, value });
                }
                match state.tree.insert(u64::from(id), value) {
                    Ok(()) => {
                        state.cursor = next_id(id, max_id);
                        Ok(id)
                    }
                    Err(value) => Err(Rejected {
                        error: TableError::Busy,
                        value,
                    }),
                }
            },
            // An owner without state has restore mode off.
            |value| {
                Err(Rejected {
                    error: TableError::NotRestoring,
                    value,
                })
            },
        )
    }

    fn set_restore(&self, owner: Owner, on: bool) {
        if on {
            self.owners
                .with(owner, |slot| write(&slot.state).restoring = true);
        } else {
            self.owners
                .with_existing(owner, |slot| write(&slot.state).restoring = false);
        }
    }

    fn is_restoring(&self, owner: Owner) -> bool {
        self.owners
            .with_existing(owner, |slot| read(&slot.state).restoring)
            .unwrap_or(false)
    }

    fn get(&self, owner: Owner, id: Id) -> Option<Entry<'_, T>> {
        let shard = self.owners.read_shard(owner);
        let slot: *const RadixOwner<T> = &**shard.get(&owner)?;
        // The owner's state is boxed inside the shard map, so its address is stable while it
        // stays in the map; removing it needs the shard's write lock, which `shard` (moved
        // into the entry and dropped last) keeps out.
        // SAFETY: so the state outlives the entry that this reference goes into.
        let slot: &RadixOwner<T> = unsafe { &*slot };
        let tree = read(&slot.state);
        let value: *const T = tree.tree.get(u64::from(id))?;
        Some(Entry {
            inner: EntryInner::Tree(RadixEntry {
                value,
                _tree: tree,
                _shard: shard,
            }),
        })
    }

    fn remove(&self, owner: Owner, id: Id) -> Result<T, TableError> {
        self.owners
            .with_existing(owner, |slot| write(&slot.state).tree.remove(u64::from(id)))
            .flatten()
            .ok_or(TableError::NotFound)
    }

    fn ids(&self, owner: Owner) -> Vec<Id> {
        self.owners
            .with_existing(owner, |slot| {
                let state = read(&slot.state);
                state
                    .tree
                    .indices()
                    .into_iter()
                    .map(|id| id as Id)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn remove_owner(&self, owner: Owner) -> usize {
        match self.owners.remove(owner) {
            // Dropped here, with no lock held: user destructors run outside the table.
            Some(slot) => read(&slot.state).tree.len(),
            None => 0,
        }
    }

    fn memory_bytes(&self) -> usize {
        self.owners
            .memory_bytes(|slot| read(&slot.state).tree.heap_bytes())
    }
}

/// The radix design's part of an [`Entry`]: the value, the owner's tree held for reading, and
/// the registry shard that keeps the owner's state alive. Fields drop in order: the tree guard
/// before the shard guard.
pub(crate) struct RadixEntry<'a, T> {
    value: *const T,
    _tree: RwLockReadGuard<'a, TreeState<T>>,
    _shard: RwLockReadGuard<'a, Shard<RadixOwner<T>>>,
}

impl<T> RadixEntry<'_, T> {
    #[inline]
    pub(crate) fn value(&self) -> &T {
        // `value` points into a leaf of the tree that `_tree` holds for reading.
        // SAFETY: so the leaf can be neither changed nor freed while `self` lives.
        unsafe { &*self.value }
    }
}
