//! Concurrency IDs: the MM CID rewrite of Linux 6.19, its baselines, and the kernel's own
//! `rseq` mm_cid.
//!
//! # What a CID is
//!
//! A concurrency ID is a small integer a running task uses to index per-CPU-like data
//! (allocator caches, sharded counters), so that memory scales with real concurrency rather
//! than with the number of threads. Two rules hold at every instant (the ABI):
//!
//! 1. no two tasks of one space (the kernel's mm) that run at the same time hold the same CID;
//! 2. every CID is below the number of CPUs.
//!
//! Compaction (keeping CIDs small) is an optimisation: the optimum is
//! `min(tasks, CPUs allowed by the union of affinities)`.
//!
//! # The designs
//!
//! All implement [`CidAllocator`]; a "CPU" is a worker slot, and `switch` is a context switch on
//! it. A space has 1 to [`MAX_CPUS`] CPUs, and a [`Task`] belongs to the space that forked it:
//! another space refuses it ([`CidError::ForeignTask`]).
//!
//! * [`Rework`], the recommended design: Thomas Gleixner's rewrite ("sched: Rewrite MM CID
//!   management", Linux 6.19); its docs explain the ownership modes and the fixup walks.
//!   Tasks own CIDs while there are few of them; CPUs own them, and tasks borrow, when tasks
//!   outnumber the CID budget. Mode changes happen in fork and exit, which walk the tasks or the
//!   CPUs to hand CIDs over; context switches stay a few loads and stores, under a per-CPU
//!   runqueue lock (the kernel's scheduler holds `rq->lock` there anyway; ours has no lock
//!   to share, so a scheduler thread bound to its CPU with [`bind_current_thread`] takes a
//!   lock biased to it, without an atomic read-modify-write; [`Rework`] says what that
//!   saves).
//! * [`BitmapCids`]: the first design (Linux 6.3): take the lowest free CID under a per-space
//!   lock at every switch-in, give it back at every switch-out.
//! * [`LazyCids`]: the design before the rewrite (Linux 6.4 to 6.18): CPUs cache CIDs across
//!   switches; other CPUs take them back without locks (a lazy-put mark and a Dekker check of
//!   the CPU's current task); a periodic scan returns the CIDs no task uses, run at a tick on
//!   the switch path or by a worker thread ([`ScanPlacement`]; Gabriele Monaco's "sched: Move
//!   task_mm_cid_work to mm delayed work").
//!
//! [`rseq`] reads the kernel's own mm_cid for the calling thread.
//!
//! # Without `std`, and memory
//!
//! The three designs build on `core` + `alloc`: the caller's scheduler calls
//! [`switch`](CidAllocator::switch) with the CPU it runs on, each design's locks are a type
//! parameter (see [`lock`](crate::lock)), and [`LazyCids`]'s scan on the tick reads the clock
//! of the [`host`](crate::host). Only [`rseq`] and [`ScanPlacement::Worker`] (a scan thread)
//! need `std`.
//!
//! A context switch allocates nothing. What allocates: a space's per-CPU state when it is
//! built (the kernel's `mm_alloc_cid`, which can fail with `-ENOMEM`) and a fork's [`Task`],
//! an `Arc` (the kernel's per-task CID state lives inside `task_struct`, allocated by fork
//! before the CID code runs). Stable Rust has no `Arc::try_new`, so both abort on exhaustion
//! as `Arc::new` and `Vec` do; they are sized by CPUs and tasks, made once per space and once
//! per task, never on the switch path.

use crate::prelude::*;

mod bias;
mod bitmap;
#[cfg(feature = "std")]
pub(crate) mod current;
mod error;
mod lazy;
mod mask;
mod rework;
#[cfg(feature = "std")]
pub mod rseq;
mod runqueue;
mod task;

pub use bias::bind_current_thread;
pub use bitmap::BitmapCids;
pub use error::CidError;
pub use lazy::{
    LazyCids, ScanPlacement, ScanStats, KERNEL_SCAN_PERIOD, MAX_SCAN_PERIOD, TICK_SWITCHES,
};
pub use rework::Rework;
pub use task::{affinity_mask, Task};

// The kernel's CID word encoding: a CID, possibly with flag bits. Tasks and CPUs keep these
// words internally; users see only the CID value (`user_cid`), so the encoding is private.

/// No CID (`MM_CID_UNSET`).
pub(crate) const UNSET: u32 = 1 << 31;
/// The CID is owned by the CPU (`MM_CID_ONCPU`).
pub(crate) const ONCPU: u32 = 1 << 30;
/// A transition between ownership modes is in progress (`MM_CID_TRANSIT`).
pub(crate) const TRANSIT: u32 = 1 << 29;
/// Spaces have at most this many CPUs (affinities are 64-bit masks): a larger count is
/// [`CidError::BadCpuCount`], a CPU number at or beyond it [`CidError::BadCpu`].
pub const MAX_CPUS: usize = 64;

/// The CID value of a CID word, as user space sees it.
#[inline]
pub(crate) fn user_cid(word: u32) -> u32 {
    word & !(ONCPU | TRANSIT)
}

/// Checks a space's CPU count: `1..=MAX_CPUS`.
pub(crate) fn check_cpu_count(cpus: usize) -> Result<usize, CidError> {
    if (1..=MAX_CPUS).contains(&cpus) {
        Ok(cpus)
    } else {
        Err(CidError::BadCpuCount { cpus })
    }
}

/// Who owns the CIDs.
///
/// ```
/// use idspace::cid::{BitmapCids, CidAllocator, CidError, LazyCids, Mode, Rework};
///
/// let spaces: [Box<dyn CidAllocator>; 3] = [
///     Box::new(Rework::new(2)?),
///     Box::new(BitmapCids::new(2)?),
///     Box::new(LazyCids::new(2)?),
/// ];
/// let modes: Vec<Mode> = spaces.iter().map(|space| space.state().mode).collect();
/// // The rewrite starts with its tasks owning the CIDs; the baselines have no modes.
/// assert_eq!(modes, [Mode::Task, Mode::None, Mode::None]);
/// assert_eq!(Mode::Cpu.as_str(), "cpu");
/// # Ok::<(), CidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Tasks own CIDs.
    Task,
    /// CPUs own CIDs; running tasks borrow them.
    Cpu,
    /// A design without ownership modes (the baselines).
    None,
}

impl Mode {
    /// The mode's name in the replay protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Task => "task",
            Mode::Cpu => "cpu",
            Mode::None => "none",
        }
    }
}

/// A snapshot of a space.
///
/// In the rewrite, tasks own the CIDs while they are few; once they outnumber the budget, the
/// CPUs own them, and the last exits hand them back to the tasks:
///
/// ```
/// use idspace::cid::{CidAllocator, CidError, CidState, Mode, Rework};
///
/// let space = Rework::new(4)?;
/// let mut tasks = Vec::new();
/// for _ in 0..3 {
///     tasks.push(space.fork(space.all_cpus())?);
/// }
/// assert_eq!(space.state().mode, Mode::Task);
/// for _ in 0..2 {
///     tasks.push(space.fork(space.all_cpus())?);
/// }
/// let state: CidState = space.state();
/// assert_eq!((state.mode, state.users, state.max_cids), (Mode::Cpu, 5, 4));
/// assert_eq!(state.mode.as_str(), "cpu");
///
/// let cid = space.switch(2, Some(&tasks[3]))?.expect("a running task has a CID");
/// assert!(cid < 4);
/// assert_eq!(space.state().running, [(tasks[3].id(), cid)]);
/// for task in tasks.drain(1..) {
///     space.exit(&task)?;
/// }
/// assert_eq!(space.state().mode, Mode::Task);
/// # Ok::<(), CidError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidState {
    /// Ownership mode.
    pub mode: Mode,
    /// Live tasks.
    pub users: u32,
    /// The CID budget: the rework's `max_cids`; the CPU count for the 6.3 bitmap;
    /// `min(users, CPUs allowed)` for the lazy design (the bound its `max_nr_cid` cursor
    /// shrinks to).
    pub max_cids: u32,
    /// Running tasks (by [`Task::id`]) and the CID each sees, by CPU order.
    pub running: Vec<(u64, u32)>,
}

/// The operations every CID design offers.
///
/// ```
/// use idspace::cid::{BitmapCids, CidAllocator, CidError, LazyCids, Rework};
///
/// let designs: Vec<Box<dyn CidAllocator>> = vec![
///     Box::new(Rework::new(2)?),
///     Box::new(BitmapCids::new(2)?),
///     Box::new(LazyCids::new(2)?),
/// ];
/// for space in &designs {
///     let task = space.fork(0b11)?; // allowed on CPUs 0 and 1
///     assert_eq!(space.switch(1, Some(&task))?, Some(0), "{}", space.name());
///     assert_eq!(space.switch(2, Some(&task)), Err(CidError::BadCpu));
///     space.exit(&task)?;
/// }
/// # Ok::<(), CidError>(())
/// ```
pub trait CidAllocator: Send + Sync {
    /// A short name for reports ("rework", "bitmap", "lazy").
    fn name(&self) -> &'static str;

    /// CPUs (worker slots) of the space.
    fn cpus(&self) -> usize;

    /// A new task (fork), not running, allowed on the CPUs of `affinity` (a bit per CPU).
    ///
    /// # Errors
    /// [`CidError::BadCpu`] if the affinity is empty or names a CPU the space does not have.
    fn fork(&self, affinity: u64) -> Result<Task, CidError>;

    /// The task leaves (exit); if it runs, its CPU becomes idle.
    ///
    /// # Errors
    /// [`CidError::ForeignTask`] if another space forked it, [`CidError::UnknownTask`] if it
    /// already exited; nothing changes then.
    fn exit(&self, task: &Task) -> Result<(), CidError>;

    /// Context switch on `cpu`: the current task (if any) is switched out and `next` (if any)
    /// switched in. Returns the CID `next` sees.
    ///
    /// # Errors
    /// [`CidError::ForeignTask`] if another space forked `next`, [`CidError::BadCpu`],
    /// [`CidError::UnknownTask`], [`CidError::RunningElsewhere`], [`CidError::NotAllowed`];
    /// nothing changes then (in this space or any other).
    fn switch(&self, cpu: usize, next: Option<&Task>) -> Result<Option<u32>, CidError>;

    /// Changes a task's affinity (a bit per CPU).
    ///
    /// # Errors
    /// [`CidError::ForeignTask`], [`CidError::UnknownTask`], [`CidError::BadCpu`]; nothing
    /// changes then.
    fn set_affinity(&self, task: &Task, affinity: u64) -> Result<(), CidError>;

    /// Runs deferred work: the rework's deferred mode switch, the lazy design's compaction.
    fn run_deferred(&self);

    /// A snapshot: mode, users, budget, and the running tasks' CIDs.
    fn state(&self) -> CidState;

    /// CIDs currently taken from the space's bitmap, by tasks or CPUs: the footprint that
    /// per-CID data must cover.
    fn cids_in_use(&self) -> u32;
}

/// Checks an affinity mask against a CPU count.
pub(crate) fn check_affinity(affinity: u64, cpus: usize) -> Result<(), CidError> {
    if affinity == 0 || affinity & !task::all_cpus(cpus) != 0 {
        Err(CidError::BadCpu)
    } else {
        Ok(())
    }
}
