//! What the two hash designs share: chains of intrusive nodes, the owner bookkeeping around
//! them, and the [`IdTable`] operations written once over any way of finding and locking a
//! chain.

use crate::prelude::*;
use core::ptr::NonNull;

use crossbeam_utils::CachePadded;

use super::entry::Entry;
use super::limbo::{Limbo, Retired};
use super::node::Node;
use super::owners::{Counted, Owners, Shared};
use super::{exact_id_refusal, next_id, Id, IdTable, Owner, Rejected, TableError, MAX_ID};
use crate::lock::{DefaultLocks, Locks, Mutex, MutexGuard};
use crate::sync::{exclusive_load, AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use crate::util::hash::mix;
use crate::util::idset::IdSet;
use crate::util::readers::{Readers, Section};

/// The head of a chain: its first node, or null (the kernel's `hlist_head`). A chain owns one
/// reference to each node linked into it.
pub(crate) type Head<T> = AtomicPtr<Node<T>>;

/// An empty chain's head.
pub(crate) fn empty_head<T>() -> Head<T> {
    AtomicPtr::new(core::ptr::null_mut())
}

/// A locked chain: the guard of the lock that covers it (its bucket's, or the global one) and
/// its head. Links are changed only through a guard.
///
/// Links are stored with Release and loaded with Acquire: a node's fields are written before
/// the store that links it, so whoever finds the node through a link sees them.
pub(crate) struct ChainGuard<'a, T, L: Locks> {
    _lock: MutexGuard<'a, L, ()>,
    head: &'a Head<T>,
}

impl<'a, T, L: Locks> ChainGuard<'a, T, L> {
    /// The chain at `head`, whose lock the caller holds in `lock`.
    #[inline]
    pub(crate) fn new(lock: MutexGuard<'a, L, ()>, head: &'a Head<T>) -> Self {
        ChainGuard { _lock: lock, head }
    }

    /// The node after the link `link` (a pointer with the provenance of the node's allocation,
    /// so that the last reference can free it).
    #[inline]
    fn follow(link: &Head<T>) -> Option<NonNull<Node<T>>> {
        // Acquire pairs with the Release stores that link nodes (see the type's docs).
        NonNull::new(link.load(Ordering::Acquire))
    }

    /// A linked node, borrowed for as long as the chain is.
    #[inline]
    fn node(&self, node: NonNull<Node<T>>) -> &Node<T> {
        // SAFETY: a linked node holds the chain's reference, and only a holder of the chain's
        // lock (which `self` is, for the borrow) can unlink it and give that reference away.
        unsafe { node.as_ref() }
    }

    /// The chain's nodes, first to last.
    #[inline]
    fn nodes(&self) -> impl Iterator<Item = NonNull<Node<T>>> + '_ {
        core::iter::successors(Self::follow(self.head), |&node| {
            Self::follow(&self.node(node).next)
        })
    }

    /// A new reference to the node of (owner, id), found by walking the chain as the kernel
    /// walks its hlist.
    #[inline]
    pub(crate) fn get(&self, owner: Owner, id: Id) -> Option<Entry<T>> {
        let node = self.nodes().find(|&node| self.node(node).is(owner, id))?;
        // SAFETY: the chain's reference keeps the node alive while we hold its lock.
        Some(unsafe { Entry::retained(node) })
    }

    /// Whether the chain holds (owner, id): a linked node is alive (the chain holds a strong
    /// reference), so no reference is taken.
    #[inline]
    pub(crate) fn holds(&self, owner: Owner, id: Id) -> bool {
        self.nodes().any(|node| self.node(node).is(owner, id))
    }

    /// Links `node` first unless the chain already holds its key (the node comes back then);
    /// the chain's length afterwards. The node is pinned for the table's lookups (see the
    /// `node` module) until its unlink's grace period has passed.
    #[inline]
    pub(crate) fn insert(&mut self, node: Box<Node<T>>) -> Result<usize, Box<Node<T>>> {
        let mut len = 0;
        for other in self.nodes() {
            if self.node(other).is(node.owner, node.id) {
                return Err(node);
            }
            len += 1;
        }
        node.pin();
        self.link(NonNull::from(Box::leak(node)));
        Ok(len + 1)
    }

    /// Links `node` first; the caller's reference to it becomes the chain's.
    #[inline]
    fn link(&mut self, node: NonNull<Node<T>>) {
        // Release, like every link: a node moved by a split is still reachable from its old
        // chain, and a lookup standing on it follows this store into the new chain, whose
        // nodes were made by other threads. The Release fence in `ScaledChains::grow` already
        // orders that in the language, but ThreadSanitizer does not model fences, and without
        // this edge it sees the lookup's reads of the new chain's nodes race the writes that
        // made them. On x86 a Release store is the same `mov`.
        self.node(node)
            .next
            .store(self.head.load(Ordering::Relaxed), Ordering::Release);
        // Release: see the type's docs.
        self.head.store(node.as_ptr(), Ordering::Release);
    }

    /// Unlinks the node of (owner, id) and hands over the chain's reference to it, and the
    /// table's pin on its memory, which must be kept until a grace period has passed.
    #[inline]
    pub(crate) fn unlink(&mut self, owner: Owner, id: Id) -> Option<(Entry<T>, Retired)> {
        let mut link = self.head;
        while let Some(node) = Self::follow(link) {
            let node_ref = self.node(node);
            if node_ref.is(owner, id) {
                // Release: see the type's docs.
                link.store(node_ref.next.load(Ordering::Acquire), Ordering::Release);
                // SAFETY: the chain's reference to the node, given up by unlinking it, and the
                // pin every linked node carries (`insert`), handed to the caller with its duty.
                return Some(unsafe { (Entry::from_reference(node), Retired::new(node)) });
            }
            link = &node_ref.next;
        }
        None
    }

    /// Moves every node for which `moves` holds into `to` (a bucket split).
    pub(crate) fn split_into(
        &mut self,
        to: &mut ChainGuard<'_, T, L>,
        mut moves: impl FnMut(&Node<T>) -> bool,
    ) {
        let mut link = self.head;
        while let Some(node) = Self::follow(link) {
            let node_ref = self.node(node);
            if moves(node_ref) {
                link.store(node_ref.next.load(Ordering::Acquire), Ordering::Release);
                // The chain's reference moves from this chain to `to` (both locked).
                to.link(node);
            } else {
                link = &node_ref.next;
            }
        }
    }

    /// Bytes of the chain's nodes.
    pub(crate) fn node_bytes(&self) -> usize {
        self.nodes().count() * core::mem::size_of::<Node<T>>()
    }
}

/// Drops the chain's references to its nodes and their pins (the table is going away).
pub(crate) fn release_chain<T>(head: &mut Head<T>) {
    let mut next = exclusive_load(head);
    while let Some(node) = NonNull::new(next) {
        // SAFETY: `&mut` to the head means no other thread reaches the chain; the node is live
        // while the chain's reference to it is.
        next = exclusive_load(unsafe { &mut (*node.as_ptr()).next });
        // SAFETY: the chain's reference to the node, given up; then the pin every linked node
        // carries, with no lookup running (`&mut`).
        unsafe {
            Node::release(node);
            Node::unpin(node);
        }
    }
}

/// The node of (owner, id) in the chain at `head`, walked without the chain's lock as the
/// kernel walks its hlist under RCU. Links are loaded with Acquire, pairing with the Release
/// stores that link nodes, so the fields of every node reached are visible; a node's key
/// never changes once it is linked.
///
/// The caller is in a read-side section of the table (see [`Readers`]): every node it can reach
/// stays allocated until the section ends, and the pointer returned may be used until then.
#[inline]
pub(crate) fn find_unlocked<T>(
    _section: &Section<'_>,
    head: &Head<T>,
    owner: Owner,
    id: Id,
) -> Option<NonNull<Node<T>>> {
    let mut next = head.load(Ordering::Acquire);
    while let Some(node) = NonNull::new(next) {
        // SAFETY: reached from the chain during the section, so allocated (see `Readers`).
        let node_ref = unsafe { node.as_ref() };
        node_ref.reached();
        if node_ref.is(owner, id) {
            return Some(node);
        }
        next = node_ref.next.load(Ordering::Acquire);
    }
    None
}

/// How a hash design finds and locks the chain of a hash.
pub(crate) trait Chains<T, L: Locks>: Send + Sync {
    /// Locks the chain that holds (or would hold) keys with this hash.
    fn lock(&self, hash: u64) -> ChainGuard<'_, T, L>;
    /// The node of (owner, id), whose hash is `hash`, found without taking a lock (see
    /// [`find_unlocked`]); valid while `section` lives.
    fn find(
        &self,
        section: &Section<'_>,
        hash: u64,
        owner: Owner,
        id: Id,
    ) -> Option<NonNull<Node<T>>>;
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

/// One stripe of an owner's ID list, alone on its cache lines (two CPUs recording neighbouring
/// IDs must not pass one line back and forth).
#[repr(align(64))]
struct IdStripe<L: Locks> {
    ids: Mutex<L, Stripe>,
}

/// What a stripe's lock covers.
#[derive(Default)]
struct Stripe {
    /// The IDs `id` of this stripe, each stored as `id / ID_STRIPES` so that a stripe's values
    /// stay as dense as the IDs are (one bitmap covers `ID_STRIPES` times the IDs).
    ids: IdSet,
    /// The nodes the removes of this stripe's IDs unlinked, until their grace period passes.
    limbo: Limbo,
}

impl<L: Locks> Default for IdStripe<L> {
    fn default() -> Self {
        IdStripe {
            ids: crate::lock::mutex::<L, _>(Stripe::default()),
        }
    }
}

/// An owner's list of live IDs (the kernel's per-process timer list under `siglock`), striped
/// by ID so that creates and removes of one owner on different CPUs take different locks.
///
/// Each stripe's lock is held only to add or remove one ID (with the ID's one chain lock
/// inside it), never together with another stripe's: a thread preempted while it holds one
/// stalls only the few operations that need the same stripe during those nanoseconds.
struct OwnerIds<L: Locks> {
    stripes: [IdStripe<L>; ID_STRIPES],
}

impl<L: Locks> Default for OwnerIds<L> {
    fn default() -> Self {
        OwnerIds {
            stripes: core::array::from_fn(|_| IdStripe::default()),
        }
    }
}

impl<L: Locks> OwnerIds<L> {
    #[inline]
    fn stripe(&self, id: Id) -> (&Mutex<L, Stripe>, Id) {
        let stripes = ID_STRIPES as Id;
        (&self.stripes[(id % stripes) as usize].ids, id / stripes)
    }

    /// Forgets `id` and runs `then` on the stripe's limbo with the stripe still locked;
    /// `None` if `id` was not there.
    #[inline]
    fn remove_then<R>(&self, id: Id, then: impl FnOnce(&mut Limbo) -> R) -> Option<R> {
        let (stripe, value) = self.stripe(id);
        let mut stripe = stripe.lock();
        if !stripe.ids.remove(value) {
            return None;
        }
        Some(then(&mut stripe.limbo))
    }

    /// [`remove_then`](Self::remove_then) for a caller that holds no registry lock: checks
    /// under the stripe's lock that `remove_owner` has not detached the state first.
    #[inline]
    fn remove_then_attached<R>(
        &self,
        id: Id,
        detached: &AtomicBool,
        then: impl FnOnce(&mut Limbo) -> R,
    ) -> Attached<R> {
        let (stripe, value) = self.stripe(id);
        let mut stripe = stripe.lock();
        // Relaxed: ordered by the stripe's lock (see `OwnerSlot::detached`).
        if detached.load(Ordering::Relaxed) {
            return Attached::Detached;
        }
        if !stripe.ids.remove(value) {
            return Attached::Missing;
        }
        Attached::Removed(then(&mut stripe.limbo))
    }

    /// Moves every node the stripes' limbos keep into `into`, for a caller that waits for a
    /// grace period before dropping them.
    fn drain_limbo(&self, into: &mut Vec<Retired>) {
        for stripe in &self.stripes {
            stripe.ids.lock().limbo.take_all(into);
        }
    }

    /// How many IDs are recorded, summed a stripe at a time.
    fn len(&self) -> usize {
        self.stripes.iter().map(|s| s.ids.lock().ids.len()).sum()
    }

    /// The IDs in ascending order, read a stripe at a time.
    fn ascending(&self) -> Vec<Id> {
        let mut ids = Vec::new();
        for (index, stripe) in self.stripes.iter().enumerate() {
            let values = stripe.ids.lock().ids.ascending();
            ids.extend(
                values
                    .into_iter()
                    .map(|value| value * ID_STRIPES as Id + index as Id),
            );
        }
        ids.sort_unstable();
        ids
    }

    /// Heap bytes of the stripes' sets and limbos, counting `node` bytes per node a limbo
    /// keeps.
    fn heap_bytes(&self, node: usize) -> usize {
        self.stripes
            .iter()
            .map(|s| {
                let stripe = s.ids.lock();
                stripe.ids.heap_bytes() + stripe.limbo.heap_bytes() + stripe.limbo.len() * node
            })
            .sum()
    }
}

/// Per-owner bookkeeping of the hash designs: the cursor, restore mode, and the owner's list of
/// IDs (the kernel's per-process timer list, walked by `/proc/PID/timers` and at exit).
///
/// As in the kernel since 6.15, choosing an ID takes no per-owner lock: a create claims the
/// cursor's ID with an atomic increment, and the chain's lock decides whether that ID is free.
/// Only the list has locks, one per stripe of IDs, each held to record or forget one ID.
pub(crate) struct OwnerSlot<L: Locks> {
    /// The next ID a create tries. Relaxed throughout: it only steers the search; the chains'
    /// locks decide which ID is whose. On a cache line of its own: every create of the owner
    /// writes it, and the flags below, which every create reads, would otherwise leave with
    /// it to whichever CPU created last.
    cursor: CachePadded<AtomicU32>,
    /// Restore mode. Relaxed: a flag read on its own; no other data hangs on it.
    restoring: AtomicBool,
    /// Set once `remove_owner` took the state out of the registry: a create through an owner
    /// handle then links nothing (see `OwnerSlot::link_and_record`). Relaxed: it is stored
    /// before `remove_owner` takes each stripe's lock and read under a stripe's lock, so the
    /// stripe locks order it.
    detached: AtomicBool,
    /// Pointers to the state: the registry's and the owner handles' (see `owners::Shared`).
    pointers: AtomicUsize,
    ids: OwnerIds<L>,
}

impl<L: Locks> Counted for OwnerSlot<L> {
    fn pointers(&self) -> &AtomicUsize {
        &self.pointers
    }
}

/// What [`OwnerIds::remove_then_attached`] found.
enum Attached<R> {
    /// The ID was listed and is no more; what the closure returned.
    Removed(R),
    /// The ID was not listed.
    Missing,
    /// `remove_owner` detached the state: nothing was touched.
    Detached,
}

/// Why [`OwnerSlot::link_and_record`] linked nothing; the node comes back.
enum Unlinked<T> {
    /// The chain already holds the key.
    Taken(Box<Node<T>>),
    /// The state was detached by `remove_owner`.
    Detached(Box<Node<T>>),
}

impl<L: Locks> Default for OwnerSlot<L> {
    fn default() -> Self {
        OwnerSlot {
            cursor: CachePadded::new(AtomicU32::new(0)),
            restoring: AtomicBool::new(false),
            detached: AtomicBool::new(false),
            // The registry's (see `owners::Counted`).
            pointers: AtomicUsize::new(1),
            ids: OwnerIds::default(),
        }
    }
}

impl<L: Locks> OwnerSlot<L> {
    /// Whether the state is what a new owner starts with, so that dropping it loses nothing.
    /// Called under the registry shard's write lock, which keeps every other access out.
    fn is_initial(&self) -> bool {
        self.cursor.load(Ordering::Relaxed) == 0
            && !self.restoring.load(Ordering::Relaxed)
            && self.ids.len() == 0
    }

    /// Links `node` into its chain with `link` and records its ID in the list, both under
    /// the ID's stripe lock, unless `remove_owner` detached the state (then nothing is linked).
    ///
    /// The stripe is held across the link so that a create through an owner handle, which
    /// holds no registry lock, cannot add an entry `remove_owner` would miss: `remove_owner`
    /// sets `detached` and then takes every stripe's lock before it reads the list, so a
    /// create's section either ran before (its ID is listed) or sees the flag. Stripe before
    /// chain is the order a remove takes them in too.
    #[inline]
    fn link_and_record<T>(
        &self,
        node: Box<Node<T>>,
        link: impl FnOnce(Box<Node<T>>) -> Result<Inserted, Box<Node<T>>>,
    ) -> Result<Inserted, Unlinked<T>> {
        let id = node.id;
        let (stripe, value) = self.ids.stripe(id);
        let mut stripe = stripe.lock();
        if self.detached.load(Ordering::Relaxed) {
            return Err(Unlinked::Detached(node));
        }
        let inserted = link(node).map_err(Unlinked::Taken)?;
        // Newly in the chain, so not in the list (see `ChainedTable`).
        let recorded = stripe.ids.insert(value);
        debug_assert!(recorded, "ID {id} was listed but not in its chain");
        Ok(inserted)
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

/// An owner's state in one table, kept by a caller that creates for the owner often (a process
/// keeping its own, as the kernel reaches it through `current->signal`): a create through it
/// takes no lock of the owner registry. Made by `ScaledHash::owner_handle`.
///
/// While a handle lives, the owner's state is not dropped as idle (an owner with no entries,
/// cursor 0 and restore mode off stays listed by [`IdTable::owners`]); `remove_owner` still
/// removes the owner, after which creates through the handle go through the registry, as
/// `create(handle.owner(), value)` would.
///
/// A process's threads share its handle (clones name the same state):
///
/// ```
/// use idspace::table::{IdTable, OwnerHandle, ScaledHash};
///
/// let timers = ScaledHash::new();
/// let process: OwnerHandle = timers.owner_handle(42)?;
/// assert_eq!(timers.owners(), [42], "listed while its handle lives, though it holds no ID");
/// std::thread::scope(|scope| {
///     for thread in 0..4 {
///         let (timers, handle) = (&timers, process.clone());
///         scope.spawn(move || {
///             for _ in 0..10 {
///                 timers.create_in(&handle, thread).expect("room");
///             }
///         });
///     }
/// });
/// assert_eq!(process.owner(), 42);
/// assert_eq!(timers.ids(42), (0..40).collect::<Vec<_>>(), "one cursor, no ID twice");
/// # Ok::<(), idspace::table::TableError>(())
/// ```
pub struct OwnerHandle<L: Locks = DefaultLocks> {
    owner: Owner,
    /// The number of the table that made the handle.
    table: usize,
    slot: Shared<OwnerSlot<L>>,
}

impl<L: Locks> OwnerHandle<L> {
    /// The owner the handle creates for.
    pub fn owner(&self) -> Owner {
        self.owner
    }
}

impl<L: Locks> Clone for OwnerHandle<L> {
    fn clone(&self) -> Self {
        OwnerHandle {
            owner: self.owner,
            table: self.table,
            slot: self.slot.clone(),
        }
    }
}

impl<L: Locks> core::fmt::Debug for OwnerHandle<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OwnerHandle")
            .field("owner", &self.owner)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// Reader slots of a table: two per CPU, at least 4 and at most 64 (`Readers::new` rounds up
/// to a power of two; two in loom models). A lookup that finds them all taken locks its chain
/// instead of waiting, so a few suffice.
fn reader_slots() -> usize {
    #[cfg(not(loom))]
    let slots = (2 * crate::host::cpus()).clamp(4, 64);
    #[cfg(loom)]
    let slots = 2;
    slots
}

/// The hash designs' [`IdTable`], written once over their [`Chains`].
///
/// Two locks nest in one order only, stripe before chain: a create holds the stripe of its ID
/// while it inserts the ID into its chain and lists it (so that `remove_owner` orders it, see
/// `OwnerSlot::link_and_record`), and a remove holds it while it takes the ID out of its chain
/// (so that it can retire the node into the stripe's limbo under the same lock); nothing takes
/// a stripe while holding a chain. An ID enters the chain before the list and leaves the list
/// before the chain, so an ID in an owner's list is always in its chain: a remove that wins the
/// ID in the list is the one remove that takes it out of the chain, and a create that inserted
/// an ID into the chain finds it missing from the list. Every operation on an owner by number
/// runs with the registry's shard held for reading, which `remove_owner` excludes with the
/// write lock; a create through an owner handle holds no registry lock, and `remove_owner`
/// detaches the state before it reads the list (see `OwnerSlot::detached`).
pub(crate) struct ChainedTable<C, L: Locks> {
    chains: C,
    owners: Owners<OwnerSlot<L>, L, Shared<OwnerSlot<L>>>,
    /// Lookups in flight. A remove unlinks its node under the chain's lock and hands the
    /// chain's reference to the caller at once, but the table's pin on the node's memory goes
    /// to the limbo of the ID's stripe, which releases it only after a grace period
    /// ([`Limbo`]): every node a lookup's section can reach stays allocated, and the lookup
    /// takes a reference only while a strong one remains (`Node::try_retain`). Neither side
    /// waits: if every slot is taken, a lookup takes the chain's lock instead (a lock holder
    /// sees no unlinked node).
    readers: Readers,
    max_id: Id,
    /// The table's number, unique in the process: an owner handle names the table it was made
    /// by, and another table does not take it for its own.
    id: usize,
}

/// Numbers tables for their owner handles. `core`'s atomic, not the `sync` module's: a
/// counter of the process (loom's atomics live in one model), in no protocol; Relaxed.
static TABLES: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

impl<C, L: Locks> ChainedTable<C, L> {
    pub(crate) fn new(chains: C, max_id: Id) -> Self {
        ChainedTable {
            chains,
            owners: Owners::new(),
            readers: Readers::new(reader_slots()),
            max_id,
            id: TABLES.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
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

/// Links `node` into its chain unless the chain holds its key: the kernel's
/// `posix_timer_add_at`. The node was allocated before, so that the chain's lock is held only
/// for the search and the link.
#[inline]
fn try_insert<T, L: Locks, C: Chains<T, L>>(
    chains: &C,
    node: Box<Node<T>>,
) -> Result<Inserted, Box<Node<T>>> {
    let hash = mix(node.owner, node.id);
    let len = chains.lock(hash).insert(node)?;
    Ok(Inserted { hash, len })
}

/// The refusal of a create that found no memory for its entry.
fn no_memory<T>(value: T) -> Rejected<T> {
    Rejected {
        error: TableError::NoMemory,
        value,
    }
}

/// Takes (owner, id) out of its chain, with the chain's reference and the table's pin.
#[inline]
fn take<T, L: Locks, C: Chains<T, L>>(
    chains: &C,
    owner: Owner,
    id: Id,
) -> Option<(Entry<T>, Retired)> {
    chains.lock(mix(owner, id)).unlink(owner, id)
}

impl<T: Send + Sync, L: Locks, C: Chains<T, L>> IdTable<T> for ChainedTable<C, L> {
    fn name(&self) -> &'static str {
        "chained"
    }

    fn create(&self, owner: Owner, value: T) -> Result<Id, Rejected<T>> {
        // The entry's one allocation, made before any lock is taken.
        let node = Node::try_boxed(owner, 0, value).map_err(no_memory)?;
        self.create_node(node)
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
                    let node = Node::try_boxed(owner, id, value).map_err(no_memory)?;
                    match slot.link_and_record(node, |node| try_insert(&self.chains, node)) {
                        Ok(inserted) => {
                            slot.cursor.store(next_id(id, max_id), Ordering::Relaxed);
                            Ok(inserted)
                        }
                        Err(Unlinked::Taken(node)) => Err(Rejected {
                            error: TableError::Busy,
                            value: Node::into_value(*node), // never linked, so ours alone
                        }),
                        Err(Unlinked::Detached(_)) => unreachable!("{DETACHED_IN_REGISTRY}"),
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
            self.forget_if_initial(owner);
        }
    }

    fn is_restoring(&self, owner: Owner) -> bool {
        self.owners
            .with_existing(owner, |slot| slot.restoring.load(Ordering::Relaxed))
            .unwrap_or(false)
    }

    fn get(&self, owner: Owner, id: Id) -> Option<Entry<T>> {
        let hash = mix(owner, id);
        let Some(section) = self.readers.try_enter() else {
            // Every reader slot is taken: search under the chain's lock instead.
            return self.chains.lock(hash).get(owner, id);
        };
        let node = self.chains.find(&section, hash, owner, id)?;
        // SAFETY: the section keeps the node allocated: its table's pin is released only a
        // grace period after the unlink (see `Limbo`).
        if !unsafe { node.as_ref() }.try_retain() {
            return None; // removed and let go meanwhile
        }
        // SAFETY: the strong reference just taken is the entry's.
        let entry = unsafe { Entry::from_reference(node) };
        drop(section);
        Some(entry)
    }

    fn get_copied(&self, owner: Owner, id: Id) -> Option<T>
    where
        T: Copy,
    {
        let hash = mix(owner, id);
        let Some(section) = self.readers.try_enter() else {
            return self.chains.lock(hash).get(owner, id).map(|entry| *entry);
        };
        let node = self.chains.find(&section, hash, owner, id)?;
        // SAFETY: the section keeps the node allocated, as in `get`.
        let value = unsafe { node.as_ref() }.copied();
        drop(section);
        value
    }

    fn contains(&self, owner: Owner, id: Id) -> bool {
        let hash = mix(owner, id);
        let Some(section) = self.readers.try_enter() else {
            return self.chains.lock(hash).holds(owner, id);
        };
        // No reference is taken: the section keeps the node allocated while its count word is
        // read (as in `get`), and a node whose value is gone was removed meanwhile.
        self.chains
            .find(&section, hash, owner, id)
            // SAFETY: the section keeps the node allocated, as in `get`.
            .is_some_and(|node| unsafe { node.as_ref() }.is_alive())
    }

    fn remove(&self, owner: Owner, id: Id) -> Result<Entry<T>, TableError> {
        self.owners
            .with_existing(owner, |slot| {
                // Winning the ID in the list makes this the one remove of it; until the chain
                // lets go, a create of the same ID still finds it taken (the kernel keeps a
                // deleted timer's ID reserved until it is unhashed). The stripe stays locked
                // while the node is unlinked and its pin retired into the stripe's limbo,
                // which releases it a grace period later (the kernel's `kfree_rcu`): the
                // remove never waits for a lookup.
                slot.ids
                    .remove_then(id, |limbo| self.take_into(limbo, owner, id))
            })
            .flatten()
            .flatten()
            .ok_or(TableError::NotFound)
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
        // No other thread reaches `slot` through the registry any more, but a create through an
        // owner handle may. Once the flag is set and every stripe's lock was taken after it
        // (draining the limbos does), no create links or lists anything more: the list read
        // below is final (see `OwnerSlot::link_and_record`).
        slot.detached.store(true, Ordering::Relaxed);
        let mut retired = Vec::new();
        slot.ids.drain_limbo(&mut retired);
        let values: Vec<Entry<T>> = slot
            .ids
            .ascending()
            .into_iter()
            .filter_map(|id| {
                let (entry, pin) = take(&self.chains, owner, id)?;
                retired.push(pin);
                Some(entry)
            })
            .collect();
        let removed = values.len();
        drop(slot);
        // This call may wait (a process exit): one grace period for every node unlinked,
        // rather than a limbo's turn (the kernel's `synchronize_rcu` before a bulk free).
        self.readers.synchronize();
        drop(retired);
        drop(values); // user destructors run with no lock held
        removed
    }

    fn memory_bytes(&self) -> usize {
        let node = core::mem::size_of::<Node<T>>();
        let owners = self.owners.memory_bytes(|slot| slot.ids.heap_bytes(node));
        self.chains.memory_bytes() + owners + self.readers.memory_bytes()
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
                    .filter_map(|id| Some((id, self.chains.lock(mix(owner, id)).get(owner, id)?)))
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
            self.forget_if_initial(owner);
        } else {
            self.owners
                .with(owner, |slot| slot.cursor.store(cursor, Ordering::Relaxed));
        }
        Ok(())
    }

    fn forget_idle(&self) -> usize {
        // The states dropped may keep unlinked nodes in their limbos: those wait for one grace
        // period here, after the registry's locks are let go.
        let retired = core::cell::RefCell::new(Vec::new());
        let dropped = self.owners.remove_all_if(|slot| {
            let idle = slot.ids.len() == 0;
            if idle {
                slot.ids.drain_limbo(&mut retired.borrow_mut());
            }
            idle
        });
        self.release_after_grace(retired.into_inner());
        dropped
    }
}

/// Why an unreachable arm is so: the registry's paths hold its shard for reading, and a state
/// is detached only after `remove_owner` took it out under the write lock.
const DETACHED_IN_REGISTRY: &str = "a state found in the registry is not detached";

/// How a create through one owner state ended without an entry; the node comes back.
enum Refused<T> {
    /// Every ID is taken.
    Full(Box<Node<T>>),
    /// `remove_owner` detached the state.
    Detached(Box<Node<T>>),
}

impl<C, L: Locks> ChainedTable<C, L> {
    /// Claims IDs from the state's cursor until one is free in its chain, links `node` with it
    /// and lists it (the kernel's `posix_timer_add`). Every ID is claimed at most once: `Full`
    /// if all are taken.
    #[inline]
    fn claim_and_link<T>(
        &self,
        slot: &OwnerSlot<L>,
        mut node: Box<Node<T>>,
    ) -> Result<(Id, Inserted), Refused<T>>
    where
        C: Chains<T, L>,
    {
        let max_id = self.max_id;
        for _ in 0..=u64::from(max_id) {
            let id = slot.claim(max_id);
            node.id = id;
            match slot.link_and_record(node, |node| try_insert(&self.chains, node)) {
                Ok(inserted) => return Ok((id, inserted)),
                Err(Unlinked::Taken(back)) => node = back,
                Err(Unlinked::Detached(back)) => return Err(Refused::Detached(back)),
            }
        }
        Err(Refused::Full(node))
    }

    /// [`IdTable::create`] of an allocated node, through the registry.
    fn create_node<T>(&self, node: Box<Node<T>>) -> Result<Id, Rejected<T>>
    where
        C: Chains<T, L>,
    {
        // The registry's shard stays read-locked across the create: a `remove_owner`, which
        // write-locks it, sees the entry in the owner's list or starts after the create.
        let (id, inserted) = self.owners.try_with(
            node.owner,
            node,
            |slot, node| match self.claim_and_link(slot, node) {
                Ok(created) => Ok(created),
                Err(Refused::Full(node)) => Err(Rejected {
                    error: TableError::Full,
                    value: Node::into_value(*node), // never linked, so ours alone
                }),
                Err(Refused::Detached(_)) => unreachable!("{DETACHED_IN_REGISTRY}"),
            },
            |node| Err(no_memory(Node::into_value(*node))),
        )?;
        // Growth runs with no lock held, so other creators of this owner do not wait for it.
        self.chains.inserted(inserted.hash, inserted.len);
        Ok(id)
    }

    /// A handle on the owner's state (made if the owner has none), for
    /// [`create_in`](Self::create_in).
    ///
    /// # Errors
    /// [`TableError::NoMemory`] if there is no memory for a new owner's state.
    pub(crate) fn owner_handle(&self, owner: Owner) -> Result<OwnerHandle<L>, TableError> {
        let slot = self.owners.share(owner).ok_or(TableError::NoMemory)?;
        Ok(OwnerHandle {
            owner,
            table: self.id,
            slot,
        })
    }

    /// [`IdTable::create`] through an owner handle: the registry is not consulted, as the
    /// kernel's `timer_create` finds its process's state through `current->signal`. A handle
    /// of another table, or one whose owner `remove_owner` dropped since, creates through the
    /// registry instead (as `create(handle.owner(), value)`).
    #[inline]
    pub(crate) fn create_in<T>(&self, handle: &OwnerHandle<L>, value: T) -> Result<Id, Rejected<T>>
    where
        C: Chains<T, L>,
    {
        let node = Node::try_boxed(handle.owner, 0, value).map_err(no_memory)?;
        if handle.table != self.id {
            return self.create_node(node);
        }
        match self.claim_and_link(&handle.slot, node) {
            Ok((id, inserted)) => {
                // Growth runs with no lock held, as in `create_node`.
                self.chains.inserted(inserted.hash, inserted.len);
                Ok(id)
            }
            Err(Refused::Full(node)) => Err(Rejected {
                error: TableError::Full,
                value: Node::into_value(*node), // never linked, so ours alone
            }),
            // The owner was removed: its next create makes a fresh state, as after any
            // `remove_owner`.
            Err(Refused::Detached(node)) => self.create_node(node),
        }
    }
}

impl<C, L: Locks> ChainedTable<C, L> {
    /// [`IdTable::remove`] through an owner handle: the registry is not consulted, as the
    /// kernel's `timer_delete` finds its process's timers through `current->signal`. A handle
    /// of another table, or one whose owner `remove_owner` dropped since, removes through the
    /// registry instead (as `remove(handle.owner(), id)`).
    #[inline]
    pub(crate) fn remove_in<T>(
        &self,
        handle: &OwnerHandle<L>,
        id: Id,
    ) -> Result<Entry<T>, TableError>
    where
        T: Send + Sync,
        C: Chains<T, L>,
    {
        if handle.table != self.id {
            return self.remove(handle.owner, id);
        }
        let slot = &*handle.slot;
        let owner = handle.owner;
        // As `remove`, with the stripe's lock ordering it against `remove_owner` in place of
        // the registry's: `remove_owner` sets `detached` and then takes every stripe's lock,
        // so a section that sees the flag clear ran before that (its node went into a limbo
        // `remove_owner` drains), and one that sees it set touches nothing of the old state.
        let removed = slot
            .ids
            .remove_then_attached(id, &slot.detached, |limbo| self.take_into(limbo, owner, id));
        match removed {
            Attached::Removed(entry) => entry.ok_or(TableError::NotFound),
            Attached::Missing => Err(TableError::NotFound),
            Attached::Detached => self.remove(owner, id),
        }
    }

    /// Takes (owner, id) out of its chain and retires the table's pin on the node into
    /// `limbo` (its stripe's, locked by the caller): the removed entry, if the chain held it.
    #[inline]
    fn take_into<T>(&self, limbo: &mut Limbo, owner: Owner, id: Id) -> Option<Entry<T>>
    where
        C: Chains<T, L>,
    {
        let (entry, retired) = take(&self.chains, owner, id)?;
        limbo.retire(retired, &self.readers);
        Some(entry)
    }

    /// Drops the owner's state if it is back to the initial one, its limbo's nodes released
    /// after a grace period.
    fn forget_if_initial(&self, owner: Owner) {
        let mut retired = Vec::new();
        self.owners.remove_if(owner, |slot| {
            let initial = slot.is_initial();
            if initial {
                slot.ids.drain_limbo(&mut retired);
            }
            initial
        });
        self.release_after_grace(retired);
    }

    /// Releases the pins of nodes unlinked earlier, after a grace period (none if there are
    /// none: these calls are the rare ones that may wait).
    fn release_after_grace(&self, retired: Vec<Retired>) {
        if !retired.is_empty() {
            self.readers.synchronize();
        }
        drop(retired);
    }
}

/// Implements [`IdTable`] for a newtype over [`ChainedTable`] by delegation.
macro_rules! delegate_chained_table {
    ($design:ident, $name:literal) => {
        impl<T: Send + Sync, L: $crate::lock::Locks> $crate::table::IdTable<T> for $design<T, L> {
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
            fn get_copied(&self, owner: Owner, id: Id) -> Option<T>
            where
                T: Copy,
            {
                self.table.get_copied(owner, id)
            }
            #[inline]
            fn contains(&self, owner: Owner, id: Id) -> bool {
                self.table.contains(owner, id)
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

    type Test = crate::lock::DefaultLocks;

    fn chain_of(
        head: &Head<u64>,
        lock: &Mutex<Test, ()>,
        f: impl FnOnce(&mut ChainGuard<'_, u64, Test>),
    ) {
        f(&mut ChainGuard::<u64, Test>::new(lock.lock(), head));
    }

    #[test]
    fn a_split_moves_exactly_the_chosen_nodes_and_keeps_every_reference() {
        let (lock, mut from, mut to) = (Mutex::<Test, ()>::new(()), empty_head(), empty_head());
        chain_of(&from, &lock, |chain| {
            for id in 0..5 {
                assert_eq!(
                    chain.insert(Node::boxed(1, id, u64::from(id))).ok(),
                    Some(id as usize + 1)
                );
            }
            assert!(chain.insert(Node::boxed(1, 3, 0)).is_err(), "a key twice");
        });
        let held = chain_of_get(&from, &lock, 2);
        {
            let mut source = ChainGuard::<u64, Test>::new(lock.lock(), &from);
            let other = Mutex::<Test, ()>::new(());
            let mut target = ChainGuard::<u64, Test>::new(other.lock(), &to);
            source.split_into(&mut target, |node| node.id % 2 == 0);
            assert_eq!(source.nodes().count(), 2);
            assert_eq!(target.nodes().count(), 3);
            assert!((0..5).all(|id| (id % 2 == 0) == target.get(1, id).is_some()));
            assert!((0..5).all(|id| (id % 2 == 1) == source.get(1, id).is_some()));
            let (removed, pin) = target.unlink(1, 2).expect("moved");
            // No lookup runs: the pin may go at once.
            drop(pin);
            assert_eq!((*removed, *held), (2, 2));
            assert!(target.unlink(1, 2).is_none());
        }
        release_chain(&mut from);
        release_chain(&mut to);
        assert_eq!(held.try_unwrap().ok(), Some(2), "the last reference");
    }

    fn chain_of_get(head: &Head<u64>, lock: &Mutex<Test, ()>, id: Id) -> Entry<u64> {
        ChainGuard::<u64, Test>::new(lock.lock(), head)
            .get(1, id)
            .expect("inserted")
    }
}
