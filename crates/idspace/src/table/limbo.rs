//! [`Limbo`]: the nodes a hash table unlinked, kept pinned until every lookup that might still
//! walk over them has ended, then released by a later remove that never waits: the kernel's
//! `kfree_rcu` for the table's nodes.
//!
//! Each stripe of an owner's ID list keeps one, under the stripe's lock, which the remove holds
//! anyway: retiring a node costs a push, and once per [`BATCH`] retirements a look at the
//! reader slots (a [`Snapshot`] of them, or a check that the previous batch's grace period has
//! passed). An owner's removes thus share no line with another owner's, and a remove never
//! spins on a lookup of another thread, as `Readers::synchronize` after every remove did.
//! Operations that may wait (`remove_owner`, dropping an idle owner's state) take everything a
//! limbo holds and wait for one grace period instead.

use crate::prelude::*;
use core::ptr::NonNull;

use super::node::Node;
use crate::util::readers::{Readers, Snapshot};

/// Retirements a limbo gathers before it looks at the grace period (each look reads every
/// reader slot, lines other CPUs write). Small, because a passed batch is freed at once: a
/// burst of frees no larger than an allocator's per-thread cache of a size (glibc's tcache
/// keeps 7) is taken back by the next creates without the allocator's shared paths; 16 measured
/// slower than the synchronous grace period it replaced.
pub(crate) const BATCH: usize = 6;

/// A table's pin on a node it unlinked (see the `node` module), released when dropped: after a
/// grace period, or when no lookup can run any more (the table is going away).
pub(crate) struct Retired {
    node: NonNull<()>,
    unpin: unsafe fn(NonNull<()>),
}

// SAFETY: the pin is a count on an allocation that any thread may free, as an `Entry`'s
// reference is; the node's value is not touched through it.
unsafe impl Send for Retired {}
// SAFETY: a `&Retired` gives access to nothing.
unsafe impl Sync for Retired {}

impl Retired {
    /// The pin of `node`, which its table just unlinked.
    ///
    /// # Safety
    /// The node is pinned, the caller owns the pin and hands it over; the `Retired` must be
    /// dropped only once no read-side section that may have reached the node is running.
    pub(crate) unsafe fn new<T>(node: NonNull<Node<T>>) -> Retired {
        /// Releases the pin of a `Node<T>` given as an untyped pointer.
        unsafe fn unpin<T>(node: NonNull<()>) {
            // SAFETY: `Retired::new` made the pointer from a `Node<T>` and the pin is ours.
            unsafe { Node::<T>::unpin(node.cast()) }
        }
        Retired {
            node: node.cast(),
            unpin: unpin::<T>,
        }
    }
}

impl Drop for Retired {
    fn drop(&mut self) {
        // SAFETY: the pin is ours, and whoever drops a `Retired` waited for the grace period
        // (see `Retired::new`).
        unsafe { (self.unpin)(self.node) }
    }
}

/// Unlinked nodes waiting for their grace period: `next` gathers what is retired now;
/// `waiting` holds an earlier batch together with the snapshot taken after its last member was
/// unlinked; `passed` holds a batch whose grace period has passed, released one node per
/// retirement so that the frees come as evenly as the removes (a burst of frees overflows the
/// allocator's per-thread cache, and the creates that follow then take its shared paths).
/// The snapshot's box is kept while the limbo is in use, so that a busy owner does not allocate
/// one per batch.
#[derive(Default)]
pub(crate) struct Limbo {
    next: Vec<Retired>,
    waiting: Vec<Retired>,
    passed: Vec<Retired>,
    snapshot: Option<Box<Snapshot>>,
}

impl Limbo {
    /// Keeps `retired` until a grace period has passed; releases an earlier node whose grace
    /// period has. Never waits.
    #[inline]
    pub(crate) fn retire(&mut self, retired: Retired, readers: &Readers) {
        self.next.push(retired);
        drop(self.passed.pop());
        if self.next.len() >= BATCH {
            self.collect(readers);
        }
    }

    /// Moves the waiting batch to `passed` if its grace period has passed, then starts one for
    /// what was retired since.
    #[cold]
    fn collect(&mut self, readers: &Readers) {
        if !self.waiting.is_empty() {
            let Some(snapshot) = &self.snapshot else {
                unreachable!("a waiting batch has its snapshot");
            };
            if !readers.passed(snapshot) {
                // A lookup of the old batch's time still runs (its thread may be preempted):
                // keep gathering; the next retirement looks again.
                return;
            }
            // Whatever of the batch before is still there has passed too.
            self.passed.clear();
            core::mem::swap(&mut self.passed, &mut self.waiting);
        }
        core::mem::swap(&mut self.next, &mut self.waiting);
        // In place: a snapshot is `MAX_SLOTS` words, most of them beyond this table's slots,
        // and building one on the stack to move it into the box cost a clear and a copy of all
        // of them per batch.
        match &mut self.snapshot {
            Some(snapshot) => readers.snapshot_into(snapshot),
            None => self.snapshot = Some(Box::new(readers.snapshot())),
        }
    }

    /// Everything kept, for a caller that will wait for a grace period before dropping it.
    pub(crate) fn take_all(&mut self, into: &mut Vec<Retired>) {
        into.append(&mut self.passed);
        into.append(&mut self.waiting);
        into.append(&mut self.next);
        *self = Limbo::default();
    }

    /// Heap bytes: the batches' room and the snapshot (the nodes are counted by the caller).
    pub(crate) fn heap_bytes(&self) -> usize {
        let item = core::mem::size_of::<Retired>();
        let snapshot = self
            .snapshot
            .as_ref()
            .map_or(0, |_| core::mem::size_of::<Snapshot>());
        let room = self.next.capacity() + self.waiting.capacity() + self.passed.capacity();
        room * item + snapshot
    }

    /// Nodes kept.
    pub(crate) fn len(&self) -> usize {
        self.next.len() + self.waiting.len() + self.passed.len()
    }
}
