//! Tasks as every CID design sees them: a task's state in an atomic word that the task owns,
//! and the space's roster of live tasks.
//!
//! # The task word
//!
//! A task's CID word, its runqueue (the CPU it runs on, or last ran on: the kernel's
//! `task_cpu`) and whether it exited share one 64-bit atomic word ([`Word`]). Whether it runs is
//! not in the word: it runs if and only if it is its runqueue's current task.
//!
//! **Who writes it:** only the holder of its runqueue's lock (`runqueue`), with plain Release
//! stores, as the kernel changes a task's scheduling state under `task_rq_lock`. A CPU that
//! switches in a task of its own runqueue (the common case) so neither writes the word nor
//! needs an atomic read-modify-write on the task: the runqueue lock it takes anyway covers it,
//! and the runqueue's current task says who runs. A task
//! moves to another runqueue only under both locks (a migration); so whoever looks up a task's
//! runqueue, locks it, and finds the word still naming it, holds the word's only writer's lock.
//!
//! **Readers** outside the lock (to find which lock to take) load it with Acquire, which pairs
//! with the Release stores; under the lock, the lock's own Acquire/Release orders everything.
//!
//! Affinity lives in a word of its own (set from outside, read at claim, no ordering needed
//! beyond what the caller's calls give).

use hashbrown::HashMap;

use super::{CidError, MAX_CPUS, UNSET};
use crate::sync::{Arc, AtomicU32, AtomicU64, Ordering};
use crate::util::hash::BuildIntHasher;

/// A snapshot of a task word: `cid | rq << 32 | EXITED`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Word(u64);

impl Word {
    const RQ_SHIFT: u32 = 32;
    const RQ_MASK: u64 = 0xff << Self::RQ_SHIFT;
    const EXITED: u64 = 1 << 40;

    /// A new task's word: no CID, not running, on runqueue `rq`.
    fn new(rq: usize) -> Word {
        debug_assert!(rq < MAX_CPUS);
        Word(u64::from(UNSET) | (rq as u64) << Self::RQ_SHIFT)
    }

    /// The CID word.
    #[inline]
    pub(crate) fn cid(self) -> u32 {
        self.0 as u32
    }

    /// The task's runqueue: the CPU it runs on or last ran on, whose lock guards the word.
    #[inline]
    pub(crate) fn rq(self) -> usize {
        ((self.0 & Self::RQ_MASK) >> Self::RQ_SHIFT) as usize
    }

    /// Whether the task is live on `cpu`'s runqueue: one compare for what a switch-in on
    /// `cpu` checks first (its runqueue, and that it did not exit).
    #[inline]
    pub(crate) fn live_on(self, cpu: usize) -> bool {
        self.0 & (Self::RQ_MASK | Self::EXITED) == (cpu as u64) << Self::RQ_SHIFT
    }

    #[inline]
    pub(crate) fn exited(self) -> bool {
        self.0 & Self::EXITED != 0
    }

    #[inline]
    pub(crate) fn with_cid(self, cid: u32) -> Word {
        Word(self.0 & !u64::from(u32::MAX) | u64::from(cid))
    }

    /// On `cpu`'s runqueue (a migration).
    #[inline]
    pub(crate) fn moved_to(self, cpu: usize) -> Word {
        debug_assert!(cpu < MAX_CPUS);
        Word(self.0 & !Self::RQ_MASK | (cpu as u64) << Self::RQ_SHIFT)
    }

    /// Exited: no CID, on the same runqueue.
    #[inline]
    pub(crate) fn exited_now(self) -> Word {
        Word(self.0 & Self::RQ_MASK | u64::from(UNSET) | Self::EXITED)
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
    #[inline]
    pub(crate) fn check(&self, task: &Task) -> Result<(), CidError> {
        if Arc::ptr_eq(&self.0, &task.0.space.0) {
            Ok(())
        } else {
            Err(CidError::ForeignTask)
        }
    }

    /// [`SpaceId::check`] for a switch's optional next task.
    #[inline]
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
    /// `migrate_from_cpu`); [`NO_CPU`] before its first run (the word's runqueue is set from
    /// fork). Touched only by the CPU that runs the task, under its runqueue lock.
    last_cpu: AtomicU32,
}

impl TaskInner {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The task word.
    #[inline]
    pub(crate) fn word(&self) -> Word {
        // Acquire pairs with the Release stores of the word's writers (`store_locked`).
        Word(self.word.load(Ordering::Acquire))
    }

    /// Sets the CID word. The caller holds the lock of the task's runqueue (the word's only
    /// writer), or no other thread can reach the task yet (a fork's).
    #[inline]
    pub(crate) fn set_cid_locked(&self, cid: u32) {
        // Relaxed: the caller is the only writer; what it reads is its own last write or one
        // that the runqueue lock orders before it.
        let word = Word(self.word.load(Ordering::Relaxed));
        self.store_locked(word.with_cid(cid));
    }

    /// Stores the word. The caller holds the lock of the task's runqueue (both runqueues'
    /// locks if `word` moves the task to another).
    #[inline]
    pub(crate) fn store_locked(&self, word: Word) {
        // Release pairs with the Acquire loads in `word` of readers outside the lock (who then
        // lock the runqueue it names).
        self.word.store(word.0, Ordering::Release);
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
        // Relaxed: only the holder of the task's runqueue lock touches it (the lock orders the
        // holders).
        let last = self.last_cpu.swap(cpu as u32, Ordering::Relaxed);
        (last != NO_CPU).then_some(last as usize)
    }
}

/// A task of a CID space: returned by `fork`, passed to `switch`, `exit` and `set_affinity`.
/// Cheap to clone.
///
/// A task belongs to the space that forked it: another space refuses it with
/// [`CidError::ForeignTask`].
///
/// ```
/// use idspace::cid::{CidAllocator, CidError, Rework};
///
/// let space = Rework::new(2)?;
/// let first = space.fork(space.all_cpus())?;
/// let second = space.fork(space.all_cpus())?;
/// // Numbered in fork order, from 0; a clone is the same task.
/// assert_eq!((first.id(), second.id()), (0, 1));
/// let again = first.clone();
/// assert_eq!(space.switch(0, Some(&first))?, space.switch(0, Some(&again))?);
/// assert_eq!(format!("{again:?}"), "Task(0)");
/// # Ok::<(), CidError>(())
/// ```
#[derive(Clone)]
pub struct Task(pub(crate) Arc<TaskInner>);

impl Task {
    fn new(space: SpaceId, id: u64, affinity: u64, rq: usize) -> Task {
        Task(Arc::new(TaskInner {
            id,
            space,
            word: AtomicU64::new(Word::new(rq).0),
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

    /// A new task of `space`, numbered in fork order, allowed on the CPUs of `affinity` (not
    /// empty), on the runqueue of one of them (the kernel's `select_task_rq` at wake-up of a new
    /// task): forks spread over the allowed CPUs in turn.
    pub(crate) fn fork(&mut self, space: &SpaceId, affinity: u64) -> Task {
        debug_assert!(affinity != 0);
        let mut rest = affinity;
        for _ in 0..self.next_id % u64::from(affinity.count_ones()) {
            rest &= rest - 1;
        }
        let rq = rest.trailing_zeros() as usize;
        let task = Task::new(SpaceId(Arc::clone(&space.0)), self.next_id, affinity, rq);
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
