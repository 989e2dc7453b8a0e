//! How a [`Processes`](super::Processes) builds the designs it was instantiated with: each
//! design family gets one constructor trait, so that the choice is a type parameter (made at
//! build time, with no trait object on the switch path).

use crate::cid::{BitmapCids, CidAllocator, CidError, LazyCids, Rework};
use crate::pid::{BitmapHash, IdrOnce, IdrRelock, PerCpu, PidAllocator};
use crate::table::{GlobalHash, IdTable, Radix, ScaledHash};

/// A PID design that can be built for `cpus` CPU slots.
pub trait PidDesign: PidAllocator + Sized + 'static {
    /// A new allocator; `cpus` is the number of CPU slots callers pass as `cpu`.
    fn with_cpus(cpus: usize) -> Self;
}

impl PidDesign for PerCpu {
    fn with_cpus(cpus: usize) -> Self {
        PerCpu::new(cpus)
    }
}

impl PidDesign for IdrOnce {
    fn with_cpus(_cpus: usize) -> Self {
        IdrOnce::new()
    }
}

impl PidDesign for IdrRelock {
    fn with_cpus(_cpus: usize) -> Self {
        IdrRelock::new()
    }
}

impl PidDesign for BitmapHash {
    fn with_cpus(_cpus: usize) -> Self {
        BitmapHash::new()
    }
}

/// A CID design: one space per process, its CPUs the runtime's workers.
pub trait CidDesign: CidAllocator + Sized + 'static {
    /// A new space for `cpus` CPUs.
    ///
    /// # Errors
    /// [`CidError::BadCpuCount`] outside `1..=64`.
    fn with_cpus(cpus: usize) -> Result<Self, CidError>;
}

impl CidDesign for Rework {
    fn with_cpus(cpus: usize) -> Result<Self, CidError> {
        Rework::new(cpus)
    }
}

impl CidDesign for BitmapCids {
    fn with_cpus(cpus: usize) -> Result<Self, CidError> {
        BitmapCids::new(cpus)
    }
}

impl CidDesign for LazyCids {
    fn with_cpus(cpus: usize) -> Result<Self, CidError> {
        LazyCids::new(cpus)
    }
}

/// A table design holding every process's timer IDs, one owner per process.
pub trait TableDesign: IdTable<()> + Sized + 'static {
    /// A new, empty table.
    fn empty() -> Self;
}

impl TableDesign for ScaledHash<()> {
    fn empty() -> Self {
        ScaledHash::new()
    }
}

impl TableDesign for GlobalHash<()> {
    fn empty() -> Self {
        GlobalHash::new()
    }
}

impl TableDesign for Radix<()> {
    fn empty() -> Self {
        Radix::new()
    }
}
