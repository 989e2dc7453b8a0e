//! Switch-in's CID: reuse the CPU's, else allocate from the bitmap lock-free, with the
//! `use_cid_lock` fallback for forward progress (`mm_cid_get`, `__mm_cid_get`,
//! `__mm_cid_try_get` of 6.13 to 6.18).

use super::pcpu::{is_lazy_put, is_valid, UNSET};
use super::SpaceState;
use crate::lock::Locks;
use crate::sync::{spin_wait, Ordering};

impl<L: Locks> SpaceState<L> {
    /// The CID of the task switching in on `cpu`, whose runqueue the caller holds
    /// (`mm_cid_get`). The common path: the CPU's word is valid, and it is reused as is.
    pub(super) fn mm_cid_get(&self, cpu: usize) -> u32 {
        let pcpu = &self.pcpus[cpu];
        // Acquire pairs with the AcqRel compare-and-swaps of remote sides.
        let word = pcpu.cid.load(Ordering::Acquire);
        if is_valid(word) {
            self.snapshot_time(cpu);
            return word;
        }
        if is_lazy_put(word) && pcpu.take(word) {
            // A remote pass marked it while no task ran here: the CID goes back.
            self.cids.put(word & !super::pcpu::LAZY_PUT);
        }
        let cid = self.allocate(cpu);
        // Release pairs with the Acquire loads of remote sides. Only this CPU's switch path
        // leaves the unset state, so a plain store suffices.
        pcpu.cid.store(cid, Ordering::Release);
        // Relaxed: a hint, read only by this CPU's switch path and migrations towards it.
        pcpu.recent_cid.store(cid, Ordering::Relaxed);
        cid
    }

    /// Records that a task of the space used `cpu` now (`mm_cid_snapshot_time`).
    pub(super) fn snapshot_time(&self, cpu: usize) {
        // Relaxed: the scan's "unused for a period" is a heuristic; a stale value only clears
        // or keeps a cached CID one scan early or late.
        let now = self.hot.epoch.load(Ordering::Relaxed);
        let time = &self.pcpus[cpu].time;
        if time.load(Ordering::Relaxed) != now {
            time.store(now, Ordering::Relaxed);
        }
    }

    /// A CID from the bitmap (`__mm_cid_get`): lock-free, unless a lost race made an earlier
    /// allocation set `use_cid_lock`; then allocations queue on `cid_lock` until the one that
    /// lost succeeds, so that it cannot lose forever.
    fn allocate(&self, cpu: usize) -> u32 {
        let held = if !self.hot.use_cid_lock.load(Ordering::Relaxed) {
            if let Some(cid) = self.try_get(cpu) {
                self.snapshot_time(cpu);
                return cid;
            }
            self.cid_lock.lock()
        } else {
            let held = self.cid_lock.lock();
            if let Some(cid) = self.try_get(cpu) {
                drop(held);
                self.snapshot_time(cpu);
                return cid;
            }
            held
        };
        // Relaxed, in the kernel's words "only program order matters": the flag steers newcomers
        // onto the lock; the lock itself orders what it protects.
        self.hot.use_cid_lock.store(true, Ordering::Relaxed);
        let cid = loop {
            if let Some(cid) = self.try_get(cpu) {
                break cid;
            }
            // A yield where the kernel relaxes: the thread that must free a CID may be
            // preempted here, where the kernel's remote side runs with interrupts off.
            spin_wait();
        };
        self.hot.use_cid_lock.store(false, Ordering::Relaxed);
        drop(held);
        self.snapshot_time(cpu);
        cid
    }

    /// One lock-free attempt (`__mm_cid_try_get`, 6.13 with 02d954c0): `None` when another
    /// allocation took the CID this one found free.
    fn try_get(&self, cpu: usize) -> Option<u32> {
        let hot = &self.hot;
        // Relaxed throughout: these are sizes and hints; the bitmap's own atomics decide who
        // owns a CID.
        let users = hot.users.load(Ordering::Relaxed);
        let allowed = hot.nr_cpus_allowed.load(Ordering::Relaxed);
        // Shrink the expansion cursor to min(CPUs allowed, users), so that the space grows
        // again from low CIDs.
        let bound = allowed.min(users);
        let mut max_nr_cid = hot.max_nr_cid.load(Ordering::Relaxed);
        while max_nr_cid > bound {
            match hot.max_nr_cid.compare_exchange(
                max_nr_cid,
                bound,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => max_nr_cid = bound,
                Err(now) => max_nr_cid = now,
            }
        }
        // The CPU's recent CID, if below the cursor (cache locality).
        let recent = self.pcpus[cpu].recent_cid.load(Ordering::Relaxed);
        if recent != UNSET && recent < max_nr_cid && self.cids.try_take(recent) {
            return Some(recent);
        }
        // Expand: claim the cursor's next CID while it is below both bounds.
        let mut cid = max_nr_cid;
        while cid < hot.nr_cpus_allowed.load(Ordering::Relaxed)
            && cid < hot.users.load(Ordering::Relaxed)
        {
            match hot.max_nr_cid.compare_exchange(
                cid,
                cid + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) if self.cids.try_take(cid) => return Some(cid),
                // Another CPU claimed the cursor, or the CID it gave is taken: look again.
                Ok(_) => {}
                Err(now) => cid = now,
            }
        }
        // The first free CID. The bitmap is only ever full below the allowed CPUs while a
        // remote side holds a CID it is freeing, without any lock: wait for it (yielding, as
        // above).
        let cid = loop {
            let cid = self.cids.first_free();
            if cid < hot.nr_cpus_allowed.load(Ordering::Relaxed) {
                break cid;
            }
            spin_wait();
        };
        self.cids.try_take(cid).then_some(cid)
    }
}
