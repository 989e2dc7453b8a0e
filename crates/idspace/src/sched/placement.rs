//! Where a woken task runs: the kernel's `select_task_rq_fair` for a task runtime.
//!
//! A wakeup made by a task while it is being polled is a *sync* wakeup (`WF_SYNC`: the waker
//! will most likely return `Pending` right after, as a pipe writer blocks on the next read). Its
//! wakee goes into the waker's worker's *next slot* and runs as soon as the waker's poll
//! returns, on the same worker: no queue lock, no other thread, no notification (tokio's LIFO
//! slot, Go's `runnext`, the kernel's `wake_affine` with `WF_SYNC`). A task already in the slot
//! is displaced to the back of the worker's run queue; only then, and only if some worker is
//! idle, is that worker notified, so that it can steal (tokio #8065: notifying on every local
//! wakeup cost 8.5% CPU and up to a third of the throughput).
//!
//! Two rules keep the slot honest:
//!
//! * **The starvation cap.** A worker runs at most [`MAX_NEXT_POLLS`] tasks in a row from its
//!   slot; then the slot's task goes to the back of the run queue and the worker takes the
//!   front (tokio's `MAX_LIFO_POLLS_PER_TICK`, #5712). Two tasks waking each other forever would
//!   otherwise hold the worker for good.
//! * **`wake_wide`.** A waker that keeps waking different tasks (a fan-out: a message thread,
//!   a hackbench sender) stacks them all on its own worker if every one goes to the slot. The
//!   kernel counts `wakee_flips`, the times a task's wakee differed from its last one, decayed
//!   over time, and turns affine placement off once they exceed the LLC size. Each task here
//!   carries a flips score (see [`Wakees`]); above [`WIDE_FLIPS`] its wakeups skip the slot.
//!
//! Every other wakeup (one from a thread outside the runtime, a timer firing between polls, a
//! wide waker's) is placed as before: the wakee's last worker if it is idle, else the first
//! idle worker after it (`select_idle_sibling`), else the less loaded of the waker's worker and
//! the last one (`wake_affine_weight`); a wide waker's wakee then stays on the waker's worker
//! whatever the loads (below). Once a remote target is chosen, the runtime's
//! [`Policy`](super::Policy) decides how the wakeup travels there.
//!
//! **With no worker idle, a wide waker's wakee stays with the waker** ([`select_wide`]). The
//! kernel's `wake_wide` also asks the wakee to flip, and a hackbench receiver, waking nobody
//! but the odd writer, never does: the kernel does not find hackbench's senders wide, and pulls
//! their receivers towards the sender's CPU (`wake_affine`). Our `wake_wide` looks at the waker
//! only (so that a schbench message task, which the kernel's rule also calls affine, spreads
//! its workers over the idle workers), and so calls the senders wide. Sending their wakees to
//! the less loaded of two busy workers (a coin toss between two busy queues' lengths) kept
//! every group of hackbench split over both workers for the whole run: a receiver
//! drained its pipe on one CPU while the senders filled it on the other, and every message
//! moved the pipe's lock and buffer lines between CPUs. Keeping the wakee with its waker keeps
//! communicating tasks together (tokio keeps every wakeup made on a worker local); an idle
//! worker still gets the wakee first, and a worker that runs dry steals (`balance.rs`). On the
//! lab's `-g 4 -l 250` messaging (2 workers, alternated runs on a quiet machine) our CPU per
//! message went from about 1.3x tokio's to about 1.05-1.1x; ties or a one-task bias towards
//! the waker in the load test kept most of the cost. Wakeups made between polls (timers, I/O
//! delivery) and from outside keep the load test: no waker is about to sleep there.
//!
//! [`Placement::Remote`] turns the slot off, never chooses the waker's own worker when another
//! exists, and turns balancing off (a steal would pull the wakee back to its waker's worker):
//! every wakeup then crosses workers and its wakee runs there, as before the slot and stealing
//! existed, so that the lab can still compare the policies on the path they differ on.

use std::fmt;
use std::str::FromStr;

use super::builder::BuildError;
use super::hooks::{Hooks, TaskId};
use super::runtime::TaskRef;
use super::worker::Worker;
use crate::sync::UnsafeCell;

/// How wakees are placed. Both place wakeups from outside the runtime the same way.
///
/// ```
/// use idspace::sched::{Builder, Placement};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// assert_eq!(Placement::default(), Placement::Kernel);
/// assert_eq!(Placement::ALL.map(Placement::name), ["kernel", "remote"]);
/// let remote: Placement = "remote".parse()?;
/// let runtime = Builder::new().workers(2).placement(remote).build()?;
/// assert_eq!(runtime.handle().placement(), Placement::Remote);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Placement {
    /// As the kernel decides: a sync wakeup from a running task runs its wakee next on the
    /// waker's worker (capped, and not for fan-out wakers); other wakeups go to the wakee's
    /// last worker if idle, else to an idle worker, else stay with the less loaded of the two
    /// (with the waker, for a fan-out waker's wakee).
    #[default]
    Kernel,
    /// Every wakeup made on a worker goes to another worker (the wakee's last one if that is not
    /// the waker's, else an idle one, else the next), and no worker steals: the cross-worker
    /// path on which the wakeup [`Policy`](super::Policy) values differ, kept measurable for
    /// the lab.
    Remote,
}

impl Placement {
    /// Both placements, in the order the lab reports them.
    pub const ALL: [Placement; 2] = [Placement::Kernel, Placement::Remote];

    /// The placement's name: `kernel` or `remote`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Kernel => "kernel",
            Placement::Remote => "remote",
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Placement {
    type Err = BuildError;

    fn from_str(name: &str) -> Result<Placement, BuildError> {
        Placement::ALL
            .into_iter()
            .find(|placement| placement.name() == name)
            .ok_or_else(|| BuildError::UnknownPlacement(name.to_string()))
    }
}

/// Tasks a worker runs in a row from its next slot before it serves its run queue (tokio's
/// `MAX_LIFO_POLLS_PER_TICK`).
pub(crate) const MAX_NEXT_POLLS: u32 = 3;

/// The flips score above which a waker is wide: its wakeups skip the next slot.
pub(crate) const WIDE_FLIPS: u32 = 32;

/// A task's record as a waker, packed in one word of its header: the low 32 bits of its last
/// wakee's ID and its flips score. The score is an exponential average over its wakeups
/// rather than the kernel's per-second halving (no clock read on a wakeup): each wakeup keeps
/// 7/8 of it and adds 8 if the wakee differs from the last one. Waking one partner forever
/// leaves it below 8; waking a different task every time raises it towards 64, and past
/// [`WIDE_FLIPS`] after about six wakeups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Wakees {
    last: u32,
    flips: u32,
}

impl Wakees {
    pub(crate) fn unpack(word: u64) -> Wakees {
        Wakees {
            last: word as u32,
            flips: (word >> 32) as u32,
        }
    }

    pub(crate) fn pack(self) -> u64 {
        u64::from(self.last) | (u64::from(self.flips) << 32)
    }

    /// Records a wakeup of `wakee` (`record_wakee`) and returns whether the waker is wide.
    pub(crate) fn record(&mut self, wakee: TaskId) -> bool {
        let id = wakee.0 as u32;
        self.flips -= self.flips / 8;
        if id != self.last {
            self.last = id;
            self.flips += 8;
        }
        self.flips > WIDE_FLIPS
    }
}

/// What only a worker's own thread touches: its next slot and the waker record of the task it
/// is polling (`None` between polls, so a wakeup made then, by a timer, is not a sync one).
struct LocalState<H: Hooks> {
    next: Option<TaskRef<H>>,
    running: Option<Wakees>,
}

/// A worker's thread-owned placement state. Entered by the worker's own thread, and by the
/// shutdown path once that thread has ended.
pub(crate) struct Local<H: Hooks> {
    state: UnsafeCell<LocalState<H>>,
}

// SAFETY: the cell is entered only by the worker's own thread (every caller checks that it runs
// on that worker: `worker::current`, or the worker loop itself) or, through `take_next` at
// shutdown, after that thread was joined; task references are `Send`.
unsafe impl<H: Hooks> Sync for Local<H> {}

/// What a sync wakeup did with the wakee.
pub(crate) enum Affine<H: Hooks> {
    /// Not a sync wakeup (no task is being polled): place it as usual.
    No(TaskRef<H>),
    /// A wakeup by a wide waker: place it as usual, but with the waker if no worker is idle
    /// ([`select_wide`]).
    Wide(TaskRef<H>),
    /// The wakee is in the next slot; the task it displaced, if any, must be queued.
    Slotted(Option<TaskRef<H>>),
}

impl<H: Hooks> Local<H> {
    pub(crate) fn new() -> Self {
        Local {
            state: UnsafeCell::new(LocalState {
                next: None,
                running: None,
            }),
        }
    }

    /// Runs `f` on the state.
    ///
    /// # Safety
    /// The caller is the worker's own thread, or its thread has ended; `f` calls nothing that
    /// could enter the state again.
    unsafe fn with<R>(&self, f: impl FnOnce(&mut LocalState<H>) -> R) -> R {
        self.state.with_mut(|state| {
            // SAFETY: the caller's contract: no other access runs concurrently or nested.
            f(unsafe { &mut *state })
        })
    }

    /// The worker starts polling a task whose waker record is `record`.
    pub(crate) fn switch_in(&self, record: u64) {
        // SAFETY: called by the worker loop, on the worker's thread; the closure calls out to
        // nothing.
        unsafe { self.with(|state| state.running = Some(Wakees::unpack(record))) }
    }

    /// The poll ended: returns the task's waker record to store back into it.
    pub(crate) fn switch_out(&self) -> u64 {
        // SAFETY: as in `switch_in`.
        unsafe { self.with(|state| state.running.take().unwrap_or_default().pack()) }
    }

    /// A wakeup of `task` made on this worker's thread: puts it into the next slot if this is a
    /// sync wakeup from a task that is not wide.
    ///
    /// Call only on this worker's thread.
    pub(crate) fn wake_affine(&self, task: TaskRef<H>) -> Affine<H> {
        // SAFETY: the caller runs on this worker's thread (`worker::current` said so); the
        // closure only moves references (a displaced task is dropped, if ever, by the caller).
        unsafe {
            self.with(|state| {
                let Some(waker) = state.running.as_mut() else {
                    return Affine::No(task);
                };
                if waker.record(task.id()) {
                    Affine::Wide(task)
                } else {
                    Affine::Slotted(state.next.replace(task))
                }
            })
        }
    }

    /// Takes the task in the next slot. Call only on the worker's thread, or after it ended.
    pub(crate) fn take_next(&self) -> Option<TaskRef<H>> {
        // SAFETY: the caller's contract above; `take` calls out to nothing.
        unsafe { self.with(|state| state.next.take()) }
    }
}

/// The first idle worker other than `except`, starting after `from`.
pub(crate) fn idle_worker<H: Hooks>(
    workers: &[Worker<H>],
    from: usize,
    except: Option<usize>,
) -> Option<usize> {
    let n = workers.len();
    (1..=n)
        .map(|step| (from + step) % n)
        .find(|&index| Some(index) != except && workers[index].is_idle())
}

/// The kernel's choice for a wakeup that does not take the next slot (`select_task_rq_fair`
/// without `WF_SYNC`): the wakee's last worker `prev` if it is idle, else the first idle
/// worker after it (`select_idle_sibling`); with none idle, the waker's worker `here` if fewer
/// tasks wait on it than on `prev`, else `prev` (`wake_affine_weight`, with waiting tasks,
/// queued or pending, for load).
pub(crate) fn select_idle<H: Hooks>(
    workers: &[Worker<H>],
    prev: usize,
    here: Option<usize>,
) -> usize {
    if workers[prev].is_idle() {
        return prev;
    }
    if let Some(idle) = idle_worker(workers, prev, None) {
        return idle;
    }
    match here {
        Some(this) if workers[this].load() < workers[prev].load() => this,
        _ => prev,
    }
}

/// The choice for a wakeup by a wide waker running on worker `waker`: the wakee's last worker
/// `prev` if it is idle, else the first idle worker after it, as [`select_idle`]; with none
/// idle, the waker's worker, whatever the loads (see the module's documentation).
pub(crate) fn select_wide<H: Hooks>(workers: &[Worker<H>], prev: usize, waker: usize) -> usize {
    if workers[prev].is_idle() {
        return prev;
    }
    idle_worker(workers, prev, None).unwrap_or(waker)
}

/// [`Placement::Remote`]'s choice: like [`select_idle`] but never the waker's worker `here`
/// while another exists: `prev` if it is not `here`, else an idle worker, else the next one.
pub(crate) fn select_remote<H: Hooks>(
    workers: &[Worker<H>],
    prev: usize,
    here: Option<usize>,
) -> usize {
    let Some(this) = here else {
        return select_idle(workers, prev, None);
    };
    if workers.len() == 1 {
        return this;
    }
    if prev != this {
        return prev;
    }
    idle_worker(workers, this, Some(this)).unwrap_or((this + 1) % workers.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_partner_stays_affine_and_a_fan_out_turns_wide() {
        let mut partner = Wakees::default();
        for _ in 0..1000 {
            assert!(!partner.record(TaskId(7)));
        }
        assert!(partner.flips < 8, "{partner:?}");
        let mut fan = Wakees::default();
        let wide_after = (1..100u64).find(|&n| fan.record(TaskId(n))).unwrap();
        assert!((4..=10).contains(&wide_after), "wide after {wide_after}");
        // Once it settles on one wakee again, it decays back to affine.
        let back = (1..100).find(|_| !fan.record(TaskId(1))).unwrap();
        assert!(back <= 8, "affine again after {back}");
        assert_eq!(Wakees::unpack(fan.pack()), fan);
    }

    #[test]
    fn placements_parse_and_name_themselves() {
        for placement in Placement::ALL {
            assert_eq!(placement.name().parse::<Placement>().unwrap(), placement);
        }
        let error = "near".parse::<Placement>().unwrap_err();
        assert!(error.to_string().contains("\"near\""), "{error}");
        assert_eq!(Placement::default(), Placement::Kernel);
    }
}
