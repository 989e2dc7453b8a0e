//! Errors of the CID operations.

use core::fmt;

use super::MAX_CPUS;

/// Why a CID operation was refused. The state is unchanged when one is returned.
///
/// ```
/// use idspace::cid::{CidAllocator, CidError, LazyCids, Rework, MAX_CPUS};
///
/// let space = Rework::new(2)?;
/// let pinned = space.fork(0b01)?; // CPU 0 only
/// assert_eq!(space.switch(1, Some(&pinned)), Err(CidError::NotAllowed));
/// assert_eq!(space.fork(0b100).err(), Some(CidError::BadCpu)); // no CPU 2 here
/// space.exit(&pinned)?;
/// assert_eq!(space.exit(&pinned), Err(CidError::UnknownTask));
/// assert_eq!(space.switch(0, Some(&pinned)), Err(CidError::UnknownTask));
/// let cpus = MAX_CPUS + 1;
/// assert_eq!(LazyCids::new(cpus).err(), Some(CidError::BadCpuCount { cpus }));
/// assert_eq!(CidError::NotAllowed.as_str(), "not_allowed");
/// # Ok::<(), CidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CidError {
    /// The task has exited (or was never forked in this space).
    UnknownTask,
    /// The task is running on another CPU.
    RunningElsewhere,
    /// The CPU is not in the task's affinity.
    NotAllowed,
    /// The CPU number is not below the space's CPU count (or not below [`MAX_CPUS`]), or an
    /// affinity names such a CPU or no CPU at all.
    BadCpu,
    /// The task was forked by another space: a task belongs to the space that forked it, and
    /// only that space may switch it, exit it or change its affinity.
    ForeignTask,
    /// A space was asked for a CPU count outside `1..=`[`MAX_CPUS`] (affinities are 64-bit
    /// masks, so no space has more CPUs).
    BadCpuCount {
        /// The CPU count asked for.
        cpus: usize,
    },
    /// A periodic CID scan was asked to run with a zero period, or one above
    /// [`MAX_SCAN_PERIOD`](super::MAX_SCAN_PERIOD).
    BadScanPeriod,
    /// The thread that runs a space's periodic CID scan could not be started.
    ScanThread,
}

impl CidError {
    /// The error's name in the replay protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            CidError::UnknownTask => "unknown_task",
            CidError::RunningElsewhere => "running_elsewhere",
            CidError::NotAllowed => "not_allowed",
            CidError::BadCpu => "bad_cpu",
            CidError::ForeignTask => "foreign_task",
            CidError::BadCpuCount { .. } => "bad_cpu_count",
            CidError::BadScanPeriod => "bad_scan_period",
            CidError::ScanThread => "scan_thread",
        }
    }
}

impl fmt::Display for CidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CidError::UnknownTask => f.write_str("the task has exited"),
            CidError::RunningElsewhere => f.write_str("the task is running on another CPU"),
            CidError::NotAllowed => f.write_str("the CPU is not in the task's affinity"),
            CidError::BadCpu => f.write_str("no such CPU, or an empty affinity"),
            CidError::ForeignTask => f.write_str("the task belongs to another CID space"),
            CidError::BadCpuCount { cpus } => write!(
                f,
                "a CID space has 1 to {MAX_CPUS} CPUs, not {cpus} (affinities are 64-bit masks)"
            ),
            CidError::BadScanPeriod => {
                f.write_str("a periodic CID scan needs a period above zero and at most a day")
            }
            CidError::ScanThread => f.write_str("the CID scan's worker thread could not start"),
        }
    }
}

impl core::error::Error for CidError {}
