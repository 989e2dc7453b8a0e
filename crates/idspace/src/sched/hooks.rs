//! The points in a task's life where other subsystems attach: creation, switch-in, switch-out
//! and exit (the kernel's `sched_fork`, `prepare_task_switch`/`finish_task_switch` and
//! `do_exit`). This is where a task gets its PID, its concurrency ID or its timers.

use std::fmt;

/// A task's identity: unique within its runtime, in spawn order, starting at 1.
///
/// ```
/// use idspace::sched::{Policy, Runtime, TaskId};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let ids: Vec<TaskId> = (0..3).map(|_| runtime.spawn(async {}).id()).collect();
/// assert_eq!(ids, [TaskId(1), TaskId(2), TaskId(3)]);
/// assert_eq!(ids[1].to_string(), "task 2");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(pub u64);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}", self.0)
    }
}

/// How a task ended, as [`Hooks::exited`] is told.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use idspace::sched::{Builder, Exit, Hooks, TaskId};
///
/// #[derive(Default)]
/// struct Ends(Mutex<Vec<Exit>>);
/// impl Hooks for Ends {
///     type Data = ();
///     fn created(&self, _task: TaskId, _worker: Option<usize>) {}
///     fn exited(&self, _task: TaskId, _data: &(), _worker: Option<usize>, how: Exit) {
///         self.0.lock().unwrap().push(how);
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ends = Arc::new(Ends::default());
/// let runtime = Builder::new().workers(1).hooks(Arc::clone(&ends)).build()?;
/// runtime.spawn(async {}).join()?;
/// assert!(runtime.spawn(async { panic!("boom") }).join().is_err());
/// // Nothing can wake it: it is dropped, cancelled.
/// assert!(runtime.spawn(std::future::pending::<()>()).join().is_err());
/// drop(runtime);
/// assert_eq!(*ends.0.lock().unwrap(), [Exit::Completed, Exit::Panicked, Exit::Cancelled]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exit {
    /// Its future returned.
    Completed,
    /// Its future panicked, or a switch hook panicked at it; the join handle carries the
    /// payload.
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
/// they must be short, must not block and should not panic. A panic in a hook is caught and
/// the worker goes on: in `switched_in` or `switched_out` it ends the task there, whose handle
/// reports [`JoinError::HookPanicked`](super::JoinError::HookPanicked) with the hook's name and
/// message; in `created` it reaches the caller of `spawn`; in `exited`, `worker_started` or
/// `worker_stopped` it is only printed by the panic hook (the task's outcome, if any, was
/// delivered before). Every method but `created` has an empty default.
///
/// Here each task carries a count of its polls, and the hooks record them at exit:
///
/// ```
/// use std::future::Future;
/// use std::pin::Pin;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::{Arc, Mutex};
/// use std::task::{Context, Poll};
/// use idspace::sched::{Builder, Exit, Hooks, TaskId};
///
/// #[derive(Default)]
/// struct Polls(Mutex<Vec<(TaskId, u32)>>);
/// impl Hooks for Polls {
///     type Data = AtomicU32;
///     fn created(&self, _task: TaskId, _worker: Option<usize>) -> AtomicU32 {
///         AtomicU32::new(0)
///     }
///     fn switched_in(&self, _task: TaskId, polls: &AtomicU32, _worker: usize) {
///         // Relaxed: only the switch hooks of this one task touch it.
///         polls.fetch_add(1, Ordering::Relaxed);
///     }
///     fn exited(&self, task: TaskId, polls: &AtomicU32, _: Option<usize>, _how: Exit) {
///         self.0.lock().unwrap().push((task, polls.load(Ordering::Relaxed)));
///     }
/// }
///
/// /// Pending twice (waking itself each time), then ready: three polls.
/// struct YieldTwice(u8);
/// impl Future for YieldTwice {
///     type Output = ();
///     fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
///         if self.0 == 2 {
///             return Poll::Ready(());
///         }
///         self.0 += 1;
///         cx.waker().wake_by_ref();
///         Poll::Pending
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let polls = Arc::new(Polls::default());
/// let runtime = Builder::new().workers(2).hooks(Arc::clone(&polls)).build()?;
/// let task = runtime.spawn(YieldTwice(0));
/// let id = task.id();
/// task.join()?;
/// drop(runtime);
/// assert_eq!(*polls.0.lock().unwrap(), [(id, 3)]);
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// use idspace::sched::{Builder, NoHooks, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // What a builder starts with, and the default type parameter of `Runtime`.
/// let runtime: Runtime<NoHooks> = Builder::new().workers(1).build()?;
/// assert_eq!(runtime.spawn(async { 3 }).join()?, 3);
/// assert_eq!(std::mem::size_of::<<NoHooks as idspace::sched::Hooks>::Data>(), 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {
    type Data = ();

    fn created(&self, _task: TaskId, _worker: Option<usize>) {}
}
