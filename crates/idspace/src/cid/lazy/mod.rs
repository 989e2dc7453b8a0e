//! [`LazyCids`]: the CID design of Linux 6.4 to 6.18, which the rewrite replaced; its design is
//! documented on the type.
//!
//! * `pcpu`: the per-CPU CID word and its lock-free transitions (the lazy-put mark, the
//!   Dekker pair against the CPU's current task);
//! * `get`: a switch-in's CID, with the `use_cid_lock` fallback;
//! * `migrate`: a migrating task's CID steal from its previous CPU;
//! * `scan`: the periodic scan, where it runs, and what it costs.

mod get;
mod migrate;
mod pcpu;
mod scan;

use crate::prelude::*;
use crossbeam_utils::CachePadded;

use self::pcpu::Pcpu;
pub use self::scan::{
    ScanPlacement, ScanStats, KERNEL_SCAN_PERIOD, MAX_SCAN_PERIOD, TICK_SWITCHES,
};
use super::mask::CidMask;
use super::runqueue::{exit_task, leave, Claim, Rqs};
use super::task::{Roster, SpaceId, Task};
use super::{check_affinity, check_cpu_count, CidAllocator, CidError, CidState, Mode};
use crate::lock::{DefaultLocks, Locks, Mutex};
use crate::sync::{Arc, AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The pre-rewrite design (Linux 6.4 to 6.18, from 223baf9d17f2 with 6.13's `recent_cid` and
/// `max_nr_cid`): CPUs cache CIDs across context switches, other CPUs take them back without
/// locks, and a periodic scan returns the ones no task uses. A baseline for
/// [`Rework`](super::Rework).
///
/// ```
/// use std::time::Duration;
/// use idspace::cid::{CidAllocator, LazyCids, ScanPlacement};
///
/// // The scan only when asked, so that the CIDs are reproducible.
/// let space = LazyCids::with_scan(4, ScanPlacement::OnDemand)?;
/// let a = space.fork(0b1111)?;
/// let b = space.fork(0b1111)?;
/// assert_eq!(space.switch(0, Some(&a))?, Some(0));
/// assert_eq!(space.switch(1, Some(&b))?, Some(1));
/// space.switch(1, None)?; // CPU 1 goes idle and keeps CID 1 (lazy put)
/// assert_eq!(space.cpu_cids(), vec![Some(0), Some(1), None, None]);
/// space.run_deferred(); // CPU 1 was used since the previous scan: it keeps CID 1
/// space.run_deferred(); // now unused for a period: CID 1 goes back
/// assert_eq!(space.cpu_cids(), vec![Some(0), None, None, None]);
/// assert_eq!(space.scan_stats().invocations, 2);
///
/// // The kernel's placement: a tick on the switch path runs the scan every 100 ms.
/// let kernel = LazyCids::new(4)?;
/// assert_eq!(kernel.placement(), ScanPlacement::Tick { period: Duration::from_millis(100) });
/// # Ok::<(), idspace::cid::CidError>(())
/// ```
///
/// # The kernel's design
///
/// Each CPU has a CID word for the space (`mm->pcpu_cid[cpu]`): a CID, the same CID marked
/// `LAZY_PUT`, or unset. The space's bitmap says which CIDs are taken.
///
/// * **Switch-out** does nothing to the CPU's CID unless a remote side marked it lazy-put while
///   the task ran: then the switch takes the word to unset and frees the CID
///   (`mm_cid_put_lazy`).
/// * **Switch-in** reuses the CPU's word when it is valid: the common path, no atomic
///   read-modify-write. Otherwise it frees a lazy-put CID, and allocates: the CPU's
///   `recent_cid` if below the cursor `max_nr_cid`, else the cursor's next CID while below
///   `min(users, CPUs allowed)`, else the first free bit below the CPUs allowed. A lost race
///   for a bit sets `use_cid_lock`, which sends every newcomer through `cid_lock` until the
///   loser got a CID: lock-free in the common case, starvation-free under contention.
/// * **Migration**: a task that switches in on another CPU than it last ran on brings that
///   CPU's CID along when it was that CPU's last user, and the destination has none (or, with
///   fewer users than CPUs allowed, drops it): the source word is marked lazy-put, and taken
///   only if no task of the space runs there.
/// * **The scan** (`task_mm_cid_work`), every 100 ms: CPUs unused for a period, then CPUs
///   whose CID is at or above the number of CIDs taken, lose their CID, by the same lazy-put
///   mark and check. It takes no runqueue lock. Where it runs is the question of Gabriele
///   Monaco's "sched: Move task_mm_cid_work to mm delayed work": [`ScanPlacement`].
/// * **Exit** of a running task unsets its CPU's word whatever its state (`mm_cid_put`).
///
/// # Invariants
///
/// * A CPU's word leaves the unset state only on that CPU's switch path (its runqueue held);
///   a remote side may only mark a valid word lazy-put and take a lazy-put word to unset.
/// * Every CID in the bitmap is in exactly one CPU's word (valid or lazy-put), or held by one
///   side between taking a word to unset and freeing or moving its CID.
/// * A remote side frees a CID only after it marked the word and then, past a full fence, saw
///   no task of the space on the CPU; the switch path stores whether a task runs and then,
///   past a full fence, reads the word. So a running task's CID is never freed: both ABI rules
///   hold (CIDs are bits of a bitmap sized by the CPUs, and one CPU runs one task).
///
/// # Where we differ from the kernel, and why
///
/// * A CPU is a worker slot; a switch holds its runqueue lock, as in every design here, which
///   also guards the words of the tasks that last ran there (a task switched in elsewhere
///   migrates under both runqueues' locks). Remote sides take no runqueue lock.
/// * Migration is handled when the task switches in on a new CPU: the simulator has no
///   enqueue, which is where the kernel calls `sched_mm_cid_migrate_to`.
/// * "Unused for 100 ms" is counted in scans: a CPU not used since before the previous scan.
///   The kernel compares runqueue clocks; scans are a period apart either way, and a scan
///   epoch costs the switch path one shared read instead of a clock read.
/// * The tick is every [`TICK_SWITCHES`] switch-ins of a CPU rather than a timer interrupt.
/// * `cid_lock` and `use_cid_lock` are per space, not global: spaces here are independent.
/// * `users` counts live tasks (the kernel's `mm_users` also counts temporary references), and
///   the CPUs allowed are the union of the tasks' affinities (6.13's `mm_cpus_allowed`).
/// * Where the kernel relaxes the CPU while it waits for a CID that a remote side is freeing,
///   we yield: in user space that side may be preempted.
pub struct LazyCids<L: Locks = DefaultLocks> {
    space: SpaceId,
    shared: Arc<SpaceState<L>>,
    #[cfg(all(feature = "std", not(loom)))]
    _worker: Option<scan::Worker>,
}

/// The space's state, shared with the scan's worker thread.
struct SpaceState<L: Locks> {
    cpus: usize,
    cids: CidMask,
    pcpus: Box<[CachePadded<Pcpu>]>,
    rqs: Rqs,
    hot: CachePadded<Hot>,
    /// Serialises allocations while `use_cid_lock` is set.
    cid_lock: Mutex<L, ()>,
    members: Mutex<L, Members>,
    scan: scan::ScanState,
}

/// What switch-ins read: the allocation bounds, the cursor, the fallback flag, the scan epoch.
struct Hot {
    /// Live tasks (`mm_users`).
    users: AtomicU32,
    /// CPUs in the union of the affinities (`mm->nr_cpus_allowed`).
    nr_cpus_allowed: AtomicU32,
    /// The expansion cursor (`mm->max_nr_cid`).
    max_nr_cid: AtomicU32,
    /// Allocations go through `cid_lock` (`use_cid_lock`).
    use_cid_lock: AtomicBool,
    /// Scans so far: the clock of the CPUs' `time` snapshots.
    epoch: AtomicU64,
}

/// Fork/exit bookkeeping, under the members lock.
struct Members {
    users: u32,
    allowed: u64,
    roster: Roster,
}

impl LazyCids {
    /// A space for `cpus` CPUs (worker slots), with no task, whose scan runs as in the kernel:
    /// at a tick on the switch path, every [`KERNEL_SCAN_PERIOD`].
    ///
    /// # Errors
    /// [`CidError::BadCpuCount`] unless `cpus` is in `1..=`[`MAX_CPUS`](super::MAX_CPUS).
    pub fn new(cpus: usize) -> Result<LazyCids, CidError> {
        LazyCids::with_scan(
            cpus,
            ScanPlacement::Tick {
                period: KERNEL_SCAN_PERIOD,
            },
        )
    }

    /// A space whose scan runs where `placement` says.
    ///
    /// # Errors
    /// [`CidError::BadCpuCount`] unless `cpus` is in `1..=`[`MAX_CPUS`](super::MAX_CPUS);
    /// [`CidError::BadScanPeriod`] for a zero period or one above [`MAX_SCAN_PERIOD`]; [`CidError::ScanThread`] if the worker
    /// thread of [`ScanPlacement::Worker`] cannot start.
    pub fn with_scan(cpus: usize, placement: ScanPlacement) -> Result<LazyCids, CidError> {
        LazyCids::with_locks(cpus, placement)
    }
}

impl<L: Locks> LazyCids<L> {
    /// A space whose scan runs where `placement` says, on the locks `L` (see
    /// [`lock`](crate::lock)): [`LazyCids::with_scan`] on other locks.
    ///
    /// # Errors
    /// As [`LazyCids::with_scan`].
    pub fn with_locks(cpus: usize, placement: ScanPlacement) -> Result<Self, CidError> {
        let cpus = check_cpu_count(cpus)?;
        if placement
            .period()
            .is_some_and(|period| period.is_zero() || period > MAX_SCAN_PERIOD)
        {
            return Err(CidError::BadScanPeriod);
        }
        let shared = Arc::new(SpaceState {
            cpus,
            cids: CidMask::new(cpus as u32),
            pcpus: (0..cpus).map(|_| CachePadded::new(Pcpu::new())).collect(),
            rqs: Rqs::new(cpus),
            hot: CachePadded::new(Hot {
                users: AtomicU32::new(0),
                nr_cpus_allowed: AtomicU32::new(0),
                max_nr_cid: AtomicU32::new(0),
                use_cid_lock: AtomicBool::new(false),
                epoch: AtomicU64::new(0),
            }),
            cid_lock: crate::lock::mutex::<L, _>(()),
            members: crate::lock::mutex::<L, _>(Members {
                users: 0,
                allowed: 0,
                roster: Roster::new(),
            }),
            scan: scan::ScanState::new(placement),
        });
        #[cfg(all(feature = "std", not(loom)))]
        let worker = match placement {
            ScanPlacement::Worker { period } => Some(
                scan::Worker::start(Arc::clone(&shared), period)
                    .map_err(|_| CidError::ScanThread)?,
            ),
            _ => None,
        };
        Ok(LazyCids {
            space: SpaceId::new(),
            shared,
            #[cfg(all(feature = "std", not(loom)))]
            _worker: worker,
        })
    }

    /// Where the space's scan runs.
    pub fn placement(&self) -> ScanPlacement {
        self.shared.scan.placement
    }

    /// What the space's scans cost so far.
    pub fn scan_stats(&self) -> ScanStats {
        self.shared.scan.stats()
    }

    /// The CID each CPU holds (valid or marked lazy-put), by CPU: the cache the scan and
    /// migrations take back. A snapshot; CPUs may change it meanwhile.
    pub fn cpu_cids(&self) -> Vec<Option<u32>> {
        self.shared
            .pcpus
            .iter()
            .map(|pcpu| {
                // Acquire pairs with the Release stores of CIDs.
                let word = pcpu.cid.load(Ordering::Acquire);
                (!pcpu::is_unset(word)).then_some(word & !pcpu::LAZY_PUT)
            })
            .collect()
    }
}

impl<L: Locks> SpaceState<L> {
    /// Publishes the allocation bounds after fork, exit or an affinity change.
    fn publish(&self, members: &Members) {
        // Relaxed: bounds read by switch-ins as hints; the bitmap decides ownership.
        self.hot.users.store(members.users, Ordering::Relaxed);
        self.hot
            .nr_cpus_allowed
            .store(members.allowed.count_ones(), Ordering::Relaxed);
    }
}

impl<L: Locks> CidAllocator for LazyCids<L> {
    fn name(&self) -> &'static str {
        "lazy"
    }

    fn cpus(&self) -> usize {
        self.shared.cpus
    }

    fn fork(&self, affinity: u64) -> Result<Task, CidError> {
        let shared = &*self.shared;
        check_affinity(affinity, shared.cpus)?;
        let mut members = shared.members.lock();
        let task = members.roster.fork(&self.space, affinity);
        members.users += 1;
        members.allowed |= affinity;
        shared.publish(&members);
        Ok(task)
    }

    fn exit(&self, task: &Task) -> Result<(), CidError> {
        self.space.check(task)?;
        let shared = &*self.shared;
        let mut members = shared.members.lock();
        exit_task(&shared.rqs, task, |_, on_cpu| {
            if let Some(cpu) = on_cpu {
                // The task exits on its CPU (`sched_mm_cid_exit_signals`): no task of the space
                // runs there any more, then the CPU's CID goes back whatever its state.
                let pcpu = &shared.pcpus[cpu];
                pcpu.set_curr(false);
                if let Some(cid) = pcpu.unset() {
                    shared.cids.put(cid);
                }
            }
        })?;
        members.roster.remove(task);
        members.users -= 1;
        shared.publish(&members);
        Ok(())
    }

    fn switch(&self, cpu: usize, next: Option<&Task>) -> Result<Option<u32>, CidError> {
        self.space.check_next(next)?;
        let shared = &*self.shared;
        if cpu >= shared.cpus {
            return Err(CidError::BadCpu);
        }
        let (rq, claim) = shared.rqs.lock_switch(cpu, next)?;
        let last_mm_cid = match claim {
            Claim::AlreadyHere(cid) => return Ok(Some(cid)),
            Claim::Claimed(cid) => cid,
        };
        // The previous task's CID word stays as `last_mm_cid`: a hint for its next migration.
        let had_prev = rq.curr().is_some();
        leave(&rq, next);
        let pcpu = &shared.pcpus[cpu];
        if had_prev != next.is_some() {
            // Whether a task of the space runs here changes: the Dekker half of the switch path
            // (a switch between two tasks of the space needs no fence, as in the kernel).
            pcpu.set_curr(next.is_some());
        }
        if had_prev {
            shared.snapshot_time(cpu);
            pcpu.put_lazy(&shared.cids);
        }
        let Some(next) = next else {
            return Ok(None);
        };
        let cid = {
            let mut last_mm_cid = last_mm_cid;
            if let Some(src) = next.0.replace_last_cpu(cpu) {
                if src != cpu {
                    shared.migrate_to(cpu, src, &mut last_mm_cid);
                }
            }
            let cid = shared.mm_cid_get(cpu);
            // `next` runs here now: this runqueue's holder is its word's only writer.
            next.0.set_cid_locked(cid);
            cid
        };
        let scan_now = shared.tick(cpu);
        drop(rq);
        if scan_now {
            // The task_work: run before the task goes back to user space, not under the
            // runqueue lock.
            shared.scan();
        }
        Ok(Some(cid))
    }

    fn set_affinity(&self, task: &Task, affinity: u64) -> Result<(), CidError> {
        self.space.check(task)?;
        let shared = &*self.shared;
        check_affinity(affinity, shared.cpus)?;
        let mut members = shared.members.lock();
        task.set_affinity(affinity)?;
        members.allowed |= affinity;
        shared.publish(&members);
        Ok(())
    }

    /// One scan, whatever the placement (the replay's `compact`, tests).
    fn run_deferred(&self) {
        self.shared.scan();
    }

    fn cids_in_use(&self) -> u32 {
        self.shared.cids.count()
    }

    fn state(&self) -> CidState {
        let shared = &*self.shared;
        let users = shared.members.lock().users;
        let hot = &shared.hot;
        // Relaxed: a snapshot.
        let budget = hot
            .users
            .load(Ordering::Relaxed)
            .min(hot.nr_cpus_allowed.load(Ordering::Relaxed));
        let running = (0..shared.cpus)
            .filter_map(|cpu| {
                let rq = shared.rqs.lock(cpu);
                rq.curr().map(|task| (task.id(), task.word().cid()))
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
