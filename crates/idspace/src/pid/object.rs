//! [`Pid`]: the object an allocation creates, with its number in every space that sees it.

use std::sync::Arc;

use super::NsId;

/// The kernel's `struct pid`: one object with an ID in its space and in every ancestor.
///
/// Cheap to clone (a reference count); compare with [`Pid::same`].
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

    /// Whether two handles name the same object.
    pub fn same(&self, other: &Pid) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
