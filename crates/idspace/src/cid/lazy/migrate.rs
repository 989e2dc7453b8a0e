//! Migration: a task that last ran on another CPU brings that CPU's CID along, if that CPU no
//! longer needs it (`sched_mm_cid_migrate_from`, `sched_mm_cid_migrate_to` and their two
//! helpers, 6.13 to 6.18). The source CPU's runqueue is not taken: the steal is the lazy-put
//! mark and the Dekker check of [`Pcpu::curr`](super::pcpu::Pcpu), as the scan's.

use super::pcpu::{is_unset, is_valid};
use super::SpaceState;
use crate::cid::UNSET as NO_CID;
use crate::lock::Locks;
use crate::sync::Ordering;

impl<L: Locks> SpaceState<L> {
    /// `task` switches in on `dst` (whose runqueue the caller holds) after it last ran on `src`.
    /// Keeps CIDs compact when few tasks move around many CPUs: the source CPU's CID moves to
    /// an unset destination, or goes back when the destination has one.
    pub(super) fn migrate_to(&self, dst: usize, src: usize, last_mm_cid: &mut u32) {
        let dst_pcpu = &self.pcpus[dst];
        // Relaxed: hints (the destination's own runqueue is held; its word leaves the unset
        // state only under it).
        let dst_cid_is_set = !is_unset(dst_pcpu.cid.load(Ordering::Relaxed))
            || !is_unset(dst_pcpu.recent_cid.load(Ordering::Relaxed));
        // With at least as many users as CPUs allowed, user space may expect CIDs up to the CPU
        // count anyway: a destination that has a CID keeps the source's too.
        if dst_cid_is_set
            && self.hot.users.load(Ordering::Relaxed)
                >= self.hot.nr_cpus_allowed.load(Ordering::Relaxed)
        {
            return;
        }
        let Some(cid) = self.fetch_cid(src, last_mm_cid) else {
            return;
        };
        let Some(cid) = self.try_steal_cid(src, last_mm_cid, cid) else {
            return;
        };
        if dst_cid_is_set {
            self.cids.put(cid);
            return;
        }
        self.snapshot_time(dst);
        // Release pairs with the Acquire loads of remote sides, as in `mm_cid_get`.
        dst_pcpu.cid.store(cid, Ordering::Release);
        dst_pcpu.recent_cid.store(cid, Ordering::Relaxed);
    }

    /// The source CPU's CID if the task was its last user there (`…_migrate_from_fetch_cid`).
    fn fetch_cid(&self, src: usize, last_mm_cid: &mut u32) -> Option<u32> {
        let last = *last_mm_cid;
        if last == NO_CID {
            return None;
        }
        let src_pcpu = &self.pcpus[src];
        // Acquire pairs with the Release store of the CID on the source CPU.
        let cid = src_pcpu.cid.load(Ordering::Acquire);
        if !is_valid(cid) || cid != last {
            return None;
        }
        // Another task of the space runs there: it keeps the CID (an early, unfenced look;
        // the steal below looks again after its mark).
        if src_pcpu.curr.load(Ordering::Relaxed) {
            *last_mm_cid = NO_CID;
            return None;
        }
        Some(cid)
    }

    /// Takes `cid` from the source CPU's word without its runqueue
    /// (`…_migrate_from_try_steal_cid`): mark it lazy-put, fence, and unset it only if no task
    /// of the space runs there; otherwise that task frees it at its switch-out.
    fn try_steal_cid(&self, src: usize, last_mm_cid: &mut u32, cid: u32) -> Option<u32> {
        let src_pcpu = &self.pcpus[src];
        let lazy = src_pcpu.mark_lazy(cid)?;
        if src_pcpu.curr.load(Ordering::Relaxed) {
            *last_mm_cid = NO_CID;
            return None;
        }
        if !src_pcpu.take(lazy) {
            return None;
        }
        src_pcpu
            .recent_cid
            .store(super::pcpu::UNSET, Ordering::Relaxed);
        Some(cid)
    }
}
