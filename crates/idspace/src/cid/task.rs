//! Tasks as every CID design sees them: a task's state in atomic words that the task owns, and
//! the space's roster of live tasks.
//!
//! # The task word
//!
//! A task's CID word and where it runs share one 64-bit atomic word ([`Word`]): the CID word in
//! the low half (designs give its flag bits their meaning), the CPU it runs on (plus one, zero
//! when it sleeps) above it, and an exited bit. One word, so that a context switch claims the
//! task and reads its CID with a single compare-and-swap, and a slow path that changes a
//! sleeping task's CID cannot miss a claim racing it.
//!
//! Who writes it:
//!
//! * **A running task's word** is written only by whoever holds the runqueue lock of the CPU it
//!   runs on (that CPU's switches, a mode change's walk, exit), with plain stores: no one else
//!   may write it, and a compare-and-swap elsewhere fails on it without writing.
//! * **A sleeping task's word** changes only by compare-and-swap: a claim (a CPU switching the
//!   task in), a walk dropping its CID, exit. Whoever loses sees the winner's word and looks
//!   again.
//!
//! Every store and successful compare-and-swap is Release, every load and claim Acquire: the
//! CPU that claims a task sees what the CPU it last ran on did with it (its switch-out's store,
//! the lazy design's `last_cpu`), and a claim that reads a walk's compare-and-swap sees the mode
//! the walk published before it.
//!
//! Affinity lives in a word of its own (set from outside, read at claim, no ordering needed
//! beyond what the caller's calls give).

use std::collections::HashMap;
use std::sync::Arc;

use super::{CidError, MAX_CPUS, UNSET};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::util::hash::BuildIntHasher;

/// A snapshot of a task word: `cid | (cpu + 1) << 32 | EXITED`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Word(u64);

impl Word {
    const CPU_SHIFT: u32 = 32;
    const CPU_MASK: u64 = 0xff << Self::CPU_SHIFT;
    const EXITED_BIT: u64 = 1 << 40;

    /// A new task's word: no CID, not running.
    const NEW: Word = Word(UNSET as u64);

    /// An exited task's word: no CID, not running, and no claim will succeed.
    pub(crate) const EXITED: Word = Word(Self::EXITED_BIT | UNSET as u64);

    /// The CID word.
    #[inline]
    pub(crate) fn cid(self) -> u32 {
        self.0 as u32
    }

    /// The CPU the task runs on (or is being switched in on).
    #[inline]
    pub(crate) fn cpu(self) -> Option<usize> {
        match (self.0 & Self::CPU_MASK) >> Self::CPU_SHIFT {
            0 => None,
            plus_one => Some(plus_one as usize - 1),
        }
    }

    #[inline]
    pub(crate) fn exited(self) -> bool {
        self.0 & Self::EXITED_BIT != 0
    }

    #[inline]
    pub(crate) fn with_cid(self, cid: u32) -> Word {
        Word(self.0 & !u64::from(u32::MAX) | u64::from(cid))
    }

    #[inline]
    pub(crate) fn running_on(self, cpu: usize) -> Word {
        debug_assert!(cpu < MAX_CPUS);
        Word(self.0 & !Self::CPU_MASK | (cpu as u64 + 1) << Self::CPU_SHIFT)
    }

    #[inline]
    pub(crate) fn sleeping(self) -> Word {
        Word(self.0 & !Self::CPU_MASK)
    }
}

/// No CPU in [`TaskInner::last_cpu`].
const NO_CPU: u32 = u32::MAX;

/// A space's identity: one allocation that the space and each of its tasks point at. Two spaces
/// never share one (it lives as long as the space or any of its tasks does), so whether a task
/// belongs to a space is a pointer comparison.
pub(crate) struct SpaceId(Arc<()>);

impl SpaceId {
    pub(crate) fn new() -> SpaceId {
        SpaceId(Arc::new(()))
    }

    /// Refuses a task that another space forked: its state (CPU, CID word) speaks of that
    /// space's CPUs and bitmap, so acting on it here would break both spaces.
    pub(crate) fn check(&self, task: &Task) -> Result<(), CidError> {
        if Arc::ptr_eq(&self.0, &task.0.space.0) {
            Ok(())
        } else {
            Err(CidError::ForeignTask)
        }
    }

    /// [`SpaceId::check`] for a switch's optional next task.
    pub(crate) fn check_next(&self, next: Option<&Task>) -> Result<(), CidError> {
        next.map_or(Ok(()), |task| self.check(task))
    }
}

/// A task's state. A runqueue points at its current task's `TaskInner` without a reference
/// count (see [`Roster`]).
pub(crate) struct TaskInner {
    id: u64,
    /// The space that forked the task, the only one that may act on it.
    space: SpaceId,
    /// The task word (module docs).
    word: AtomicU64,
    /// CPUs the task may run on.
    affinity: AtomicU64,
    /// The CPU the task last ran on, for designs that track migrations (the lazy design's
    /// `migrate_from_cpu`); [`NO_CPU`] before its first run. Written only by the CPU that runs
    /// the task, under its runqueue lock.
    last_cpu: AtomicU32,
}

impl TaskInner {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The task word.
    #[inline]
    pub(crate) fn word(&self) -> Word {
        // Acquire pairs with the Release stores and compare-and-swaps of the word's writers.
        Word(self.word.load(Ordering::Acquire))
    }

    /// Sets the CID word of a task that runs on a CPU whose runqueue lock the caller holds (the
    /// word's only writer then), or of a task no other thread can reach yet (a fork's).
    #[inline]
    pub(crate) fn set_cid_exclusive(&self, cid: u32) {
        // Relaxed: the caller is the only writer, and its own last write (or the write of the
        // previous holder of the runqueue lock, which the lock orders) is what it reads.
        let word = Word(self.word.load(Ordering::Relaxed));
        // Release pairs with the Acquire loads and claims of later readers.
        self.word.store(word.with_cid(cid).0, Ordering::Release);
    }

    /// Stores the word of a task the caller's runqueue lock covers (the word's only writer).
    #[inline]
    pub(crate) fn store_exclusive(&self, word: Word) {
        // Release pairs with the Acquire loads and claims of later readers (the next CPU to
        // claim a task that leaves this one sees what this CPU did with it).
        self.word.store(word.0, Ordering::Release);
    }

    /// Replaces a sleeping task's word `current` by `new` unless it changed meanwhile (a claim,
    /// another slow path); the word it found otherwise.
    #[inline]
    pub(crate) fn update_sleeping(&self, current: Word, new: Word) -> Result<(), Word> {
        debug_assert!(current.cpu().is_none() && new.cpu().is_none());
        // AcqRel: Release pairs with the Acquire of a later claim (which then sees what the
        // caller published before, e.g. a walk's mode); Acquire as in `word`.
        self.word
            .compare_exchange(current.0, new.0, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(Word)
    }

    /// Claims the sleeping task whose word is `current` for `cpu`, unless its word changed
    /// meanwhile (another CPU claimed it, a slow path changed it, it exited); the word it found
    /// otherwise.
    #[inline]
    pub(crate) fn claim(&self, current: Word, cpu: usize) -> Result<(), Word> {
        debug_assert!(current.cpu().is_none() && !current.exited());
        // Acquire pairs with the Release store of the task's switch-out on the CPU it last ran
        // on (this CPU sees what that one did with the task), and with the Release
        // compare-and-swap of a slow path that changed the sleeping word (a walk: this CPU then
        // reads the mode the walk published before it). No Release needed: whoever must see
        // what this CPU does with the task takes its runqueue lock.
        self.word
            .compare_exchange(
                current.0,
                current.running_on(cpu).0,
                Ordering::Acquire,
                Ordering::Acquire,
            )
            .map(|_| ())
            .map_err(Word)
    }

    #[inline]
    pub(crate) fn affinity(&self) -> u64 {
        // Relaxed: the mask is a value of its own; calls that set it and calls that read it
        // are ordered by the callers.
        self.affinity.load(Ordering::Relaxed)
    }

    /// The CPU the task last ran on, replaced by `cpu` (the caller runs it there, with the
    /// runqueue held).
    pub(crate) fn replace_last_cpu(&self, cpu: usize) -> Option<usize> {
        // Relaxed: only the CPU running the task touches it, and the claim (Acquire) of that
        // CPU follows the previous one's switch-out (Release).
        let last = self.last_cpu.swap(cpu as u32, Ordering::Relaxed);
        (last != NO_CPU).then_some(last as usize)
    }
}

/// A task of a CID space: returned by `fork`, passed to `switch`, `exit` and `set_affinity`.
/// Cheap to clone.
///
/// A task belongs to the space that forked it: another space refuses it with
/// [`CidError::ForeignTask`].
#[derive(Clone)]
pub struct Task(pub(crate) Arc<TaskInner>);

impl Task {
    fn new(space: SpaceId, id: u64, affinity: u64) -> Task {
        Task(Arc::new(TaskInner {
            id,
            space,
            word: AtomicU64::new(Word::NEW.0),
            affinity: AtomicU64::new(affinity),
            last_cpu: AtomicU32::new(NO_CPU),
        }))
    }

    /// The task's number within its space (in fork order, from 0).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Sets the affinity of a task that has not exited.
    ///
    /// # Errors
    /// [`CidError::UnknownTask`] if it exited.
    pub(crate) fn set_affinity(&self, affinity: u64) -> Result<(), CidError> {
        if self.0.word().exited() {
            return Err(CidError::UnknownTask);
        }
        // Relaxed: see `TaskInner::affinity`.
        self.0.affinity.store(affinity, Ordering::Relaxed);
        Ok(())
    }
}

impl core::fmt::Debug for Task {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Task({})", self.0.id)
    }
}

/// A space's live tasks (the kernel's thread list), under the space's fork/exit lock: forks add
/// to it, exits remove from it, a mode change's walk visits it.
///
/// It also keeps every live task alive. That is what lets a runqueue point at its current task
/// without a reference count (two atomic read-modify-writes a switch saves): a task runs only
/// while it is live, and exit takes it off its CPU before it leaves the roster.
pub(crate) struct Roster {
    tasks: HashMap<u64, Task, BuildIntHasher>,
    next_id: u64,
}

impl Roster {
    pub(crate) fn new() -> Roster {
        Roster {
            tasks: HashMap::default(),
            next_id: 0,
        }
    }

    /// A new task of `space`, numbered in fork order, allowed on the CPUs of `affinity`.
    pub(crate) fn fork(&mut self, space: &SpaceId, affinity: u64) -> Task {
        let task = Task::new(SpaceId(Arc::clone(&space.0)), self.next_id, affinity);
        self.next_id += 1;
        self.tasks.insert(task.id(), task.clone());
        task
    }

    /// Forgets an exited task.
    pub(crate) fn remove(&mut self, task: &Task) {
        debug_assert!(task.0.word().exited());
        self.tasks.remove(&task.id());
    }

    /// The live tasks.
    pub(crate) fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values()
    }
}

/// The affinity mask (a bit per CPU) of the CPUs in `cpus`, for a space of `ncpus` CPUs.
///
/// # Errors
/// [`CidError::BadCpu`] if the list is empty or names a CPU at or beyond `ncpus` or at or
/// beyond [`MAX_CPUS`] (a mask has 64 bits, so CPU 64 and above cannot be named at all).
///
/// ```
/// use idspace::cid::{affinity_mask, CidError};
///
/// assert_eq!(affinity_mask(&[0, 2], 4), Ok(0b101));
/// assert_eq!(affinity_mask(&[4], 4), Err(CidError::BadCpu));
/// assert_eq!(affinity_mask(&[70], 128), Err(CidError::BadCpu));
/// ```
pub fn affinity_mask(cpus: &[usize], ncpus: usize) -> Result<u64, CidError> {
    let mut mask = 0u64;
    for &cpu in cpus {
        if cpu >= ncpus.min(MAX_CPUS) {
            return Err(CidError::BadCpu);
        }
        mask |= 1 << cpu;
    }
    if mask == 0 {
        return Err(CidError::BadCpu);
    }
    Ok(mask)
}

/// Mask of all `cpus` CPUs.
pub(crate) fn all_cpus(cpus: usize) -> u64 {
    if cpus >= 64 {
        u64::MAX
    } else {
        (1u64 << cpus) - 1
    }
}
