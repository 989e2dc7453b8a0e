//! Errors of the per-CID structures.

use core::fmt;

use super::IndexSource;

/// Why a per-CID structure could not be built. Nothing was allocated when one is returned.
///
/// ```
/// use idspace::percid::{IndexSource, PerCidError, PerCidPool};
///
/// let error = PerCidPool::<u32>::with_source(IndexSource::ThreadIds, 0).unwrap_err();
/// assert_eq!(error, PerCidError::ZeroCapacity);
/// assert_eq!(error.to_string(), "a pool's per-slot capacity must be at least 1");
///
/// // An absurd capacity is refused before anything is allocated.
/// let error = PerCidPool::<u32>::with_source(IndexSource::ThreadIds, usize::MAX).unwrap_err();
/// assert_eq!(error, PerCidError::CapacityTooLarge { capacity: usize::MAX });
///
/// // The task CID needs a runtime task of a process, which this thread is not.
/// let error = PerCidPool::<u32>::with_source(IndexSource::TaskCid, 8).unwrap_err();
/// assert_eq!(error, PerCidError::Unavailable(IndexSource::TaskCid));
/// assert!(error.to_string().contains("task CID"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PerCidError {
    /// The index source was asked for, but the calling thread cannot use it: no rseq area
    /// (rseq disabled or unsupported, Miri, loom, an architecture without critical sections),
    /// or for [`IndexSource::MmCid`] a kernel that does not fill `mm_cid`.
    Unavailable(IndexSource),
    /// A pool was asked for a per-slot capacity of zero.
    ZeroCapacity,
    /// A pool was asked for a per-slot capacity above
    /// [`PerCidPool::MAX_CAPACITY`](super::PerCidPool::MAX_CAPACITY).
    CapacityTooLarge {
        /// The capacity asked for.
        capacity: usize,
    },
}

impl fmt::Display for PerCidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PerCidError::Unavailable(source) => {
                write!(
                    f,
                    "the index source \"{}\" is not available on this thread",
                    source.as_str()
                )
            }
            PerCidError::ZeroCapacity => write!(f, "a pool's per-slot capacity must be at least 1"),
            PerCidError::CapacityTooLarge { capacity } => write!(
                f,
                "a pool's per-slot capacity is at most {}, not {capacity}",
                super::PerCidPool::<()>::MAX_CAPACITY
            ),
        }
    }
}

impl std::error::Error for PerCidError {}
