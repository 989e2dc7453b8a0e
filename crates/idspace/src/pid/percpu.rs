//! [`PerCpu`]: per-CPU ranges of IDs, the design Mateusz Guzik sketches in "further
//! damage-control lack of clone scalability", built. Its design and its deferred-reuse guarantee
//! are documented on the type, where `cargo doc` shows them.

use crate::prelude::*;
use hashbrown::HashMap;

use super::hazards::{Hazard, Hazards};
use super::level::{check_pid_max, check_set_tid};
use super::limbo::Limbo;
use super::object::Pid;
use super::slots::{RetiredBlock, Slots};
use super::space_list::{SpaceList, CAPACITY};
use super::spaces::Taken;
use super::{NsId, PidAllocator, PidError, MAX_LEVEL, PID_MAX_DEFAULT, ROOT};
use crate::lock::{DefaultLocks, Locks, Mutex, MutexGuard, RwLock};
use crate::range::RangeSource;
use crate::sync::{AtomicUsize, Ordering};
use crate::util::hash::BuildIntHasher;
use crate::util::readers::Readers;
use crossbeam_utils::CachePadded;

/// IDs per range: a range's bitmap and object slots fit a few cache lines (the sketch suggests
/// "250 entries or so").
///
/// Each CPU slot allocates from a range of its own, so two CPUs' IDs do not share one:
///
/// ```
/// use idspace::pid::{PerCpu, PidAllocator, PidError, RANGE, ROOT};
///
/// let pids = PerCpu::new(2)?;
/// let on = |cpu| pids.alloc(ROOT, &[], cpu).map(|pid| pid.ids()[0]);
/// let (a, b, c) = (on(0)?, on(1)?, on(0)?);
/// assert_ne!(a / RANGE, b / RANGE);
/// assert_eq!(a / RANGE, c / RANGE);
/// # Ok::<(), PidError>(())
/// ```
#[cfg(not(loom))]
pub const RANGE: u32 = 256;
/// IDs per range (small under loom, so that models cross range boundaries).
#[cfg(loom)]
pub const RANGE: u32 = 4;
const WORDS: usize = RANGE.div_ceil(64) as usize;

/// Reader slots of one allocator: more than the lookups that run at once on any machine this
/// targets (a lookup that finds them all busy waits for one); two in loom models.
#[cfg(not(loom))]
const READER_SLOTS: usize = crate::util::readers::MAX_SLOTS;
#[cfg(loom)]
const READER_SLOTS: usize = 2;

/// A range of one space, held by one CPU.
struct Range {
    /// The first ID the range may hand out (its base, or 1 for the range holding 0).
    start: u32,
    /// One past the last ID of the range.
    end: u32,
    /// Bump cursor: IDs below it were handed out (or skipped) and are not bumped again.
    next: u32,
    taken: [u64; WORDS],
    live: u32,
}

impl Range {
    fn new(index: u32) -> Range {
        let base = index * RANGE;
        Range {
            start: base.max(1),
            end: base + RANGE,
            next: base.max(1),
            taken: [0; WORDS],
            live: 0,
        }
    }

    fn base(&self) -> u32 {
        self.end - RANGE
    }

    fn is_taken(&self, id: u32) -> bool {
        let offset = id - self.base();
        self.taken[offset as usize / 64] & (1 << (offset % 64)) != 0
    }

    fn set(&mut self, id: u32) {
        let offset = id - self.base();
        self.taken[offset as usize / 64] |= 1 << (offset % 64);
        self.live += 1;
    }

    /// Frees `id`; false if it was not taken.
    fn clear(&mut self, id: u32) -> bool {
        let offset = id - self.base();
        let word = &mut self.taken[offset as usize / 64];
        if *word & (1 << (offset % 64)) != 0 {
            *word &= !(1 << (offset % 64));
            self.live -= 1;
            true
        } else {
            false
        }
    }

    /// The next never-handed-out free ID below `limit`, taken.
    fn bump(&mut self, limit: u32) -> Option<u32> {
        let end = self.end.min(limit);
        while self.next < end {
            let id = self.next;
            self.next += 1;
            if !self.is_taken(id) {
                self.set(id);
                return Some(id);
            }
        }
        None
    }

    /// Any free ID below `limit` (the nearly-full fallback), taken.
    fn any_free(&mut self, limit: u32) -> Option<u32> {
        let id = (self.start..self.end.min(limit)).find(|&id| !self.is_taken(id))?;
        self.set(id);
        Some(id)
    }
}

/// What one CPU's lock guards: the ranges it holds, its current range per space, and what it
/// took out of lookups' reach (objects freed from its ranges' slots, blocks of lookup slots of
/// ranges it gave back) until no lookup can still read them.
struct CpuRanges {
    ranges: HashMap<(NsId, u32), Range, BuildIntHasher>,
    current: HashMap<NsId, u32, BuildIntHasher>,
    limbo: Limbo<RetiredBlock>,
    objects: Limbo<Pid>,
}

/// Frees gathered before a CPU looks whether their grace period has passed: a look reads every
/// reader slot, so it is amortised over a batch.
const OBJECT_BATCH: usize = 64;

impl Default for CpuRanges {
    fn default() -> Self {
        CpuRanges {
            ranges: HashMap::default(),
            current: HashMap::default(),
            limbo: Limbo::new(1),
            objects: Limbo::new(OBJECT_BATCH),
        }
    }
}

/// A space's directory: which CPU holds which range, and where carving goes on.
struct Directory {
    holders: HashMap<u32, usize, BuildIntHasher>,
    cursor: u32,
}

struct Space<L: Locks> {
    parent: Option<NsId>,
    level: u32,
    pid_max: AtomicUsize,
    /// ID 1 has been handed out (0/1).
    init_seen: AtomicUsize,
    /// ID 1 was freed (0/1).
    dead: AtomicUsize,
    /// `free_ns` took the space away (0/1): written under every CPU's lock, read under one.
    freed: AtomicUsize,
    /// Child spaces not freed yet: changed only under the allocator's `namespaces` lock.
    children: AtomicUsize,
    directory: RwLock<L, Directory>,
    /// The objects by ID, for lookups that take no lock an allocation takes.
    slots: Slots,
}

impl<L: Locks> Space<L> {
    fn new(parent: Option<NsId>, level: u32) -> Space<L> {
        Space {
            parent,
            level,
            pid_max: AtomicUsize::new(PID_MAX_DEFAULT as usize),
            init_seen: AtomicUsize::new(0),
            dead: AtomicUsize::new(0),
            freed: AtomicUsize::new(0),
            children: AtomicUsize::new(0),
            directory: crate::lock::rwlock::<L, _>(Directory {
                holders: HashMap::default(),
                cursor: 0,
            }),
            slots: Slots::new(),
        }
    }

    fn pid_max(&self) -> u32 {
        // Relaxed: `pid_max` is a limit read on its own; no other data hangs on it.
        self.pid_max.load(Ordering::Relaxed) as u32
    }

    /// Whether `free_ns` took the space; the caller holds some CPU's lock, which orders this
    /// read after or before the whole of `free_ns`'s work under every CPU's lock.
    fn is_freed(&self) -> bool {
        // Relaxed: ordered by the CPU lock the caller holds (see above).
        self.freed.load(Ordering::Relaxed) != 0
    }

    fn holder(&self, index: u32) -> Option<usize> {
        self.directory.read().holders.get(&index).copied()
    }
}

/// Every range of the space is held by some CPU.
struct NoRangeLeft;

/// A space's directory is the [`RangeSource`] of its CPUs' ranges: a grant is the index of a
/// range of [`RANGE`] IDs.
impl<L: Locks> RangeSource for Space<L> {
    type Grant = u32;
    type Error = NoRangeLeft;

    /// Carves the next free range for `cpu`, cyclically.
    fn carve(&self, cpu: usize) -> Result<(core::ops::Range<u64>, u32), NoRangeLeft> {
        let ranges = self.pid_max().div_ceil(RANGE);
        let mut directory = self.directory.write();
        let start = directory.cursor % ranges.max(1);
        let index = (start..ranges)
            .chain(0..start)
            .find(|index| !directory.holders.contains_key(index))
            .ok_or(NoRangeLeft)?;
        directory.holders.insert(index, cpu);
        directory.cursor = index + 1;
        let base = u64::from(index) * u64::from(RANGE);
        Ok((base..base + u64::from(RANGE), index))
    }

    /// Takes range `index` back; a range's IDs are tracked by its bitmap, so the unused tail
    /// needs no bookkeeping here. The caller has unlinked its lookup slots (`PerCpu::give_back`).
    fn give_back(&self, _cpu: usize, index: u32, _unused: core::ops::Range<u64>) {
        self.directory.write().holders.remove(&index);
    }
}

/// Per-CPU ranges of IDs, the design Mateusz Guzik sketches in "further damage-control lack of
/// clone scalability", built: the recommended PID design when allocation throughput matters more
/// than the kernel's exact sequence of numbers (see the module docs of [`crate::pid`] for the
/// semantics all designs share).
///
/// Holds at most [`PerCpu::MAX_NAMESPACES`] spaces, the root included; creating one more is
/// [`PidError::TooManyNamespaces`].
///
/// ```
/// use idspace::pid::{PerCpu, PidAllocator, PidError, ROOT};
///
/// let pids = PerCpu::new(4)?; // four worker slots
/// // The root's first process is its init, 1.
/// let init = pids.alloc(ROOT, &[], 0)?;
/// assert_eq!(init.ids(), [1]);
///
/// // A child namespace: its processes have an ID there and one in the root.
/// let child = pids.new_ns(ROOT)?;
/// // `set_tid` asks for exact IDs, innermost first: 1 in the child (its init).
/// let child_init = pids.alloc(child, &[1], 2)?;
/// assert_eq!(child_init.id_in(child), Some(1));
/// let in_root = child_init.id_in(ROOT).unwrap();
/// assert_ne!(in_root, 1);
///
/// // Freeing it by any of its numbers frees every level.
/// pids.free(ROOT, in_root, 3)?;
/// assert!(pids.lookup(child, 1)?.is_none());
/// // The child's init is gone: the namespace takes no new process.
/// assert_eq!(pids.alloc(child, &[], 0).err(), Some(PidError::NamespaceDead));
/// # Ok::<(), PidError>(())
/// ```
///
/// # Design
///
/// * Each space's ID range is cut into *ranges* of [`RANGE`] IDs. A space keeps a directory:
///   which CPU holds which range, and a cursor for carving ranges cyclically.
/// * Each CPU (worker slot) has one lock, its pidmap lock, guarding every range it carved, in
///   every space. An allocation on CPU `c` takes `c`'s lock once and, for each level, takes the
///   next ID of `c`'s current range in that space: one lock for all levels, and in the common
///   case no cache line that another CPU writes.
/// * A range hands its IDs out once, in ascending order (a bump cursor), skipping IDs taken
///   exactly. When it is used up the CPU carves the next free range from the space's directory
///   (the directory's lock is the only shared lock on that path, once per 256 allocations).
/// * A free from any CPU goes to the lock of the CPU that holds the range. A range that is used
///   up and has no live ID goes back to its space.
/// * Lookup takes no lock at all, as the kernel's `find_pid_ns` under RCU: it enters a
///   read-side section (a compare-and-swap on a reader slot of its thread's own, no shared
///   line), follows atomic pointers from the space to the ID's slot, and takes a reference to
///   the object it finds there (two atomic words, read twice to validate the pair). Nothing a
///   lookup may read is freed before the lookup ends: a free hands the slot's reference to
///   the object, and giving a range back hands its block of slots, to the CPU's *limbo*, which
///   drops them once every section running at the time has ended (a grace period, checked
///   without waiting, once per 64 frees or per block); `free_ns` waits for one. So a lookup
///   never waits behind a CPU's allocations, a carve or another lookup, and an allocation never
///   waits for a lookup (see `util::readers` and the `limbo` and `slots` modules).
/// * Rare paths take every CPU's lock in ascending order: exact IDs (`set_tid`, restore only),
///   and allocation when no range is left to carve (the space is nearly full).
/// * Spaces are freed ([`PidAllocator::free_ns`]) while other threads may be using them: every
///   operation holds a hazard pointer on the space it names (a compare-and-swap on a slot of
///   its thread's own, no shared line); a space's ancestors stay because a space with a child
///   is not freed, and freeing a space lowers its parent's child count only once no hazard
///   holds it. `free_ns` takes every CPU's lock (no allocation is then between taking an ID
///   and publishing it), checks that no range of the space has a live ID, drops the space's
///   ranges from every CPU and unlinks their lookup slots, unlinks the space, waits until no
///   hazard holds it and for a grace period (lookups hold no hazard), then frees it, the
///   unlinked blocks and everything in the CPUs' limbos. An allocation that protected the space before the unlink
///   sees, under its CPU's lock, that it was freed, and takes nothing.
///
/// Lock order: the spaces' lock (creating and freeing spaces) before any CPU's lock; a CPU's
/// lock, then a space's directory. Frees read the directory and release it before locking a
/// CPU, then check that the CPU still holds the range (a range
/// with a live ID cannot move, so the check fails only for IDs that are gone).
///
/// # Deferred reuse
///
/// IDs are not sequential, but a freed ID is not handed out again soon. Within a range the bump
/// cursor never goes back, and ranges are carved cyclically, so an ID freed in range `R` comes
/// back only after `R` was returned and the space's carving cursor went once round the space:
/// every other range that was free meanwhile was carved and used up first. **Guarantee:** after
/// an ID is freed, at least `RANGE × (F − 1)` allocations in its space happen before it is
/// handed out again, where `F` is the number of ranges of the space not held by any CPU at the
/// time (with the default `pid_max` of 32768, `F` is 128 minus the ranges held: tens of
/// thousands of allocations). The exceptions: a nearly full space, where no range can be
/// carved and an allocation takes any free ID in a held range, as the kernel's cyclic allocator
/// reuses IDs once it has wrapped; and a space that is alive and holds no ID when an allocation
/// into it fails, which starts again at its first range so that its next object is its init
/// (see the module docs of [`crate::pid`]).
///
/// # Differences from the kernel
///
/// The 300 floor (`RESERVED_PIDS`) is not applied: ranges cover `1..pid_max` and are reused
/// whole. `Full` means that no ID in `1..pid_max` is free.
pub struct PerCpu<L: Locks = DefaultLocks> {
    cpus: Box<[CachePadded<Mutex<L, CpuRanges>>]>,
    spaces: SpaceList<Space<L>, L>,
    /// The lookups' read-side sections: what a lookup may read (a space, a block of lookup
    /// slots) is freed only after a grace period.
    readers: Readers,
    /// Hazard pointers on spaces: every operation holds one on the space it names while it
    /// uses it, so that `free_ns` frees a space only once nobody uses it.
    space_hazards: Hazards<Space<L>>,
    /// Serialises creating and freeing spaces (rare): a space's `children` and its being
    /// linked change only under it.
    namespaces: Mutex<L, ()>,
}

/// A space in use: the hazard keeps it (and, through its `children` count, its ancestors)
/// from being freed until dropped.
struct SpaceRef<'a, L: Locks> {
    space: &'a Space<L>,
    _hazard: Hazard<'a, Space<L>>,
}

impl<L: Locks> core::ops::Deref for SpaceRef<'_, L> {
    type Target = Space<L>;
    fn deref(&self) -> &Space<L> {
        self.space
    }
}

impl PerCpu {
    /// Spaces (namespaces) one allocator holds at most, the root included: 65,536 (128 in loom
    /// models).
    pub const MAX_NAMESPACES: usize = CAPACITY;

    /// Worker slots one allocator has at most: 8192, the kernel's largest `NR_CPUS` (each
    /// slot is a cache-padded lock and its ranges, allocated up front).
    pub const MAX_CPUS: usize = 8192;

    /// An allocator for `cpus` worker slots, with only the root space. A `cpu` argument beyond
    /// the slots wraps around (`cpu % cpus`).
    ///
    /// # Errors
    /// [`PidError::BadCpuCount`] unless `cpus` is in `1..=`[`MAX_CPUS`](Self::MAX_CPUS),
    /// checked before anything is allocated.
    ///
    /// ```
    /// use idspace::pid::{PerCpu, PidError};
    ///
    /// assert_eq!(PerCpu::new(0).err(), Some(PidError::BadCpuCount { cpus: 0 }));
    /// assert_eq!(PerCpu::new(usize::MAX).err(), Some(PidError::BadCpuCount { cpus: usize::MAX }));
    /// assert_eq!(PerCpu::new(PerCpu::MAX_CPUS)?.cpus(), PerCpu::MAX_CPUS);
    /// # Ok::<(), PidError>(())
    /// ```
    pub fn new(cpus: usize) -> Result<PerCpu, PidError> {
        PerCpu::with_locks(cpus)
    }
}

impl<L: Locks> PerCpu<L> {
    /// An allocator for `cpus` worker slots on the locks `L` (see [`lock`](crate::lock)):
    /// [`PerCpu::new`] on other locks.
    ///
    /// # Errors
    /// As [`PerCpu::new`].
    pub fn with_locks(cpus: usize) -> Result<Self, PidError> {
        if !(1..=PerCpu::MAX_CPUS).contains(&cpus) {
            return Err(PidError::BadCpuCount { cpus });
        }
        let spaces = SpaceList::new();
        spaces.push(Space::new(None, 0));
        Ok(Self {
            cpus: (0..cpus)
                .map(|_| CachePadded::new(crate::lock::mutex::<L, _>(CpuRanges::default())))
                .collect(),
            spaces,
            readers: Readers::new(READER_SLOTS),
            space_hazards: Hazards::new(),
            namespaces: crate::lock::mutex::<L, _>(()),
        })
    }

    /// Worker slots.
    pub fn cpus(&self) -> usize {
        self.cpus.len()
    }

    /// Why `ns` names no space: freed (its number was handed out) or never created.
    fn missing(&self, ns: NsId) -> PidError {
        if (ns as usize) < self.spaces.len() {
            PidError::NamespaceFreed
        } else {
            PidError::UnknownNs
        }
    }

    /// Space `ns`, protected by a hazard until the returned reference is dropped.
    #[inline]
    fn space(&self, ns: NsId) -> Result<SpaceRef<'_, L>, PidError> {
        let entry = self
            .spaces
            .entry(ns as usize)
            .ok_or_else(|| self.missing(ns))?;
        // Relaxed: only a hint to skip the hazard for a missing space; the SeqCst load below
        // decides.
        let pointer = entry.load(Ordering::Relaxed);
        if pointer.is_null() {
            return Err(self.missing(ns));
        }
        let hazard = self.space_hazards.protect(pointer);
        // SeqCst: after the hazard's publication in the single order (see `Hazards`): a
        // `free_ns` that unlinked the space before this load makes it fail, one that unlinks it
        // after sees the hazard and waits. Also acquiring, for the space's initialisation.
        if entry.load(Ordering::SeqCst) != pointer {
            return Err(PidError::NamespaceFreed);
        }
        // SAFETY: linked after the hazard was published, so `free_ns` frees it only after the
        // hazard (dropped with the returned reference) is withdrawn.
        let space = unsafe { &*pointer };
        Ok(SpaceRef {
            space,
            _hazard: hazard,
        })
    }

    /// The spaces of an allocation in `ns`, innermost first; `target` is `ns`'s space, whose
    /// hazard keeps them all alive for as long as it is borrowed.
    fn chain<'a>(
        &'a self,
        ns: NsId,
        target: &'a SpaceRef<'a, L>,
        set_tid: &[u32],
    ) -> Result<Vec<(NsId, &'a Space<L>)>, PidError> {
        check_set_tid(set_tid, target.level)?;
        let mut chain = Vec::with_capacity(target.level as usize + 1);
        let mut next = Some((ns, target.space));
        while let Some((ns, space)) = next {
            chain.push((ns, space));
            next = match space.parent {
                // A space with a child is not freed (`children`), and `free_ns` of the target
                // lowers its parent's count only once no hazard holds the target.
                // SAFETY: so every ancestor of the hazard-protected target stays alive while
                // `target` is borrowed.
                Some(parent) => unsafe { self.spaces.get(parent as usize) }.map(|p| (parent, p)),
                None => None,
            };
        }
        Ok(chain)
    }

    /// The fast path of one level: the next ID of `cpu`'s current range in `ns`, carving a new
    /// range when it is used up. `None` when no range can be carved.
    fn bump(&self, state: &mut CpuRanges, cpu: usize, ns: NsId, space: &Space<L>) -> Option<u32> {
        let limit = space.pid_max();
        loop {
            if let Some(&index) = state.current.get(&ns) {
                let range = state
                    .ranges
                    .get_mut(&(ns, index))
                    .expect("current ranges are held");
                if let Some(id) = range.bump(limit) {
                    return Some(id);
                }
                state.current.remove(&ns);
                if range.live == 0 {
                    state.ranges.remove(&(ns, index));
                    self.give_back(state, cpu, index, space);
                }
            }
            let (_, index) = space.carve(cpu).ok()?;
            state.ranges.insert((ns, index), Range::new(index));
            state.current.insert(ns, index);
        }
    }

    /// Undoes the fast path's bumps (`taken`, one ID per level of `chain` so far) when an outer
    /// level has no range left: the IDs were never published, so each range's bump cursor
    /// goes back to them and the rare path, which allocates once more, hands out the same
    /// ones. Otherwise the retry would move the inner levels twice: a new space's init would
    /// get 2 instead of 1.
    fn unbump(&self, state: &mut CpuRanges, taken: &Taken, chain: &[(NsId, &Space<L>)]) {
        for (&(ns, id), &(_, space)) in taken.iter().zip(chain) {
            self.release_one(state, ns, id, space);
            // Bumped just now under the lock we hold, in the CPU's current range of `ns`,
            // which `release_one` keeps.
            if let Some(range) = state.ranges.get_mut(&(ns, id / RANGE)) {
                if range.next == id + 1 {
                    range.next = id;
                }
            }
        }
    }

    /// Frees `id` in range `id / RANGE` of `ns`, held in `state`, and gives the range back
    /// to its space if it is empty and not the CPU's current range.
    fn release_one(&self, state: &mut CpuRanges, ns: NsId, id: u32, space: &Space<L>) {
        let index = id / RANGE;
        if let Some(range) = state.ranges.get_mut(&(ns, index)) {
            if range.clear(id) {
                // Under the holder's lock, as the publish was: the slot and the range agree.
                // The slot's reference waits for lookups that may be taking one of their own.
                if let Some(pid) = space.slots.take(id) {
                    state.objects.retire(pid, &self.readers);
                }
            }
            if range.live == 0 && state.current.get(&ns) != Some(&index) {
                state.ranges.remove(&(ns, index));
                self.give_back(state, 0, index, space);
            }
        }
    }

    /// Gives range `index` of `space`, held in `state`, back to the space. Its lookup slots
    /// (all empty) are unlinked and wait in the CPU's limbo until no lookup can read them: an
    /// allocation never waits for a lookup.
    fn give_back(&self, state: &mut CpuRanges, cpu: usize, index: u32, space: &Space<L>) {
        if let Some(block) = space.slots.retire(index) {
            state.limbo.retire(block, &self.readers);
        }
        space.give_back(cpu, index, 0..0);
    }

    /// Stores the object in the slot of (ns, id), held in `state`, and marks an init.
    fn publish_one(state: &mut CpuRanges, ns: NsId, id: u32, space: &Space<L>, pid: &Pid) {
        if state.ranges.contains_key(&(ns, id / RANGE)) {
            space.slots.publish(id, pid.clone());
        }
        if id == 1 {
            // Release pairs with the Acquire load in `take_chosen`.
            space.init_seen.store(1, Ordering::Release);
        }
    }

    /// Every CPU's lock, in ascending order: the rare paths.
    fn lock_all(&self) -> Vec<MutexGuard<'_, L, CpuRanges>> {
        self.cpus.iter().map(|cpu| cpu.lock()).collect()
    }

    /// The slow path of an allocation, under every CPU's lock: one ID per level of `chain`
    /// (the one `set_tid` asks for, else the next free), published together, or all released
    /// if a level fails or the target namespace died meanwhile.
    fn alloc_slow(
        &self,
        chain: &[(NsId, &Space<L>)],
        set_tid: &[u32],
        cpu: usize,
    ) -> Result<Pid, PidError> {
        let mut guards = self.lock_all();
        if chain[0].1.is_freed() {
            return Err(PidError::NamespaceFreed);
        }
        let mut states: Vec<&mut CpuRanges> = guards.iter_mut().map(|guard| &mut **guard).collect();
        let mut taken = Taken::new();
        let mut holders: Vec<usize> = Vec::with_capacity(chain.len());
        if let Err(error) =
            self.take_levels(&mut states, chain, set_tid, cpu, &mut taken, &mut holders)
        {
            self.release_taken(&mut states, chain, &taken, &holders);
            self.restart_if_unused(&mut states, chain[0].0, chain[0].1);
            return Err(error);
        }
        // Acquire pairs with the Release store in `free`.
        if chain[0].1.dead.load(Ordering::Acquire) != 0 {
            self.release_taken(&mut states, chain, &taken, &holders);
            return Err(PidError::NamespaceDead);
        }
        let pid = Pid::new(&taken);
        for (level, (&(ns, id), &holder)) in taken.iter().zip(&holders).enumerate() {
            Self::publish_one(states[holder], ns, id, chain[level].1, &pid);
        }
        Ok(pid)
    }

    /// [`PidAllocator::alloc_refused`] under every CPU's lock: the levels taken as
    /// [`alloc_slow`](Self::alloc_slow) takes them, then released, with no restart of the
    /// chain's spaces (the refused allocation's target is a freed space below them).
    fn refused_slow(&self, chain: &[(NsId, &Space<L>)], set_tid: &[u32], cpu: usize) -> PidError {
        let mut guards = self.lock_all();
        if chain[0].1.is_freed() {
            return PidError::NamespaceFreed;
        }
        let mut states: Vec<&mut CpuRanges> = guards.iter_mut().map(|guard| &mut **guard).collect();
        let mut taken = Taken::new();
        let mut holders: Vec<usize> = Vec::with_capacity(chain.len());
        let answer = self
            .take_levels(&mut states, chain, set_tid, cpu, &mut taken, &mut holders)
            .err()
            .unwrap_or(PidError::NamespaceDead);
        self.release_taken(&mut states, chain, &taken, &holders);
        answer
    }

    /// Takes one ID per level of `chain`, innermost first (the one `set_tid` asks for, else
    /// the next free), recording each and its holder CPU, until a level refuses.
    fn take_levels(
        &self,
        states: &mut [&mut CpuRanges],
        chain: &[(NsId, &Space<L>)],
        set_tid: &[u32],
        cpu: usize,
        taken: &mut Taken,
        holders: &mut Vec<usize>,
    ) -> Result<(), PidError> {
        for (level, &(ns, space)) in chain.iter().enumerate() {
            let (id, holder) = match set_tid.get(level) {
                Some(&tid) => Self::take_chosen(states, cpu, ns, space, tid)?,
                None => self.take_next(states, cpu, ns, space)?,
            };
            taken.push((ns, id));
            holders.push(holder);
        }
        Ok(())
    }

    /// Takes `tid`, the ID `set_tid` asks for in `ns`, holding its range for `cpu` if no CPU
    /// holds it: the ID and the CPU whose state holds its range.
    fn take_chosen(
        states: &mut [&mut CpuRanges],
        cpu: usize,
        ns: NsId,
        space: &Space<L>,
        tid: u32,
    ) -> Result<(u32, usize), PidError> {
        let limit = space.pid_max();
        // Acquire pairs with the Release store in `publish_one`.
        let init = space.init_seen.load(Ordering::Acquire) != 0;
        if tid < 1 || tid >= limit || (tid != 1 && !init) {
            return Err(PidError::Invalid);
        }
        let index = tid / RANGE;
        let holder = match space.holder(index) {
            Some(holder) => holder,
            None => {
                // Not held: hold it for this CPU, outside any bump order.
                space.directory.write().holders.insert(index, cpu);
                states[cpu].ranges.insert((ns, index), Range::new(index));
                cpu
            }
        };
        let range = states[holder]
            .ranges
            .get_mut(&(ns, index))
            .expect("the directory and the CPUs agree");
        if range.is_taken(tid) {
            return Err(PidError::Exists);
        }
        range.set(tid);
        Ok((tid, holder))
    }

    /// Takes the next free ID of `ns`: `cpu`'s next (`bump`), else, the space being nearly
    /// full, any free ID of any CPU's ranges. The ID and the CPU whose state holds its range.
    fn take_next(
        &self,
        states: &mut [&mut CpuRanges],
        cpu: usize,
        ns: NsId,
        space: &Space<L>,
    ) -> Result<(u32, usize), PidError> {
        let limit = space.pid_max();
        if let Some(id) = self.bump(states[cpu], cpu, ns, space) {
            return Ok((id, cpu));
        }
        // Nearly full: any free ID of any held range.
        for (holder, state) in states.iter_mut().enumerate() {
            let ids = state
                .ranges
                .iter_mut()
                .filter(|((space_ns, _), _)| *space_ns == ns)
                .find_map(|(_, range)| range.any_free(limit));
            if let Some(id) = ids {
                return Ok((id, holder));
            }
        }
        Err(PidError::Full)
    }

    /// Releases the IDs a failed allocation took, one per level of `chain`, each in the state
    /// of its holder.
    fn release_taken(
        &self,
        states: &mut [&mut CpuRanges],
        chain: &[(NsId, &Space<L>)],
        taken: &Taken,
        holders: &[usize],
    ) {
        for (level, (&(ns, id), &holder)) in taken.iter().zip(holders).enumerate() {
            self.release_one(states[holder], ns, id, chain[level].1);
        }
    }

    /// Whether any CPU's ranges, all locked in `states`, hold a live ID of `ns`.
    fn holds_ids(states: &[MutexGuard<'_, L, CpuRanges>], ns: NsId) -> bool {
        states.iter().any(|state| {
            state
                .ranges
                .iter()
                .any(|(&(range_ns, _), range)| range_ns == ns && range.live != 0)
        })
    }

    /// Drops every CPU's ranges of `ns`, which holds no live ID, and empties every CPU's limbo,
    /// all locked in `states`. Returns the unlinked blocks and the retired objects, to be freed
    /// after a grace period, so that memory returns now rather than at some later allocation.
    fn drop_ranges(
        states: &mut [MutexGuard<'_, L, CpuRanges>],
        ns: NsId,
        space: &Space<L>,
    ) -> (Vec<RetiredBlock>, Vec<Pid>) {
        let mut retired: Vec<RetiredBlock> = Vec::new();
        let mut objects: Vec<Pid> = Vec::new();
        for state in states.iter_mut() {
            let held: Vec<u32> = state
                .ranges
                .keys()
                .filter(|&&(range_ns, _)| range_ns == ns)
                .map(|&(_, index)| index)
                .collect();
            for index in held {
                state.ranges.remove(&(ns, index));
                // Its slots are all empty (no live ID); lookups may still read the block.
                retired.extend(space.slots.retire(index));
            }
            retired.append(&mut state.limbo.take_all());
            objects.append(&mut state.objects.take_all());
            state.current.remove(&ns);
            // The maps' capacity then depends on what is left only, so memory returns.
            state.ranges.shrink_to_fit();
            state.current.shrink_to_fit();
        }
        (retired, objects)
    }

    /// Counts `space`, being freed, out of its parent's children; `_structure` is the
    /// `namespaces` lock.
    fn leave_parent(&self, space: &Space<L>, _structure: &MutexGuard<'_, L, ()>) {
        if let Some(parent) = space.parent {
            // Alive: it has a child (this one) until now, and we hold the `namespaces` lock.
            // SAFETY: see above.
            if let Some(up) = unsafe { self.spaces.get(parent as usize) } {
                // Relaxed: under the `namespaces` lock.
                up.children.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// The end of an allocation into `ns` that failed at some level (the kernel's reset of a
    /// space with no object yet): if `ns` is alive and holds no ID, its next object must take
    /// ID 1 and become its init. Every CPU gives its ranges of `ns` (none with a live ID) back
    /// and carving starts again at range 0, whose first ID is 1. The other levels' ranges stay
    /// as the allocation left them. The caller holds every CPU's lock (`states`), so no
    /// allocation is between taking an ID and publishing it: the ranges' counts are every ID
    /// the space holds.
    fn restart_if_unused(&self, states: &mut [&mut CpuRanges], ns: NsId, space: &Space<L>) {
        // Acquire pairs with the Release store in `free`.
        if space.dead.load(Ordering::Acquire) != 0 {
            return;
        }
        let holds_ids = states.iter().any(|state| {
            state
                .ranges
                .iter()
                .any(|(&(range_ns, _), range)| range_ns == ns && range.live != 0)
        });
        if holds_ids {
            return;
        }
        for (cpu, state) in states.iter_mut().enumerate() {
            let held: Vec<u32> = state
                .ranges
                .keys()
                .filter(|&&(range_ns, _)| range_ns == ns)
                .map(|&(_, index)| index)
                .collect();
            for index in held {
                state.ranges.remove(&(ns, index));
                self.give_back(state, cpu, index, space);
            }
            state.current.remove(&ns);
        }
        space.directory.write().cursor = 0;
    }

    /// Locks the CPU holding range `index` of `ns`, once the directory and the CPU agree.
    fn lock_holder(
        &self,
        ns: NsId,
        space: &Space<L>,
        index: u32,
    ) -> Option<MutexGuard<'_, L, CpuRanges>> {
        loop {
            let holder = space.holder(index)?;
            let state = self.cpus[holder].lock();
            if state.ranges.contains_key(&(ns, index)) {
                return Some(state);
            }
            // The range moved between the directory read and the lock: read again.
        }
    }
}

impl<L: Locks> PidAllocator for PerCpu<L> {
    fn name(&self) -> &'static str {
        "percpu"
    }

    fn new_ns(&self, parent: NsId) -> Result<NsId, PidError> {
        let _structure = self.namespaces.lock();
        // Only `free_ns` frees spaces, under the lock we hold.
        // SAFETY: so the parent stays alive until we release it.
        let Some(up) = (unsafe { self.spaces.get(parent as usize) }) else {
            return Err(self.missing(parent));
        };
        let level = up.level + 1;
        if level > MAX_LEVEL {
            return Err(PidError::TooDeep);
        }
        let ns = self
            .spaces
            .push(Space::new(Some(parent), level))
            .ok_or(PidError::TooManyNamespaces)?;
        // Relaxed: `children` changes and is read only under the `namespaces` lock.
        up.children.fetch_add(1, Ordering::Relaxed);
        Ok(ns as NsId)
    }

    fn free_ns(&self, ns: NsId) -> Result<(), PidError> {
        if ns == ROOT {
            return Err(PidError::UnknownNs);
        }
        let structure = self.namespaces.lock();
        let pointer = match self.spaces.entry(ns as usize) {
            // Relaxed: unlinking happens only here, under the lock we hold.
            Some(entry) => entry.load(Ordering::Relaxed),
            None => core::ptr::null_mut(),
        };
        if pointer.is_null() {
            return Err(self.missing(ns));
        }
        // Only this function frees spaces, under the lock we hold.
        // SAFETY: so the space lives until we free it below.
        let space = unsafe { &*pointer };
        // Relaxed: changed only under the `namespaces` lock, which we hold.
        if space.children.load(Ordering::Relaxed) != 0 {
            return Err(PidError::NamespaceBusy);
        }
        let mut guards = self.lock_all();
        // Every CPU's lock: no allocation or free is between taking an ID and publishing or
        // releasing it, so the ranges' counts are every ID the space holds.
        if Self::holds_ids(&guards, ns) {
            return Err(PidError::NamespaceBusy);
        }
        // Relaxed: under every CPU's lock; allocations read it under theirs (`is_freed`).
        space.freed.store(1, Ordering::Relaxed);
        let (retired, objects) = Self::drop_ranges(&mut guards, ns, space);
        let unlinked = self.spaces.unlink(ns as usize);
        debug_assert_eq!(unlinked, pointer);
        drop(guards);
        // New operations on `ns` now fail; wait for those that hold the space, and for the
        // lookups that may still read it or a retired block (a grace period: lookups never
        // wait inside their sections, so waiting here with the `namespaces` lock held is safe).
        self.space_hazards.wait_unused(pointer);
        self.readers.synchronize();
        drop(retired);
        drop(objects);
        self.leave_parent(space, &structure);
        // Unlinked, no hazard holds it and no lookup section that began before the unlink is
        // left: nobody reads it any more. It came from
        // `Box::into_raw` in `SpaceList::push`.
        // SAFETY: so we own it and free it once.
        drop(unsafe { Box::from_raw(pointer) });
        Ok(())
    }

    fn set_pid_max(&self, ns: NsId, max: u32) -> Result<(), PidError> {
        check_pid_max(max)?;
        self.space(ns)?
            .pid_max
            .store(max as usize, Ordering::Relaxed);
        Ok(())
    }

    fn alloc(&self, ns: NsId, set_tid: &[u32], cpu: usize) -> Result<Pid, PidError> {
        let cpu = cpu % self.cpus.len();
        let target = self.space(ns)?;
        let chain = self.chain(ns, &target, set_tid)?;
        if !set_tid.is_empty() {
            return self.alloc_slow(&chain, set_tid, cpu);
        }
        let mut guard = self.cpus[cpu].lock();
        if target.is_freed() {
            return Err(PidError::NamespaceFreed);
        }
        let state = &mut *guard;
        let mut taken = Taken::new();
        for &(level_ns, space) in &chain {
            match self.bump(state, cpu, level_ns, space) {
                Some(id) => taken.push((level_ns, id)),
                None => {
                    // No range left to carve: undo, and take the rare path.
                    self.unbump(state, &taken, &chain);
                    drop(guard);
                    return self.alloc_slow(&chain, set_tid, cpu);
                }
            }
        }
        // Acquire pairs with the Release store in `free`.
        if chain[0].1.dead.load(Ordering::Acquire) != 0 {
            for (level, &(ns, id)) in taken.iter().enumerate() {
                self.release_one(state, ns, id, chain[level].1);
            }
            return Err(PidError::NamespaceDead);
        }
        let pid = Pid::new(&taken);
        for (level, &(ns, id)) in taken.iter().enumerate() {
            Self::publish_one(state, ns, id, chain[level].1, &pid);
        }
        Ok(pid)
    }

    fn alloc_refused(&self, ns: NsId, set_tid: &[u32], cpu: usize) -> PidError {
        let cpu = cpu % self.cpus.len();
        let target = match self.space(ns) {
            Ok(target) => target,
            Err(error) => return error,
        };
        match self.chain(ns, &target, set_tid) {
            Ok(chain) => self.refused_slow(&chain, set_tid, cpu),
            Err(error) => error,
        }
    }

    fn free(&self, ns: NsId, id: u32, _cpu: usize) -> Result<(), PidError> {
        // Claim the object by taking its slot at the named level: of two frees of one object,
        // only one finds it there. The space's hazard goes at the end of the block, so that a
        // thread holds at most one space hazard at a time.
        let pid = {
            let space = self.space(ns)?;
            let Some(mut guard) = self.lock_holder(ns, &space, id / RANGE) else {
                return Err(PidError::NotFound);
            };
            let state = &mut *guard;
            // An empty slot: free, or reserved by an allocation still in flight.
            let pid = space.slots.take(id).ok_or(PidError::NotFound)?;
            // The slot's reference waits for lookups that may be taking one of their own.
            state.objects.retire(pid.clone(), &self.readers);
            self.release_one(state, ns, id, &space);
            pid
        };
        for &(level_ns, number) in pid.levels() {
            // Each level's space under a hazard of its own: an inner level named by another
            // free of this object may be emptied and freed meanwhile.
            let Ok(level_space) = self.space(level_ns) else {
                continue;
            };
            let level_space = &*level_space;
            if (level_ns, number) != (ns, id) {
                if let Some(mut guard) = self.lock_holder(level_ns, level_space, number / RANGE) {
                    let state = &mut *guard;
                    let ours = state.ranges.contains_key(&(level_ns, number / RANGE))
                        && level_space
                            .slots
                            .read_owned(number)
                            .is_some_and(|held| held.same(&pid));
                    if ours {
                        self.release_one(state, level_ns, number, level_space);
                    }
                }
            }
            if number == 1 {
                // Release pairs with the Acquire loads of `dead` in `alloc`.
                level_space.dead.store(1, Ordering::Release);
            }
        }
        Ok(())
    }

    fn lookup(&self, ns: NsId, id: u32) -> Result<Option<Pid>, PidError> {
        // No CPU's lock, no directory and no hazard: a read-side section, the space's entry
        // and the ID's slot alone (see `Readers` and `Slots`). A freed space holds nothing.
        let section = self.readers.enter();
        let pointer = match self.spaces.entry(ns as usize) {
            // Acquire pairs with the Release store of `SpaceList::push` (the space's
            // initialisation). Loaded inside the section: `free_ns` unlinks the space before
            // its grace period, so a space read here is freed only after the section ends.
            Some(entry) => entry.load(Ordering::Acquire),
            None => core::ptr::null_mut(),
        };
        if pointer.is_null() {
            return match self.missing(ns) {
                PidError::NamespaceFreed => Ok(None),
                error => Err(error),
            };
        }
        // SAFETY: linked when loaded inside the section, and freed only after it ends (above).
        let space = unsafe { &*pointer };
        Ok(space.slots.read(id, &section))
    }

    fn memory_bytes(&self) -> usize {
        // First free what waits in the limbos (after a grace period), so that the figure does
        // not depend on when lookups last ran.
        let retired: Vec<(Vec<RetiredBlock>, Vec<Pid>)> = self
            .cpus
            .iter()
            .map(|cpu| {
                let mut state = cpu.lock();
                (state.limbo.take_all(), state.objects.take_all())
            })
            .collect();
        self.readers.synchronize();
        drop(retired);
        let mut bytes = core::mem::size_of::<Self>()
            + self.cpus.len() * core::mem::size_of::<CachePadded<Mutex<L, CpuRanges>>>();
        for cpu in self.cpus.iter() {
            let state = cpu.lock();
            let (kept, room) = state.limbo.counts();
            let (objects, object_room) = state.objects.counts();
            bytes += state.ranges.capacity() * (core::mem::size_of::<((NsId, u32), Range)>() + 1)
                + state.current.capacity() * (core::mem::size_of::<(NsId, u32)>() + 1)
                + room * core::mem::size_of::<RetiredBlock>()
                + kept * RetiredBlock::BYTES
                + object_room * core::mem::size_of::<Pid>()
                + objects * super::idr::pid_bytes(0);
            for range in state.ranges.values() {
                bytes += range.live as usize * super::idr::pid_bytes(0);
            }
        }
        let _structure = self.namespaces.lock();
        for index in 0..self.spaces.len() {
            // Only `free_ns` frees spaces, under the lock we hold.
            // SAFETY: so the space lives while we read it.
            if let Some(space) = unsafe { self.spaces.get(index) } {
                let directory = space.directory.read();
                bytes += core::mem::size_of::<Space<L>>()
                    + space.slots.memory_bytes()
                    + directory.holders.capacity() * (core::mem::size_of::<(u32, usize)>() + 1);
            }
        }
        bytes
    }
}
