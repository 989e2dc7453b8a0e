//! [`BitmapCids`]: the first CID design (Linux 6.3, af7f588d8f73): the lowest free CID is taken
//! from the bitmap under a per-space lock at every switch-in and given back at every
//! switch-out.

use super::mask::CidMask;
use super::task::{claim, Claim, Rqs, Task};
use super::{check_affinity, CidAllocator, CidError, CidState, Mode, MAX_CPUS, UNSET};
use crate::sync::{lock, Mutex};

struct Members {
    users: u32,
    next_id: u64,
}

/// The 6.3 design: a bitmap under a per-space lock, touched at every switch.
pub struct BitmapCids {
    cpus: usize,
    /// The per-space `cid_lock`: every switch-in and switch-out takes it.
    cid_lock: Mutex<()>,
    cids: CidMask,
    rqs: Rqs,
    members: Mutex<Members>,
}

impl BitmapCids {
    /// A space for `cpus` CPUs (clamped to `1..=64`).
    pub fn new(cpus: usize) -> BitmapCids {
        let cpus = cpus.clamp(1, MAX_CPUS);
        BitmapCids {
            cpus,
            cid_lock: Mutex::new(()),
            cids: CidMask::new(cpus as u32),
            rqs: Rqs::new(cpus),
            members: Mutex::new(Members {
                users: 0,
                next_id: 0,
            }),
        }
    }

    fn put(&self, task: &Task) {
        let mut state = task.state();
        if state.cid != UNSET {
            let _held = lock(&self.cid_lock);
            self.cids.put(state.cid);
        }
        state.cid = UNSET;
    }

    /// CIDs currently taken.
    pub fn cids_in_use(&self) -> u32 {
        self.cids.count()
    }
}

impl CidAllocator for BitmapCids {
    fn name(&self) -> &'static str {
        "bitmap"
    }

    fn cpus(&self) -> usize {
        self.cpus
    }

    fn fork(&self, affinity: u64) -> Result<Task, CidError> {
        check_affinity(affinity, self.cpus)?;
        let mut members = lock(&self.members);
        let task = Task::new(members.next_id, affinity);
        members.next_id += 1;
        members.users += 1;
        Ok(task)
    }

    fn exit(&self, task: &Task) -> Result<(), CidError> {
        let mut members = lock(&self.members);
        loop {
            let on_cpu = {
                let state = task.state();
                if state.exited {
                    return Err(CidError::UnknownTask);
                }
                state.on_cpu
            };
            if let Some(cpu) = on_cpu {
                let mut rq = self.rqs.lock(cpu);
                if !rq.curr.as_ref().is_some_and(|curr| curr.same(task)) {
                    continue;
                }
                rq.curr = None;
                task.state().on_cpu = None;
            } else if task.state().on_cpu.is_some() {
                continue;
            }
            break;
        }
        self.put(task);
        task.state().exited = true;
        members.users -= 1;
        Ok(())
    }

    fn switch(&self, cpu: usize, next: Option<&Task>) -> Result<Option<u32>, CidError> {
        if cpu >= self.cpus {
            return Err(CidError::BadCpu);
        }
        let mut rq = self.rqs.lock(cpu);
        let prev = match claim(&mut rq, cpu, next)? {
            Claim::AlreadyHere => return Ok(next.map(|task| task.state().cid)),
            Claim::Claimed { prev } => prev,
        };
        if let Some(prev) = prev {
            self.put(&prev);
        }
        Ok(next.map(|task| {
            let _held = lock(&self.cid_lock);
            // At most `cpus` tasks run, so a CID is free.
            let cid = self.cids.get(self.cpus as u32);
            task.state().cid = cid;
            cid
        }))
    }

    fn set_affinity(&self, task: &Task, affinity: u64) -> Result<(), CidError> {
        check_affinity(affinity, self.cpus)?;
        let mut state = task.state();
        if state.exited {
            return Err(CidError::UnknownTask);
        }
        state.affinity = affinity;
        Ok(())
    }

    fn run_deferred(&self) {}

    fn state(&self) -> CidState {
        let users = lock(&self.members).users;
        let running = (0..self.cpus)
            .filter_map(|cpu| {
                let rq = self.rqs.lock(cpu);
                rq.curr.as_ref().map(|task| (task.id(), task.state().cid))
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
