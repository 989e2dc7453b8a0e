//! Tasks and CPUs as every CID design sees them: a task's CID state behind its own lock, a CPU's
//! current task and CID behind the CPU's runqueue lock, and the checks every switch makes.
//!
//! Lock order: a CPU's runqueue, then a task. No path holds two tasks' locks at once.

use std::sync::Arc;

use super::{CidError, MAX_CPUS, UNSET};
use crate::sync::{lock, Mutex, MutexGuard};
use crossbeam_utils::CachePadded;

/// A task's CID state.
pub(crate) struct TaskState {
    /// The task's CID word (designs give the flag bits their meaning).
    pub(crate) cid: u32,
    /// The CPU the task runs on (or is being switched in on).
    pub(crate) on_cpu: Option<usize>,
    /// CPUs the task may run on.
    pub(crate) affinity: u64,
    pub(crate) exited: bool,
    /// The CPU the task last ran on, for designs that track migrations (the lazy design's
    /// `migrate_from_cpu`); the designs that do not leave it `None`.
    pub(crate) last_cpu: Option<usize>,
}

/// A space's identity: one allocation that the space and each of its tasks point at. Two spaces
/// never share one (it lives as long as the space or any of its tasks does), so whether a task
/// belongs to a space is a pointer comparison.
pub(crate) struct SpaceId(Arc<()>);

impl SpaceId {
    pub(crate) fn new() -> SpaceId {
        SpaceId(Arc::new(()))
    }

    /// Refuses a task that another space forked: its state (CPU, CID word) speaks of that
    /// space's CPUs and bitmap, so acting on it here would break both spaces.
    pub(crate) fn check(&self, task: &Task) -> Result<(), CidError> {
        if Arc::ptr_eq(&self.0, &task.0.space.0) {
            Ok(())
        } else {
            Err(CidError::ForeignTask)
        }
    }

    /// [`SpaceId::check`] for a switch's optional next task.
    pub(crate) fn check_next(&self, next: Option<&Task>) -> Result<(), CidError> {
        next.map_or(Ok(()), |task| self.check(task))
    }
}

pub(crate) struct TaskInner {
    id: u64,
    /// The space that forked the task, the only one that may act on it.
    space: SpaceId,
    pub(crate) state: Mutex<TaskState>,
}

/// A task of a CID space: returned by `fork`, passed to `switch`, `exit` and `set_affinity`.
/// Cheap to clone.
///
/// A task belongs to the space that forked it: another space refuses it with
/// [`CidError::ForeignTask`].
#[derive(Clone)]
pub struct Task(pub(crate) Arc<TaskInner>);

impl Task {
    /// A new task of `space` numbered `*next_id` (which moves on): every design's fork numbers
    /// tasks so.
    pub(crate) fn fork(space: &SpaceId, next_id: &mut u64, affinity: u64) -> Task {
        let task = Task::new(SpaceId(Arc::clone(&space.0)), *next_id, affinity);
        *next_id += 1;
        task
    }

    fn new(space: SpaceId, id: u64, affinity: u64) -> Task {
        Task(Arc::new(TaskInner {
            id,
            space,
            state: Mutex::new(TaskState {
                cid: UNSET,
                on_cpu: None,
                affinity,
                exited: false,
                last_cpu: None,
            }),
        }))
    }

    /// The task's number within its space (in fork order, from 0).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, TaskState> {
        lock(&self.0.state)
    }

    pub(crate) fn same(&self, other: &Task) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl core::fmt::Debug for Task {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Task({})", self.0.id)
    }
}

/// A CPU's runqueue, as far as CIDs go.
pub(crate) struct Rq {
    pub(crate) curr: Option<Task>,
    /// The CPU's CID word (`mm_cid_pcpu::cid`).
    pub(crate) cid: u32,
}

/// The runqueues, each on its own cache line.
pub(crate) struct Rqs(Box<[CachePadded<Mutex<Rq>>]>);

impl Rqs {
    pub(crate) fn new(cpus: usize) -> Rqs {
        Rqs((0..cpus)
            .map(|_| {
                CachePadded::new(Mutex::new(Rq {
                    curr: None,
                    cid: UNSET,
                }))
            })
            .collect())
    }

    pub(crate) fn lock(&self, cpu: usize) -> MutexGuard<'_, Rq> {
        lock(&self.0[cpu])
    }

    pub(crate) fn get(&self, cpu: usize) -> &Mutex<Rq> {
        &self.0[cpu]
    }
}

/// The affinity mask (a bit per CPU) of the CPUs in `cpus`, for a space of `ncpus` CPUs.
///
/// # Errors
/// [`CidError::BadCpu`] if the list is empty or names a CPU at or beyond `ncpus` or at or
/// beyond [`MAX_CPUS`] (a mask has 64 bits, so CPU 64 and above cannot be named at all).
///
/// ```
/// use idspace::cid::{affinity_mask, CidError};
///
/// assert_eq!(affinity_mask(&[0, 2], 4), Ok(0b101));
/// assert_eq!(affinity_mask(&[4], 4), Err(CidError::BadCpu));
/// assert_eq!(affinity_mask(&[70], 128), Err(CidError::BadCpu));
/// ```
pub fn affinity_mask(cpus: &[usize], ncpus: usize) -> Result<u64, CidError> {
    let mut mask = 0u64;
    for &cpu in cpus {
        if cpu >= ncpus.min(MAX_CPUS) {
            return Err(CidError::BadCpu);
        }
        mask |= 1 << cpu;
    }
    if mask == 0 {
        return Err(CidError::BadCpu);
    }
    Ok(mask)
}

/// Mask of all `cpus` CPUs.
pub(crate) fn all_cpus(cpus: usize) -> u64 {
    if cpus >= 64 {
        u64::MAX
    } else {
        (1u64 << cpus) - 1
    }
}

/// What a switch does before any CID work: checks `next` and claims it for `cpu` (so that no
/// other CPU can switch it in), and takes the current task off the CPU.
pub(crate) enum Claim {
    /// `next` already runs on this CPU: nothing to do.
    AlreadyHere,
    /// `next` is claimed for this CPU; the previous task (if any) was switched out.
    Claimed,
}

/// Checks and claims `next` for `cpu` with the runqueue held. `switch_out` runs on the previous
/// task's state in the same lock hold that takes it off the CPU, before another CPU can claim
/// it (a design that takes CIDs back at switch-out must do it there).
pub(crate) fn claim(
    rq: &mut Rq,
    cpu: usize,
    next: Option<&Task>,
    switch_out: impl FnOnce(&mut TaskState),
) -> Result<Claim, CidError> {
    if let Some(next) = next {
        if let Claim::AlreadyHere = claim_next(rq, cpu, next, &mut next.state())? {
            return Ok(Claim::AlreadyHere);
        }
    }
    leave(rq, next, switch_out);
    Ok(Claim::Claimed)
}

/// The first half of [`claim`], for a design that switches `next` in while it holds the task's
/// lock (`state`, locked by the caller): checks `next` and marks it running on `cpu`.
pub(crate) fn claim_next(
    rq: &Rq,
    cpu: usize,
    next: &Task,
    state: &mut TaskState,
) -> Result<Claim, CidError> {
    if rq.curr.as_ref().is_some_and(|curr| curr.same(next)) {
        // Already running here: nothing to switch, but the affinity still rules.
        if state.affinity & (1 << cpu) == 0 {
            return Err(CidError::NotAllowed);
        }
        return Ok(Claim::AlreadyHere);
    }
    if state.exited {
        return Err(CidError::UnknownTask);
    }
    if state.on_cpu.is_some() {
        return Err(CidError::RunningElsewhere);
    }
    if state.affinity & (1 << cpu) == 0 {
        return Err(CidError::NotAllowed);
    }
    state.on_cpu = Some(cpu);
    Ok(Claim::Claimed)
}

/// The second half of [`claim`]: the previous task leaves the CPU (after `switch_out` on its
/// state) and `next` becomes the CPU's current task.
pub(crate) fn leave(rq: &mut Rq, next: Option<&Task>, switch_out: impl FnOnce(&mut TaskState)) {
    if let Some(prev) = rq.curr.take() {
        let mut state = prev.state();
        switch_out(&mut state);
        state.on_cpu = None;
    }
    rq.curr = next.cloned();
}

/// Exit's common part: takes `task` off its CPU if it runs (the CPU becomes idle), with the
/// runqueue and task locks taken in order, runs `off` on the task's state in that lock hold (a
/// design gives the task's CID back there; `on_cpu` still names the CPU the task ran on, whose
/// runqueue is held), and marks the task exited.
///
/// # Errors
/// [`CidError::UnknownTask`] if the task already exited (also when two exits race).
pub(crate) fn exit_task(
    rqs: &Rqs,
    task: &Task,
    off: impl FnOnce(&mut TaskState),
) -> Result<(), CidError> {
    loop {
        let on_cpu = {
            let state = task.state();
            if state.exited {
                return Err(CidError::UnknownTask);
            }
            state.on_cpu
        };
        let mut rq = on_cpu.map(|cpu| rqs.lock(cpu));
        let mut state = task.state();
        if state.exited {
            return Err(CidError::UnknownTask);
        }
        if state.on_cpu != on_cpu {
            continue; // it moved between the look and the locks
        }
        if let Some(rq) = rq.as_mut() {
            rq.curr = None;
        }
        off(&mut state);
        state.on_cpu = None;
        state.exited = true;
        return Ok(());
    }
}
