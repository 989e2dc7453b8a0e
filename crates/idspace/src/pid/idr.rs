//! [`IdrRelock`] and [`IdrOnce`]: the kernel's IDR (a radix tree per space) behind one global
//! lock, taken once per level and once more to publish (before Linux 7.0), or once for
//! everything (Guzik's fix, merged for 7.0).

use super::level::IdSpace;
use super::object::Pid;
use super::spaces::{Spaces, Taken};
use super::{NsId, PidAllocator, PidError};
use crate::lock::{DefaultLocks, Locks, RwLock, RwLockWriteGuard};
use crate::util::radix::RadixTree;

/// A space's IDR: `None` reserves an ID before its object is published (the kernel stores
/// NULL, then `idr_replace`s the `struct pid`).
#[derive(Default)]
pub(crate) struct Idr {
    tree: RadixTree<Option<Pid>>,
    /// Entries reserved and not published yet (`None`): the tree's other entries are the
    /// objects the kernel counts in `pid_allocated`.
    reserved: usize,
}

impl Idr {
    /// Publishes `pid` at `id`, which this allocation reserved (`idr_replace`).
    fn publish(&mut self, id: u32, pid: &Pid) {
        if let Some(slot) = self.tree.get_mut(u64::from(id)) {
            *slot = Some(pid.clone());
            self.reserved -= 1;
        }
    }
}

impl IdSpace for Idr {
    fn is_taken(&self, id: u32) -> bool {
        self.tree.get(u64::from(id)).is_some()
    }
    fn first_free(&self, from: u32, end: u32) -> Option<u32> {
        let last = end.checked_sub(1)?;
        self.tree
            .first_free(u64::from(from), u64::from(last))
            .map(|id| id as u32)
    }
    fn reserve(&mut self, id: u32) {
        // The caller checked that `id` is free.
        let _ = self.tree.insert(u64::from(id), None);
        self.reserved += 1;
    }
    /// Only reservations are released this way; a free removes a published object.
    fn release(&mut self, id: u32) {
        if self.tree.remove(u64::from(id)).is_some() {
            self.reserved -= 1;
        }
    }
    fn holds_objects(&self) -> bool {
        self.tree.len() > self.reserved
    }
}

/// The IDR designs' shared implementation; `relock` picks the pre-7.0 locking.
struct IdrAllocator<L: Locks> {
    spaces: RwLock<L, Spaces<Idr>>,
    relock: bool,
}

impl<L: Locks> IdrAllocator<L> {
    fn new(relock: bool) -> Self {
        IdrAllocator {
            spaces: crate::lock::rwlock::<L, _>(Spaces::new()),
            relock,
        }
    }

    fn alloc(&self, ns: NsId, set_tid: &[u32]) -> Result<Pid, PidError> {
        let mut spaces: RwLockWriteGuard<'_, L, Spaces<Idr>> = self.spaces.write();
        let chain = spaces.chain(ns, set_tid)?;
        let mut taken = Taken::new();
        for index in 0..chain.len() {
            if self.relock {
                // Before 7.0: `idr_preload`, `spin_lock(&pidmap_lock)` for every level.
                drop(spaces);
                spaces = self.spaces.write();
            }
            if let Err(error) = spaces.alloc_at(&chain, index, set_tid, &mut taken) {
                spaces.fail(ns, &taken);
                return Err(error);
            }
        }
        if self.relock {
            // ... and once more to publish.
            drop(spaces);
            spaces = self.spaces.write();
        }
        spaces.finish(&taken)?;
        let pid = Pid::new(&taken);
        for &(ns, id) in &taken {
            spaces.at(ns).ids.publish(id, &pid);
        }
        Ok(pid)
    }

    fn alloc_refused(&self, ns: NsId, set_tid: &[u32]) -> PidError {
        // One lock hold, also for the relocking design: nothing is published, so no other
        // allocation can tell how many holds it took.
        self.spaces.write().refused(ns, set_tid)
    }

    fn free(&self, ns: NsId, id: u32) -> Result<(), PidError> {
        let mut spaces = self.spaces.write();
        let pid = match spaces.get(ns)?.ids.tree.get(u64::from(id)) {
            Some(Some(pid)) => pid.clone(),
            // Reserved by an allocation still in flight: not an object yet.
            _ => return Err(PidError::NotFound),
        };
        for &(space, number) in pid.levels() {
            spaces.at(space).ids.tree.remove(u64::from(number));
            spaces.note_freed(space, number);
        }
        Ok(())
    }

    fn lookup(&self, ns: NsId, id: u32) -> Result<Option<Pid>, PidError> {
        let spaces = self.spaces.read();
        match spaces.get(ns) {
            Ok(space) => Ok(space.ids.tree.get(u64::from(id)).cloned().flatten()),
            // A freed space holds nothing.
            Err(PidError::NamespaceFreed) => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn free_ns(&self, ns: NsId) -> Result<(), PidError> {
        // Reserved IDs of an allocation in flight are in the tree too: they count as held.
        self.spaces.write().remove(ns, |ids| ids.tree.len() != 0)
    }

    fn memory_bytes(&self) -> usize {
        let spaces = self.spaces.read();
        core::mem::size_of::<Self>()
            + spaces.map_bytes()
            + spaces
                .live
                .values()
                .map(|s| s.ids.tree.heap_bytes() + s.ids.tree.len() * pid_bytes(s.level))
                .sum::<usize>()
    }
}

/// Heap bytes of one object with IDs at `level + 1` levels, counted once per level that holds
/// it (a share), so that sums over spaces count each object once.
pub(crate) fn pid_bytes(level: u32) -> usize {
    let levels = level as usize + 1;
    // Arc header (two counts) + the (space, ID) pairs, shared by `levels` slots.
    (2 * core::mem::size_of::<usize>() + levels * core::mem::size_of::<(NsId, u32)>()) / levels
}

macro_rules! idr_design {
    ($name:ident, $relock:expr, $label:literal, $doc:literal) => {
        #[doc = $doc]
        pub struct $name<L: Locks = DefaultLocks>(IdrAllocator<L>);

        impl $name {
            /// An allocator with only the root space.
            pub fn new() -> Self {
                Self::with_locks()
            }
        }

        impl<L: Locks> $name<L> {
            /// An allocator with only the root space, on the locks `L` (see
            /// [`lock`](crate::lock)).
            pub fn with_locks() -> Self {
                $name(IdrAllocator::new($relock))
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl<L: Locks> PidAllocator for $name<L> {
            fn name(&self) -> &'static str {
                $label
            }
            fn new_ns(&self, parent: NsId) -> Result<NsId, PidError> {
                self.0.spaces.write().add(parent)
            }
            fn set_pid_max(&self, ns: NsId, max: u32) -> Result<(), PidError> {
                self.0.spaces.write().set_pid_max(ns, max)
            }
            fn alloc(&self, ns: NsId, set_tid: &[u32], _cpu: usize) -> Result<Pid, PidError> {
                self.0.alloc(ns, set_tid)
            }
            fn alloc_refused(&self, ns: NsId, set_tid: &[u32], _cpu: usize) -> PidError {
                self.0.alloc_refused(ns, set_tid)
            }
            fn free(&self, ns: NsId, id: u32, _cpu: usize) -> Result<(), PidError> {
                self.0.free(ns, id)
            }
            fn lookup(&self, ns: NsId, id: u32) -> Result<Option<Pid>, PidError> {
                self.0.lookup(ns, id)
            }
            fn free_ns(&self, ns: NsId) -> Result<(), PidError> {
                self.0.free_ns(ns)
            }
            fn memory_bytes(&self) -> usize {
                self.0.memory_bytes()
            }
        }
    };
}

idr_design!(
    IdrRelock,
    true,
    "idr-relock",
    "The kernel before 7.0: one global lock, taken once per namespace level to allocate and once \
     more to publish, over a radix tree (the IDR) per space. Lookups take the lock shared (the \
     kernel walks under RCU)."
);
idr_design!(
    IdrOnce,
    false,
    "idr-once",
    "Linux 7.0 (\"pid: only take pidmap_lock once on alloc\"): the same trees, one hold of the \
     global lock for every level and the publication. Lookups take the lock shared."
);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::pid::spaces::Taken;
    use crate::pid::ROOT;

    #[test]
    fn reservations_in_flight_are_not_objects() {
        let mut idr = Idr::default();
        idr.reserve(1);
        assert!(!idr.holds_objects());
        idr.publish(1, &Pid::new(&[(ROOT, 1)]));
        assert!(idr.holds_objects());
        idr.reserve(2);
        idr.release(2);
        idr.tree.remove(1);
        assert!(!idr.holds_objects());
    }

    /// `IdrRelock` drops its lock between levels, so a failure may see another allocation's
    /// reservation in the target: the kernel counts published objects only, and resets.
    #[test]
    fn a_failure_beside_an_allocation_in_flight_resets_the_space() {
        let mut spaces = Spaces::<Idr>::new();
        let ns = spaces.add(ROOT).unwrap();
        let chain = [ns, ROOT];
        let mut in_flight = Taken::new();
        spaces.alloc_at(&chain, 0, &[], &mut in_flight).unwrap();
        let mut failing = Taken::new();
        spaces.alloc_at(&chain, 0, &[], &mut failing).unwrap();
        assert_eq!(failing[..], [(ns, 2)]);
        spaces.fail(ns, &failing);
        assert_eq!(spaces.get(ns).unwrap().core.cursor, 0);
        // Once the other allocation published, the space holds an object: no reset.
        spaces.alloc_at(&chain, 1, &[], &mut in_flight).unwrap();
        spaces.finish(&in_flight).unwrap();
        for &(space, id) in &in_flight {
            spaces.at(space).ids.publish(id, &Pid::new(&in_flight));
        }
        let mut failing = Taken::new();
        spaces.alloc_at(&chain, 0, &[], &mut failing).unwrap();
        assert_eq!(failing[..], [(ns, 2)]);
        spaces.fail(ns, &failing);
        assert_eq!(spaces.get(ns).unwrap().core.cursor, 3);
    }
}
