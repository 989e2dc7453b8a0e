//! Errors of the table operations.

use core::fmt;

/// Why a table operation failed. The names follow the kernel's errors.
///
/// ```
/// use idspace::table::{IdTable, ScaledHash, TableError, MAX_ID};
///
/// let table = ScaledHash::new();
/// assert_eq!(table.create(1, "a"), Ok(0));
/// assert_eq!(table.remove(1, 5).err(), Some(TableError::NotFound));
/// assert_eq!(table.create_at(1, 0, "b").unwrap_err().error, TableError::NotRestoring);
/// table.set_restore(1, true);
/// assert_eq!(table.create_at(1, 0, "b").unwrap_err().error, TableError::Busy);
/// assert_eq!(table.create_at(1, MAX_ID + 1, "c").unwrap_err().error, TableError::Invalid);
/// assert_eq!(TableError::Busy.as_str(), "busy");
/// assert_eq!(TableError::Busy.to_string(), "the requested ID is already taken");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TableError {
    /// The owner has no free ID (the kernel's `-EAGAIN` after trying every ID).
    Full,
    /// The requested ID is taken (`-EBUSY` in restore mode).
    Busy,
    /// The requested ID is out of range (`-EINVAL`).
    Invalid,
    /// An exact ID was requested while the owner's restore mode is off.
    NotRestoring,
    /// No entry has this (owner, id) (`-EINVAL` from the timer syscalls).
    NotFound,
    /// No memory for the entry or the owner's state (`-ENOMEM`): the create changed nothing.
    NoMemory,
}

impl TableError {
    /// The error's name in the replay protocol (`"full"`, `"busy"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TableError::Full => "full",
            TableError::Busy => "busy",
            TableError::Invalid => "invalid",
            TableError::NotRestoring => "not_restoring",
            TableError::NotFound => "not_found",
            TableError::NoMemory => "no_memory",
        }
    }
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            TableError::Full => "the owner has no free ID",
            TableError::Busy => "the requested ID is already taken",
            TableError::Invalid => "the requested ID is out of range",
            TableError::NotRestoring => "exact IDs need the owner's restore mode on",
            TableError::NotFound => "no entry has this owner and ID",
            TableError::NoMemory => "no memory for the entry",
        };
        f.write_str(text)
    }
}

impl core::error::Error for TableError {}

/// Why a [`Sizing`](super::Sizing) was refused by
/// [`ScaledHash::with_sizing`](super::ScaledHash::with_sizing).
///
/// ```
/// use idspace::table::{ScaledHash, Sizing, SizingError, MAX_SIZED_BUCKETS};
///
/// let refused = |sizing| ScaledHash::<()>::with_sizing(sizing).err();
/// assert_eq!(refused(Sizing::Fixed { buckets: 0 }), Some(SizingError::NoBuckets));
/// let buckets = MAX_SIZED_BUCKETS + 1;
/// assert_eq!(refused(Sizing::Fixed { buckets }), Some(SizingError::TooManyBuckets { buckets }));
/// assert_eq!(refused(Sizing::Growing { initial: 8, max_load: 0 }), Some(SizingError::NoLoad));
/// assert_eq!(refused(Sizing::Fixed { buckets: MAX_SIZED_BUCKETS }), None);
/// assert_eq!(SizingError::NoBuckets.to_string(), "a table needs at least one bucket");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SizingError {
    /// A bucket count (fixed, or to start with) of zero.
    NoBuckets,
    /// A bucket count (fixed, or to start with) above
    /// [`MAX_SIZED_BUCKETS`](super::MAX_SIZED_BUCKETS).
    TooManyBuckets {
        /// The bucket count asked for.
        buckets: usize,
    },
    /// A growing table's `max_load` of zero: every chain would overflow.
    NoLoad,
}

impl fmt::Display for SizingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizingError::NoBuckets => f.write_str("a table needs at least one bucket"),
            SizingError::TooManyBuckets { buckets } => write!(
                f,
                "{buckets} buckets asked for, at most {} can be sized",
                super::MAX_SIZED_BUCKETS
            ),
            SizingError::NoLoad => f.write_str("a growing table's max_load must be at least 1"),
        }
    }
}

impl core::error::Error for SizingError {}

/// A create that failed: the error, and the value handed back so that nothing is lost.
///
/// ```
/// use idspace::table::{IdTable, Rejected, ScaledHash, TableError};
///
/// let table = ScaledHash::new();
/// table.set_restore(1, true);
/// assert_eq!(table.create_at(1, 7, String::from("first")).ok(), Some(7));
/// let Rejected { error, value } = table.create_at(1, 7, String::from("second")).unwrap_err();
/// assert_eq!(error, TableError::Busy);
/// assert_eq!(value, "second");
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Rejected<T> {
    /// Why the create failed.
    pub error: TableError,
    /// The value that was not stored.
    pub value: T,
}

impl<T> fmt::Display for Rejected<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T: fmt::Debug> core::error::Error for Rejected<T> {}
