//! [`Radix`]: a radix tree per owner, the per-process xarray the posix-timers rework measured and
//! rejected for its memory on sparse IDs.

use super::node::Node;
use super::owners::Owners;
use super::{exact_id_refusal, next_id, Entry, Id, IdTable, Owner, Rejected, TableError, MAX_ID};
use crate::lock::{DefaultLocks, Locks, RwLock};
use crate::prelude::*;
use crate::util::radix::RadixTree;

/// One owner's tree with its cursor and restore flag, behind the owner's lock (the xarray's
/// `xa_lock`, which the kernel would take on insertion; readers share it here where the kernel
/// uses RCU).
struct TreeState<T> {
    cursor: Id,
    restoring: bool,
    /// The tree holds one reference to each entry, so that a lookup can hand out another and
    /// let go of the tree.
    tree: RadixTree<Entry<T>>,
}

impl<T> TreeState<T> {
    /// Whether the state is what a new owner starts with, so that dropping it loses nothing.
    fn is_initial(&self) -> bool {
        self.cursor == 0 && !self.restoring && self.tree.len() == 0
    }

    /// Places `value` at `id` if that ID is free (checked here, under the owner's write lock
    /// the caller holds), and moves the cursor past it, as `idr_alloc_cyclic` does.
    fn place(&mut self, owner: Owner, id: Id, value: T, max_id: Id) -> Result<Id, Rejected<T>> {
        if self.tree.get(u64::from(id)).is_some() {
            return Err(Rejected {
                error: TableError::Busy,
                value,
            });
        }
        let _ = self
            .tree
            .insert(u64::from(id), Entry::new(owner, id, value));
        self.cursor = next_id(id, max_id);
        Ok(id)
    }
}

pub(crate) struct RadixOwner<T, L: Locks> {
    state: RwLock<L, TreeState<T>>,
}

impl<T, L: Locks> Default for RadixOwner<T, L> {
    fn default() -> Self {
        RadixOwner {
            state: crate::lock::rwlock::<L, _>(TreeState {
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
///
/// ```
/// use idspace::table::{IdTable, Radix};
///
/// let table = Radix::new();
/// // Sparse IDs, as a restore creates them.
/// table.set_restore(5, true);
/// for id in [3, 700, 40_000] {
///     assert_eq!(table.create_at(5, id, id * 2).map_err(|r| r.error), Ok(id));
/// }
/// table.set_restore(5, false);
/// assert_eq!(table.ids(5), [3, 700, 40_000]);
/// // The cursor moved past the last exact ID.
/// assert_eq!(table.create(5, 0), Ok(40_001));
/// assert_eq!(table.get(5, 700).as_deref(), Some(&1400));
/// assert_eq!(table.len(), 4);
/// assert_eq!(table.remove_owner(5), 4);
/// assert!(table.is_empty());
/// ```
pub struct Radix<T, L: Locks = DefaultLocks> {
    owners: Owners<RadixOwner<T, L>, L>,
    max_id: Id,
}

impl<T: Send + Sync> Radix<T> {
    /// An empty table with the kernel's ID range.
    pub fn new() -> Self {
        Self::with_max_id(MAX_ID)
    }

    /// An empty table whose IDs run `0..=max_id`.
    pub fn with_max_id(max_id: Id) -> Self {
        Self::with_locks_and_max_id(max_id)
    }
}

impl<T: Send + Sync, L: Locks> Radix<T, L> {
    /// An empty table on the locks `L` (see [`lock`](crate::lock)), with the kernel's ID
    /// range.
    pub fn with_locks() -> Self {
        Self::with_locks_and_max_id(MAX_ID)
    }

    /// An empty table on the locks `L` whose IDs run `0..=max_id`.
    pub fn with_locks_and_max_id(max_id: Id) -> Self {
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

impl<T: Send + Sync, L: Locks> IdTable<T> for Radix<T, L> {
    fn name(&self) -> &'static str {
        "radix"
    }

    fn create(&self, owner: Owner, value: T) -> Result<Id, Rejected<T>> {
        let max = u64::from(self.max_id);
        let no_memory = |value| {
            Err(Rejected {
                error: TableError::NoMemory,
                value,
            })
        };
        self.owners.try_with(
            owner,
            value,
            |slot, value| {
                let mut state = slot.state.write();
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
                                   // first_free said the index is free, and we hold the lock: `place` refusing it
                                   // is unreachable, but handing the value back beats a panic.
                state.place(owner, id, value, self.max_id)
            },
            no_memory,
        )
    }

    fn create_at(&self, owner: Owner, id: Id, value: T) -> Result<Id, Rejected<T>> {
        let max_id = self.max_id;
        self.owners.with_existing_or(
            owner,
            value,
            |slot, value| {
                let mut state = slot.state.write();
                if let Some(error) = exact_id_refusal(state.restoring, id, max_id) {
                    return Err(Rejected { error, value });
                }
                state.place(owner, id, value, max_id)
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
                .with(owner, |slot| slot.state.write().restoring = true);
        } else {
            self.owners
                .with_existing(owner, |slot| slot.state.write().restoring = false);
            self.owners
                .remove_if(owner, |slot| slot.state.read().is_initial());
        }
    }

    fn is_restoring(&self, owner: Owner) -> bool {
        self.owners
            .with_existing(owner, |slot| slot.state.read().restoring)
            .unwrap_or(false)
    }

    fn get(&self, owner: Owner, id: Id) -> Option<Entry<T>> {
        // The shard and the tree are held for reading only while the entry's count is raised.
        self.owners
            .with_existing(owner, |slot| {
                slot.state.read().tree.get(u64::from(id)).cloned()
            })
            .flatten()
    }

    fn remove(&self, owner: Owner, id: Id) -> Result<Entry<T>, TableError> {
        self.owners
            .with_existing(owner, |slot| slot.state.write().tree.remove(u64::from(id)))
            .flatten()
            .ok_or(TableError::NotFound)
    }

    fn ids(&self, owner: Owner) -> Vec<Id> {
        self.owners
            .with_existing(owner, |slot| {
                let state = slot.state.read();
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
            Some(slot) => slot.state.read().tree.len(),
            None => 0,
        }
    }

    fn owners(&self) -> Vec<Owner> {
        self.owners.owners()
    }

    fn len(&self) -> usize {
        self.owners.sum(|slot| slot.state.read().tree.len())
    }

    fn entries(&self, owner: Owner) -> Vec<(Id, Entry<T>)> {
        self.owners
            .with_existing(owner, |slot| {
                let state = slot.state.read();
                state
                    .tree
                    .indices()
                    .into_iter()
                    .filter_map(|id| Some((id as Id, state.tree.get(id)?.clone())))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn cursor(&self, owner: Owner) -> Id {
        self.owners
            .with_existing(owner, |slot| slot.state.read().cursor)
            .unwrap_or(0)
    }

    fn set_cursor(&self, owner: Owner, cursor: Id) -> Result<(), TableError> {
        if cursor > self.max_id {
            return Err(TableError::Invalid);
        }
        if cursor == 0 {
            self.owners
                .with_existing(owner, |slot| slot.state.write().cursor = 0);
            self.owners
                .remove_if(owner, |slot| slot.state.read().is_initial());
        } else {
            self.owners
                .with(owner, |slot| slot.state.write().cursor = cursor);
        }
        Ok(())
    }

    fn forget_idle(&self) -> usize {
        self.owners
            .remove_all_if(|slot| slot.state.read().tree.len() == 0)
    }

    fn memory_bytes(&self) -> usize {
        // Each entry's node: its key, link, count and value (the link is unused here).
        let shared = core::mem::size_of::<Node<T>>();
        self.owners.memory_bytes(|slot| {
            let state = slot.state.read();
            state.tree.heap_bytes() + state.tree.len() * shared
        })
    }
}
