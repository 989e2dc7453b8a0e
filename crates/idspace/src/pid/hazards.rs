//! [`Hazards`]: the few pointers that threads are using right now, so that what they use is
//! freed only once nobody uses it (hazard pointers, reduced to what `PerCpu` needs): the space
//! an allocation, a free or a `set_pid_max` works in, against `PerCpu::free_ns`. These
//! operations may wait while they hold one (for a CPU's lock), so the lookups, which must never
//! wait, use grace periods instead (`Readers`).
//!
//! A user publishes the pointer it is about to use in a free hazard slot, then checks that it
//! is still installed; a retirer uninstalls it, then waits until no hazard slot holds it. Both
//! sides are `SeqCst`: in their single order either the publication comes first (the retirer
//! sees it and waits) or the retirer's uninstall does (the user's check fails and it uses
//! nothing). Each slot sits on its own cache line and a thread starts its search at a slot of
//! its own, so users on different CPUs write no shared line; only a retirement reads them all.

use crate::prelude::*;
use core::ptr;

use crate::sync::{spin_wait, AtomicPtr, Ordering};
use crossbeam_utils::CachePadded;

/// Hazard slots: more than the readers that run at once on any machine this targets; a reader
/// that finds them all busy waits for one.
#[cfg(not(loom))]
const SLOTS: usize = 64;
#[cfg(loom)]
const SLOTS: usize = 2;

/// Pointers being read, one per slot (null: free).
pub(crate) struct Hazards<T> {
    slots: Box<[CachePadded<AtomicPtr<T>>]>,
}

/// A published hazard; dropping it withdraws the publication.
pub(crate) struct Hazard<'a, T> {
    slot: &'a AtomicPtr<T>,
}

impl<T> Drop for Hazard<'_, T> {
    fn drop(&mut self) {
        // Release pairs with the SeqCst (acquiring) loads in `wait_unused`: the reads under the
        // hazard happen before the retirer frees what they read.
        self.slot.store(ptr::null_mut(), Ordering::Release);
    }
}

impl<T> Hazards<T> {
    pub(crate) fn new() -> Self {
        Hazards {
            slots: (0..SLOTS)
                .map(|_| CachePadded::new(AtomicPtr::new(ptr::null_mut())))
                .collect(),
        }
    }

    /// Publishes `pointer` in a free slot. The caller must then check that `pointer` is still
    /// installed before reading through it.
    #[inline]
    pub(crate) fn protect(&self, pointer: *mut T) -> Hazard<'_, T> {
        let start = Self::first_choice();
        loop {
            for offset in 0..SLOTS {
                let slot = &self.slots[(start + offset) % SLOTS];
                // SeqCst: the reader's half of the pattern in the module docs, ordered before
                // the caller's check of the installed pointer.
                if slot
                    .compare_exchange(
                        ptr::null_mut(),
                        pointer,
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    single_order();
                    return Hazard { slot };
                }
            }
            spin_wait();
        }
    }

    /// The slot a thread tries first: by the host's slot hint, the CPU's index where it is
    /// known ([`host::first_slot`](crate::host::first_slot)).
    #[cfg(not(loom))]
    #[inline]
    fn first_choice() -> usize {
        crate::host::first_slot(SLOTS)
    }

    /// Under loom, always the first slot: a thread-local's address differs between the
    /// executions loom replays, and a model must make the same choices in each.
    #[cfg(loom)]
    fn first_choice() -> usize {
        0
    }

    /// Waits until no slot holds `pointer`. The caller has already uninstalled it (`SeqCst`),
    /// so no new hazard on it survives its owner's check.
    pub(crate) fn wait_unused(&self, pointer: *mut T) {
        single_order();
        for slot in self.slots.iter() {
            // SeqCst: the retirer's half of the pattern in the module docs; acquiring, it pairs
            // with the Release in `Hazard::drop`.
            while slot.load(Ordering::SeqCst) == pointer {
                spin_wait();
            }
        }
    }
}

/// A `SeqCst` fence between the two halves of each side (the reader's publication and its
/// check; the retirer's unlink and its scan). The pattern needs the store of one side and the
/// load of the other ordered in one total order; `SeqCst` fences give exactly that (if the
/// reader's fence precedes the retirer's, the retirer's scan sees the publication or a later
/// value of the slot; otherwise the reader's check sees the unlink). `SeqCst` accesses alone
/// give it too on the hardware, but neither loom nor Miri models that for accesses mixed with
/// the slot's `Release` withdrawals: Miri reported a race between a reader and the free without
/// the fences. On x86-64 the reader's fence follows a locked compare-exchange, already a full
/// barrier.
#[inline(always)]
fn single_order() {
    crate::sync::fence(Ordering::SeqCst);
}
