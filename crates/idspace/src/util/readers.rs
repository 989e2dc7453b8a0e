//! [`Readers`]: read-side sections and grace periods, the user-space stand-in for the RCU under
//! which the kernel's lookups run (`find_pid_ns`, the timer and IPC ID lookups), reduced to
//! what lookups without locks need. The hash tables wait out a grace period after each remove
//! (`synchronize_rcu`); `PerCpu` hands what it unlinks to a limbo that frees it later
//! (`call_rcu`).
//!
//! # Protocol
//!
//! A reader enters a [`Section`] by claiming a free reader slot: a counter, even while free and
//! odd while a section runs in it, moved from even to odd by a compare-exchange. A `SeqCst`
//! fence follows the claim, and every pointer the reader loads after it stays valid until it
//! leaves, by a `Release` store of the next even value.
//!
//! A writer first unlinks what it will free, then issues a `SeqCst` fence and reads every slot
//! (a [`Snapshot`]); once each slot that was odd has moved on, every section that might have
//! loaded the unlinked pointer has ended: a *grace period* has passed ([`Readers::passed`],
//! [`Readers::synchronize`]).
//!
//! # Why the fences pair
//!
//! The reader's fence separates its claim from its loads; the writer's separates its unlink
//! from its scan. In the single total order of `SeqCst` fences one comes first. If the
//! reader's does, the writer's scan reads the claim or a later value of the slot: it sees the
//! slot odd and waits for the section, or sees it already moved on. If the writer's does, the
//! reader's loads read the unlink or later stores, so the section cannot reach what was
//! unlinked. A section that starts after the scan is the second case. The section's `Release`
//! store pairs with the writer's `Acquire` loads of the slot, so the section's reads happen
//! before anything the writer frees afterwards.
//!
//! # Why no ABA
//!
//! A slot's counter only grows (by two per section), so a slot the writer saw odd and then sees
//! at any other value has ended that section: a later section in the same slot has a different
//! odd value and is never mistaken for the one in the snapshot. For the same reason a reader
//! that keeps entering sections never holds a grace period up: only the section running at the
//! snapshot does. A 64-bit counter does not wrap.
//!
//! # Cost
//!
//! Each slot sits on its own cache line (padded by [`CachePadded`]) and a thread starts its
//! search at a slot of its own (spread by [`host::slot_hint`](crate::host::slot_hint)), so
//! sections on different CPUs write no shared line; only grace periods read all of them. On
//! x86 the compare-exchange that claims a slot is a locked instruction, itself a full barrier,
//! so there the reader's fence is only a compiler fence (an `mfence` would cost about as much
//! again as the rest of a lookup). That is correct by the hardware's memory model, not the
//! language's, so loom and Miri, which check the language's, the sanitizer builds, and every
//! other architecture get the fence itself.
//!
//! # Differences from the kernel's RCU
//!
//! * The kernel's readers only disable preemption (or bump a per-task counter) and its grace
//!   periods are detected by every CPU passing a quiescent state. User space cannot see
//!   context switches, so a reader announces itself in a slot, at the price of one
//!   compare-exchange and one fence on a line of its own per section.
//! * The slots are per structure, not global: a grace period waits only for the readers of that
//!   structure, and it scans a few dozen cache lines, not every CPU.
//! * There are fewer slots than threads may be: [`Readers::try_enter`] reports that every slot
//!   is taken (the tables then take the bucket's lock instead), and [`Readers::enter`] waits
//!   for one (`PerCpu`). Readers never wait for anything inside a section, so a writer may wait
//!   for a grace period while it holds any lock a section does not take.
//! * Grace periods are detected by polling ([`Readers::passed`]) or spinning
//!   ([`Readers::synchronize`]); there are no callbacks and no grace-period thread.

use crate::prelude::*;
use crate::sync::{fence, spin_wait, AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// The most reader slots one structure may have (and the size of a [`Snapshot`]).
pub(crate) const MAX_SLOTS: usize = 64;

/// The reader slots of one structure.
pub(crate) struct Readers {
    /// A power of two of them, at most [`MAX_SLOTS`].
    slots: Box<[CachePadded<AtomicU64>]>,
}

/// A running read-side section: while it lives, nothing it can reach is freed. Dropping it ends
/// the section.
pub(crate) struct Section<'a> {
    slot: &'a AtomicU64,
    /// The slot's (odd) value while this section runs.
    value: u64,
}

impl Drop for Section<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release pairs with the Acquire loads in `Readers::passed` and `Readers::synchronize`:
        // the section's reads happen before the writer frees what they read.
        self.slot.store(self.value + 1, Ordering::Release);
    }
}

/// The slots' values when a writer looked, after its unlink: the odd ones are the sections
/// its grace period waits for.
#[derive(Clone)]
pub(crate) struct Snapshot {
    /// One value per slot; beyond the structure's slots, zeros (free).
    values: [u64; MAX_SLOTS],
}

impl Readers {
    /// `slots` reader slots, rounded up to a power of two and kept within 1 to [`MAX_SLOTS`].
    pub(crate) fn new(slots: usize) -> Self {
        let slots = slots.clamp(1, MAX_SLOTS).next_power_of_two();
        Readers {
            slots: (0..slots)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }

    /// Enters a section on a free slot, or `None` if every slot is taken: pointers loaded after
    /// this returns a section stay valid until the section ends.
    #[inline]
    pub(crate) fn try_enter(&self) -> Option<Section<'_>> {
        self.try_enter_from(first_choice())
    }

    /// Enters a section, waiting for a free slot if every slot is taken.
    #[inline]
    pub(crate) fn enter(&self) -> Section<'_> {
        let start = first_choice();
        loop {
            if let Some(section) = self.try_enter_from(start) {
                return section;
            }
            spin_wait();
        }
    }

    /// Tries every slot once, from `start` on.
    #[inline(always)]
    fn try_enter_from(&self, start: usize) -> Option<Section<'_>> {
        let len = self.slots.len();
        for offset in 0..len {
            let slot = &*self.slots[(start + offset) & (len - 1)];
            // Relaxed: a free slot is only claimed by the compare-exchange in `claim`.
            let value = slot.load(Ordering::Relaxed);
            if value % 2 == 1 {
                continue;
            }
            if claim(slot, value) {
                return Some(Section {
                    slot,
                    value: value + 1,
                });
            }
        }
        None
    }

    /// The slots' values now, for a writer that has already unlinked what it will free.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot {
            values: [0; MAX_SLOTS],
        };
        self.snapshot_into(&mut snapshot);
        snapshot
    }

    /// [`Readers::snapshot`] into a snapshot of this structure's slots taken before (or a
    /// fresh one): only this structure's slots are written, the rest stay zero (free). A
    /// writer that snapshots often keeps one and so does not clear and copy a whole
    /// [`MAX_SLOTS`]-slot array each time.
    pub(crate) fn snapshot_into(&self, snapshot: &mut Snapshot) {
        // SeqCst: the writer's half of the pattern in the module docs, between its unlink and
        // its scan; pairs with the fence in `claim`.
        fence(Ordering::SeqCst);
        for (value, slot) in snapshot.values.iter_mut().zip(self.slots.iter()) {
            // Acquire pairs with the Release in `Section::drop` (see `passed`).
            *value = slot.load(Ordering::Acquire);
        }
    }

    /// Whether every section running at `snapshot` has ended.
    pub(crate) fn passed(&self, snapshot: &Snapshot) -> bool {
        snapshot
            .values
            .iter()
            .zip(self.slots.iter())
            // Acquire pairs with the Release in `Section::drop` (directly, or through the
            // compare-exchange of a later section, which continues its release sequence): the
            // ended section's reads happen before the caller frees anything.
            .all(|(&seen, slot)| seen % 2 == 0 || slot.load(Ordering::Acquire) != seen)
    }

    /// Waits for a grace period: every section running now ends. The caller has unlinked what
    /// it will free, and holds no lock a reader may wait for (a reader that found every slot
    /// taken may take one).
    pub(crate) fn synchronize(&self) {
        // SeqCst: the writer's half of the pattern in the module docs, as in `snapshot`.
        fence(Ordering::SeqCst);
        for slot in self.slots.iter() {
            // Acquire pairs with the Release in `Section::drop`, as in `passed`.
            let seen = slot.load(Ordering::Acquire);
            if seen % 2 == 1 {
                while slot.load(Ordering::Acquire) == seen {
                    spin_wait();
                }
            }
        }
    }

    /// Bytes of the slots.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.slots.len() * core::mem::size_of::<CachePadded<AtomicU64>>()
    }
}

/// Claims `slot` from its even `value`, ordered before the loads that follow by a `SeqCst`
/// fence: the reader's half of the pattern in the module docs (the kernel's
/// `smp_mb__after_atomic`).
#[inline(always)]
fn claim(slot: &AtomicU64, value: u64) -> bool {
    // On x86 a locked compare-exchange is itself a full barrier, and a `SeqCst` fence would add
    // an `mfence`; the compiler fence keeps the compiler from moving the section's loads above
    // it. crossbeam-epoch pins the same way. This is correct by the hardware's memory model
    // only: in the language's, a `SeqCst` read-modify-write does not order the plain loads
    // after it against the writer's fence. Loom, Miri and the sanitizer builds (see the crate's
    // build script) take the portable form, correct by the language's model.
    #[cfg(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        not(any(loom, miri, idspace_sanitized))
    ))]
    {
        let claimed = slot
            .compare_exchange(value, value + 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok();
        core::sync::atomic::compiler_fence(Ordering::SeqCst);
        claimed
    }
    #[cfg(not(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        not(any(loom, miri, idspace_sanitized))
    )))]
    {
        // The fence orders the claim before the section's loads, and pairs with the writer's
        // fence in `Readers::snapshot` and `Readers::synchronize`. Acquire pairs with the
        // Release in `Section::drop` of the slot's previous section: a writer whose Acquire
        // load reads the end of ours then also follows theirs, which a grace period that saw
        // theirs running relies on (a later section's end replaces the earlier one's in the
        // slot). The fence gives that in the language too, but ThreadSanitizer does not model
        // fences and reported the earlier section's reads racing the writer's free.
        let claimed = slot
            .compare_exchange(value, value + 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        if claimed {
            fence(Ordering::SeqCst);
        }
        claimed
    }
}

/// The slot a thread tries first (before masking by the slot count): by the host's slot hint,
/// the CPU's index where it is known, so that readers on different CPUs claim different lines
/// ([`host::first_slot`](crate::host::first_slot)). `MAX_SLOTS` covers every slot count a
/// structure may have, and masking by a smaller power of two keeps each CPU's pair.
#[cfg(not(loom))]
#[inline]
fn first_choice() -> usize {
    crate::host::first_slot(MAX_SLOTS)
}

/// Under loom, always the first slot: a thread-local's address differs between the executions
/// loom replays, and a model must make the same choices in each.
#[cfg(loom)]
fn first_choice() -> usize {
    0
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn slot_counts_are_powers_of_two_within_bounds() {
        for (asked, got) in [(0, 1), (1, 1), (3, 4), (4, 4), (5, 8), (64, 64), (1000, 64)] {
            assert_eq!(Readers::new(asked).slots.len(), got, "asked {asked}");
        }
    }

    #[test]
    fn try_enter_reports_when_every_slot_is_taken() {
        let readers = Readers::new(2);
        let first = readers.try_enter().expect("a free slot");
        let second = readers.try_enter().expect("a free slot");
        assert!(readers.try_enter().is_none());
        drop(first);
        let third = readers
            .try_enter()
            .expect("the slot the first section left");
        drop((second, third));
        // Every section ended: a grace period needs no wait.
        readers.synchronize();
        assert!(readers.passed(&readers.snapshot()));
    }

    #[test]
    fn a_grace_period_waits_for_the_sections_at_its_snapshot_only() {
        let readers = Readers::new(4);
        let old = readers.enter();
        let snapshot = readers.snapshot();
        assert!(!readers.passed(&snapshot));
        // A section that starts after the snapshot does not hold the grace period up, even in
        // the slot the old one leaves (its counter has moved on: no ABA).
        drop(old);
        let new = readers.enter();
        assert!(readers.passed(&snapshot));
        drop(new);
    }

    #[test]
    fn synchronize_waits_for_a_section_in_flight() {
        use crate::sync::{AtomicBool, Ordering};
        let readers = Readers::new(4);
        let ended = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let section = readers.enter();
            scope.spawn(|| {
                readers.synchronize();
                assert!(ended.load(Ordering::SeqCst));
            });
            ended.store(true, Ordering::SeqCst);
            drop(section);
        });
    }
}
