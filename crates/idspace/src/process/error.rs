//! Errors of the process operations.

use std::fmt;

use super::posix_timer::TimerError;
use crate::pid::PidError;

/// Why a process operation failed. [`ProcessError::name`] gives the replay protocol's name.
///
/// # Examples
///
/// ```
/// use idspace::pid::ROOT;
/// use idspace::process::{ProcessError, Processes};
///
/// let model = Processes::new(1)?;
/// assert_eq!(model.clone_thread(42, 0).unwrap_err(), ProcessError::UnknownProcess);
/// let init = model.fork(ROOT, 0)?;
/// // The root's init ends: nothing new enters the root namespace.
/// model.exit(init.tid(), 0)?;
/// let refused = model.fork(ROOT, 0).unwrap_err();
/// assert_eq!(refused, ProcessError::NsDead);
/// assert_eq!(refused.name(), "ns_dead");
/// assert_eq!(Processes::new(0).unwrap_err(), ProcessError::BadCpuCount(0));
/// # Ok::<(), ProcessError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProcessError {
    /// No namespace has this number.
    UnknownNs,
    /// The namespace is dead (its init ended) or already freed: nothing new enters it.
    NsDead,
    /// A new namespace would be deeper than 32 levels below the root.
    TooDeep,
    /// The PID design holds no more namespaces ([`PerCpu::MAX_NAMESPACES`](crate::pid::PerCpu)).
    TooManyNamespaces,
    /// A `pid_max` outside `301..=4194304`, or a restored ID the target namespace refuses
    /// (out of its range, or not 1 in a namespace without its init).
    Invalid,
    /// No free ID at some level, or no free timer ID.
    Full,
    /// A restored ID is taken.
    Exists,
    /// No live process has this PID.
    UnknownProcess,
    /// No live thread has this TID (a zombie leader is no longer live).
    UnknownThread,
    /// The process has no timer with this ID.
    NotFound,
    /// A checkpoint image that cannot describe a process; the text says why.
    BadImage(String),
    /// The CPU count is outside what the CID designs support (`1..=64`).
    BadCpuCount(usize),
    /// Called outside a task of a process (of a runtime with these designs).
    NotInProcess,
    /// A bad timer argument: a negative or unnormalised time, or an unknown clock.
    Timer(TimerError),
    /// `timer_wait` on a timer whose notification is not [`Notify::Wake`](super::Notify).
    NotWaitable,
    /// The model's timers fire on another runtime already.
    OtherWheel,
}

impl ProcessError {
    /// The error's name in the replay protocol (`unknown_ns`, `ns_dead`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            ProcessError::UnknownNs => "unknown_ns",
            ProcessError::NsDead => "ns_dead",
            ProcessError::TooDeep => "too_deep",
            ProcessError::TooManyNamespaces => "too_many_ns",
            ProcessError::Invalid => "invalid",
            ProcessError::Full => "full",
            ProcessError::Exists => "exists",
            ProcessError::UnknownProcess => "unknown_process",
            ProcessError::UnknownThread => "unknown_thread",
            ProcessError::NotFound => "not_found",
            ProcessError::BadImage(_) => "bad_image",
            ProcessError::BadCpuCount(_) => "bad_cpu_count",
            ProcessError::NotInProcess => "not_in_process",
            ProcessError::Timer(error) => error.name(),
            ProcessError::NotWaitable => "not_waitable",
            ProcessError::OtherWheel => "other_wheel",
        }
    }

    /// The process error for a PID allocator's error.
    pub(crate) fn from_pid(error: PidError) -> ProcessError {
        match error {
            PidError::Full => ProcessError::Full,
            PidError::Exists => ProcessError::Exists,
            PidError::Invalid => ProcessError::Invalid,
            PidError::NamespaceDead | PidError::NamespaceFreed => ProcessError::NsDead,
            PidError::TooDeep => ProcessError::TooDeep,
            PidError::UnknownNs => ProcessError::UnknownNs,
            PidError::TooManyNamespaces => ProcessError::TooManyNamespaces,
            // Only `free` and `lookup` report `NotFound`, and the model frees only what it
            // holds; should a design disagree, the thread is what is missing. `NamespaceBusy`
            // comes only from `free_ns`, which the model calls on empty namespaces alone.
            _ => ProcessError::UnknownThread,
        }
    }
}

impl fmt::Display for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessError::UnknownNs => write!(f, "no namespace has this number"),
            ProcessError::NsDead => write!(f, "the namespace is dead: its init ended"),
            ProcessError::TooDeep => write!(f, "namespaces nest at most 32 levels below the root"),
            ProcessError::TooManyNamespaces => {
                write!(f, "the PID design holds no more namespaces")
            }
            ProcessError::Invalid => write!(
                f,
                "invalid value: pid_max outside 301..=4194304, or a restored ID the namespace refuses"
            ),
            ProcessError::Full => write!(f, "no free ID"),
            ProcessError::Exists => write!(f, "a restored ID is taken"),
            ProcessError::UnknownProcess => write!(f, "no live process has this PID"),
            ProcessError::UnknownThread => write!(f, "no live thread has this TID"),
            ProcessError::NotFound => write!(f, "the process has no timer with this ID"),
            ProcessError::BadImage(why) => write!(f, "bad checkpoint image: {why}"),
            ProcessError::NotInProcess => {
                write!(f, "not inside a task of a process of a runtime with these designs")
            }
            ProcessError::Timer(error) => write!(f, "bad timer argument: {error}"),
            ProcessError::OtherWheel => {
                write!(f, "the model's timers fire on another runtime already")
            }
            ProcessError::NotWaitable => {
                write!(f, "the timer does not notify by waking: nothing to wait for")
            }
            ProcessError::BadCpuCount(cpus) => {
                write!(f, "processes need 1 to 64 CPUs for their CID spaces, not {cpus}")
            }
        }
    }
}

impl std::error::Error for ProcessError {}
