//! CPUs as every CID design sees them: a runqueue per CPU (its current task and CID word, behind
//! a spin lock, as the kernel's `rq->lock` is), and the checks and claims every switch makes.
//!
//! # The switch's common path
//!
//! A switch on a CPU takes that CPU's lock (one compare-and-swap; unlocking is a Release
//! store), claims the next task (one compare-and-swap of its word, which also reads its CID),
//! stores the previous task's word (it leaves the CPU) and points the runqueue at the next task.
//! Nothing else is shared: no task lock, no reference count, and the runqueue is on a cache
//! line of its own.
//!
//! Lock order: a CPU's runqueue, then anything a design has. No path holds two runqueues; a
//! path that needs one it must not wait for (a mode change's walk) only tries it.

use core::ptr;
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use super::task::{Task, TaskInner, Word};
use super::{CidError, UNSET};
use crate::sync::{cpu_relax, spin_wait, AtomicBool, AtomicPtr, AtomicU32, Ordering};

/// Spins of a contended lock before it starts yielding the thread (the holder may be preempted:
/// a user-space "CPU" is a thread).
const SPINS_BEFORE_YIELD: u32 = 64;

/// A CPU's runqueue, as far as CIDs go. The fields are atomics only so that the lock needs no
/// cell: every access is Relaxed, under the lock.
pub(crate) struct Rq {
    locked: AtomicBool,
    /// The current task, or null (see [`RqGuard::curr`] for why the pointer is valid).
    curr: AtomicPtr<TaskInner>,
    /// The CPU's CID word (`mm_cid_pcpu::cid`); the designs that keep it here use it.
    cid: AtomicU32,
}

/// The runqueues, each on its own cache line.
pub(crate) struct Rqs(Box<[CachePadded<Rq>]>);

impl Rqs {
    pub(crate) fn new(cpus: usize) -> Rqs {
        Rqs((0..cpus)
            .map(|_| {
                CachePadded::new(Rq {
                    locked: AtomicBool::new(false),
                    curr: AtomicPtr::new(ptr::null_mut()),
                    cid: AtomicU32::new(UNSET),
                })
            })
            .collect())
    }

    /// Locks `cpu`'s runqueue.
    pub(crate) fn lock(&self, cpu: usize) -> RqGuard<'_> {
        let mut spins = 0;
        loop {
            if let Some(guard) = self.try_lock(cpu) {
                return guard;
            }
            // Relaxed: only a hint that the lock looks free; the compare-and-swap decides.
            while self.0[cpu].locked.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    cpu_relax();
                } else {
                    spin_wait();
                }
            }
        }
    }

    /// Locks `cpu`'s runqueue unless another thread holds it.
    pub(crate) fn try_lock(&self, cpu: usize) -> Option<RqGuard<'_>> {
        let rq = &*self.0[cpu];
        // Acquire pairs with the Release store that unlocks (`RqGuard::drop`): the holder sees
        // everything the previous holder did.
        rq.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| RqGuard(rq))
    }
}

/// A held runqueue lock.
pub(crate) struct RqGuard<'a>(&'a Rq);

impl RqGuard<'_> {
    /// The current task.
    #[inline]
    pub(crate) fn curr(&self) -> Option<&TaskInner> {
        // Relaxed: under the lock.
        let curr = self.0.curr.load(Ordering::Relaxed);
        // SAFETY: a non-null `curr` was stored by `set_curr` from a live task of this
        // runqueue's space, which the space's roster keeps alive until its exit; exit clears
        // `curr` under this lock before the task leaves the roster, and the space (which owns
        // the roster) outlives this guard. So the pointer is valid for the guard's lifetime.
        unsafe { curr.as_ref() }
    }

    #[inline]
    pub(crate) fn set_curr(&self, task: Option<&Task>) {
        let curr = task.map_or(ptr::null_mut(), |task| Arc::as_ptr(&task.0).cast_mut());
        // Relaxed: under the lock.
        self.0.curr.store(curr, Ordering::Relaxed);
    }

    /// The CPU's CID word.
    #[inline]
    pub(crate) fn cid(&self) -> u32 {
        // Relaxed: under the lock.
        self.0.cid.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_cid(&self, cid: u32) {
        // Relaxed: under the lock.
        self.0.cid.store(cid, Ordering::Relaxed);
    }
}

impl Drop for RqGuard<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire compare-and-swap in `Rqs::try_lock`.
        self.0.locked.store(false, Ordering::Release);
    }
}

/// What a switch does before any CID work: checks `next` and claims it for the CPU (so that no
/// other CPU can switch it in), and takes the current task off the CPU.
pub(crate) enum Claim {
    /// `next` already runs on this CPU: nothing to do. Its CID word.
    AlreadyHere(u32),
    /// `next` (if any) is claimed for this CPU; its CID word (`UNSET` without `next`).
    Claimed(u32),
}

/// Checks `next` and claims it for `cpu`, whose runqueue the caller holds: one compare-and-swap
/// of its word, which fails (without writing) if another CPU claims it, a slow path changes its
/// sleeping word, or it exits meanwhile; then it looks again.
pub(crate) fn claim_next(rq: &RqGuard<'_>, cpu: usize, next: &Task) -> Result<Claim, CidError> {
    let task = &*next.0;
    let allowed = task.affinity() & (1 << cpu) != 0;
    let mut word = task.word();
    loop {
        if word.cpu() == Some(cpu) {
            // Running here (with the runqueue held, it is this CPU's current task): nothing to
            // switch, but the affinity still rules.
            debug_assert!(rq.curr().is_some_and(|curr| ptr::eq(curr, task)));
            if !allowed {
                return Err(CidError::NotAllowed);
            }
            return Ok(Claim::AlreadyHere(word.cid()));
        }
        if word.exited() {
            return Err(CidError::UnknownTask);
        }
        if word.cpu().is_some() {
            return Err(CidError::RunningElsewhere);
        }
        if !allowed {
            return Err(CidError::NotAllowed);
        }
        match task.claim(word, cpu) {
            Ok(()) => return Ok(Claim::Claimed(word.cid())),
            Err(now) => word = now,
        }
    }
}

/// Checks and claims `next` for `cpu` with the runqueue held, then takes the previous task off
/// the CPU ([`leave`]).
pub(crate) fn claim(
    rq: &RqGuard<'_>,
    cpu: usize,
    next: Option<&Task>,
    switch_out: impl FnOnce(u32) -> u32,
) -> Result<Claim, CidError> {
    let mut cid = UNSET;
    if let Some(next) = next {
        match claim_next(rq, cpu, next)? {
            Claim::AlreadyHere(cid) => return Ok(Claim::AlreadyHere(cid)),
            Claim::Claimed(claimed) => cid = claimed,
        }
    }
    leave(rq, next, switch_out);
    Ok(Claim::Claimed(cid))
}

/// The previous task (if any) leaves the CPU, its CID word replaced by what `switch_out` makes
/// of it (a design that takes CIDs back at switch-out does it there, before another CPU can
/// claim the task), and `next` becomes the CPU's current task.
#[inline]
pub(crate) fn leave(rq: &RqGuard<'_>, next: Option<&Task>, switch_out: impl FnOnce(u32) -> u32) {
    if let Some(prev) = rq.curr() {
        // The word of a task running here: this lock's holder is its only writer.
        let word = prev.word();
        prev.store_exclusive(word.with_cid(switch_out(word.cid())).sleeping());
    }
    rq.set_curr(next);
}

/// Exit's common part: marks `task` exited and takes it off its CPU if it runs (the CPU becomes
/// idle), then runs `off` with its last CID word and the CPU it ran on (whose runqueue is still
/// held then: a design gives the task's CID back there).
///
/// A sleeping task exits by a compare-and-swap of its word, which a racing claim (or exit) may
/// win: then it looks again. A running task's word changes under its CPU's runqueue lock.
///
/// # Errors
/// [`CidError::UnknownTask`] if the task already exited (also when two exits race).
pub(crate) fn exit_task(
    rqs: &Rqs,
    task: &Task,
    off: impl FnOnce(u32, Option<usize>),
) -> Result<(), CidError> {
    let task = &*task.0;
    let mut word = task.word();
    loop {
        if word.exited() {
            return Err(CidError::UnknownTask);
        }
        match word.cpu() {
            None => match task.update_sleeping(word, Word::EXITED) {
                Ok(()) => {
                    off(word.cid(), None);
                    return Ok(());
                }
                Err(now) => word = now,
            },
            Some(cpu) => {
                let rq = rqs.lock(cpu);
                word = task.word();
                if word.cpu() != Some(cpu) {
                    continue; // it moved (or exited) between the look and the lock
                }
                rq.set_curr(None);
                task.store_exclusive(Word::EXITED);
                off(word.cid(), Some(cpu));
                return Ok(());
            }
        }
    }
}
