//! The sequential designs' spaces: every live space with its parent, level, kernel state and
//! ID structure, kept under the design's one lock.

use crate::prelude::*;
use hashbrown::HashMap;

use super::level::{alloc_level, check_set_tid, IdSpace, SpaceCore};
use super::{NsId, PidError, MAX_LEVEL, ROOT};
use crate::util::hash::BuildIntHasher;

pub(crate) struct Space<S> {
    pub(crate) parent: Option<NsId>,
    pub(crate) level: u32,
    pub(crate) core: SpaceCore,
    pub(crate) ids: S,
    /// Child spaces not freed yet.
    pub(crate) children: usize,
}

/// The live spaces by number; space 0 is the root. A dead space stays (refusing allocations)
/// until `free_ns` removes it; numbers are handed out in creation order and never reused, so a
/// freed number below `next` answers [`PidError::NamespaceFreed`] and keeps no memory.
pub(crate) struct Spaces<S> {
    pub(crate) live: HashMap<NsId, Space<S>, BuildIntHasher>,
    /// The number the next space gets.
    next: NsId,
}

/// The (space, ID) pairs one allocation has reserved, innermost first.
pub(crate) type Taken = smallvec::SmallVec<[(NsId, u32); 8]>;

impl<S: IdSpace + Default> Spaces<S> {
    pub(crate) fn new() -> Self {
        let mut live = HashMap::default();
        live.insert(
            ROOT,
            Space {
                parent: None,
                level: 0,
                core: SpaceCore::default(),
                ids: S::default(),
                children: 0,
            },
        );
        Spaces { live, next: 1 }
    }

    /// Why `ns` names no live space.
    fn missing(&self, ns: NsId) -> PidError {
        if ns < self.next {
            PidError::NamespaceFreed
        } else {
            PidError::UnknownNs
        }
    }

    pub(crate) fn get(&self, ns: NsId) -> Result<&Space<S>, PidError> {
        self.live.get(&ns).ok_or_else(|| self.missing(ns))
    }

    pub(crate) fn get_mut(&mut self, ns: NsId) -> Result<&mut Space<S>, PidError> {
        let missing = self.missing(ns);
        self.live.get_mut(&ns).ok_or(missing)
    }

    /// The space of `ns`, which the caller knows is live (it is on a live object's chain).
    pub(crate) fn at(&mut self, ns: NsId) -> &mut Space<S> {
        self.live
            .get_mut(&ns)
            .expect("a live object's spaces are live")
    }

    pub(crate) fn add(&mut self, parent: NsId) -> Result<NsId, PidError> {
        let level = self.get(parent)?.level + 1;
        if level > MAX_LEVEL {
            return Err(PidError::TooDeep);
        }
        let ns = self.next;
        // Numbers are never reused; past `u32::MAX` spaces there are none left to hand out.
        self.next = ns.checked_add(1).ok_or(PidError::TooManyNamespaces)?;
        self.live.insert(
            ns,
            Space {
                parent: Some(parent),
                level,
                core: SpaceCore::default(),
                ids: S::default(),
                children: 0,
            },
        );
        self.at(parent).children += 1;
        Ok(ns)
    }

    /// Frees `ns`, which `holds` says holds no IDs; the map then gives its slack back, so that
    /// its capacity depends on the live spaces only.
    pub(crate) fn remove(
        &mut self,
        ns: NsId,
        holds_ids: impl Fn(&S) -> bool,
    ) -> Result<(), PidError> {
        if ns == ROOT {
            return Err(PidError::UnknownNs);
        }
        let space = self.get(ns)?;
        if space.children != 0 || holds_ids(&space.ids) {
            return Err(PidError::NamespaceBusy);
        }
        let parent = space.parent;
        self.live.remove(&ns);
        self.live.shrink_to_fit();
        if let Some(parent) = parent {
            self.at(parent).children -= 1;
        }
        Ok(())
    }

    /// Heap bytes of the map of spaces (not of what the spaces hold).
    pub(crate) fn map_bytes(&self) -> usize {
        self.live.capacity() * (core::mem::size_of::<(NsId, Space<S>)>() + 1)
    }

    /// The spaces an allocation in `ns` takes an ID in, innermost first; checks `set_tid`.
    pub(crate) fn chain(&self, ns: NsId, set_tid: &[u32]) -> Result<Vec<NsId>, PidError> {
        let space = self.get(ns)?;
        check_set_tid(set_tid, space.level)?;
        let mut chain = Vec::with_capacity(space.level as usize + 1);
        let mut next = Some(ns);
        while let Some(ns) = next {
            chain.push(ns);
            next = self.live.get(&ns).and_then(|space| space.parent);
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
        // A design that drops its lock between levels (`IdrRelock`) may find the target freed
        // before it reserved anything there; once it has, the target and so its ancestors stay.
        let space = self.get_mut(ns)?;
        let id = alloc_level(&mut space.core, &mut space.ids, set_tid.get(index).copied())?;
        taken.push((ns, id));
        Ok(())
    }

    /// The failure path of an allocation into `target` (`alloc_pid`'s `out_free`): releases
    /// what it reserved, then resets the target's cursor if the target is alive and holds no
    /// object (see [`SpaceCore::after_failed_alloc`]). The cursors the allocation moved stay
    /// moved otherwise.
    pub(crate) fn fail(&mut self, target: NsId, taken: &Taken) {
        for &(ns, id) in taken {
            self.at(ns).ids.release(id);
        }
        // A design that drops its lock between levels (`IdrRelock`) may find the target freed
        // before it reserved anything there: nothing is left to reset.
        if let Some(space) = self.live.get_mut(&target) {
            let holds_objects = space.ids.holds_objects();
            space.core.after_failed_alloc(holds_objects);
        }
    }

    /// [`PidAllocator::alloc_refused`](super::PidAllocator::alloc_refused) under the
    /// design's lock: every level of `ns`'s chain allocated, then released without a reset.
    pub(crate) fn refused(&mut self, ns: NsId, set_tid: &[u32]) -> PidError {
        let chain = match self.chain(ns, set_tid) {
            Ok(chain) => chain,
            Err(error) => return error,
        };
        let mut taken = Taken::new();
        let mut answer = PidError::NamespaceDead;
        for index in 0..chain.len() {
            if let Err(error) = self.alloc_at(&chain, index, set_tid, &mut taken) {
                answer = error;
                break;
            }
        }
        for &(ns, id) in &taken {
            self.at(ns).ids.release(id);
        }
        answer
    }

    /// The final check of `alloc_pid`, after every level: the target space must be alive.
    /// Marks the inits of spaces where the allocation took ID 1.
    pub(crate) fn finish(&mut self, taken: &Taken) -> Result<(), PidError> {
        let target = taken[0].0;
        if self.at(target).core.dead {
            self.fail(target, taken);
            return Err(PidError::NamespaceDead);
        }
        for &(ns, id) in taken {
            if id == 1 {
                self.at(ns).core.init_seen = true;
            }
        }
        Ok(())
    }

    /// Bookkeeping for freed IDs: a space whose ID 1 is freed dies.
    pub(crate) fn note_freed(&mut self, ns: NsId, id: u32) {
        if id == 1 {
            self.at(ns).core.dead = true;
        }
    }

    pub(crate) fn set_pid_max(&mut self, ns: NsId, max: u32) -> Result<(), PidError> {
        super::level::check_pid_max(max)?;
        self.get_mut(ns)?.core.pid_max = max;
        Ok(())
    }
}
