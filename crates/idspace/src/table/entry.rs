//! [`Entry`]: a counted reference to a stored entry that holds no lock of the table.

use crate::prelude::*;
use core::marker::PhantomData;
use core::ops::Deref;
use core::ptr::NonNull;

use super::node::Node;
use super::{Id, Owner};

/// A shared reference to an entry's value, returned by [`IdTable::get`](super::IdTable::get)
/// and [`IdTable::remove`](super::IdTable::remove).
///
/// Each entry lives in one allocation that holds its key, its chain link, a reference count
/// and the value (the kernel's timer is its own hash node), and an `Entry` is a counted
/// pointer to it, like an `Arc`. A lookup only adds a reference: an `Entry` holds no lock of the
/// table, so it may be kept across any other call of any design, including a `remove` of the
/// very entry it refers to (the value then lives until the last `Entry` of it is dropped).
/// This is what the kernel's RCU lookups give: a timer found under RCU stays valid while the
/// remover unhashes it.
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
    /// One reference of the node's count, owned by this `Entry`.
    node: NonNull<Node<T>>,
    /// Owns a share of a `Node<T>` (for the drop checker and auto traits).
    _owns: PhantomData<Node<T>>,
}

// SAFETY: an `Entry` gives `&T` to whoever holds it and may drop the `T` on any thread (the
// last reference), as an `Arc<T>`; the count itself is atomic.
unsafe impl<T: Send + Sync> Send for Entry<T> {}
// SAFETY: as `Send`: `&Entry` gives `&T` and can clone a reference that another thread drops.
unsafe impl<T: Send + Sync> Sync for Entry<T> {}

impl<T> Entry<T> {
    /// A fresh entry, not stored anywhere: its one reference is this `Entry`'s.
    pub(crate) fn new(owner: Owner, id: Id, value: T) -> Self {
        // SAFETY: the caller (us) owns the node's one reference, which the `Entry` takes.
        unsafe { Entry::from_reference(NonNull::from(Box::leak(Node::boxed(owner, id, value)))) }
    }

    /// Takes over one reference to `node`.
    ///
    /// # Safety
    /// The caller owns one reference to the live node `node` and gives it to the `Entry`.
    #[inline]
    pub(crate) unsafe fn from_reference(node: NonNull<Node<T>>) -> Self {
        Entry {
            node,
            _owns: PhantomData,
        }
    }

    /// A new reference to `node`.
    ///
    /// # Safety
    /// `node` is live and stays so during the call: the caller holds a reference to it, or the
    /// lock of a chain that holds one.
    #[inline]
    pub(crate) unsafe fn retained(node: NonNull<Node<T>>) -> Self {
        // SAFETY: live during the call, by the caller's promise.
        unsafe { node.as_ref() }.retain();
        // SAFETY: the reference just added is the `Entry`'s.
        unsafe { Entry::from_reference(node) }
    }

    #[inline]
    fn node(&self) -> &Node<T> {
        // SAFETY: this `Entry`'s reference keeps the node alive while `self` is borrowed.
        unsafe { self.node.as_ref() }
    }

    /// The value itself if no other `Entry` of it is alive and no table holds it any more,
    /// else the entry back.
    ///
    /// # Errors
    /// The entry, unchanged, while another reference to the same value exists.
    ///
    /// ```
    /// use idspace::table::{IdTable, ScaledHash, TableError};
    ///
    /// let table = ScaledHash::new();
    /// table.create(1, String::from("timer")).unwrap();
    /// let held = table.get(1, 0).expect("created");
    /// let removed = table.remove(1, 0)?;
    /// // A lookup's entry still shares the value.
    /// let removed = removed.try_unwrap().unwrap_err();
    /// drop(held);
    /// assert_eq!(removed.try_unwrap().ok().as_deref(), Some("timer"));
    /// # Ok::<(), TableError>(())
    /// ```
    pub fn try_unwrap(self) -> Result<T, Self> {
        let node = self.node;
        // SAFETY: we own one reference; on success it is consumed, so `self` must not drop it.
        match unsafe { Node::try_unwrap(node) } {
            Some(value) => {
                core::mem::forget(self);
                Ok(value)
            }
            None => Err(self),
        }
    }

    /// [`Entry::try_unwrap`] for a `Copy` value: the same answer, at one atomic operation on
    /// the entry's count where `try_unwrap` takes two.
    ///
    /// # Errors
    /// The entry, unchanged, while another reference to the same value exists.
    ///
    /// ```
    /// use idspace::table::{IdTable, ScaledHash, TableError};
    ///
    /// let table = ScaledHash::new();
    /// table.create(1, 7u64).unwrap();
    /// let held = table.get(1, 0).expect("created");
    /// let removed = table.remove(1, 0)?;
    /// let removed = removed.try_unwrap_copied().unwrap_err();
    /// drop(held);
    /// assert_eq!(removed.try_unwrap_copied().ok(), Some(7));
    /// # Ok::<(), TableError>(())
    /// ```
    pub fn try_unwrap_copied(self) -> Result<T, Self>
    where
        T: Copy,
    {
        let node = self.node;
        // SAFETY: we own one reference; on success it is consumed, so `self` must not drop it.
        match unsafe { Node::try_unwrap_copied(node) } {
            Some(value) => {
                core::mem::forget(self);
                Ok(value)
            }
            None => Err(self),
        }
    }
}

impl<T> Drop for Entry<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the `Entry` owns one reference and gives it up here.
        unsafe { Node::release(self.node) }
    }
}

impl<T> Clone for Entry<T> {
    #[inline]
    fn clone(&self) -> Self {
        // SAFETY: our own reference keeps the node alive.
        unsafe { Entry::retained(self.node) }
    }
}

impl<T> Deref for Entry<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        self.node().value()
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
