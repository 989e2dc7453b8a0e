//! The points in a task's life where other subsystems attach: creation, switch-in, switch-out
//! and exit (the kernel's `sched_fork`, `prepare_task_switch`/`finish_task_switch` and
//! `do_exit`). This is where a task gets its PID, its concurrency ID or its timers.

use std::fmt;

/// A task's identity: unique within its runtime, in spawn order, starting at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(pub u64);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}", self.0)
    }
}

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exit {
    /// Its future returned.
    Completed,
    /// Its future panicked; the join handle carries the payload.
    Panicked,
    /// It was dropped unfinished: at shutdown, or when nothing could wake it any more.
    Cancelled,
}

/// Callbacks at a task's life-cycle points, called on the thread where the event happens, with
/// the task's own data.
///
/// [`created`](Hooks::created) makes a task's [`Data`](Hooks::Data) when it is spawned; the
/// runtime keeps it inside the task itself (next to its state word, in the same allocation) and
/// hands it by reference to [`switched_in`](Hooks::switched_in),
/// [`switched_out`](Hooks::switched_out) and [`exited`](Hooks::exited): no map lookup, no
/// extra allocation and no lock on the hot path. The data is dropped with the task, after
/// `exited`. It is shared (`&`), as the kernel's `task_struct` is: a hook that changes it at
/// switch-in does so through atomics or cells of its own; only the worker running the task calls
/// the switch hooks, so Relaxed accesses suffice for what only those hooks touch.
///
/// The hooks run on the scheduling paths (`switched_in`/`switched_out` around every poll), so
/// they must be short, must not block and must not panic: a panic in a hook is not caught and
/// ends the worker thread. Every method but `created` has an empty default.
pub trait Hooks: Send + Sync + 'static {
    /// What each task carries for the hooks: a PID, a CID slot, a process reference.
    type Data: Send + Sync + 'static;

    /// A worker thread starts (`worker` is its index).
    fn worker_started(&self, worker: usize) {
        let _ = worker;
    }

    /// A worker thread stops, at shutdown.
    fn worker_stopped(&self, worker: usize) {
        let _ = worker;
    }

    /// A task is being spawned, from `worker` or (`None`) from a thread outside the runtime:
    /// returns the data it carries for its whole life.
    fn created(&self, task: TaskId, worker: Option<usize>) -> Self::Data;

    /// `worker` is about to poll `task`.
    fn switched_in(&self, task: TaskId, data: &Self::Data, worker: usize) {
        let _ = (task, data, worker);
    }

    /// `worker` has finished polling `task` (before `exited` if the task ended).
    fn switched_out(&self, task: TaskId, data: &Self::Data, worker: usize) {
        let _ = (task, data, worker);
    }

    /// `task` ended, on `worker` or (`None`) off the runtime's workers (a cancellation).
    fn exited(&self, task: TaskId, data: &Self::Data, worker: Option<usize>, how: Exit) {
        let _ = (task, data, worker, how);
    }
}

/// No hooks: tasks carry no data, and every life-cycle point compiles to nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {
    type Data = ();

    fn created(&self, _task: TaskId, _worker: Option<usize>) {}
}
