//! [`BitmapCids`]: the first CID design (Linux 6.3, af7f588d8f73): the lowest free CID is taken
//! from the bitmap under a per-space lock at every switch-in and given back at every
//! switch-out.

use super::mask::CidMask;
use super::runqueue::{exit_task, leave, switch_out, Claim, Rqs};
use super::task::{Roster, SpaceId, Task};
use super::{check_affinity, check_cpu_count, CidAllocator, CidError, CidState, Mode, UNSET};
use crate::lock::{DefaultLocks, Locks, Mutex};
use crate::sync::spin_wait;

struct Members {
    users: u32,
    roster: Roster,
}

/// The 6.3 design: a bitmap under a per-space lock, touched at every switch. A baseline for
/// [`Rework`](super::Rework).
///
/// A switch-in takes the lowest free CID, a switch-out gives it back: a CID follows the CPU's
/// current task, not the task.
///
/// ```
/// use idspace::cid::{BitmapCids, CidAllocator, CidError, Mode};
///
/// let space = BitmapCids::new(2)?;
/// let (a, b) = (space.fork(0b11)?, space.fork(0b11)?);
/// assert_eq!(space.switch(0, Some(&a))?, Some(0));
/// assert_eq!(space.switch(1, Some(&b))?, Some(1));
/// assert_eq!(space.switch(0, Some(&b)), Err(CidError::RunningElsewhere));
/// space.switch(0, None)?; // `a` switches out: CID 0 goes back at once
/// assert_eq!(space.cids_in_use(), 1);
/// // On CPU 1, `b` switches out and `a` in: the lowest free CID again.
/// assert_eq!(space.switch(1, Some(&a))?, Some(0));
/// let state = space.state();
/// assert_eq!((state.mode, state.users, state.max_cids), (Mode::None, 2, 2));
/// assert_eq!(state.running, [(a.id(), 0)]);
/// # Ok::<(), CidError>(())
/// ```
pub struct BitmapCids<L: Locks = DefaultLocks> {
    space: SpaceId,
    cpus: usize,
    /// The per-space `cid_lock`: every switch-in and switch-out takes it.
    cid_lock: Mutex<L, ()>,
    cids: CidMask,
    rqs: Rqs,
    members: Mutex<L, Members>,
}

impl BitmapCids {
    /// A space for `cpus` CPUs (worker slots), with no task.
    ///
    /// # Errors
    /// [`CidError::BadCpuCount`] unless `cpus` is in `1..=`[`MAX_CPUS`](super::MAX_CPUS).
    pub fn new(cpus: usize) -> Result<BitmapCids, CidError> {
        BitmapCids::with_locks(cpus)
    }
}

impl<L: Locks> BitmapCids<L> {
    /// A space for `cpus` CPUs on the locks `L` (see [`lock`](crate::lock)):
    /// [`BitmapCids::new`] on other locks.
    ///
    /// # Errors
    /// As [`BitmapCids::new`].
    pub fn with_locks(cpus: usize) -> Result<Self, CidError> {
        let cpus = check_cpu_count(cpus)?;
        Ok(BitmapCids {
            space: SpaceId::new(),
            cpus,
            cid_lock: crate::lock::mutex::<L, _>(()),
            cids: CidMask::new(cpus as u32),
            rqs: Rqs::new(cpus),
            members: crate::lock::mutex::<L, _>(Members {
                users: 0,
                roster: Roster::new(),
            }),
        })
    }

    /// Gives a CID taken from a task back. The caller took it out of the task's state in the
    /// lock hold that took the task off its CPU, so a CPU that switches the task in again
    /// cannot be handed a CID this call is about to free; and it holds the runqueue of that
    /// CPU, so taken CIDs never outnumber busy CPUs.
    fn put(&self, cid: u32) {
        if cid != UNSET {
            let _held = self.cid_lock.lock();
            self.cids.put(cid);
        }
    }

    /// The lowest free CID, under `cid_lock`; waits (without the lock, so that switch-outs can
    /// give CIDs back) while a switch-out elsewhere is still returning one.
    fn get(&self) -> u32 {
        loop {
            let taken = {
                let _held = self.cid_lock.lock();
                self.cids.try_get(self.cpus as u32)
            };
            if let Some(cid) = taken {
                return cid;
            }
            spin_wait();
        }
    }
}

impl<L: Locks> CidAllocator for BitmapCids<L> {
    fn name(&self) -> &'static str {
        "bitmap"
    }

    fn cpus(&self) -> usize {
        self.cpus
    }

    fn fork(&self, affinity: u64) -> Result<Task, CidError> {
        check_affinity(affinity, self.cpus)?;
        let mut members = self.members.lock();
        let task = members.roster.fork(&self.space, affinity);
        members.users += 1;
        Ok(task)
    }

    fn exit(&self, task: &Task) -> Result<(), CidError> {
        self.space.check(task)?;
        let mut members = self.members.lock();
        // A switch-out: the CID goes back before the CPU is free, so that a switch-in there
        // always finds one (at most one CID per busy CPU is taken).
        exit_task(&self.rqs, task, |cid, _| self.put(cid))?;
        members.roster.remove(task);
        members.users -= 1;
        Ok(())
    }

    fn switch(&self, cpu: usize, next: Option<&Task>) -> Result<Option<u32>, CidError> {
        self.space.check_next(next)?;
        if cpu >= self.cpus {
            return Err(CidError::BadCpu);
        }
        let (rq, claim) = self.rqs.lock_switch(cpu, next)?;
        if let Claim::AlreadyHere(cid) = claim {
            return Ok(Some(cid));
        }
        let mut released = UNSET;
        switch_out(&rq, |cid| {
            released = cid;
            UNSET
        });
        leave(&rq, next);
        self.put(released);
        Ok(next.map(|task| {
            let cid = self.get();
            // `next` runs here now: this runqueue's holder is its word's only writer.
            task.0.set_cid_locked(cid);
            cid
        }))
    }

    fn set_affinity(&self, task: &Task, affinity: u64) -> Result<(), CidError> {
        self.space.check(task)?;
        check_affinity(affinity, self.cpus)?;
        task.set_affinity(affinity)
    }

    fn run_deferred(&self) {}

    fn cids_in_use(&self) -> u32 {
        self.cids.count()
    }

    fn state(&self) -> CidState {
        let users = self.members.lock().users;
        let running = (0..self.cpus)
            .filter_map(|cpu| {
                let rq = self.rqs.lock(cpu);
                rq.curr().map(|task| (task.id(), task.word().cid()))
            })
            .collect();
        CidState {
            mode: Mode::None,
            users,
            max_cids: self.cpus as u32,
            running,
        }
    }
}
