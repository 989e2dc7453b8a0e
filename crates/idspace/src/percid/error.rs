//! Errors of the per-CID structures.

use core::fmt;

use super::IndexSource;

/// Why a per-CID structure could not be built. Nothing was allocated when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PerCidError {
    /// The index source was asked for, but the calling thread cannot use it: no rseq area
    /// (rseq disabled or unsupported, Miri, loom, an architecture without critical sections),
    /// or for [`IndexSource::MmCid`] a kernel that does not fill `mm_cid`.
    Unavailable(IndexSource),
    /// A pool was asked for a per-slot capacity of zero.
    ZeroCapacity,
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
        }
    }
}

impl std::error::Error for PerCidError {}
