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

/// Callbacks at a task's life-cycle points, called on the thread where the event happens.
///
/// They run on the scheduling paths (`switched_in`/`switched_out` around every poll), so they
/// must be short, must not block and must not panic: a panic in a hook is not caught and ends
/// the worker thread. Every method has an empty default.
pub trait Hooks: Send + Sync + 'static {
    /// A worker thread starts (`worker` is its index).
    fn worker_started(&self, worker: usize) {
        let _ = worker;
    }

    /// A worker thread stops, at shutdown.
    fn worker_stopped(&self, worker: usize) {
        let _ = worker;
    }

    /// A task was spawned, from `worker` or (`None`) from a thread outside the runtime.
    fn created(&self, task: TaskId, worker: Option<usize>) {
        let _ = (task, worker);
    }

    /// `worker` is about to poll `task`.
    fn switched_in(&self, task: TaskId, worker: usize) {
        let _ = (task, worker);
    }

    /// `worker` has finished polling `task` (before `exited` if the task ended).
    fn switched_out(&self, task: TaskId, worker: usize) {
        let _ = (task, worker);
    }

    /// `task` ended, on `worker` or (`None`) off the runtime's workers (a cancellation).
    fn exited(&self, task: TaskId, worker: Option<usize>, how: Exit) {
        let _ = (task, worker, how);
    }
}
