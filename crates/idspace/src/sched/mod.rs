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
//! # This module
//!
//! [`Runtime`] runs futures on N workers (the CPUs). Each worker has a run queue under its own
//! lock, a wakelist (intrusive, multi-producer, single-consumer: push with one CAS, take all with
//! one swap, reversed for FIFO order), and an idle word through which it polls and then sleeps on
//! a futex. A woken task goes to a target worker, its last one if idle, otherwise an idle one,
//! otherwise the less loaded of the waker's and its last one (`wake_affine`), and the [`Policy`]
//! decides how it gets there:
//!
//! * [`Policy::Locked`]: lock the target's queue, enqueue, notify it if it idles;
//! * [`Policy::Wakelist`]: the kernel's rule, the wakelist if the target is idle, else locked;
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
//! * A task is on at most one run queue or wakelist, and is polled by at most one worker at a
//!   time (its state word, see `task.rs`).
//! * A wakeup is never lost: a task whose waker returned will be polled, or cancelled at shutdown.
//! * Every spawned task ends exactly once: completed, panicked, or cancelled (at shutdown, or when
//!   its last waker is dropped), and its [`JoinHandle`] reports which.
//! * A panic inside a task is caught; the worker and the runtime go on.
//!
//! # Where we differ from the kernel
//!
//! * Tasks are futures, polled to their next `Pending`; there is no preemption and no time
//!   slice, so a woken task waits for the current poll on its target to return.
//! * There are no cache domains: every worker "shares the LLC" with every other, so the
//!   wakelist is used only for idle targets (or always, under `wakelist-always`).
//! * `ttwu_pending` is a count of entries rather than a flag, and it drops only after the batch
//!   is enqueued, so a target never looks idle while it has wakeups in flight.
//! * An idle worker polls for a bounded time ([`Builder::poll`], 50 µs by default, roughly the
//!   kernel's 10–60 µs) and then sleeps on a futex: the futex wake stands in for the IPI. It
//!   polls only while another worker runs (and no more polling workers than running ones), for
//!   as long as its recent idle periods say a poll pays (the kernel's `haltpoll` governor): a
//!   polling worker burns a CPU the machine may need, which an idle CPU in the kernel does not.
//! * No load balancing or work stealing: a task moves only when it is woken (to an idle worker).
//!   A runtime user who needs stealing wants tokio; the lab compares the two.
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

mod hooks;
mod idle;
mod join;
mod registry;
mod runtime;
mod stats;
mod task;
pub mod time;
mod wakelist;
mod worker;

pub mod protocol {
    #![doc = include_str!("PROTOCOL.md")]
}

pub use hooks::{Exit, Hooks, NoHooks, TaskId};
pub use join::{JoinError, JoinHandle};
pub use runtime::{spawn, BuildError, Builder, Handle, NoRuntime, Policy, Runtime, MAX_WORKERS};
pub use stats::Stats;
