//! [`Readers`]: `PerCpu`'s read-side critical sections and grace periods, the user-space
//! counterpart of the RCU under which the kernel's `find_pid_ns` runs, reduced to what lookups
//! need. [`Limbo`]: what a writer unlinked, kept until every section that might still read it
//! has ended.
//!
//! # Protocol
//!
//! A reader enters a section by claiming a free reader slot (a counter: even when free, odd
//! while a section runs in it), then issues a `SeqCst` fence; every pointer it follows after the
//! fence stays valid until it leaves (a `Release` store of the next even value). A writer first
//! unlinks what it will free, then issues a `SeqCst` fence and notes the slots that are odd (a
//! [`Snapshot`]); once each of them has moved on, every section that might have seen the
//! unlinked pointer has ended (a *grace period*). The two fences order the two sides: if the
//! reader's precedes the writer's, the writer's scan sees the slot odd (or already moved on);
//! otherwise the reader's loads see the unlink. Slot counters only grow, so a slot that moved
//! on is never mistaken for the same section (no ABA), and a reader that keeps entering
//! sections never holds a grace period up: only a section that was running at the snapshot
//! does.
//!
//! Readers never wait for anything inside a section, so a writer may wait for a grace period
//! while it holds any lock (`free_ns`); the hot paths do not wait at all but hand what they
//! unlink to a [`Limbo`], which frees it at a later call once its grace period has passed.
//!
//! Each slot sits on its own cache line and a thread starts its search at a slot of its own,
//! so sections on different CPUs write no shared line; only grace periods read them all.

use crate::sync::{fence, spin_wait, AtomicUsize, Ordering};
#[cfg(not(loom))]
use crate::util::hash::mix;
use crossbeam_utils::CachePadded;

/// Reader slots: more than the readers that run at once on any machine this targets; a reader
/// that finds them all busy waits for one.
#[cfg(not(loom))]
const SLOTS: usize = 64;
#[cfg(loom)]
const SLOTS: usize = 2;

#[cfg(not(loom))]
crate::sync::thread_local! {
    /// Its address tells threads apart, to spread their first choice of slot.
    static THREAD_KEY: u8 = const { 0 };
}

/// The reader slots of one allocator.
pub(crate) struct Readers {
    slots: Box<[CachePadded<AtomicUsize>]>,
}

/// A running read-side section; dropping it ends the section.
pub(crate) struct Section<'a> {
    slot: &'a AtomicUsize,
    /// The slot's (odd) value while this section runs.
    value: usize,
}

impl Drop for Section<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release pairs with the Acquire loads in `Readers::passed` and `synchronize`: the
        // section's reads happen before the writer frees what they read.
        self.slot
            .store(self.value.wrapping_add(1), Ordering::Release);
    }
}

/// The slots that were in a section when a writer looked (odd values), after its unlink.
#[derive(Clone)]
pub(crate) struct Snapshot {
    values: [usize; SLOTS],
}

impl Readers {
    pub(crate) fn new() -> Self {
        Readers {
            slots: (0..SLOTS)
                .map(|_| CachePadded::new(AtomicUsize::new(0)))
                .collect(),
        }
    }

    /// Enters a section: pointers loaded after this returns stay valid until the section ends.
    #[inline]
    pub(crate) fn enter(&self) -> Section<'_> {
        let start = first_choice();
        loop {
            for offset in 0..SLOTS {
                let slot = &self.slots[(start + offset) % SLOTS];
                // Relaxed: a free slot is only claimed by the compare-exchange below.
                let value = slot.load(Ordering::Relaxed);
                if value % 2 != 0 {
                    continue;
                }
                // SeqCst, and the barrier after it: the reader's half of the pattern in the
                // module docs, ordered before every load the section makes.
                if slot
                    .compare_exchange(value, value + 1, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    full_barrier_after_rmw();
                    return Section {
                        slot,
                        value: value + 1,
                    };
                }
            }
            spin_wait();
        }
    }

    /// The sections running now, for a writer that has already unlinked what it will free.
    pub(crate) fn snapshot(&self) -> Snapshot {
        // SeqCst: the writer's half of the pattern in the module docs, between its unlink and
        // its scan.
        fence(Ordering::SeqCst);
        let mut values = [0; SLOTS];
        for (value, slot) in values.iter_mut().zip(self.slots.iter()) {
            // Acquire pairs with the Release in `Section::drop` (see `passed`).
            *value = slot.load(Ordering::Acquire);
        }
        Snapshot { values }
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
    /// it will free.
    pub(crate) fn synchronize(&self) {
        let snapshot = self.snapshot();
        while !self.passed(&snapshot) {
            spin_wait();
        }
    }
}

/// A `SeqCst` fence after a read-modify-write, the kernel's `smp_mb__after_atomic`. On x86 the
/// locked instruction that claimed the slot is already a full barrier, so natively only the
/// compiler is kept from moving loads above it (a fence there would cost a second barrier on
/// every lookup); Miri and loom, which check the language's model rather than the hardware's,
/// and every other architecture get the fence itself.
#[inline(always)]
fn full_barrier_after_rmw() {
    #[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), not(miri), not(loom)))]
    core::sync::atomic::compiler_fence(Ordering::SeqCst);
    #[cfg(not(all(any(target_arch = "x86", target_arch = "x86_64"), not(miri), not(loom))))]
    fence(Ordering::SeqCst);
}

/// The slot a thread tries first: spread by the address of a thread-local.
#[cfg(not(loom))]
#[inline]
fn first_choice() -> usize {
    let key = THREAD_KEY.with(|key| core::ptr::from_ref(key).addr());
    mix(key as u64, 0) as usize
}

/// Under loom, always the first slot: a thread-local's address differs between the executions
/// loom replays, and a model must make the same choices in each.
#[cfg(loom)]
fn first_choice() -> usize {
    0
}

/// Unlinked values waiting for their grace period, freed (dropped) by later calls without ever
/// waiting: `next` collects what is retired now; `waiting` holds an earlier batch together with
/// the snapshot taken after its last member was unlinked.
pub(crate) struct Limbo<T> {
    next: Vec<T>,
    waiting: Vec<T>,
    snapshot: Option<Snapshot>,
    /// Items `next` gathers before a retirement looks at the grace period (each look reads
    /// the reader slots).
    batch: usize,
}

impl<T> Limbo<T> {
    /// An empty limbo that looks at the grace period every `batch` retirements.
    pub(crate) fn new(batch: usize) -> Self {
        Limbo {
            next: Vec::new(),
            waiting: Vec::new(),
            snapshot: None,
            batch: batch.max(1),
        }
    }

    /// Keeps `item`, already unlinked, until a grace period has passed; frees earlier items
    /// whose grace period has.
    #[inline]
    pub(crate) fn retire(&mut self, item: T, readers: &Readers) {
        self.next.push(item);
        if self.next.len() % self.batch == 0 {
            self.collect(readers);
        }
    }

    /// Frees the waiting batch if its grace period has passed, then starts one for what was
    /// retired since.
    pub(crate) fn collect(&mut self, readers: &Readers) {
        if let Some(snapshot) = &self.snapshot {
            if !readers.passed(snapshot) {
                return;
            }
            self.waiting.clear();
            self.snapshot = None;
        }
        if !self.next.is_empty() {
            core::mem::swap(&mut self.next, &mut self.waiting);
            self.snapshot = Some(readers.snapshot());
        }
    }

    /// Everything kept, for a caller that will wait for a grace period and then drop it; the
    /// limbo is left empty, without capacity.
    pub(crate) fn take_all(&mut self) -> Vec<T> {
        self.snapshot = None;
        let mut all = core::mem::take(&mut self.waiting);
        all.append(&mut self.next);
        self.next = Vec::new();
        all
    }

    /// Items kept, and the room of the two batches in items.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (
            self.next.len() + self.waiting.len(),
            self.next.capacity() + self.waiting.capacity(),
        )
    }
}
