//! Handle tables keyed by (owner, id): the POSIX-timer ID designs of Linux 6.15.
//!
//! # The kernel design
//!
//! POSIX timer IDs are per process (per `signal_struct`), but the timers of every process live in
//! one system-wide hash table keyed by (process, id). Until Linux 6.15 that table had 512 buckets
//! behind one global spinlock: with 100,000 timers a bucket held ~200 of them, and every
//! `timer_create` and every lookup walked a chain under the one lock. Thomas Gleixner's rework
//! ("posix-timers: Rework the global hash table and provide a sane mechanism for CRIU", Linux
//! 6.15) kept the hash but sized it from the CPU count at boot
//! (`512 × CPUs`, rounded up to a power of two), gave every bucket its own lock, and hashed
//! (process, id) with `jhash2`. A per-process xarray was measured too and rejected for its memory
//! on sparse IDs (2048 timers 512 IDs apart: more than 1 MB).
//!
//! IDs are chosen per owner by a cursor: the first free ID at or after the cursor, wrapping from
//! `i32::MAX` to 0; afterwards the cursor is `id + 1`. For checkpoint/restore, a process can switch
//! on *restore mode* (`prctl(PR_TIMER_CREATE_RESTORE_IDS)`), in which `timer_create` creates
//! exactly the requested ID (`EBUSY` if taken) and moves the cursor past it.
//!
//! # The designs here
//!
//! All three implement [`IdTable`] and pass one test suite; [`ScaledHash::new`] is the
//! recommended table:
//!
//! | design | storage | locks | in the rework's measurements |
//! |---|---|---|---|
//! | [`GlobalHash`] | 512 chains | one global mutex; lookups take none | "mainline" (before 6.15) |
//! | [`ScaledHash`] | `512 × CPUs` 16-byte buckets, growing | one mutex per bucket; lookups take none | "newhash" (6.15) |
//! | [`Radix`] | a radix tree of 64-slot nodes per owner | one rwlock per owner | "xarray" |
//!
//! # Invariants
//!
//! * An owner never holds two entries with the same ID, and every ID is in `0..=max_id`
//!   (`i32::MAX` unless configured lower).
//! * An entry is visible to [`IdTable::get`] from the moment its ID is returned by `create` until
//!   `remove` returns its value; nothing is lost and nothing is found twice.
//! * [`IdTable::ids`] lists exactly the owner's live IDs, ascending, without a table-wide lock
//!   (an ID whose create or remove is in flight meanwhile may or may not be listed).
//! * In the hash designs an ID in an owner's list is in its chain: IDs enter the chain first
//!   and leave the list first, so the remove that takes an ID out of the list is the only one
//!   that takes it out of the chain, and a create never finds its fresh ID already listed.
//! * In the hash designs a node a lock-free lookup can reach is allocated: the table pins each
//!   node it links, and releases the pin of an unlinked node only after every lookup in flight
//!   when it was unlinked has ended. A lookup takes a reference to a node only while a strong
//!   one remains, so a value is never read after its last [`Entry`] let it go.
//!
//! # Where we differ from the kernel, and why
//!
//! * **Owners are integers.** The kernel finds the per-process state through `current->signal`
//!   for free; user space names owners by number, so each table keeps a registry from owner to
//!   its state (cursor, restore flag, ID list): 64 cache-padded shards, each a read-write lock
//!   over a map. Every design uses the same registry, so comparisons stay fair. Lookups in the
//!   hash designs do not touch it.
//! * **Owner handles: `current->signal` for a caller that keeps it.** A create through the
//!   registry takes its shard's read lock and unlock (two of a create's seven atomic
//!   read-modify-writes, and a map probe), which the kernel's `timer_create` does not pay.
//!   [`ScaledHash::owner_handle`] hands out a counted pointer to the owner's state, and
//!   [`ScaledHash::create_in`] creates through it without the registry: the same IDs, cursor
//!   and errors as `create`, about 130 instructions fewer of about 720 (one owner creating in
//!   sequence, under callgrind). Without the registry lock, two things the lock used to order
//!   are ordered otherwise. `remove_owner` detaches the state and then takes every stripe of
//!   its list; a create takes its ID's stripe *before* it links the entry into its chain, and
//!   links nothing once the state is detached, so each create either ran before (its entry is
//!   listed and removed) or finds the owner gone and creates afresh through the registry, as a
//!   create after the removal would. And a state someone keeps is never dropped as idle
//!   (`forget_idle`, or a state back to the initial one): an owner whose process holds a
//!   handle stays known, as a live process's `signal_struct` does. The kernel needs neither:
//!   only the exiting process itself tears its timers down.
//! * **No owner lock to choose an ID, and a striped owner list.** As in 6.15, a create claims
//!   the owner's cursor with an atomic operation and inserts under the bucket lock (which
//!   decides whether the ID is free). The kernel then records the timer in the process's list
//!   under `siglock`; here the owner's list is split into stripes by ID, each with its own lock,
//!   so that threads of one owner creating consecutive IDs record them under different locks.
//!   Locks nest in one order only, stripe before bucket: a create holds its ID's stripe while
//!   it inserts the ID into its bucket and records it, and a remove holds it while it unhashes
//!   the ID (and retires the node into the stripe's limbo, below); nothing takes a stripe
//!   while holding a bucket. An ID enters its bucket before the list and leaves the list
//!   before its bucket (so a removed ID stays taken until it is unhashed, as the kernel keeps
//!   it reserved). A concurrent `remove_owner` cannot miss an entry: creates and removes by
//!   owner number hold the owner registry's shard for reading throughout, and `remove_owner`
//!   detaches the owner under the shard's write lock; creates and removes through an owner
//!   handle are ordered by the stripes instead: `remove_owner` flags the state detached and
//!   then takes every stripe's lock, and a handle's create or remove checks the flag under its
//!   stripe. The kernel avoids the race because only an
//!   exiting process tears down its timers.
//! * **Locks that yield.** The kernel's bucket locks are spinlocks held with preemption off. In
//!   user space a lock holder can be preempted, and with more threads than CPUs std's futex
//!   mutex then convoys (waiters sleep, every unlock pays a wake-up). The tables use
//!   [`AsymmetricMutex`](crate::lock::AsymmetricMutex) by default, whose waiters yield to the
//!   holder before they sleep and whose unlock is a store, as a spinlock's is; a
//!   kernel puts its own spinlock in their place (the type parameter `L`, see
//!   [`lock`](crate::lock)), and then a bucket is as small as its lock allows.
//! * **Out of memory is an answer.** A create allocates its entry before it takes any lock,
//!   and a new owner's state under the registry's write lock, each through a fallible path
//!   (stable Rust has no `Box::try_new`: the box is made from the global allocator's call,
//!   which returns null, and the map reserves with `try_reserve`); either failure is
//!   [`TableError::NoMemory`] with the value handed back, as `timer_create` returns
//!   `-ENOMEM`. What stays infallible: an owner's ID list growing (a few bytes per 16 IDs, or
//!   one 8 KiB bitmap per 65,536), [`ScaledHash`]'s growth (a failed split would leave the
//!   table as it was, but the allocation aborts first), the radix tree's nodes in [`Radix`]
//!   (a baseline), and the owner state that [`IdTable::set_restore`] and
//!   [`IdTable::set_cursor`] create, which have no error to report.
//! * **Intrusive nodes and 16-byte buckets, as the kernel has them.** Each entry is one
//!   allocation holding its key, its chain link, a reference count and the value (the
//!   kernel's `k_itimer` is its own hlist node), and an [`Entry`] is a counted pointer to it,
//!   like an `Arc`: a create allocates once, and the chain never reallocates. A bucket is a
//!   32-bit lock word, a split count and a chain head: 16
//!   bytes, four to a cache line, as the kernel's. The count field sits next to the ID, so a
//!   node is a 24-byte header and the value. On 2048 IDs 512 apart the growing table holds
//!   about 95 KB on two CPUs (1024 buckets to start with), against about 120 KB for a
//!   `dashmap` (218 KB when buckets were 64-byte lines holding two entries inline); the
//!   per-owner radix tree holds 1.3 MB.
//! * **`ScaledHash` grows.** The kernel sizes its table once at boot, so its per-timer cost rises
//!   with the number of timers (on a 2-CPU machine, 1024 buckets hold ~100 timers each at
//!   100,000). [`ScaledHash::new`] starts at the kernel's size and grows by linear hashing:
//!   inserts that overflow a chain split the next block of buckets, while every other thread
//!   keeps working (see "Growth by linear hashing" on [`ScaledHash`]).
//!   [`ScaledHash::kernel_sized`] keeps the kernel's fixed table for comparison.
//! * **Locality-preserving hash.** Consecutive IDs of one owner hash to neighbouring buckets
//!   (64-ID groups to 64-bucket blocks, the blocks placed by a full mix), where the kernel's
//!   `jhash2` scatters them. Owners allocate IDs in sequence, so a large table then costs
//!   cache misses per block rather than per operation; sparse IDs still scatter.
//! * **Read-side sections instead of RCU, and a limbo instead of `kfree_rcu`.** Lookups in the
//!   hash designs walk the chain without its lock, as the kernel's walk under `rcu_read_lock`.
//!   User space has no grace periods, so each table keeps a few reader slots (two per CPU, each
//!   on its own cache line): a lookup claims one for the walk (one compare-exchange on a line
//!   no other CPU writes, and a fence). The kernel's `timer_delete` unhashes the timer and
//!   frees it with `kfree_rcu`: it never waits for a reader, and a reader that still finds the
//!   timer checks under its lock that it is live. Ours has the same shape. A node's count word
//!   holds its strong references, whether the value is still there, and the table's *pin* on
//!   its memory (see `node`). A remove unlinks the node and hands the chain's strong reference
//!   to the caller at once; the pin goes to the *limbo* of the ID's stripe (the remove holds
//!   that stripe's lock anyway), which releases it once a later grace period is observed
//!   passed: every few retirements it snapshots the reader slots, and a later retirement
//!   that sees each snapshotted section ended releases that batch, one node per retirement
//!   (see `limbo`). A lookup takes a reference only while a strong one remains (the kernel's
//!   `kref_get_unless_zero`); the memory it walks over stays pinned until its section ends.
//!   `get_copied` reads a `Copy` value in place and takes no reference at all, and `contains`
//!   reads only whether the value is still there: neither writes the entry's count word, so
//!   lookups of one entry from several CPUs share its line read-only, as RCU readers do.
//!   (A borrowing lookup of a value that is not `Copy` still takes a reference: the value goes
//!   with its last [`Entry`], which a remove hands out at once, not a grace period later.)
//!
//!   Before, each remove waited for a grace period itself (`synchronize_rcu` per remove): a
//!   `SeqCst` fence and a read of every reader slot, lines the other CPUs' lookups write, so
//!   two threads each removing and looking up their own entries passed those lines back and
//!   forth on every operation, and a remove spun while another thread's lookup ran. Now a
//!   remove reads the slots once per batch and never waits. What it costs: an unlinked node's
//!   memory (not its value, which goes with its last `Entry`) outlives the remove by a few
//!   retirements of its stripe; `remove_owner`, dropping an idle owner's state, and the
//!   table's drop release an owner's limbo after one grace period of their own (they may
//!   wait). If every slot is taken, a lookup locks the bucket instead. The growing table
//!   moves nodes between chains when it splits a bucket, which the kernel's fixed table never
//!   does: a lookup reads the bucket's split count (a seqcount) before and after its walk and
//!   walks again if a split ran meanwhile (the proofs are on `util::readers` and on
//!   [`ScaledHash`]). The radix design takes its owner's lock for reading, as before.
//!
//!   The guarantee that matters to callers holds for every design: an [`Entry`] holds no lock,
//!   so it can be kept across any other call (two entries of keys that share a bucket, a
//!   `remove` of the same entry, `remove_owner`, a `create` of the same owner) without
//!   deadlock, and the value stays valid until the last [`Entry`] goes. A value that changes
//!   after creation carries its own lock, the kernel's `it_lock`.
//! * **A cycle of one ID pays little beyond the kernel's path.** An owner that creates, looks up
//!   and removes one ID at a time (the create+delete loop, the C ABI's `capi` cycle) paid for
//!   work the kernel's `timer_create` + lookup + `timer_delete` does not do, about 1,150
//!   instructions and 17 atomic read-modify-writes a cycle through the registry (callgrind,
//!   `examples/table_cycle.rs`). What changed, each for the same answers:
//!   - The owner's ID list keeps its newest group when its last ID goes, in place of the array
//!     it would have parked as its spare (see `util::idset`), so the next create appends
//!     inline: the kernel's list is intrusive and costs two pointer writes each way, ours
//!     took the group out and made it again, about 70 instructions a cycle.
//!   - The last [`Entry`] of a value without drop glue lets it go in one read-modify-write of
//!     the count word (clearing its count and the value's bit together), where it took two;
//!     [`Entry::try_unwrap_copied`] does the same for a remover that takes a `Copy` value
//!     back (the C ABI's `idspace_table_remove`).
//!   - A limbo releasing a node whose pin is all that is left frees it after a load: once the
//!     grace period has passed and the value is gone nothing can change the count, so the
//!     pin's read-modify-write was spent on nobody. It also snapshots the reader slots in
//!     place rather than clearing and copying 64 words per batch.
//!   - The bucket lock's addressing is inline in the create and the remove.
//!
//!   Now about 1,010 instructions (770 through an owner handle, which creates and removes
//!   without the registry) and 15 atomic
//!   read-modify-writes. What remains beyond the kernel's: the registry's read lock and map
//!   probe on a create and a remove by number (two read-modify-writes and about 70
//!   instructions each; an owner handle avoids both, [`ScaledHash::create_in`] and
//!   [`ScaledHash::remove_in`]); an allocation and a free per create (about 140 instructions
//!   of glibc under callgrind). A node cache per CPU in front of the allocator (the kernel's
//!   `kmem_cache` for `k_itimer`, built on [`PerCidPool`](crate::percid::PerCidPool)) was
//!   measured and left out: glibc's per-thread cache already hands a freed node to the next
//!   create on the same thread, and in the lab's create+delete loop at 8 workers the cached
//!   table took 42.9 and 43.2 ms against 44.5 ms without it, within the run-to-run noise; the reader slot a lookup claims; and
//!   unlocks that are read-modify-writes (a lock that yields must see its waiters), where the
//!   kernel's `spin_unlock` is a store.
//! * **Exact-ID errors.** `create_at` reports [`TableError::NotRestoring`] when restore mode is off
//!   (the kernel would silently allocate a fresh ID instead, since it only reads the requested ID in
//!   restore mode); the explicit error makes misuse visible.

use crate::prelude::*;

mod chain;
mod entry;
mod error;
mod global;
mod limbo;
mod node;
mod owners;
mod radix;
mod scaled;

pub use chain::OwnerHandle;
pub use entry::Entry;
pub use error::{Rejected, SizingError, TableError};
pub use global::GlobalHash;
pub use radix::Radix;
pub use scaled::{ScaledHash, Sizing, DEFAULT_MAX_LOAD, MAX_SIZED_BUCKETS};

/// Names an independent ID space (the kernel's `signal_struct`: one per process).
///
/// ```
/// use idspace::table::{IdTable, Owner, ScaledHash};
///
/// let timers = ScaledHash::new();
/// let (shell, editor): (Owner, Owner) = (100, 101);
/// // Each owner counts its IDs from 0, as each process numbers its own POSIX timers.
/// assert_eq!(timers.create(shell, "alarm"), Ok(0));
/// assert_eq!(timers.create(editor, "autosave"), Ok(0));
/// assert_eq!(timers.get_copied(editor, 0), Some("autosave"));
/// assert_eq!(timers.remove_owner(shell), 1, "an exit removes the owner's IDs");
/// assert_eq!(timers.get_copied(shell, 0), None);
/// ```
pub type Owner = u64;

/// An ID within an owner's space.
///
/// ```
/// use idspace::table::{GlobalHash, Id, IdTable, MAX_ID};
///
/// let timers = GlobalHash::new();
/// let ids: Vec<Id> = (0..3).map(|n| timers.create(7, n).expect("room")).collect();
/// assert_eq!(ids, [0, 1, 2]);
/// // A restore asks for the exact ID its checkpoint recorded, up to the kernel's `INT_MAX`.
/// timers.set_restore(7, true);
/// assert_eq!(timers.create_at(7, MAX_ID, 99), Ok(MAX_ID));
/// assert!(timers.create_at(7, MAX_ID + 1, 100).is_err());
/// ```
pub type Id = u32;

/// The largest ID the kernel hands out: `INT_MAX`.
pub const MAX_ID: Id = i32::MAX as Id;

/// The operations every table design offers; all designs pass the same test suite.
///
/// Methods take `&self`: every design is safe to share between threads.
///
/// ```
/// use idspace::table::{GlobalHash, IdTable, Radix, ScaledHash};
///
/// let designs: Vec<Box<dyn IdTable<&str>>> = vec![
///     Box::new(GlobalHash::new()),
///     Box::new(ScaledHash::new()),
///     Box::new(Radix::new()),
/// ];
/// for table in &designs {
///     assert_eq!(table.create(1, "first"), Ok(0), "{}", table.name());
///     assert_eq!(table.create(1, "second"), Ok(1));
///     assert_eq!(table.remove(1, 0).as_deref(), Ok(&"first"));
///     assert_eq!(table.ids(1), [1]);
/// }
/// ```
pub trait IdTable<T>: Send + Sync {
    /// A short name for reports ("global", "scaled", "radix").
    fn name(&self) -> &'static str;

    /// Creates an entry with the first free ID at or after the owner's cursor, wrapping from
    /// the largest ID to 0; afterwards the cursor is `id + 1`.
    ///
    /// # Errors
    /// [`TableError::Full`] if the owner has no free ID; the value comes back in [`Rejected`].
    fn create(&self, owner: Owner, value: T) -> Result<Id, Rejected<T>>;

    /// Creates an entry with exactly `id` (restore mode only); afterwards the cursor is `id + 1`.
    ///
    /// # Errors
    /// [`TableError::NotRestoring`] if the owner's restore mode is off, [`TableError::Invalid`]
    /// if `id` is above the largest ID, [`TableError::Busy`] if the owner already has `id`.
    fn create_at(&self, owner: Owner, id: Id, value: T) -> Result<Id, Rejected<T>>;

    /// Switches the owner's restore mode on or off (`PR_TIMER_CREATE_RESTORE_IDS`).
    fn set_restore(&self, owner: Owner, on: bool);

    /// Whether the owner's restore mode is on.
    fn is_restoring(&self, owner: Owner) -> bool;

    /// The entry's value, or `None` if there is no such entry.
    ///
    /// The [`Entry`] holds no lock of the table: it may be kept across any other call, of this
    /// thread or another, in every design (see [`Entry`]).
    fn get(&self, owner: Owner, id: Id) -> Option<Entry<T>>;

    /// A copy of the entry's value, or `None` if there is no such entry: [`get`](Self::get)
    /// for `Copy` values. The hash designs read it in place during the lookup, without taking
    /// a reference to the entry (two atomic read-modify-writes fewer).
    fn get_copied(&self, owner: Owner, id: Id) -> Option<T>
    where
        T: Copy,
    {
        self.get(owner, id).map(|entry| *entry)
    }

    /// Runs `read` on the entry's value and returns its answer, or `None` if there is no such
    /// entry: [`get`](Self::get) that lends the value to a closure instead of handing out an
    /// [`Entry`], so no reference outlives the call.
    ///
    /// No lock of the table is taken. The value is kept alive for `read` by the entry's own
    /// reference count, one increment and one decrement of the entry's word: a remove racing
    /// the read takes the entry out of the table, and the value is dropped by whichever
    /// reference goes last, never under `read`. Where this differs from the kernel: a timer
    /// lookup there reads under `rcu_read_lock` and then takes the timer's own `it_lock`, and
    /// the timer's memory is freed a grace period later (`kfree_rcu`); a Rust value with drop
    /// glue is dropped when its last reference goes, not a grace period later, so the count
    /// stands in for the timer's lock. [`get_copied`](Self::get_copied) takes no reference
    /// for `Copy` values.
    ///
    /// ```
    /// use idspace::table::{IdTable, ScaledHash};
    ///
    /// let sockets = ScaledHash::new();
    /// let id = sockets.create(1, String::from("10.0.0.7:443")).map_err(|r| r.error)?;
    /// assert_eq!(sockets.get_with(1, id, |peer| peer.len()), Some(12));
    /// assert_eq!(sockets.get_with(1, id + 1, |peer| peer.len()), None);
    /// # Ok::<(), idspace::table::TableError>(())
    /// ```
    fn get_with<R>(&self, owner: Owner, id: Id, read: impl FnOnce(&T) -> R) -> Option<R>
    where
        Self: Sized,
    {
        self.get(owner, id).map(|entry| read(&entry))
    }

    /// Removes the entry and returns its value (shared with any [`Entry`] still held from an
    /// earlier `get`; [`Entry::try_unwrap`] takes it out once they are gone).
    ///
    /// # Errors
    /// [`TableError::NotFound`] if the owner has no entry with `id`.
    fn remove(&self, owner: Owner, id: Id) -> Result<Entry<T>, TableError>;

    /// The owner's IDs in ascending order (the kernel's `/proc/PID/timers` walk).
    fn ids(&self, owner: Owner) -> Vec<Id>;

    /// Drops all of the owner's entries and forgets its cursor and restore mode (process exit).
    /// Returns how many entries were removed.
    fn remove_owner(&self, owner: Owner) -> usize;

    /// Bytes the structure itself holds: buckets, chains or tree nodes, the entries, and the
    /// owner registry. Heap memory owned *by* the values is not counted.
    fn memory_bytes(&self) -> usize;

    /// Every owner the table keeps state for (entries, a moved cursor, or restore mode),
    /// ascending. Owners are read a shard at a time: one created or dropped meanwhile may or may
    /// not be listed.
    fn owners(&self) -> Vec<Owner>;

    /// Entries in the table, summed over the owners a shard at a time (no shared counter is
    /// kept, so that creates and removes share no cache line).
    fn len(&self) -> usize;

    /// Whether the table holds no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The owner's entries with their values, in ascending ID order (a checkpoint's walk).
    ///
    /// A checkpoint of one owner and its restore into another table, with the same IDs and
    /// the same cursor:
    ///
    /// ```
    /// use idspace::table::{IdTable, ScaledHash, TableError};
    ///
    /// let live = ScaledHash::new();
    /// for name in ["a", "b", "c"] {
    ///     live.create(1, name).unwrap();
    /// }
    /// live.remove(1, 1)?;
    /// let image: Vec<(u32, &str)> = live.entries(1).into_iter().map(|(id, e)| (id, *e)).collect();
    /// let cursor = live.cursor(1);
    /// assert_eq!((image.as_slice(), cursor), (&[(0, "a"), (2, "c")][..], 3));
    ///
    /// let restored = ScaledHash::new();
    /// restored.set_restore(1, true);
    /// for (id, value) in image {
    ///     restored.create_at(1, id, value).unwrap();
    /// }
    /// restored.set_restore(1, false);
    /// restored.set_cursor(1, cursor)?;
    /// assert_eq!(restored.ids(1), [0, 2]);
    /// // ID 1, closed before the checkpoint, is not handed out again at once.
    /// assert_eq!(restored.create(1, "d"), Ok(3));
    /// assert_eq!(restored.owners(), [1]);
    /// # Ok::<(), TableError>(())
    /// ```
    fn entries(&self, owner: Owner) -> Vec<(Id, Entry<T>)>;

    /// The owner's cursor: where the next [`create`](Self::create) starts looking (0 for an
    /// owner the table has no state for).
    fn cursor(&self, owner: Owner) -> Id;

    /// Sets the owner's cursor, as a restore does so that handles closed before the checkpoint
    /// are not handed out again.
    ///
    /// # Errors
    /// [`TableError::Invalid`] if `cursor` is above the largest ID.
    fn set_cursor(&self, owner: Owner, cursor: Id) -> Result<(), TableError>;

    /// Drops the state of every owner that holds no entries, forgetting its cursor and restore
    /// mode (as [`remove_owner`](Self::remove_owner) would); returns how many were dropped.
    /// An owner whose state is back to the initial one (no entries, cursor 0, restore mode off)
    /// is dropped at once by the call that made it so, since forgetting it loses nothing.
    fn forget_idle(&self) -> usize;

    /// Whether the owner has an entry with `id`. The hash designs answer from the lock-free
    /// walk without taking a reference to the entry (no write to its count word).
    fn contains(&self, owner: Owner, id: Id) -> bool {
        self.get(owner, id).is_some()
    }
}

/// Why an exact-ID create is refused before the table is even consulted: restore mode is off,
/// or the ID is out of range (checked in that order).
#[inline]
pub(crate) fn exact_id_refusal(restoring: bool, id: Id, max_id: Id) -> Option<TableError> {
    if !restoring {
        Some(TableError::NotRestoring)
    } else if id > max_id {
        Some(TableError::Invalid)
    } else {
        None
    }
}

/// The ID after `id`, wrapping past `max` to 0.
#[inline]
pub(crate) fn next_id(id: Id, max: Id) -> Id {
    if id >= max {
        0
    } else {
        id + 1
    }
}
