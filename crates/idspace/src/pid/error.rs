//! Errors of the PID operations.

use core::fmt;

/// Why a PID operation failed. The names follow the kernel's errors.
///
/// ```
/// use idspace::pid::{BitmapHash, PidAllocator, PidError, ROOT};
///
/// let pids = BitmapHash::new();
/// assert_eq!(pids.free(ROOT, 77, 0), Err(PidError::NotFound));
/// assert_eq!(pids.new_ns(9), Err(PidError::UnknownNs));
/// assert_eq!(pids.set_pid_max(ROOT, 1 << 30), Err(PidError::Invalid));
/// // A space without its init takes only 1 as an exact ID.
/// let ns = pids.new_ns(ROOT)?;
/// assert_eq!(pids.alloc(ns, &[5], 0).err(), Some(PidError::Invalid));
/// assert_eq!(PidError::NamespaceDead.as_str(), "ns_dead");
/// assert!(!PidError::Full.to_string().is_empty());
/// # Ok::<(), PidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PidError {
    /// No free ID at some level (`alloc_pid`'s `-EAGAIN`).
    Full,
    /// A `set_tid` entry is taken (`-EEXIST`).
    Exists,
    /// A `set_tid` entry or `pid_max` value is out of range, the `set_tid` array is longer than
    /// the space is deep, or an entry other than 1 targets a space without its init (`-EINVAL`).
    Invalid,
    /// The space's init (ID 1) was freed: no allocation succeeds in it any more (`-ENOMEM`
    /// from `alloc_pid` once `PIDNS_ADDING` is cleared).
    NamespaceDead,
    /// No object has this ID in this space.
    NotFound,
    /// A new space would be deeper than 32 levels below the root (`-ENOSPC` from
    /// `create_pid_namespace`).
    TooDeep,
    /// No space has this number (never created), or the root was named where only a created
    /// space may be (`free_ns`).
    UnknownNs,
    /// The allocator holds as many spaces as it can: [`PerCpu::MAX_NAMESPACES`] for
    /// [`PerCpu`] (the kernel caps namespaces per user with `ucounts` instead, `-ENOSPC`).
    ///
    /// [`PerCpu`]: super::PerCpu
    /// [`PerCpu::MAX_NAMESPACES`]: super::PerCpu::MAX_NAMESPACES
    TooManyNamespaces,
    /// The space still holds IDs or child spaces, so it cannot be freed (the kernel keeps a
    /// namespace while anything references it).
    NamespaceBusy,
    /// The space was freed: its number stays taken and answers as dead, but nothing enters it.
    NamespaceFreed,
    /// An allocator was asked for a worker-slot count outside `1..=`[`PerCpu::MAX_CPUS`].
    ///
    /// [`PerCpu::MAX_CPUS`]: super::PerCpu::MAX_CPUS
    BadCpuCount {
        /// The count asked for.
        cpus: usize,
    },
}

impl PidError {
    /// The error's name in the replay protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            PidError::Full => "full",
            PidError::Exists => "exists",
            PidError::Invalid => "invalid",
            PidError::NamespaceDead => "ns_dead",
            PidError::NotFound => "not_found",
            PidError::TooDeep => "too_deep",
            PidError::UnknownNs => "unknown_ns",
            PidError::TooManyNamespaces => "too_many_ns",
            PidError::NamespaceBusy => "ns_busy",
            PidError::NamespaceFreed => "ns_freed",
            PidError::BadCpuCount { .. } => "bad_cpu_count",
        }
    }
}

impl fmt::Display for PidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PidError::Full => "no free ID in some level's range",
            PidError::Exists => "a requested ID is taken",
            PidError::Invalid => "an argument is out of range",
            PidError::NamespaceDead => "the space's init has exited",
            PidError::NotFound => "no object has this ID in this space",
            PidError::TooDeep => "spaces nest at most 32 levels below the root",
            PidError::UnknownNs => "no such space",
            PidError::TooManyNamespaces => "the allocator holds no more spaces",
            PidError::NamespaceBusy => "the space still holds IDs or child spaces",
            PidError::NamespaceFreed => "the space was freed",
            PidError::BadCpuCount { cpus } => {
                return write!(
                    f,
                    "an allocator has 1 to {} worker slots, not {cpus}",
                    super::PerCpu::MAX_CPUS
                );
            }
        })
    }
}

impl core::error::Error for PidError {}
