//! [`Rework`]: the MM CID rewrite (Linux 6.19), in user space. Its design is documented on the
//! type, where `cargo doc` shows it.

use super::mask::CidMask;
use super::runqueue::{exit_task, is_curr, leave, Claim, RqGuard, Rqs};
use super::task::{all_cpus, Roster, SpaceId, Task};
use super::{
    check_affinity, check_cpu_count, user_cid, CidAllocator, CidError, CidState, Mode, ONCPU,
    TRANSIT, UNSET,
};
use crate::lock::{DefaultLocks, Locks, Mutex};
use crate::sync::{spin_wait, AtomicU32, Ordering};
use crossbeam_utils::CachePadded;

const MODE_TASK: u32 = 0;
const MODE_TO_TASK: u32 = TRANSIT;
const MODE_CPU: u32 = ONCPU;
const MODE_TO_CPU: u32 = ONCPU | TRANSIT;

/// A CID word that a task owns (`cid_on_task`).
#[inline]
fn task_owned(word: u32) -> bool {
    word < TRANSIT
}

/// A CID word that a CPU owns (`cid_on_cpu`).
#[inline]
fn cpu_owned(word: u32) -> bool {
    word & (ONCPU | UNSET) == ONCPU
}

/// The read-mostly words every switch-in reads: on their own cache line.
struct Hot {
    mode: AtomicU32,
    max_cids: AtomicU32,
}

/// Fork/exit state, under the space's mutex: the tasks (the kernel's thread list; a map so that
/// exit unlinks in constant time).
struct Members {
    roster: Roster,
}

/// Constraints, under the constraints lock (also taken by affinity changes).
struct Constraints {
    users: u32,
    allowed: u64,
    pcpu_thrs: u32,
    deferred: bool,
}

/// The rewrite's CID space for a fixed number of CPUs: the recommended CID design.
///
/// A "CPU" is a worker slot and [`CidAllocator::switch`] a context switch on it: the CID it
/// returns is below the CPU count and unique among the space's running tasks, so it can index
/// per-CPU-like data.
///
/// ```
/// use idspace::cid::{CidAllocator, CidError, Rework};
///
/// let space = Rework::new(4)?;
/// let a = space.fork(space.all_cpus())?;
/// let b = space.fork(space.all_cpus())?;
/// assert_eq!(space.switch(0, Some(&a))?, Some(0));
/// assert_eq!(space.switch(1, Some(&b))?, Some(1));
/// space.switch(0, None)?; // CPU 0 goes idle
///
/// // A task belongs to the space that forked it.
/// let other = Rework::new(4)?;
/// assert_eq!(other.switch(0, Some(&a)), Err(CidError::ForeignTask));
///
/// space.exit(&a)?;
/// space.exit(&b)?; // it was running on CPU 1, which becomes idle
/// assert_eq!(space.cids_in_use(), 0);
/// assert_eq!(Rework::new(100).err(), Some(CidError::BadCpuCount { cpus: 100 }));
/// # Ok::<(), CidError>(())
/// ```
///
/// # Ownership modes
///
/// * **Per-task** while `users <= max_cids`: every task owns a CID (a bit in the space's
///   bitmap). The CPU's slot only caches the CID of the task running on it.
/// * **Per-CPU** once `users > max_cids`: CPUs own CIDs (their slot holds `cid | ONCPU`) and the
///   task running on a CPU borrows the CPU's CID. Tasks own nothing.
/// * Back to per-task when `users < pcpu_thrs`.
///
/// `opt = min(users, CPUs in the union of affinities)` (the union only grows),
/// `max_cids = min(opt + opt/4, cpus)` and, recorded when per-CPU mode starts (and on affinity
/// growth), `pcpu_thrs = max(min(opt - opt/4, cpus/2), 1)`. The `cpus/2` cap is what keeps the
/// switch back from exhausting the CID space while CPUs still hold CIDs.
///
/// # Who does what
///
/// * **Fork and exit** are serialised by the space's mutex (the kernel's `mm_cid.mutex`). They
///   count users under the constraints lock (`mm_cid.lock`) and, when the mode must change, do
///   the fixup themselves: the mode word goes to the transition state (`ONCPU|TRANSIT` towards
///   per-CPU, `TRANSIT` towards per-task), a walk hands the CIDs over, and the final mode is
///   stored. In per-task mode a forked task gets a CID at once; in per-CPU mode nothing.
/// * **Towards per-CPU** (fork), the walk visits the tasks: a running task's CID moves to its
///   CPU, a sleeping task's CID is dropped.
/// * **Towards per-task** (exit, or deferred), the walk visits the CPUs: a CPU's CID moves to
///   the task running there, or is dropped.
/// * **Affinity growth** that would allow the switch back is deferred to
///   [`CidAllocator::run_deferred`] (the kernel's worker), unless a fork or exit gets there first.
/// * **Switch-out** does nothing. **Switch-in** reads its CPU's slot and the mode; in the common
///   case it copies one word (task to CPU slot in per-task mode, CPU slot to task in per-CPU
///   mode). Otherwise it takes over, drops or allocates a CID so that ownership matches the mode
///   it read, and compacts: a CID at or above `max_cids` is exchanged for a lower free one.
///
/// Switch-ins never wait for a mode change: whichever mode they read, the walk still to come
/// (or a later switch-in) fixes what they did, and every CID a running task sees is a bitmap
/// bit that it or its CPU holds alone, so the two ABI rules hold throughout.
///
/// # The switch's common path
///
/// A task's CID state is one atomic word the task owns (its CID word, its runqueue, whether it
/// exited), written only by the holder of its runqueue's lock, as the kernel changes a task's
/// scheduling state under `task_rq_lock`; whether it runs is whether it is its runqueue's
/// current task. So a switch on a CPU of a task of that CPU's runqueue takes the runqueue lock
/// (the scheduler's, which the kernel's switch holds too: one compare-and-swap, and a store to
/// unlock), reads the task's word, the mode and the budget, stores the task's CID into the CPU's
/// slot and makes it the current task. Switch-out only leaves the CPU: one Release store that
/// clears the runqueue's current task, without its lock (in the kernel the switch-out is part
/// of the switch-in of the next task, under the lock the scheduler holds anyway; here a CPU
/// may go idle between the two, and taking the lock only to say so cost a compare-and-swap per
/// switch that the kernel's CID code does not pay). No task lock, no reference count, no shared
/// cache line beyond the space's read-mostly mode and budget.
///
/// What that costs, measured as the process hooks run it (a 1-worker ping-pong, each pair a
/// process, under callgrind): about 70 instructions per switch-in and a store per switch-out.
/// The kernel's CID code adds no atomic read-modify-write to a switch, since the scheduler
/// holds `rq->lock` already; our runtime's switch takes no lock the CID code could share, so
/// the space has its own, and its compare-and-swap was most of what the rework added: of
/// 18 ns per switch over a runtime without hooks (on the lab's shared 2-core machine), a build
/// whose lock took no compare-and-swap (unsound, for the measurement only) added 7. So the lock is *biased* (see `runqueue`): a scheduler thread bound to its CPU
/// ([`bind_current_thread`](super::bind_current_thread), which the process runtime's workers
/// call) takes that CPU's runqueue locks by a plain store and two loads once it has taken them
/// 64 times in a row, and any other locker (a walk, a remote exit, a migration) revokes the
/// bias with one `membarrier(2)` call first, which makes the bias holder's store and load
/// ordered. Each revocation doubles the run the next bias needs (up to 65,536 locks), so a
/// CPU whose tasks keep migrating stops being biased rather than costing a call per
/// migration: an HTTP service on the runtime made several hundred calls a second before that
/// bound, and none after it. The lab's `process` experiment made about 600 in its whole run.
/// The rest is kept small by inlining: [`CidAllocator::switch`] and the lock's uncontended
/// path are inlined into the caller (the waits, migrations and fixups stay out of line); as
/// calls, with the guard and the result returned through memory, the switch-in took half again
/// as many instructions.
///
/// How the slow paths meet the fast path (the Acquire/Release pairs):
///
/// * **Walks** visit every task under its runqueue's lock, even a task without a
///   CID: a switch-in that takes that lock after the visit reads the mode stored before the
///   walk (the lock's Release/Acquire), and one that held it before is done, its CID moved to
///   the CPU. The mode word's Release stores pair with the switch-in's Acquire load.
/// * **Exit** takes the task's runqueue lock and marks the word exited; a switch-in under that
///   lock refuses it.
/// * **Switch-out** clears the runqueue's current task with a Release store, paired with the
///   Acquire load of every lock holder's read of it: a walk, exit or migration that reads the
///   CPU idle also sees what the task did with its CID, before it drops the CID or hands it
///   on; one that still reads the task there acts as if the switch-out came just after it.
/// * **Migration** (a task switched in on another CPU than its runqueue's) moves the word to the
///   new runqueue with both locks held (taken in CPU order). Readers outside any lock find a
///   task's runqueue with an Acquire load of the word (pairing with the Release stores), lock
///   it, and check the word still names it.
///
/// # Where we differ from the kernel, and why
///
/// * A task is not queued on one runqueue: any CPU may switch any task in. A task belongs to
///   the runqueue of the CPU it last ran on (fork spreads new tasks over their allowed CPUs);
///   switching it in elsewhere migrates it first.
/// * A switch-in that finds no free CID gives its claim and the runqueue lock back and starts
///   over, instead of spinning under the lock as `mm_get_cid` does. In the kernel, a fixup's
///   `task_rq_lock` of a sleeping task could wait on a CPU whose switch-in spun for a CID that
///   only the fixup would free (the live lock fixed after merge, 4327fb13, by marking CIDs
///   `TRANSIT` in both directions). Here no runqueue lock's holder waits for anything a walk
///   holds, so walks simply take the locks, and CIDs need no per-CID `TRANSIT` mark; the mode
///   word keeps its transition states.
pub struct Rework<L: Locks = DefaultLocks> {
    space: SpaceId,
    cpus: usize,
    cids: CidMask,
    hot: CachePadded<Hot>,
    rqs: Rqs,
    members: Mutex<L, Members>,
    constraints: Mutex<L, Constraints>,
}

impl Rework {
    /// A space for `cpus` CPUs (worker slots), with no task.
    ///
    /// # Errors
    /// [`CidError::BadCpuCount`] unless `cpus` is in `1..=`[`MAX_CPUS`](super::MAX_CPUS).
    pub fn new(cpus: usize) -> Result<Rework, CidError> {
        Rework::with_locks(cpus)
    }
}

impl<L: Locks> Rework<L> {
    /// A space for `cpus` CPUs on the locks `L` (see [`lock`](crate::lock)): [`Rework::new`]
    /// on other locks.
    ///
    /// # Errors
    /// As [`Rework::new`].
    pub fn with_locks(cpus: usize) -> Result<Self, CidError> {
        let cpus = check_cpu_count(cpus)?;
        Ok(Rework {
            space: SpaceId::new(),
            cpus,
            cids: CidMask::new(cpus as u32),
            hot: CachePadded::new(Hot {
                mode: AtomicU32::new(MODE_TASK),
                max_cids: AtomicU32::new(0),
            }),
            rqs: Rqs::new(cpus),
            members: crate::lock::mutex::<L, _>(Members {
                roster: Roster::new(),
            }),
            constraints: crate::lock::mutex::<L, _>(Constraints {
                users: 0,
                allowed: 0,
                pcpu_thrs: 1,
                deferred: false,
            }),
        })
    }

    /// `(opt, max_cids)` for `users` tasks allowed on the CPUs of `allowed`.
    fn limits(&self, users: u32, allowed: u64) -> (u32, u32) {
        let opt = users.min(allowed.count_ones());
        (opt, (opt + opt / 4).min(self.cpus as u32))
    }

    fn threshold(&self, opt: u32) -> u32 {
        (opt - opt / 4).min(self.cpus as u32 / 2).max(1)
    }

    /// Recomputes the budget after `users` changed; returns the mode to switch to, if any.
    fn update(&self, constraints: &mut Constraints) -> Option<u32> {
        let (opt, max) = self.limits(constraints.users, constraints.allowed);
        self.set_max_cids(max);
        // Only fork/exit/deferred work (under the members mutex, which the caller holds) store
        // the mode.
        let mode = self.hot.mode.load(Ordering::Relaxed);
        if mode == MODE_TASK && constraints.users > max {
            constraints.pcpu_thrs = self.threshold(opt);
            return Some(MODE_CPU);
        }
        if mode == MODE_CPU && constraints.users < constraints.pcpu_thrs {
            constraints.deferred = false;
            return Some(MODE_TASK);
        }
        None
    }

    /// Publishes the budget, writing the hot cache line only when it changes: every switch-in
    /// reads that line, and forks and exits that leave the budget alone should not take it away
    /// from them.
    fn set_max_cids(&self, max: u32) {
        // Relaxed: switch-ins read the budget without ordering; a stale value only delays
        // compaction by a switch. Only fork/exit/affinity paths (under the constraints lock)
        // store it.
        if self.hot.max_cids.load(Ordering::Relaxed) != max {
            self.hot.max_cids.store(max, Ordering::Relaxed);
        }
    }

    fn set_mode(&self, mode: u32) {
        // Release pairs with the Acquire load in `schedin`: a switch-in that reads the new mode
        // also sees what the switching context did before (the user count, the budget).
        self.hot.mode.store(mode, Ordering::Release);
    }

    /// Switches the whole space to `target`, with the members mutex held.
    fn switch_mode(&self, members: &Members, target: u32) {
        if target == MODE_CPU {
            self.set_mode(MODE_TO_CPU);
            self.fixup_tasks_to_cpus(members.roster.tasks());
        } else {
            self.set_mode(MODE_TO_TASK);
            self.fixup_cpus_to_tasks();
        }
        self.set_mode(target);
    }

    /// Towards per-CPU: running tasks' CIDs move to their CPUs, sleeping tasks' are dropped.
    fn fixup_tasks_to_cpus<'t>(&self, tasks: impl Iterator<Item = &'t Task>) {
        for task in tasks {
            self.fix_task(task);
        }
    }

    /// One task of the walk towards per-CPU, under its runqueue's lock as the kernel's walk
    /// is under `task_rq_lock`. Waiting for that lock is safe: its holders never wait for
    /// anything the walk holds (a switch-in without a free CID gives the lock back).
    ///
    /// Taking the lock for every task, even one without a CID, also orders the visit against a
    /// switch-in of the task: one that comes after takes the lock after this visit and so reads
    /// the new mode (it takes no CID of its own); one that came before is done when the walk
    /// gets the lock, and what it took moves to the CPU.
    fn fix_task(&self, task: &Task) {
        let (rq, word) = self.rqs.lock_task(&task.0);
        let cid = word.cid();
        if !task_owned(cid) {
            return;
        }
        if is_curr(&rq, &task.0) {
            // Running on its runqueue's CPU: the CID moves to the CPU.
            rq.set_cid(cid | ONCPU);
            task.0.set_cid_locked(cid | ONCPU);
        } else {
            task.0.set_cid_locked(UNSET);
            self.cids.put(cid);
        }
    }

    /// Towards per-task: each CPU's CID moves to the task running there, or is dropped.
    fn fixup_cpus_to_tasks(&self) {
        for cpu in 0..self.cpus {
            self.fix_cpu(cpu);
        }
    }

    /// One CPU of the walk towards per-task, under its runqueue's lock.
    fn fix_cpu(&self, cpu: usize) {
        let rq = self.rqs.lock(cpu);
        if !cpu_owned(rq.cid()) {
            return;
        }
        let cid = user_cid(rq.cid());
        match rq.curr() {
            // The current task's word: this runqueue's holder is its only writer.
            Some(task) => {
                let tcid = task.word().cid();
                if task_owned(tcid) {
                    // The task got its own during the transition: the CPU's goes back.
                    self.cids.put(cid);
                    rq.set_cid(tcid);
                } else {
                    task.set_cid_locked(cid);
                    rq.set_cid(cid);
                }
            }
            None => {
                self.cids.put(cid);
                rq.set_cid(UNSET);
            }
        }
    }

    /// A free CID below `max` if there is one, else any free one (`mm_get_cid` without its
    /// spin); `None` if none is free now.
    fn pool_cid(&self, max: u32) -> Option<u32> {
        self.cids
            .try_get(max)
            .or_else(|| self.cids.try_get(self.cpus as u32))
    }

    /// Exchanges `cid` for a free one below `max`, if there is one (`mm_cid_converge`).
    fn converge(&self, cid: u32, max: u32) -> u32 {
        if cid < max {
            return cid;
        }
        match self.cids.try_get(max) {
            Some(lower) => {
                self.cids.put(cid);
                lower
            }
            None => cid,
        }
    }

    /// Switch-in of `next`, claimed for this CPU (whose runqueue `rq` is held) with the CID
    /// word `tcid`; the CID word it gets, or `None` if it needs a CID and none is free (the
    /// caller then gives the claim back and waits without the lock).
    ///
    /// The common path (per-task mode, the task owns a CID below the budget, the CPU owns
    /// none) reads the mode, the budget and the CPU's slot, and stores the task's CID into the
    /// slot: no atomic read-modify-write and no store outside the CPU's runqueue (the kernel's
    /// `mm_cid_from_task` fast path). In per-CPU mode the common path (the CPU owns a CID below
    /// the budget, the task none) copies the CPU's CID into the task's word, which it stores
    /// only when it changes (`mm_cid_from_cpu`): kept out of the cold slow path, as an
    /// oversubscribed space switches this way every time.
    #[inline]
    fn schedin(&self, rq: &RqGuard<'_>, next: &Task, tcid: u32) -> Option<u32> {
        // Acquire pairs with the Release stores in `set_mode`.
        let mode = self.hot.mode.load(Ordering::Acquire);
        let max = self.hot.max_cids.load(Ordering::Relaxed);
        let cpu_cid = rq.cid();
        if mode & ONCPU == 0 && task_owned(tcid) && tcid < max && !cpu_owned(cpu_cid) {
            if cpu_cid != tcid {
                rq.set_cid(tcid);
            }
            return Some(tcid);
        }
        // The per-CPU mode's common path (`mm_cid_from_cpu`): the CPU owns a CID within the
        // budget and the task owns none; it borrows the CPU's. Oversubscribed spaces (more
        // tasks than CPUs) switch this way every time.
        if mode == MODE_CPU && cpu_owned(cpu_cid) && !task_owned(tcid) && user_cid(cpu_cid) < max {
            if tcid != cpu_cid {
                next.0.set_cid_locked(cpu_cid);
            }
            return Some(cpu_cid);
        }
        self.schedin_slow(rq, next, tcid, mode, max)
    }

    /// The rest of [`Rework::schedin`]: takes over, drops or allocates a CID so that ownership
    /// matches the mode read, and compacts. Changes nothing when it returns `None`.
    #[cold]
    fn schedin_slow(
        &self,
        rq: &RqGuard<'_>,
        next: &Task,
        tcid: u32,
        mode: u32,
        max: u32,
    ) -> Option<u32> {
        let cpu_cid = rq.cid();
        let cid = if mode & ONCPU != 0 {
            // Per-CPU: the CPU owns, the task borrows.
            let owned = if cpu_owned(cpu_cid) {
                if task_owned(tcid) {
                    // Not yet visited by the walk: a task keeps no CID in per-CPU mode.
                    self.cids.put(tcid);
                }
                user_cid(cpu_cid)
            } else if task_owned(tcid) {
                tcid
            } else {
                self.pool_cid(max)?
            };
            self.converge(owned, max) | ONCPU
        } else {
            // Per-task: the task owns, the CPU slot caches.
            let owned = if task_owned(tcid) {
                if cpu_owned(cpu_cid) {
                    // Not yet visited by the walk back: the CPU's CID is not needed.
                    self.cids.put(user_cid(cpu_cid));
                }
                tcid
            } else if cpu_owned(cpu_cid) {
                user_cid(cpu_cid)
            } else {
                self.pool_cid(max)?
            };
            self.converge(owned, max)
        };
        rq.set_cid(cid);
        if cid != tcid {
            // `next` runs here now: its word is this runqueue's.
            next.0.set_cid_locked(cid);
        }
        Some(cid)
    }
}

impl<L: Locks> CidAllocator for Rework<L> {
    fn name(&self) -> &'static str {
        "rework"
    }

    fn cpus(&self) -> usize {
        self.cpus
    }

    fn fork(&self, affinity: u64) -> Result<Task, CidError> {
        check_affinity(affinity, self.cpus)?;
        let mut members = self.members.lock();
        let task = members.roster.fork(&self.space, affinity);
        let switch = {
            let mut constraints = self.constraints.lock();
            constraints.users += 1;
            constraints.allowed |= affinity;
            self.update(&mut constraints)
        };
        match switch {
            // The new task has no CID; the walk moves the others' to their CPUs.
            Some(MODE_CPU) => self.switch_mode(&members, MODE_CPU),
            Some(target) => {
                self.switch_mode(&members, target);
                self.give_cid(&task);
            }
            None if self.hot.mode.load(Ordering::Relaxed) == MODE_TASK => self.give_cid(&task),
            None => {}
        }
        Ok(task)
    }

    fn exit(&self, task: &Task) -> Result<(), CidError> {
        self.space.check(task)?;
        let mut members = self.members.lock();
        exit_task(&self.rqs, task, |cid, _| {
            if task_owned(cid) {
                self.cids.put(cid);
            }
        })?;
        members.roster.remove(task);
        let switch = {
            let mut constraints = self.constraints.lock();
            constraints.users -= 1;
            self.update(&mut constraints)
        };
        if let Some(target) = switch {
            self.switch_mode(&members, target);
        }
        Ok(())
    }

    // Always inlined into the caller's switch (its waits, migrations and mode fixups are out
    // of line): the switch-out (`None`) then folds to one store, and the switch-in's result
    // does not go through memory; as a call, the switch-in took half again as many
    // instructions (saved registers, the result written and read back).
    #[inline(always)]
    fn switch(&self, cpu: usize, next: Option<&Task>) -> Result<Option<u32>, CidError> {
        self.space.check_next(next)?;
        if cpu >= self.cpus {
            return Err(CidError::BadCpu);
        }
        if next.is_none() {
            // Switch-out does nothing but leave the CPU: the previous task keeps (or drops, at
            // its next switch-in) what it has. One store, without the runqueue's lock.
            self.rqs.vacate(cpu);
            return Ok(None);
        }
        loop {
            let (rq, claim) = self.rqs.lock_switch(cpu, next)?;
            // The switch-in first: it needs nothing from the previous task.
            let cid = match (next, claim) {
                (_, Claim::AlreadyHere(tcid)) => return Ok(Some(user_cid(tcid))),
                (None, Claim::Claimed(_)) => None,
                (Some(task), Claim::Claimed(tcid)) => match self.schedin(&rq, task, tcid) {
                    Some(cid) => Some(user_cid(cid)),
                    None => {
                        // No CID free: a walk or exit in progress will free one. Give the claim
                        // back (nothing to undo: the task is not yet current here; a migrated
                        // task stays on this runqueue, asleep) and wait without the lock, which
                        // that walk may need (`runqueue`: never hold one and wait).
                        drop(rq);
                        spin_wait();
                        continue;
                    }
                },
            };
            // Switch-out does nothing: the previous task keeps (or drops, at its next
            // switch-in) what it has; it only leaves the CPU (its word says so).
            leave(&rq, next);
            return Ok(cid);
        }
    }

    fn set_affinity(&self, task: &Task, affinity: u64) -> Result<(), CidError> {
        self.space.check(task)?;
        check_affinity(affinity, self.cpus)?;
        task.set_affinity(affinity)?;
        let mut constraints = self.constraints.lock();
        if constraints.allowed | affinity == constraints.allowed {
            return Ok(());
        }
        constraints.allowed |= affinity;
        let (opt, max) = self.limits(constraints.users, constraints.allowed);
        self.set_max_cids(max);
        if self.hot.mode.load(Ordering::Relaxed) & ONCPU != 0 {
            constraints.pcpu_thrs = self.threshold(opt);
            if constraints.users < constraints.pcpu_thrs {
                // The switch back needs the walk, which cannot run here (the kernel is inside
                // the scheduler): defer it.
                constraints.deferred = true;
            }
        }
        Ok(())
    }

    fn run_deferred(&self) {
        let members = self.members.lock();
        let switch = {
            let mut constraints = self.constraints.lock();
            let due = constraints.deferred
                && self.hot.mode.load(Ordering::Relaxed) == MODE_CPU
                && constraints.users < constraints.pcpu_thrs;
            constraints.deferred = false;
            due
        };
        if switch {
            self.switch_mode(&members, MODE_TASK);
        }
    }

    fn cids_in_use(&self) -> u32 {
        self.cids.count()
    }

    fn state(&self) -> CidState {
        let members = self.members.lock();
        let users = self.constraints.lock().users;
        let mode = if self.hot.mode.load(Ordering::Relaxed) & ONCPU != 0 {
            Mode::Cpu
        } else {
            Mode::Task
        };
        let running = (0..self.cpus)
            .filter_map(|cpu| {
                let rq = self.rqs.lock(cpu);
                rq.curr()
                    .map(|task| (task.id(), user_cid(task.word().cid())))
            })
            .collect();
        drop(members);
        CidState {
            mode,
            users,
            max_cids: self.hot.max_cids.load(Ordering::Relaxed),
            running,
        }
    }
}

impl<L: Locks> Rework<L> {
    fn give_cid(&self, task: &Task) {
        let max = self.hot.max_cids.load(Ordering::Relaxed);
        // No other thread can reach the task yet: fork has not returned it, and walks wait
        // for the members mutex that fork holds.
        task.0.set_cid_locked(self.cids.get(max));
    }

    /// Mask of all the space's CPUs, for `fork`.
    pub fn all_cpus(&self) -> u64 {
        all_cpus(self.cpus)
    }
}
