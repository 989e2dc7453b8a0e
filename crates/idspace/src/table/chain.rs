//! What the two hash designs share: chains of entries, the owner bookkeeping around them, and
//! the [`IdTable`] operations written once over any way of finding and locking a chain.

use core::ops::{Deref, DerefMut};
use smallvec::SmallVec;

use super::entry::Entry;
use super::lock::{lock, Mutex, MutexGuard};
use super::owners::Owners;
use super::{exact_id_refusal, next_id, Id, IdTable, Owner, Rejected, TableError, MAX_ID};
use crate::sync::{Arc, AtomicBool, AtomicU32, Ordering};
use crate::util::hash::mix;
use crate::util::idset::IdSet;

/// One entry: its key and its value, stored inline in the chain. The value is reference
/// counted so that a lookup can hand it out and let go of the chain's lock (see [`Entry`]).
pub(crate) struct Node<T> {
    pub(crate) owner: Owner,
    pub(crate) id: Id,
    pub(crate) value: Arc<T>,
}

/// Entries a chain holds inline, in its bucket, before it spills to the heap. Two entries of a
/// pointer-sized value fill a 64-byte bucket line with its lock; the designs keep chains
/// around two entries long, so most lookups touch one line.
const INLINE: usize = 2;

/// The entries that hash to one bucket, in no particular order.
pub(crate) struct Chain<T> {
    nodes: SmallVec<[Node<T>; INLINE]>,
}

impl<T> Default for Chain<T> {
    fn default() -> Self {
        Chain {
            nodes: SmallVec::new(),
        }
    }
}

impl<T> Chain<T> {
    /// The slot of (owner, id), walking the chain as the kernel walks its hlist.
    #[inline]
    pub(crate) fn find(&self, owner: Owner, id: Id) -> Option<usize> {
        self.nodes
            .iter()
            .position(|node| node.id == id && node.owner == owner)
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    #[inline]
    pub(crate) fn push(&mut self, node: Node<T>) {
        self.nodes.push(node);
    }

    /// Removes the node in `slot`; the last node takes its place.
    #[inline]
    pub(crate) fn take(&mut self, slot: usize) -> Node<T> {
        self.nodes.swap_remove(slot)
    }

    /// Moves out every node for which `moves` holds, appending it to `to` (a bucket split).
    pub(crate) fn split_into(
        &mut self,
        to: &mut Chain<T>,
        mut moves: impl FnMut(&Node<T>) -> bool,
    ) {
        let mut slot = 0;
        while slot < self.nodes.len() {
            if moves(&self.nodes[slot]) {
                to.nodes.push(self.nodes.swap_remove(slot));
            } else {
                slot += 1;
            }
        }
        // A chain that overflowed its bucket spilled to the heap, and splitting is what brings
        // it back under `INLINE`: move it back into the bucket, so that lookups touch one line
        // and the table does not keep a heap array for every bucket that once held three.
        if self.nodes.spilled() && self.nodes.len() <= INLINE {
            self.nodes.shrink_to_fit();
        }
    }

    /// Heap bytes of the chain: its node array once it spills, and each value's count block
    /// (two counters and the value).
    pub(crate) fn heap_bytes(&self) -> usize {
        let shared =
            self.nodes.len() * (2 * core::mem::size_of::<usize>() + core::mem::size_of::<T>());
        if self.nodes.spilled() {
            self.nodes.capacity() * core::mem::size_of::<Node<T>>() + shared
        } else {
            shared
        }
    }

    #[inline]
    pub(crate) fn value(&self, slot: usize) -> &Arc<T> {
        &self.nodes[slot].value
    }
}

/// A locked chain: either one chain of a table behind one global lock, or a chain with a lock
/// of its own.
pub(crate) enum ChainGuard<'a, T> {
    /// The global design: the whole table is locked; `index` names the chain.
    Shared {
        all: MutexGuard<'a, Box<[Chain<T>]>>,
        index: usize,
    },
    /// A per-bucket lock.
    Own(MutexGuard<'a, Chain<T>>),
}

impl<T> Deref for ChainGuard<'_, T> {
    type Target = Chain<T>;
    #[inline]
    fn deref(&self) -> &Chain<T> {
        match self {
            ChainGuard::Shared { all, index } => &all[*index],
            ChainGuard::Own(chain) => chain,
        }
    }
}

impl<T> DerefMut for ChainGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Chain<T> {
        match self {
            ChainGuard::Shared { all, index } => &mut all[*index],
            ChainGuard::Own(chain) => chain,
        }
    }
}

/// How a hash design finds and locks the chain of a hash.
pub(crate) trait Chains<T>: Send + Sync {
    /// Locks the chain that holds (or would hold) keys with this hash.
    fn lock(&self, hash: u64) -> ChainGuard<'_, T>;
    /// Called after an insert of a key with `hash` left its chain `len` entries long, with no
    /// chain locked: a growing table may split buckets here.
    fn inserted(&self, _hash: u64, _len: usize) {}
    /// Bytes held by the buckets and chains.
    fn memory_bytes(&self) -> usize;
}

/// Stripes of an owner's ID list: ID `id` is recorded in stripe `id % ID_STRIPES`. Concurrent
/// creates of one owner claim consecutive IDs, so they land in different stripes.
#[cfg(not(loom))]
const ID_STRIPES: usize = 8;
#[cfg(loom)]
const ID_STRIPES: usize = 2;

/// One stripe of an owner's ID list, alone on its cache line (two CPUs recording neighbouring
/// IDs must not pass one line back and forth).
#[repr(align(64))]
#[derive(Default)]
struct IdStripe {
    /// The IDs `id` of this stripe, each stored as `id / ID_STRIPES` so that a stripe's values
    /// stay as dense as the IDs are (one bitmap covers `ID_STRIPES` times the IDs).
    ids: Mutex<IdSet>,
}

/// An owner's list of live IDs (the kernel's per-process timer list under `siglock`), striped
/// by ID so that creates and removes of one owner on different CPUs take different locks.
///
/// Each stripe's lock is held only to add or remove one ID, never together with a chain's lock
/// or another stripe's: a thread preempted while it holds one stalls only the few operations
/// that need the same stripe during those nanoseconds.
#[derive(Default)]
struct OwnerIds {
    stripes: [IdStripe; ID_STRIPES],
}

impl OwnerIds {
    #[inline]
    fn stripe(&self, id: Id) -> (&Mutex<IdSet>, Id) {
        let stripes = ID_STRIPES as Id;
        (&self.stripes[(id % stripes) as usize].ids, id / stripes)
    }

    /// Records `id`; false if it was already there.
    #[inline]
    fn insert(&self, id: Id) -> bool {
        let (stripe, value) = self.stripe(id);
        lock(stripe).insert(value)
    }

    /// Forgets `id`; false if it was not there.
    #[inline]
    fn remove(&self, id: Id) -> bool {
        let (stripe, value) = self.stripe(id);
        lock(stripe).remove(value)
    }

    /// How many IDs are recorded, summed a stripe at a time.
    fn len(&self) -> usize {
        self.stripes.iter().map(|s| lock(&s.ids).len()).sum()
    }

    /// The IDs in ascending order, read a stripe at a time.
    fn ascending(&self) -> Vec<Id> {
        let mut ids = Vec::new();
        for (index, stripe) in self.stripes.iter().enumerate() {
            let values = lock(&stripe.ids).ascending();
            ids.extend(
                values
                    .into_iter()
                    .map(|value| value * ID_STRIPES as Id + index as Id),
            );
        }
        ids.sort_unstable();
        ids
    }

    /// Heap bytes of the stripes' sets.
    fn heap_bytes(&self) -> usize {
        self.stripes.iter().map(|s| lock(&s.ids).heap_bytes()).sum()
    }
}

/// Per-owner bookkeeping of the hash designs: the cursor, restore mode, and the owner's list of
/// IDs (the kernel's per-process timer list, walked by `/proc/PID/timers` and at exit).
///
/// As in the kernel since 6.15, choosing an ID takes no per-owner lock: a create claims the
/// cursor's ID with an atomic increment, and the chain's lock decides whether that ID is free.
/// Only the list has locks, one per stripe of IDs, each held to record or forget one ID.
#[derive(Default)]
pub(crate) struct OwnerSlot {
    /// The next ID a create tries. Relaxed throughout: it only steers the search; the chains'
    /// locks decide which ID is whose.
    cursor: AtomicU32,
    /// Restore mode. Relaxed: a flag read on its own; no other data hangs on it.
    restoring: AtomicBool,
    ids: OwnerIds,
}

impl OwnerSlot {
    /// Whether the state is what a new owner starts with, so that dropping it loses nothing.
    /// Called under the registry shard's write lock, which keeps every other access out.
    fn is_initial(&self) -> bool {
        self.cursor.load(Ordering::Relaxed) == 0
            && !self.restoring.load(Ordering::Relaxed)
            && self.ids.len() == 0
    }

    /// Claims the cursor's ID and moves the cursor past it: the kernel's
    /// `atomic_inc_return(&sig->next_posix_timer_id)`, wrapping past `max_id` to 0.
    #[inline]
    fn claim(&self, max_id: Id) -> Id {
        if max_id == MAX_ID {
            // `MAX_ID + 1` divides 2^32, so the wrapped counter masked is the wrapped ID.
            self.cursor.fetch_add(1, Ordering::Relaxed) & MAX_ID
        } else {
            match self
                .cursor
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |id| {
                    Some(next_id(id, max_id))
                }) {
                Ok(id) | Err(id) => id,
            }
        }
    }

    /// The cursor as an ID (the counter may have passed `MAX_ID` and wrapped in its top bit).
    fn cursor(&self, max_id: Id) -> Id {
        let cursor = self.cursor.load(Ordering::Relaxed);
        if max_id == MAX_ID {
            cursor & MAX_ID
        } else {
            cursor
        }
    }
}

/// The hash designs' [`IdTable`], written once over their [`Chains`].
///
/// No operation holds two of these locks at once: a chain, a stripe of an owner's list. An ID
/// enters the chain before the list and leaves the list before the chain, so an ID in an
/// owner's list is always in its chain: a remove that wins the ID in the list is the one
/// remove that takes it out of the chain, and a create that inserted an ID into the chain finds
/// it missing from the list. Every operation on an owner runs with the registry's shard held
/// for reading, which `remove_owner` excludes with the write lock.
pub(crate) struct ChainedTable<C> {
    chains: C,
    owners: Owners<OwnerSlot>,
    max_id: Id,
}

impl<C> ChainedTable<C> {
    pub(crate) fn new(chains: C, max_id: Id) -> Self {
        ChainedTable {
            chains,
            owners: Owners::new(),
            max_id,
        }
    }

    pub(crate) fn chains(&self) -> &C {
        &self.chains
    }

    pub(crate) fn max_id(&self) -> Id {
        self.max_id
    }
}

/// What an insert leaves for [`Chains::inserted`], reported once no lock is held.
#[must_use = "report it with `Chains::inserted` once the owner's lock is released"]
struct Inserted {
    hash: u64,
    len: usize,
}

/// Inserts (owner, id) if its chain has no such entry: the kernel's `posix_timer_add_at`. The
/// value was allocated before, so that the chain's lock is held only for the search and the push.
#[inline]
fn try_insert<T, C: Chains<T>>(
    chains: &C,
    owner: Owner,
    id: Id,
    value: Arc<T>,
) -> Result<Inserted, Arc<T>> {
    let hash = mix(owner, id);
    let mut chain = chains.lock(hash);
    if chain.find(owner, id).is_some() {
        return Err(value);
    }
    chain.push(Node { owner, id, value });
    Ok(Inserted {
        hash,
        len: chain.len(),
    })
}

/// The value back out of its fresh allocation, which no other thread has seen.
fn unshared<T>(value: Arc<T>) -> T {
    match Arc::try_unwrap(value) {
        Ok(value) => value,
        Err(_) => unreachable!("a value not yet inserted has one reference"),
    }
}

/// Takes (owner, id) out of its chain.
#[inline]
fn take<T, C: Chains<T>>(chains: &C, owner: Owner, id: Id) -> Option<Arc<T>> {
    let hash = mix(owner, id);
    let mut chain = chains.lock(hash);
    let slot = chain.find(owner, id)?;
    Some(chain.take(slot).value)
}

impl<T: Send + Sync, C: Chains<T>> IdTable<T> for ChainedTable<C> {
    fn name(&self) -> &'static str {
        "chained"
    }

    fn create(&self, owner: Owner, value: T) -> Result<Id, Rejected<T>> {
        let max_id = self.max_id;
        // The registry's shard stays read-locked across the create: a `remove_owner`, which
        // write-locks it, sees the entry in the owner's list or starts after the create.
        // Allocated before any lock is taken.
        let mut value = Arc::new(value);
        let (id, inserted) = self.owners.with(owner, |slot| {
            // Every ID claimed in turn, at most once each: Full if all are taken.
            for _ in 0..=u64::from(max_id) {
                let id = slot.claim(max_id);
                match try_insert(&self.chains, owner, id, value) {
                    Ok(inserted) => {
                        // Newly in the chain, so not in the list (see `ChainedTable`).
                        let recorded = slot.ids.insert(id);
                        debug_assert!(recorded, "ID {id} was listed but not in its chain");
                        return Ok((id, inserted));
                    }
                    Err(back) => value = back,
                }
            }
            Err(Rejected {
                error: TableError::Full,
                value: unshared(value),
            })
        })?;
        // Growth runs with no lock held, so other creators of this owner do not wait for it.
        self.chains.inserted(inserted.hash, inserted.len);
        Ok(id)
    }

    fn create_at(&self, owner: Owner, id: Id, value: T) -> Result<Id, Rejected<T>> {
        let max_id = self.max_id;
        self.owners
            .with_existing_or(
                owner,
                value,
                |slot, value| {
                    let restoring = slot.restoring.load(Ordering::Relaxed);
                    if let Some(error) = exact_id_refusal(restoring, id, max_id) {
                        return Err(Rejected { error, value });
                    }
                    match try_insert(&self.chains, owner, id, Arc::new(value)) {
                        Ok(inserted) => {
                            let recorded = slot.ids.insert(id);
                            debug_assert!(recorded, "ID {id} was listed but not in its chain");
                            slot.cursor.store(next_id(id, max_id), Ordering::Relaxed);
                            Ok(inserted)
                        }
                        Err(value) => Err(Rejected {
                            error: TableError::Busy,
                            value: unshared(value),
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
            .map(|inserted| {
                self.chains.inserted(inserted.hash, inserted.len);
                id
            })
    }

    fn set_restore(&self, owner: Owner, on: bool) {
        if on {
            self.owners
                .with(owner, |slot| slot.restoring.store(true, Ordering::Relaxed));
        } else {
            self.owners
                .with_existing(owner, |slot| slot.restoring.store(false, Ordering::Relaxed));
            self.owners.remove_if(owner, OwnerSlot::is_initial);
        }
    }

    fn is_restoring(&self, owner: Owner) -> bool {
        self.owners
            .with_existing(owner, |slot| slot.restoring.load(Ordering::Relaxed))
            .unwrap_or(false)
    }

    fn get(&self, owner: Owner, id: Id) -> Option<Entry<T>> {
        // The chain is locked only while it is searched: the entry leaves with a count of its
        // own, and the lock is released before `get` returns.
        let chain = self.chains.lock(mix(owner, id));
        let slot = chain.find(owner, id)?;
        Some(Entry::new(chain.value(slot).clone()))
    }

    fn remove(&self, owner: Owner, id: Id) -> Result<Entry<T>, TableError> {
        self.owners
            .with_existing(owner, |slot| {
                // Winning the ID in the list makes this the one remove of it; until the chain
                // lets go, a create of the same ID still finds it taken (the kernel keeps a
                // deleted timer's ID reserved until it is unhashed).
                if !slot.ids.remove(id) {
                    return Err(TableError::NotFound);
                }
                take(&self.chains, owner, id)
                    .map(Entry::new)
                    .ok_or(TableError::NotFound)
            })
            .unwrap_or(Err(TableError::NotFound))
    }

    fn ids(&self, owner: Owner) -> Vec<Id> {
        self.owners
            .with_existing(owner, |slot| slot.ids.ascending())
            .unwrap_or_default()
    }

    fn remove_owner(&self, owner: Owner) -> usize {
        let Some(slot) = self.owners.remove(owner) else {
            return 0;
        };
        // No other thread can reach `slot` any more; its locks are uncontended.
        let values: Vec<Arc<T>> = slot
            .ids
            .ascending()
            .into_iter()
            .filter_map(|id| take(&self.chains, owner, id))
            .collect();
        let removed = values.len();
        drop(values); // user destructors run with no lock held
        removed
    }

    fn memory_bytes(&self) -> usize {
        let owners = self.owners.memory_bytes(|slot| slot.ids.heap_bytes());
        self.chains.memory_bytes() + owners
    }

    fn owners(&self) -> Vec<Owner> {
        self.owners.owners()
    }

    fn len(&self) -> usize {
        self.owners.sum(|slot| slot.ids.len())
    }

    fn entries(&self, owner: Owner) -> Vec<(Id, Entry<T>)> {
        self.owners
            .with_existing(owner, |slot| {
                // IDs listed then removed before their chain is read are left out, as a remove
                // that finished before the walk would be.
                slot.ids
                    .ascending()
                    .into_iter()
                    .filter_map(|id| {
                        let chain = self.chains.lock(mix(owner, id));
                        let slot = chain.find(owner, id)?;
                        Some((id, Entry::new(chain.value(slot).clone())))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn cursor(&self, owner: Owner) -> Id {
        self.owners
            .with_existing(owner, |slot| slot.cursor(self.max_id))
            .unwrap_or(0)
    }

    fn set_cursor(&self, owner: Owner, cursor: Id) -> Result<(), TableError> {
        if cursor > self.max_id {
            return Err(TableError::Invalid);
        }
        if cursor == 0 {
            self.owners
                .with_existing(owner, |slot| slot.cursor.store(0, Ordering::Relaxed));
            self.owners.remove_if(owner, OwnerSlot::is_initial);
        } else {
            self.owners
                .with(owner, |slot| slot.cursor.store(cursor, Ordering::Relaxed));
        }
        Ok(())
    }

    fn forget_idle(&self) -> usize {
        self.owners.remove_all_if(|slot| slot.ids.len() == 0)
    }
}

/// Implements [`IdTable`] for a newtype over [`ChainedTable`] by delegation.
macro_rules! delegate_chained_table {
    ($design:ident, $name:literal) => {
        impl<T: Send + Sync> $crate::table::IdTable<T> for $design<T> {
            fn name(&self) -> &'static str {
                $name
            }
            #[inline]
            fn create(&self, owner: Owner, value: T) -> Result<Id, Rejected<T>> {
                self.table.create(owner, value)
            }
            #[inline]
            fn create_at(&self, owner: Owner, id: Id, value: T) -> Result<Id, Rejected<T>> {
                self.table.create_at(owner, id, value)
            }
            fn set_restore(&self, owner: Owner, on: bool) {
                self.table.set_restore(owner, on)
            }
            fn is_restoring(&self, owner: Owner) -> bool {
                self.table.is_restoring(owner)
            }
            #[inline]
            fn get(&self, owner: Owner, id: Id) -> Option<Entry<T>> {
                self.table.get(owner, id)
            }
            #[inline]
            fn remove(&self, owner: Owner, id: Id) -> Result<Entry<T>, TableError> {
                self.table.remove(owner, id)
            }
            fn ids(&self, owner: Owner) -> Vec<Id> {
                self.table.ids(owner)
            }
            fn remove_owner(&self, owner: Owner) -> usize {
                self.table.remove_owner(owner)
            }
            fn memory_bytes(&self) -> usize {
                self.table.memory_bytes()
            }
            fn owners(&self) -> Vec<Owner> {
                self.table.owners()
            }
            fn len(&self) -> usize {
                self.table.len()
            }
            fn entries(&self, owner: Owner) -> Vec<(Id, Entry<T>)> {
                self.table.entries(owner)
            }
            fn cursor(&self, owner: Owner) -> Id {
                self.table.cursor(owner)
            }
            fn set_cursor(&self, owner: Owner, cursor: Id) -> Result<(), TableError> {
                self.table.set_cursor(owner, cursor)
            }
            fn forget_idle(&self) -> usize {
                self.table.forget_idle()
            }
        }
    };
}
pub(crate) use delegate_chained_table;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn node(id: Id) -> Node<u64> {
        Node {
            owner: 1,
            id,
            value: Arc::new(u64::from(id)),
        }
    }

    #[test]
    fn a_split_moves_a_spilled_chain_back_into_its_bucket() {
        let mut chain = Chain::default();
        for id in 0..=INLINE as Id {
            chain.push(node(id));
        }
        assert!(chain.nodes.spilled());
        let mut to = Chain::default();
        chain.split_into(&mut to, |node| node.id == 0);
        assert!(
            !chain.nodes.spilled(),
            "back under INLINE, still on the heap"
        );
        assert_eq!(chain.len(), INLINE);
        assert_eq!(to.len(), 1);
        assert!(chain.find(1, 0).is_none() && to.find(1, 0).is_some());
        assert!((1..=INLINE as Id).all(|id| chain.find(1, id).is_some()));
    }
}
