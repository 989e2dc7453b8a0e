//! How a [`Processes`](super::Processes) builds the designs it was instantiated with: each
//! design family gets one constructor trait, so that the choice is a type parameter (made at
//! build time, with no trait object on the switch path).

use crate::cid::{BitmapCids, CidAllocator, CidError, LazyCids, Rework};
use crate::pid::{BitmapHash, IdrOnce, IdrRelock, PerCpu, PidAllocator, PidError};
use crate::table::{GlobalHash, IdTable, Radix, ScaledHash};

/// A PID design that can be built for `cpus` CPU slots.
///
/// # Examples
///
/// ```
/// use idspace::cid::Rework;
/// use idspace::pid::{IdrOnce, PidAllocator, ROOT};
/// use idspace::process::{PidDesign, Processes};
/// use idspace::table::ScaledHash;
///
/// let pids = <IdrOnce as PidDesign>::with_cpus(4)?;
/// assert_eq!(pids.alloc(ROOT, &[], 0)?.ids(), [1]);
/// // The model builds its PID design the same way.
/// let model: Processes<IdrOnce, Rework, ScaledHash<()>> = Processes::with_designs(2)?;
/// assert_eq!(model.fork(ROOT, 0)?.ids(), [1]);
/// assert_eq!(model.pids().alloc(ROOT, &[], 0)?.ids(), [2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait PidDesign: PidAllocator + Sized + 'static {
    /// A new allocator; `cpus` is the number of CPU slots callers pass as `cpu`.
    ///
    /// # Errors
    /// [`PidError::BadCpuCount`] for a count the design cannot have (0, or above
    /// [`PerCpu::MAX_CPUS`] for [`PerCpu`]); the designs without per-CPU state take any other.
    fn with_cpus(cpus: usize) -> Result<Self, PidError>;
}

/// The designs without per-CPU state still refuse 0 slots, as every design does.
fn check_slots(cpus: usize) -> Result<(), PidError> {
    if cpus == 0 {
        return Err(PidError::BadCpuCount { cpus });
    }
    Ok(())
}

impl PidDesign for PerCpu {
    fn with_cpus(cpus: usize) -> Result<Self, PidError> {
        PerCpu::new(cpus)
    }
}

impl PidDesign for IdrOnce {
    fn with_cpus(cpus: usize) -> Result<Self, PidError> {
        check_slots(cpus)?;
        Ok(IdrOnce::new())
    }
}

impl PidDesign for IdrRelock {
    fn with_cpus(cpus: usize) -> Result<Self, PidError> {
        check_slots(cpus)?;
        Ok(IdrRelock::new())
    }
}

impl PidDesign for BitmapHash {
    fn with_cpus(cpus: usize) -> Result<Self, PidError> {
        check_slots(cpus)?;
        Ok(BitmapHash::new())
    }
}

/// A CID design: one space per process, its CPUs the runtime's workers.
///
/// # Examples
///
/// ```
/// use idspace::cid::{BitmapCids, CidAllocator};
/// use idspace::pid::{PerCpu, ROOT};
/// use idspace::process::{CidDesign, Processes};
/// use idspace::table::ScaledHash;
///
/// let space = <BitmapCids as CidDesign>::with_cpus(2)?;
/// assert_eq!(space.cpus(), 2);
/// assert!(<BitmapCids as CidDesign>::with_cpus(65).is_err(), "above 64 CPUs");
/// // Each process of the model gets such a space.
/// let model: Processes<PerCpu, BitmapCids, ScaledHash<()>> = Processes::with_designs(2)?;
/// let leader = model.fork(ROOT, 0)?;
/// assert_eq!(leader.process().cids().cpus(), 2);
/// assert_eq!(leader.switch_in(1), Some(0), "the lowest free CID");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use idspace::cid::Rework;
/// use idspace::pid::{PerCpu, ROOT};
/// use idspace::process::{Processes, TableDesign};
/// use idspace::table::{IdTable, Radix};
///
/// let table = <Radix<()> as TableDesign>::empty();
/// assert!(table.ids(1).is_empty(), "no owner holds an ID yet");
/// // The model's timers take their IDs from such a table, one owner per process.
/// let model: Processes<PerCpu, Rework, Radix<()>> = Processes::with_designs(2)?;
/// let pid = model.fork(ROOT, 0)?.tid();
/// assert_eq!(model.timer_create(pid)?, 0);
/// assert_eq!(model.timer_create(pid)?, 1);
/// assert_eq!(model.timers(pid)?, [0, 1]);
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
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
