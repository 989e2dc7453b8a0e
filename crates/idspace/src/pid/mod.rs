//! Namespaced cyclic ID allocation: the kernel's PID allocator, from the IDR to per-CPU ranges.
//!
//! # The kernel design
//!
//! A process gets one `struct pid` with a number in its PID namespace and in every ancestor
//! namespace up to the root (at most 32 levels below it). `alloc_pid` walks the levels
//! innermost first; at each it asks the space's IDR for the first free number at or after the
//! space's cursor, below the space's `pid_max`, wrapping to the bottom of the range
//! (`idr_alloc_cyclic`); once the cursor has passed 300 (`RESERVED_PIDS`) the bottom is 300, so
//! low numbers are not reused. Checkpoint/restore can ask for exact numbers (`clone3`'s
//! `set_tid`, innermost first). The first process of a new space gets 1, its init; once init's
//! number is freed the space accepts no new process. Every level is allocated under one global
//! spinlock, `pidmap_lock`: before Linux 7.0 taken once per level and once more to publish the
//! object, since 7.0 once for all (Mateusz Guzik's "further damage-control lack of clone
//! scalability").
//!
//! # The designs here
//!
//! All implement [`PidAllocator`] and pass one test suite. [`PerCpu`] is the recommended design
//! (its docs state its deferred-reuse guarantee); [`IdrOnce`] when the kernel's exact numbers
//! matter. The first three give exactly the kernel's numbers:
//!
//! | design | allocation | lookup |
//! |---|---|---|
//! | [`IdrRelock`] | radix tree per space, the global lock per level + once to publish | global lock, shared |
//! | [`IdrOnce`] | the same trees, one hold of the global lock | global lock, shared |
//! | [`BitmapHash`] | flat bitmaps under one lock (FreeBSD) | striped-lock hash |
//! | [`PerCpu`] | per-CPU ranges of 256 IDs under per-CPU locks (the series' sketch) | lock-free, under grace periods (RCU-like) |
//!
//! # Semantics (all designs)
//!
//! * `pid_max` per space, default 32768, settable within `301..=4194304`; the cursor starts at 0.
//! * Levels are allocated innermost first. `set_tid` entries cover the innermost levels; an
//!   entry outside `1..pid_max` is [`PidError::Invalid`], so is an entry other than 1 in a space
//!   without its init, and so is an array longer than the space is deep; a taken entry is
//!   [`PidError::Exists`]. Exact IDs do not move the cursor.
//! * Errors are found level by level, innermost first; a dead target space is reported
//!   ([`PidError::NamespaceDead`]) only after every level was allocated. A failed allocation
//!   releases what it took; cursors already moved stay moved, with one exception: if the
//!   target space is alive and holds no object (the kernel's `pid_allocated ==
//!   PIDNS_ADDING`: its first allocation failed), its cursor goes back to 0, so that its next
//!   object takes ID 1 and becomes its init. The outer levels keep their moved cursors.
//!   [`PerCpu`], which has no cursor, gives the space's ranges back and carves it from its
//!   start again. A failure that moved nothing (an invalid `set_tid` entry) resets too; a
//!   `set_tid` array longer than the space is deep is refused before any level and resets
//!   nothing.
//! * Freeing an object by its number in any space that sees it releases every level.
//! * [`PidAllocator::free_ns`] frees a space that holds no IDs and has no child spaces (the
//!   kernel frees a namespace once nothing references it); its number is not reused and answers
//!   [`PidError::NamespaceFreed`] (lookups find nothing). Everything the design kept for the
//!   space goes, so memory returns to where it was before the space was made, provided that the
//!   space's allocations left its ancestors' structures as they found them (they took and gave
//!   back IDs there too: a bitmap word or a CPU's current range they needed stays, and
//!   [`BitmapHash`]'s shared lookup stripes keep up to four times their entries' room). An
//!   allocation in a freed space is refused before it takes any ID.
//!
//! # Where we differ from the kernel
//!
//! * Lookups take a lock where the kernel uses RCU, except in [`PerCpu`]: the IDR designs take
//!   their global lock shared (a read-write lock), [`BitmapHash`] a stripe's. [`PerCpu`]'s
//!   lookups take none: they run in read-side sections, and what they may read (a space, a
//!   block of lookup slots, a freed object's last reference) is dropped only after a grace
//!   period, as the kernel's `call_rcu` does; unlike RCU, a section is entered with a
//!   compare-and-swap on a reader slot (user space cannot make a reader non-preemptible), and
//!   grace periods are checked by scanning those slots, without waiting, on the writers' paths.
//! * [`PerCpu`] numbers are unique, in range and reused only late (see its docs for the
//!   guarantee), but not sequential, as the sketch accepts; it ignores the 300 floor.
//!
//! # Without `std`, and against Asterinas's `id-alloc`
//!
//! Every design builds on `core` + `alloc` (see the crate's README, "Using idspace without
//! std"): the caller names the CPU of each call (`cpu`), and each design's locks are a type
//! parameter (see [`lock`](crate::lock)), so a kernel runs them under its own spinlock. The
//! closest `no_std` allocator in a Rust kernel, Asterinas's `id-alloc` (0.1), is a bitmap under
//! the caller's lock; side by side:
//!
//! | | `id-alloc` | idspace `pid` |
//! |---|---|---|
//! | cyclic cursor (freed IDs reused only after a wrap) | no: lowest free ID | yes, every design (`idr_alloc_cyclic`) |
//! | exact-ID restore | `alloc_specific` | `set_tid`, at every level of the chain, all or nothing |
//! | namespaces | no | nested spaces, an ID at every level, [`MAX_LEVEL`] deep |
//! | per-CPU ranges | no | [`PerCpu`]: a CPU's allocations take only its lock |
//! | concurrent lookups | the caller's lock | lock-free in [`PerCpu`], a shared lock in the others |
//! | locks | the caller's, around every call | inside, each a `lock_api` type of the caller's choosing |
//! | fallible allocation | fixed capacity, `None` when full | `Full` when no ID is left; memory: see below |
//!
//! Memory: an allocation's object ([`Pid`]) is an `Arc` of its levels, and stable Rust has no
//! `Arc::try_new`, so that one small allocation (two counts and eight bytes per level) aborts
//! on exhaustion as `Arc::new` does; so do a new namespace's state and [`PerCpu`]'s range maps,
//! sized by namespaces and CPUs rather than by allocations. The table family's creates, whose
//! allocations grow with their callers', report [`TableError::NoMemory`](crate::table::TableError::NoMemory).

mod bitmap_hash;
mod error;
mod hazards;
mod idr;
mod level;
mod limbo;
mod object;
mod percpu;
mod slots;
mod space_list;
mod spaces;

pub use bitmap_hash::BitmapHash;
pub use error::PidError;
pub use idr::{IdrOnce, IdrRelock};
pub use object::Pid;
pub use percpu::{PerCpu, RANGE};

/// Names a PID space (namespace); the root is 0.
///
/// A container's init has PID 1 in its own space and another PID in the root's:
///
/// ```
/// use idspace::pid::{IdrOnce, NsId, PidAllocator, PidError, ROOT};
///
/// let pids = IdrOnce::new();
/// let host_init = pids.alloc(ROOT, &[], 0)?;
/// let container: NsId = pids.new_ns(ROOT)?;
/// assert_ne!(container, ROOT);
/// let init = pids.alloc(container, &[], 0)?;
/// assert_eq!(init.ns(), container);
/// assert_eq!((init.id_in(container), init.id_in(ROOT)), (Some(1), Some(2)));
/// assert_eq!(host_init.id_in(container), None, "the root's processes are not seen inside");
/// # Ok::<(), PidError>(())
/// ```
pub type NsId = u32;

/// The root space.
pub const ROOT: NsId = 0;
/// Deepest level below the root (`MAX_PID_NS_LEVEL`).
pub const MAX_LEVEL: u32 = 32;
/// Default `pid_max` (`PID_MAX_DEFAULT`).
pub const PID_MAX_DEFAULT: u32 = 0x8000;
/// Largest `pid_max` (`PID_MAX_LIMIT` on 64-bit).
pub const PID_MAX_LIMIT: u32 = 4 * 1024 * 1024;
/// Smallest `pid_max`.
pub const PID_MAX_MIN: u32 = RESERVED_PIDS + 1;
/// Once the cursor passes this, cyclic allocation wraps to it instead of to 1.
///
/// With the kernel's exact numbers ([`IdrOnce`]): a space whose IDs ran out starts again at
/// 300, so a low ID freed meanwhile is not handed out again:
///
/// ```
/// use idspace::pid::{IdrOnce, PidAllocator, PidError, PID_MAX_MIN, ROOT};
///
/// let pids = IdrOnce::new();
/// pids.set_pid_max(ROOT, 400)?;
/// for expected in 1..400 {
///     assert_eq!(pids.alloc(ROOT, &[], 0)?.ids(), [expected]);
/// }
/// assert_eq!(pids.alloc(ROOT, &[], 0).err(), Some(PidError::Full));
/// pids.free(ROOT, 5, 0)?;
/// pids.free(ROOT, 350, 0)?;
/// assert_eq!(pids.alloc(ROOT, &[], 0)?.ids(), [350]);
/// assert_eq!(pids.alloc(ROOT, &[], 0).err(), Some(PidError::Full));
/// // `pid_max` must leave room above the reserved IDs.
/// assert_eq!(pids.set_pid_max(ROOT, PID_MAX_MIN - 1), Err(PidError::Invalid));
/// # Ok::<(), PidError>(())
/// ```
pub const RESERVED_PIDS: u32 = 300;

/// The operations every PID design offers.
///
/// ```
/// use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, PerCpu, PidAllocator, PidError, ROOT};
///
/// let designs: Vec<Box<dyn PidAllocator>> = vec![
///     Box::new(IdrRelock::new()),
///     Box::new(IdrOnce::new()),
///     Box::new(BitmapHash::new()),
///     Box::new(PerCpu::new(2)?),
/// ];
/// for pids in &designs {
///     let init = pids.alloc(ROOT, &[], 0)?;
///     assert_eq!(init.ids(), [1], "{}", pids.name());
///     assert_eq!(pids.alloc(ROOT, &[1], 0).err(), Some(PidError::Exists));
/// }
/// # Ok::<(), PidError>(())
/// ```
pub trait PidAllocator: Send + Sync {
    /// A short name for reports ("idr-relock", "percpu", ...).
    fn name(&self) -> &'static str;

    /// Creates a space below `parent`.
    ///
    /// # Errors
    /// [`PidError::UnknownNs`], [`PidError::NamespaceFreed`], [`PidError::TooDeep`] past 32
    /// levels below the root, or
    /// [`PidError::TooManyNamespaces`] when the design holds no more spaces
    /// ([`PerCpu::MAX_NAMESPACES`]; the other designs are limited by memory alone).
    ///
    /// ```
    /// use idspace::pid::{IdrRelock, PidAllocator, PidError, MAX_LEVEL, ROOT};
    ///
    /// let pids = IdrRelock::new();
    /// let mut ns = ROOT;
    /// for _ in 0..MAX_LEVEL {
    ///     ns = pids.new_ns(ns)?;
    /// }
    /// assert_eq!(pids.new_ns(ns), Err(PidError::TooDeep));
    /// // A process of the deepest space has an ID in it and in each of its 32 ancestors.
    /// let deep = pids.alloc(ns, &[], 0)?;
    /// assert_eq!(deep.ns(), ns);
    /// assert_eq!(deep.levels().len(), MAX_LEVEL as usize + 1);
    /// assert_eq!(deep.id_in(ns), Some(1));
    /// # Ok::<(), PidError>(())
    /// ```
    fn new_ns(&self, parent: NsId) -> Result<NsId, PidError>;

    /// Sets a space's `pid_max`.
    ///
    /// # Errors
    /// [`PidError::Invalid`] outside `301..=4194304`, [`PidError::UnknownNs`],
    /// [`PidError::NamespaceFreed`].
    fn set_pid_max(&self, ns: NsId, max: u32) -> Result<(), PidError>;

    /// Allocates an object in `ns` with an ID in `ns` and every ancestor; `set_tid` requests
    /// exact IDs for the innermost levels; `cpu` is the worker slot doing it.
    ///
    /// # Errors
    /// See the module docs: `Full`, `Exists`, `Invalid`, `NamespaceDead`, `UnknownNs`, and
    /// `NamespaceFreed` for a freed space.
    ///
    /// Restoring a process of a nested space with its checkpointed IDs, innermost first:
    ///
    /// ```
    /// use idspace::pid::{IdrOnce, PidAllocator, PidError, ROOT};
    ///
    /// let pids = IdrOnce::new();
    /// pids.alloc(ROOT, &[], 0)?; // the root's init
    /// let container = pids.new_ns(ROOT)?;
    /// let init = pids.alloc(container, &[1, 1000], 0)?;
    /// assert_eq!(init.ids(), [1, 1000]);
    /// // Only as deep as the target space: a third level does not exist here.
    /// assert_eq!(pids.alloc(container, &[2, 1001, 7], 0).err(), Some(PidError::Invalid));
    /// // Exact IDs inside, a fresh one outside; taken entries are refused.
    /// let worker = pids.alloc(container, &[42], 0)?;
    /// assert_eq!(worker.id_in(container), Some(42));
    /// assert_eq!(pids.alloc(container, &[42], 0).err(), Some(PidError::Exists));
    /// # Ok::<(), PidError>(())
    /// ```
    fn alloc(&self, ns: NsId, set_tid: &[u32], cpu: usize) -> Result<Pid, PidError>;

    /// The levels `ns` gives to an allocation into a namespace below it that was freed:
    /// `alloc_pid` into a dead namespace whose own levels are gone. Takes an ID at every level
    /// of `ns`'s chain as [`alloc`](Self::alloc) does (`set_tid` checked, cursors moved), then
    /// gives them all back, publishing nothing, and answers the refusal: the first level's own
    /// ([`PidError::Invalid`], [`PidError::Exists`], [`PidError::Full`]), else
    /// [`PidError::NamespaceDead`] for the dead target. The failed allocation's target is the
    /// freed namespace, so no cursor of `ns`'s chain is reset and no space there gains an init.
    ///
    /// # Errors
    /// It returns the refusal itself; [`PidError::UnknownNs`] and [`PidError::NamespaceFreed`]
    /// for an `ns` that is not a live space.
    ///
    /// ```
    /// use idspace::pid::{IdrOnce, PidAllocator, PidError, ROOT};
    ///
    /// let pids = IdrOnce::new();
    /// assert_eq!(pids.alloc(ROOT, &[], 0)?.ids(), [1]);
    /// // The root's cursor moves past the ID the refused allocation took there (2).
    /// assert_eq!(pids.alloc_refused(ROOT, &[], 0), PidError::NamespaceDead);
    /// assert_eq!(pids.alloc(ROOT, &[], 0)?.ids(), [3]);
    /// // A level's own refusal comes first.
    /// assert_eq!(pids.alloc_refused(ROOT, &[1], 0), PidError::Exists);
    /// # Ok::<(), PidError>(())
    /// ```
    fn alloc_refused(&self, ns: NsId, set_tid: &[u32], cpu: usize) -> PidError;

    /// Frees the object that has `id` in `ns`, releasing its IDs at every level.
    ///
    /// # Errors
    /// [`PidError::NotFound`], [`PidError::UnknownNs`], [`PidError::NamespaceFreed`].
    fn free(&self, ns: NsId, id: u32, cpu: usize) -> Result<(), PidError>;

    /// The object that has `id` in `ns`; none in a freed space.
    ///
    /// # Errors
    /// [`PidError::UnknownNs`].
    fn lookup(&self, ns: NsId, id: u32) -> Result<Option<Pid>, PidError>;

    /// Frees space `ns`, which holds no IDs and has no child spaces: everything the design
    /// kept for it (its tree, bitmap or directory, its CPUs' ranges and lookup slots) is given
    /// back, so [`memory_bytes`](Self::memory_bytes) returns to what it was before the space
    /// was made (see the module docs for what else a space's allocations may have changed).
    /// The number is never handed out again: every operation on it then fails with
    /// [`PidError::NamespaceFreed`]. A refused call changes nothing.
    ///
    /// # Errors
    /// [`PidError::UnknownNs`] for a number never handed out or for the root (which is never
    /// freed), [`PidError::NamespaceFreed`] if already freed, [`PidError::NamespaceBusy`] while
    /// it holds IDs (an allocation in flight included) or child spaces.
    ///
    /// ```
    /// use idspace::pid::{PerCpu, PidAllocator, PidError, ROOT};
    ///
    /// let pids = PerCpu::new(2)?;
    /// let ns = pids.new_ns(ROOT)?;
    /// pids.alloc(ns, &[], 0)?;
    /// assert_eq!(pids.free_ns(ns), Err(PidError::NamespaceBusy));
    /// pids.free(ns, 1, 0)?; // its init ends: the space is dead, and now empty
    /// pids.free_ns(ns)?;
    /// assert_eq!(pids.alloc(ns, &[], 0).err(), Some(PidError::NamespaceFreed));
    /// assert!(pids.lookup(ns, 1)?.is_none());
    /// assert_eq!(pids.free_ns(ns), Err(PidError::NamespaceFreed));
    /// assert_eq!(pids.free_ns(ROOT), Err(PidError::UnknownNs));
    /// # Ok::<(), PidError>(())
    /// ```
    fn free_ns(&self, ns: NsId) -> Result<(), PidError>;

    /// Bytes held by the structure: trees, bitmaps, ranges, hash tables and objects.
    fn memory_bytes(&self) -> usize;
}
