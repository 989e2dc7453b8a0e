//! [`Entry`]: a reference to a stored value that holds no lock of the table.

use core::ops::Deref;

use crate::sync::Arc;

/// A shared reference to an entry's value, returned by [`IdTable::get`](super::IdTable::get)
/// and [`IdTable::remove`](super::IdTable::remove).
///
/// The table keeps each value behind a reference count, and a lookup only clones that count:
/// an `Entry` holds no lock of the table, so it may be kept across any other call of any
/// design, including a `remove` of the very entry it refers to (the value then lives until the
/// last `Entry` of it is dropped). This is what the kernel's RCU lookups give: a timer found
/// under RCU stays valid while the remover unhashes it.
///
/// Values are shared, so they are read-only through an `Entry`; a value that must change after
/// creation carries its own lock (a `Mutex<V>` as the table's value type: the per-timer
/// `it_lock` of the kernel).
///
/// ```
/// use std::sync::Mutex;
/// use idspace::table::{IdTable, ScaledHash};
///
/// let timers = ScaledHash::new();
/// let id = timers.create(1, Mutex::new(0u64)).unwrap();
/// let timer = timers.get(1, id).unwrap();
/// *timer.lock().unwrap() += 1; // the entry's own lock, not the table's
/// let removed = timers.remove(1, id).unwrap(); // no deadlock while `timer` is held
/// drop(timer);
/// let value = removed.try_unwrap().ok().map(|m| m.into_inner().unwrap());
/// assert_eq!(value, Some(1));
/// ```
pub struct Entry<T> {
    value: Arc<T>,
}

impl<T> Entry<T> {
    #[inline]
    pub(crate) fn new(value: Arc<T>) -> Self {
        Entry { value }
    }

    /// The value itself if no other `Entry` of it is alive, else the entry back.
    ///
    /// # Errors
    /// The entry, unchanged, while another `Entry` of the same value exists.
    pub fn try_unwrap(self) -> Result<T, Self> {
        Arc::try_unwrap(self.value).map_err(Entry::new)
    }
}

impl<T> Clone for Entry<T> {
    fn clone(&self) -> Self {
        Entry::new(self.value.clone())
    }
}

impl<T> Deref for Entry<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: PartialEq> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq> Eq for Entry<T> {}

impl<T: core::fmt::Debug> core::fmt::Debug for Entry<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Entry").field(&**self).finish()
    }
}
