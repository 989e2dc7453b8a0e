//! [`Pid`]: the object an allocation creates, with its number in every space that sees it.

// A slice built from a `Vec`, which loom's `Arc` cannot hold.
// `alloc`'s, in every build: loom's `Arc` cannot hold a slice built from a `Vec`.
use crate::prelude::*;
use alloc::sync::Arc;

use super::NsId;

/// The kernel's `struct pid`: one object with an ID in its space and in every ancestor.
///
/// Cheap to clone (a reference count); compare with [`Pid::same`].
///
/// ```
/// use idspace::pid::{IdrOnce, PidAllocator, PidError, ROOT};
///
/// let pids = IdrOnce::new();
/// pids.alloc(ROOT, &[], 0)?; // the root's init, 1
/// let inner = pids.new_ns(ROOT)?;
/// let pid = pids.alloc(inner, &[], 0)?;
/// assert_eq!(pid.ns(), inner);
/// assert_eq!(pid.levels(), [(inner, 1), (ROOT, 2)]);
/// assert_eq!((pid.id_in(inner), pid.id_in(ROOT), pid.id_in(99)), (Some(1), Some(2), None));
/// // Looked up by either number, it is the same object.
/// let found = pids.lookup(ROOT, 2)?.expect("allocated");
/// assert!(found.same(&pid));
/// assert!(!found.same(&pids.alloc(inner, &[], 0)?));
/// # Ok::<(), PidError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Pid(Arc<[(NsId, u32)]>);

impl Pid {
    /// An object with these (space, ID) numbers, innermost first.
    pub(crate) fn new(levels: &[(NsId, u32)]) -> Pid {
        Pid(levels.into())
    }

    /// The space the object was allocated in (the innermost).
    pub fn ns(&self) -> NsId {
        self.0[0].0
    }

    /// The object's IDs, innermost first, the root's last.
    pub fn ids(&self) -> Vec<u32> {
        self.0.iter().map(|&(_, id)| id).collect()
    }

    /// (space, ID) pairs, innermost first.
    pub fn levels(&self) -> &[(NsId, u32)] {
        &self.0
    }

    /// The object's ID in `ns`, if `ns` sees it.
    pub fn id_in(&self, ns: NsId) -> Option<u32> {
        self.0
            .iter()
            .find(|&&(space, _)| space == ns)
            .map(|&(_, id)| id)
    }

    /// The object's levels as a raw pointer and their count, keeping this handle's reference
    /// (for lookup slots that hold an object in atomic words).
    pub(crate) fn into_raw(self) -> (*const (NsId, u32), usize) {
        let len = self.0.len();
        (Arc::into_raw(self.0).cast(), len)
    }

    /// Takes back the reference that [`into_raw`](Self::into_raw) kept.
    ///
    /// # Safety
    /// `levels` and `len` came from one `into_raw` call, whose reference is given up here.
    pub(crate) unsafe fn from_raw(levels: *const (NsId, u32), len: usize) -> Pid {
        // SAFETY: the caller's contract: this is the slice `Arc::into_raw` gave out.
        Pid(unsafe { Arc::from_raw(core::ptr::slice_from_raw_parts(levels, len)) })
    }

    /// A new handle on an object reached through a raw pointer.
    ///
    /// # Safety
    /// `levels` and `len` came from one `into_raw` call, and the object is alive: a reference
    /// to it is held elsewhere until this returns.
    pub(crate) unsafe fn clone_raw(levels: *const (NsId, u32), len: usize) -> Pid {
        let levels = core::ptr::slice_from_raw_parts(levels, len);
        // SAFETY: the caller's contract: a live object's slice, as `Arc::into_raw` gave it out.
        unsafe { Arc::increment_strong_count(levels) };
        // SAFETY: the reference just added is the one this handle owns.
        Pid(unsafe { Arc::from_raw(levels) })
    }

    /// Whether two handles name the same object.
    pub fn same(&self, other: &Pid) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
