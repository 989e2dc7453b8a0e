//! [`LazyCids`]: the design before the rewrite (Linux 6.4 to 6.18), documented on the type.

use super::mask::CidMask;
use super::task::{claim, exit_task, Claim, Rqs, SpaceId, Task};
use super::{check_affinity, check_cpu_count, CidAllocator, CidError, CidState, Mode, UNSET};
use crate::sync::{lock, AtomicU32, Mutex, Ordering};

struct Members {
    users: u32,
    allowed: u64,
    next_id: u64,
}

/// The pre-rewrite design (Linux 6.4 to 6.18): CPUs cache CIDs across context switches and
/// give them back lazily; a periodic compaction pass takes CIDs back from CPUs that no longer
/// use them. A baseline for [`Rework`](super::Rework).
///
/// * Switch-in on a CPU reuses the CPU's cached CID if it is below the budget
///   `max_nr_cid = min(users, CPUs allowed)` (the `recent_cid` reuse of 6.13/6.14); otherwise it
///   drops it and takes the lowest free CID. Switch-out does nothing: the CPU keeps its CID
///   (`MM_CID_LAZY_PUT`).
/// * The compaction pass ([`CidAllocator::run_deferred`], the kernel's `task_mm_cid_work` every
///   100 ms) drops the cached CID of every CPU that runs no task of the space, so that the
///   survivors' CIDs can move down at their next switch-in (seed `003_68d6ea7a8c8aa882.txt`).
///
/// We model the pass's "unused for 100 ms" as "idle when the pass runs", and replace the
/// kernel's lock-free cmpxchg transitions on the per-CPU word with the CPU's runqueue lock.
pub struct LazyCids {
    space: SpaceId,
    cpus: usize,
    cids: CidMask,
    rqs: Rqs,
    members: Mutex<Members>,
    max_nr_cid: AtomicU32,
}

impl LazyCids {
    /// A space for `cpus` CPUs (worker slots), with no task.
    ///
    /// # Errors
    /// [`CidError::BadCpuCount`] unless `cpus` is in `1..=`[`MAX_CPUS`](super::MAX_CPUS).
    pub fn new(cpus: usize) -> Result<LazyCids, CidError> {
        let cpus = check_cpu_count(cpus)?;
        Ok(LazyCids {
            space: SpaceId::new(),
            cpus,
            cids: CidMask::new(cpus as u32),
            rqs: Rqs::new(cpus),
            members: Mutex::new(Members {
                users: 0,
                allowed: 0,
                next_id: 0,
            }),
            max_nr_cid: AtomicU32::new(0),
        })
    }

    fn update(&self, members: &Members) {
        let budget = members.users.min(members.allowed.count_ones()).max(1);
        // Relaxed: a hint for switch-ins; any value keeps the ABI rules.
        self.max_nr_cid.store(budget, Ordering::Relaxed);
    }
}

impl CidAllocator for LazyCids {
    fn name(&self) -> &'static str {
        "lazy"
    }

    fn cpus(&self) -> usize {
        self.cpus
    }

    fn fork(&self, affinity: u64) -> Result<Task, CidError> {
        check_affinity(affinity, self.cpus)?;
        let mut members = lock(&self.members);
        let task = Task::fork(&self.space, &mut members.next_id, affinity);
        members.users += 1;
        members.allowed |= affinity;
        self.update(&members);
        Ok(task)
    }

    fn exit(&self, task: &Task) -> Result<(), CidError> {
        self.space.check(task)?;
        let mut members = lock(&self.members);
        // If it runs, its CPU becomes idle and keeps its CID until compaction.
        exit_task(&self.rqs, task, |state| state.cid = UNSET)?;
        members.users -= 1;
        self.update(&members);
        Ok(())
    }

    fn switch(&self, cpu: usize, next: Option<&Task>) -> Result<Option<u32>, CidError> {
        self.space.check_next(next)?;
        if cpu >= self.cpus {
            return Err(CidError::BadCpu);
        }
        let mut rq = self.rqs.lock(cpu);
        match claim(&mut rq, cpu, next, |_| {})? {
            Claim::AlreadyHere => return Ok(next.map(|task| task.state().cid)),
            Claim::Claimed => {}
        }
        let Some(next) = next else {
            return Ok(None);
        };
        let budget = self.max_nr_cid.load(Ordering::Relaxed);
        if rq.cid == UNSET || rq.cid >= budget {
            if rq.cid != UNSET {
                self.cids.put(rq.cid);
            }
            rq.cid = self.cids.get(budget);
        }
        next.state().cid = rq.cid;
        Ok(Some(rq.cid))
    }

    fn set_affinity(&self, task: &Task, affinity: u64) -> Result<(), CidError> {
        self.space.check(task)?;
        check_affinity(affinity, self.cpus)?;
        let mut members = lock(&self.members);
        {
            let mut state = task.state();
            if state.exited {
                return Err(CidError::UnknownTask);
            }
            state.affinity = affinity;
        }
        members.allowed |= affinity;
        self.update(&members);
        Ok(())
    }

    /// The compaction pass: CPUs that run no task of the space give their cached CID back.
    fn run_deferred(&self) {
        for cpu in 0..self.cpus {
            let mut rq = self.rqs.lock(cpu);
            if rq.curr.is_none() && rq.cid != UNSET {
                self.cids.put(rq.cid);
                rq.cid = UNSET;
            }
        }
    }

    fn cids_in_use(&self) -> u32 {
        self.cids.count()
    }

    fn state(&self) -> CidState {
        let (users, budget) = {
            let members = lock(&self.members);
            (members.users, self.max_nr_cid.load(Ordering::Relaxed))
        };
        let running = (0..self.cpus)
            .filter_map(|cpu| {
                let rq = self.rqs.lock(cpu);
                rq.curr.as_ref().map(|task| (task.id(), task.state().cid))
            })
            .collect();
        CidState {
            mode: Mode::None,
            users,
            max_cids: budget,
            running,
        }
    }
}
