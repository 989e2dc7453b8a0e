//! The per-CPU CID word (`mm->pcpu_cid[cpu].cid`) and its lock-free transitions.
//!
//! A word holds a valid CID, the same CID with [`LAZY_PUT`] set, or [`UNSET`]. Who may change
//! it, and how:
//!
//! * the CPU's own switch path (its runqueue held) may do anything: store a CID into an unset
//!   word, and move a lazy-put word to unset (`mm_cid_put_lazy`, `mm_cid_get`) or any word to
//!   unset (`mm_cid_put`, at exit) with a compare-and-swap;
//! * anyone else (the scan, a migration towards another CPU) holds no lock of this CPU: it may
//!   only mark a valid word lazy-put, and then move it to unset, both with a compare-and-swap,
//!   and only after it saw, *after* the mark, that no task of the space runs on the CPU.
//!
//! The mark and the check of [`Pcpu::curr`] form a Dekker pair with the switch path, which
//! stores `curr` and then reads the word, each side with a full fence in between: at least one
//! side sees the other's store. Either the remote side sees a task running and leaves the mark
//! for that task to clear at its next switch, or the switch path sees the mark and takes the
//! word to unset itself (and allocates afresh). A CID a running task uses is never freed under
//! it.

use crate::cid::mask::CidMask;
use crate::sync::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The CID is still the CPU's, but whoever moves the word to [`UNSET`] first frees it
/// (`MM_CID_LAZY_PUT`, bit 31).
pub(super) const LAZY_PUT: u32 = 1 << 31;
/// No CID (`MM_CID_UNSET`, the kernel's -1).
pub(super) const UNSET: u32 = u32::MAX;

/// A word that holds no CID.
#[inline]
pub(super) fn is_unset(word: u32) -> bool {
    word == UNSET
}

/// A word whose CID is the CPU's, without the lazy-put mark (`mm_cid_is_valid`).
#[inline]
pub(super) fn is_valid(word: u32) -> bool {
    word & LAZY_PUT == 0
}

/// A word with the lazy-put mark (`mm_cid_is_lazy_put`).
#[inline]
pub(super) fn is_lazy_put(word: u32) -> bool {
    word & LAZY_PUT != 0 && !is_unset(word)
}

/// One CPU's CID state for the space (`struct mm_cid`), on its own cache line.
pub(super) struct Pcpu {
    /// The CID word.
    pub(super) cid: AtomicU32,
    /// The CID this CPU last allocated or received (`recent_cid`, 6.13): reused first, for
    /// cache locality. [`UNSET`] for none.
    pub(super) recent_cid: AtomicU32,
    /// The scan epoch at which a task of the space last used the CPU (`time`, a runqueue clock
    /// snapshot in the kernel).
    pub(super) time: AtomicU64,
    /// A task of the space runs on the CPU (`rq->curr->mm == mm && mm_cid_active`). Stored only
    /// by the CPU's switch path and exits, under its runqueue lock; read by anyone.
    pub(super) curr: AtomicBool,
    /// Switch-ins since the CPU's last tick. Only the switch path, under the runqueue lock,
    /// touches it.
    pub(super) switches: AtomicU32,
}

impl Pcpu {
    pub(super) fn new() -> Pcpu {
        Pcpu {
            cid: AtomicU32::new(UNSET),
            recent_cid: AtomicU32::new(UNSET),
            time: AtomicU64::new(0),
            curr: AtomicBool::new(false),
            switches: AtomicU32::new(0),
        }
    }

    /// Publishes whether a task of the space runs here, then fences before the caller reads the
    /// word: the switch path's half of the Dekker pair. The SeqCst fence pairs with the one in
    /// [`Pcpu::remote_clear`] (and in the migration's steal), which follows the lazy-put mark.
    pub(super) fn set_curr(&self, running: bool) {
        self.curr.store(running, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// At a switch-out: if a remote pass marked the word lazy-put while the task ran, the task
    /// frees the CID now (`mm_cid_put_lazy`). A valid word stays: the CPU keeps its CID.
    pub(super) fn put_lazy(&self, cids: &CidMask) {
        // Acquire pairs with the AcqRel compare-and-swap that marked the word.
        let word = self.cid.load(Ordering::Acquire);
        if is_lazy_put(word) && self.take(word) {
            cids.put(word & !LAZY_PUT);
        }
    }

    /// Moves the word from `word` to unset; false if it changed meanwhile (another side won).
    #[inline]
    pub(super) fn take(&self, word: u32) -> bool {
        // AcqRel: of the sides racing to unset one word, one wins, and it sees what the others
        // did before (the word's CID bit is then its to free or move).
        self.cid
            .compare_exchange(word, UNSET, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Takes whatever CID the word holds, lazy-put or not (`mm_cid_pcpu_unset`): the exit of
    /// the task running here, its runqueue held. The CID without its mark, or `None`.
    pub(super) fn unset(&self) -> Option<u32> {
        // Acquire, as in `put_lazy`.
        let mut word = self.cid.load(Ordering::Acquire);
        loop {
            if is_unset(word) {
                return None;
            }
            // AcqRel, as in `take`.
            match self
                .cid
                .compare_exchange(word, UNSET, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(word & !LAZY_PUT),
                Err(now) => word = now,
            }
        }
    }

    /// Marks a valid word lazy-put and, if no task of the space runs here, frees its CID
    /// (`sched_mm_cid_remote_clear`): the scan's transition, with no lock of this CPU.
    pub(super) fn remote_clear(&self, cids: &CidMask) {
        // Acquire pairs with the Release store of the CID by the switch path.
        let cid = self.cid.load(Ordering::Acquire);
        if !is_valid(cid) {
            return;
        }
        let Some(lazy) = self.mark_lazy(cid) else {
            return;
        };
        if self.curr.load(Ordering::Relaxed) {
            // The running task sees the mark at its switch-out and frees the CID then.
            return;
        }
        if self.take(lazy) {
            cids.put(cid);
        }
    }

    /// Marks the valid word `cid` lazy-put, then fences before the caller reads
    /// [`Pcpu::curr`]: the remote half of the Dekker pair (the SeqCst fence pairs with the one
    /// in [`Pcpu::set_curr`]). The marked word, or `None` if the word changed meanwhile.
    pub(super) fn mark_lazy(&self, cid: u32) -> Option<u32> {
        let lazy = cid | LAZY_PUT;
        // AcqRel, as in `take`.
        self.cid
            .compare_exchange(cid, lazy, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        fence(Ordering::SeqCst);
        Some(lazy)
    }
}
