//! The sequential designs' list of spaces: every space with its parent, level, kernel state and
//! ID structure, kept under the design's one lock.

use super::level::{alloc_level, check_set_tid, IdSpace, SpaceCore};
use super::{NsId, PidError, MAX_LEVEL};

pub(crate) struct Space<S> {
    pub(crate) parent: Option<NsId>,
    pub(crate) level: u32,
    pub(crate) core: SpaceCore,
    pub(crate) ids: S,
}

/// All spaces; space 0 is the root. Spaces are never removed (a dead space stays, refusing
/// allocations), so numbers stay valid.
pub(crate) struct Spaces<S> {
    pub(crate) list: Vec<Space<S>>,
}

/// The (space, ID) pairs one allocation has reserved, innermost first.
pub(crate) type Taken = smallvec::SmallVec<[(NsId, u32); 8]>;

impl<S: IdSpace + Default> Spaces<S> {
    pub(crate) fn new() -> Self {
        Spaces {
            list: vec![Space {
                parent: None,
                level: 0,
                core: SpaceCore::default(),
                ids: S::default(),
            }],
        }
    }

    pub(crate) fn get(&self, ns: NsId) -> Result<&Space<S>, PidError> {
        self.list.get(ns as usize).ok_or(PidError::UnknownNs)
    }

    pub(crate) fn get_mut(&mut self, ns: NsId) -> Result<&mut Space<S>, PidError> {
        self.list.get_mut(ns as usize).ok_or(PidError::UnknownNs)
    }

    pub(crate) fn add(&mut self, parent: NsId) -> Result<NsId, PidError> {
        let level = self.get(parent)?.level + 1;
        if level > MAX_LEVEL {
            return Err(PidError::TooDeep);
        }
        self.list.push(Space {
            parent: Some(parent),
            level,
            core: SpaceCore::default(),
            ids: S::default(),
        });
        Ok((self.list.len() - 1) as NsId)
    }

    /// The spaces an allocation in `ns` takes an ID in, innermost first; checks `set_tid`.
    pub(crate) fn chain(&self, ns: NsId, set_tid: &[u32]) -> Result<Vec<NsId>, PidError> {
        let space = self.get(ns)?;
        check_set_tid(set_tid, space.level)?;
        let mut chain = Vec::with_capacity(space.level as usize + 1);
        let mut next = Some(ns);
        while let Some(ns) = next {
            chain.push(ns);
            next = self.list[ns as usize].parent;
        }
        Ok(chain)
    }

    /// Allocates the ID at the `index`-th level of `chain`, recording it in `taken`.
    pub(crate) fn alloc_at(
        &mut self,
        chain: &[NsId],
        index: usize,
        set_tid: &[u32],
        taken: &mut Taken,
    ) -> Result<(), PidError> {
        let ns = chain[index];
        let space = &mut self.list[ns as usize];
        let id = alloc_level(&mut space.core, &mut space.ids, set_tid.get(index).copied())?;
        taken.push((ns, id));
        Ok(())
    }

    /// Releases what a failed allocation reserved.
    pub(crate) fn release(&mut self, taken: &Taken) {
        for &(ns, id) in taken {
            self.list[ns as usize].ids.release(id);
        }
    }

    /// The final check of `alloc_pid`, after every level: the target space must be alive.
    /// Marks the inits of spaces where the allocation took ID 1.
    pub(crate) fn finish(&mut self, taken: &Taken) -> Result<(), PidError> {
        let target = taken[0].0;
        if self.list[target as usize].core.dead {
            self.release(taken);
            return Err(PidError::NamespaceDead);
        }
        for &(ns, id) in taken {
            if id == 1 {
                self.list[ns as usize].core.init_seen = true;
            }
        }
        Ok(())
    }

    /// Bookkeeping for freed IDs: a space whose ID 1 is freed dies.
    pub(crate) fn note_freed(&mut self, ns: NsId, id: u32) {
        if id == 1 {
            self.list[ns as usize].core.dead = true;
        }
    }

    pub(crate) fn set_pid_max(&mut self, ns: NsId, max: u32) -> Result<(), PidError> {
        super::level::check_pid_max(max)?;
        self.get_mut(ns)?.core.pid_max = max;
        Ok(())
    }
}
