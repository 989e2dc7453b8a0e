//! Errors of the CID operations.

use core::fmt;

/// Why a CID operation was refused. The state is unchanged when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CidError {
    /// The task has exited (or was never forked in this space).
    UnknownTask,
    /// The task is running on another CPU.
    RunningElsewhere,
    /// The CPU is not in the task's affinity.
    NotAllowed,
    /// The CPU number is not below the space's CPU count, or an affinity names such a CPU or
    /// no CPU at all.
    BadCpu,
}

impl CidError {
    /// The error's name in the replay protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            CidError::UnknownTask => "unknown_task",
            CidError::RunningElsewhere => "running_elsewhere",
            CidError::NotAllowed => "not_allowed",
            CidError::BadCpu => "bad_cpu",
        }
    }
}

impl fmt::Display for CidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CidError::UnknownTask => "the task has exited",
            CidError::RunningElsewhere => "the task is running on another CPU",
            CidError::NotAllowed => "the CPU is not in the task's affinity",
            CidError::BadCpu => "no such CPU, or an empty affinity",
        })
    }
}

impl std::error::Error for CidError {}
