//! A task runtime with per-worker run queues and the kernel's wakelist wakeups.
//!
//! # The kernel design
//!
//! When a task on one CPU wakes a task that will run on another, `try_to_wake_up` can either
//! lock the target CPU's run queue and enqueue the task itself, or push the task onto the
//! target's lock-free *wakelist* and let the target enqueue it. Tianchen Ding's series
//! (f3dd3f674555, Linux 6.0) made the second the rule whenever the target is idle: the waker
//! is done after one compare-and-swap, no run-queue lock or its cache lines travel between CPUs,
//! and an idle CPU that is *polling* needs no interrupt at all, only its `NEED_RESCHED` flag
//! (`set_nr_if_polling`). Measured on a 104-thread Xeon: pipe context switching +11%, hackbench
//! 3.25 s → 2.25 s, schbench p99 13 → 10 µs.
//!
//! Which CPU a woken task goes to is decided before that (`select_task_rq_fair`):
//!
//! * **`wake_affine` with `WF_SYNC`:** a waker that will sleep right after the wakeup (a pipe
//!   writer about to read, flagged `WF_SYNC`) may pull its wakee onto its own CPU, where the
//!   caches are warm and the waker's CPU is about to be free.
//! * **`wake_wide`:** a waker that keeps switching between wakees (`wakee_flips`, decayed every
//!   second, compared with the LLC's size) is a fan-out: pulling its wakees would stack them on
//!   one CPU, so affine placement is off for it.
//! * **`select_idle_sibling`:** the chosen CPU if idle, else the wakee's previous CPU if idle,
//!   else an idle CPU of the same LLC.
//! * **newidle balance:** a CPU about to go idle first pulls tasks from the busiest run queue
//!   of its domain (`newidle_balance`, half the imbalance).
//! * **periodic balance:** every tick a CPU checks its domains for imbalance; an overloaded CPU
//!   kicks an idle one to balance on behalf of the sleeping idle CPUs (`nohz_balancer_kick`).
//!
//! # This module
//!
//! [`Runtime`] runs futures on N workers (the CPUs). Each worker has a run queue under its own
//! lock, a wakelist (intrusive, multi-producer, consumed by its worker: push with one CAS, take
//! all with one swap, reversed for FIFO order), and an idle word through which it polls and then sleeps on
//! a futex. Where a woken task runs is its [`Placement`] (`placement.rs`); under the default,
//! [`Placement::Kernel`]:
//!
//! 1. a wakeup made by a task while it is polled is a sync wakeup: the wakee goes into the
//!    waker's worker's *next slot* and runs as soon as the waker's poll returns, on that worker,
//!    with no lock, no other thread and no notification (tokio's LIFO slot, Go's `runnext`). A
//!    task it displaces from the slot goes to the back of the run queue, and only then is an
//!    idle worker, if any, notified (to steal it);
//! 2. a worker runs at most 3 tasks in a row from its slot before it serves its queue (tokio's
//!    `MAX_LIFO_POLLS_PER_TICK`), so two tasks waking each other forever cannot starve a third;
//! 3. a waker whose recent wakees keep changing is *wide*: its wakeups skip the slot;
//! 4. every other wakeup (wide, from outside, from a timer between polls) goes to the wakee's
//!    last worker if idle, otherwise an idle one, otherwise the less loaded of the waker's and
//!    its last one (`wake_affine_weight`), or, for a wide waker's wakee, the waker's.
//!
//! Balancing (`balance.rs`): a worker that finds nothing to run steals the back half of the
//! busiest run queue before it goes idle (newidle), and a worker with two or more tasks waiting
//! periodically notifies an idle worker, which wakes and steals (the nohz kick).
//!
//! Once a remote target is chosen, the [`Policy`] decides how the wakeup gets there:
//!
//! * [`Policy::Locked`]: lock the target's queue, enqueue, notify it if it idles;
//! * [`Policy::Wakelist`]: the kernel's rule, the wakelist if nothing runs or waits on the
//!   target's run queue (`!cpu_rq(cpu)->nr_running`: idle, or about to be, its last task's poll
//!   returned), else locked;
//! * [`Policy::WakelistAlways`]: the wakelist even onto busy workers (the upstream experiment
//!   that regressed), so that the lab can show why the idle rule matters.
//!
//! A notification is sent only when a push finds the wakelist empty, and it costs a system call
//! only if the target is asleep: a polling target just has its flag set. Wakeups pending on a
//! wakelist count as load when choosing an idle target, so wakers do not stack tasks on one
//! worker (the `ttwu_pending` bug fixed in d6962c4fe8f9).
//!
//! The full wake/park protocol, its states and why no wakeup is lost: [`protocol`].
//!
//! # Invariants
//!
//! * A task is on at most one run queue, wakelist or next slot (or in a stealing worker's
//!   hands, between two queues), and is polled by at most one worker at a time (its state word,
//!   see `task.rs`).
//! * A wakeup is never lost: a task whose waker returned will be polled, or cancelled at shutdown.
//! * Every spawned task ends exactly once: completed, panicked, or cancelled (at shutdown, or when
//!   its last waker is dropped), and its [`JoinHandle`] reports which.
//! * A panic inside a task or a hook is caught; the worker and the runtime go on.
//! * No blocking call waits on a worker: `block_on` and a blocking `join` there panic.
//!
//! # Where we differ from the kernel
//!
//! * Tasks are futures, polled to their next `Pending`; there is no preemption and no time
//!   slice, so a woken task waits for the current poll on its target to return.
//! * There are no cache domains: every worker "shares the LLC" with every other, so the
//!   wakelist is used only for targets with nothing running (or always, under
//!   `wakelist-always`). *Running* is a flag the worker sets when it takes a task after having
//!   none and clears when it finds nothing left, where the kernel counts `curr` in
//!   `nr_running`: writing it per poll would put a store on the switch path for a hint.
//! * `ttwu_pending` is a count of entries rather than a flag, and it drops only after the batch
//!   is enqueued, so a target never looks idle while it has wakeups in flight.
//! * An idle worker polls for a bounded time ([`Builder::poll`], 50 µs by default, roughly the
//!   kernel's 10–60 µs) and then sleeps on a futex: the futex wake stands in for the IPI. It
//!   polls only while another worker runs (and no more polling workers than running ones), for
//!   as long as its recent idle periods say a poll pays (the kernel's `haltpoll` governor): a
//!   polling worker burns a CPU the machine may need, which an idle CPU in the kernel does not.
//!   For the same reason a worker that was preempted since its last look (its involuntary
//!   context switches moved) skips its poll: another thread wants its CPU.
//! * The sync wakeup is not a hint the waker passes: every wakeup made inside a poll counts as
//!   one (a future cannot say whether it will return `Pending`), and the wakee does not go to an
//!   idle worker first, as `select_idle_sibling` would send it, but runs next on the waker's:
//!   in a runtime the waker's poll ends within microseconds, and crossing to another worker
//!   costs more than that wait (tokio's choice). The starvation cap stands in for the
//!   preemption that the kernel has and we do not.
//! * `wake_wide` looks at the waker only, and its flips decay per wakeup (each keeps 7/8 of the
//!   score; a different wakee adds 8) instead of per second, so that no clock is read on a
//!   wakeup; a waker goes wide after about six wakeups of different tasks in a row. The
//!   kernel also asks the wakee to flip, which a schbench worker, always waking its one
//!   message thread, never does. A wide waker's wakee that finds no worker idle stays on the
//!   waker's worker rather than going to the less loaded one: the kernel, which does not call
//!   a hackbench sender wide (its receivers do not flip), pulls those wakees towards the
//!   sender's CPU too, and weighing the loads kept each group split over two CPUs
//!   (`placement.rs`).
//! * Balancing counts tasks, not weighted load, and has one domain. A steal takes half the
//!   victim's waiting tasks (rounded up) from the back of its queue, the ones that would wait
//!   longest there; the next slot is never stolen from (tokio 1.51 made its LIFO slot
//!   stealable and notified on every local wakeup: +8.5% CPU and up to a third less
//!   throughput, reverted). A wakelist is taken by another worker only as a *rescue*
//!   (`rescue.rs`): an idle worker about to sleep takes, whole, a wakelist whose head has not
//!   moved for 20 µs, since its owner is then most likely off its CPU, where a kernel CPU never
//!   is (but a vCPU can be: the kernel's `vcpu_is_preempted()` check serves the same end). The periodic balance is a kick, every 16 passes of a busy worker's
//!   loop, of one idle worker, which then balances itself (as the nohz idle balancer does).
//! * [`Placement::Remote`] exists for measurement: it turns the slot and balancing off and sends
//!   every wakeup made on a worker to another worker, so that the policies are compared on the
//!   path that the wakelist changed.
//! * A task whose wakers are all dropped is cancelled at once (its future is dropped and its
//!   handle reports it); tokio would keep it until shutdown. A future that keeps its own waker
//!   inside itself (a reference cycle) is never dropped that way: like any `Arc` cycle, it stays
//!   until something outside wakes it or breaks the cycle.
//! * [`Hooks`] make the life-cycle points explicit (create, switch-in, switch-out, exit): the
//!   kernel's `sched_fork`, `prepare_task_switch`, `finish_task_switch` and `do_exit`, where the
//!   other modules' IDs attach. Each task carries the hooks' own [`Hooks::Data`] in its header,
//!   as a `task_struct` carries its `pid` and `mm_cid`, and the hooks receive it by reference:
//!   the runtime is generic over its hooks, so no lookup, allocation or indirect call is added
//!   to a switch (with [`NoHooks`] the hooks compile away). Switch-out runs before the task's
//!   state leaves running, so one task's switch hooks never overlap across workers (the kernel's
//!   `on_cpu` rule).
//!

mod balance;
mod bell;
mod builder;
mod hooks;
mod idle;
pub(crate) mod io;
/// The reactor's races for the loom models (`tests/loom_io.rs`); not part of the API.
#[cfg(loom)]
#[doc(hidden)]
pub use io::model as io_model;
mod join;
mod placement;
mod registry;
mod rescue;
mod runtime;
mod stats;
mod task;
pub mod time;
mod wakelist;
mod worker;

pub mod protocol {
    #![doc = include_str!("PROTOCOL.md")]
}

pub use bell::{Bell, Until};
pub use builder::{
    BuildError, Builder, Policy, DEFAULT_BLOCKING_THREADS, DEFAULT_POLLER, MAX_POLL, MAX_WORKERS,
};
pub use hooks::{Exit, Hooks, NoHooks, TaskId};
#[cfg(not(loom))]
pub use io::spawn_blocking;
pub use io::Poller;
pub use join::{JoinError, JoinHandle, Panic};
pub use placement::Placement;
#[cfg(all(feature = "hyper", not(loom)))]
pub(crate) use runtime::current_driver;
pub use runtime::{spawn, Handle, NoRuntime, Runtime};
pub use stats::Stats;
