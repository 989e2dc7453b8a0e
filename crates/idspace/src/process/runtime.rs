//! Processes in the task runtime: every task of a process carries its [`Thread`] as its
//! per-task data, gets a CID from its process's space at each switch-in (with the worker as the
//! CPU) and leaves the CPU at switch-out; its exit (completed, panicked, cancelled or killed)
//! is the thread's exit in the model.
//!
//! The switch hooks do only what the kernel's switch does for these IDs plus one thread-local
//! store (the worker's "current" pointer, which [`current`] and per-CID structures read): the
//! switch-in stores the CID into the task's own record (its process's space, the space's size
//! and the thread's IDs, made once at spawn) and points the worker's cell at that record, and
//! the switch-out clears the cell and is then the CID design's own (for the rework one store
//! that leaves the CPU, without its runqueue lock, as the kernel's switch-out writes nothing;
//! the baselines give their CID back there, as their kernels did). Its future runs inside a
//! `Killable` (`kill.rs`), which stops it at its next poll once its thread is killed.
//!
//! # What a switch costs
//!
//! With the rework, a switch-in and switch-out of a thread cost no atomic read-modify-write:
//! each worker binds itself to its CPU ([`cid::bind_current_thread`]) when it starts, so the CID
//! space's runqueue lock is biased to it (see [`Rework`]'s docs), and a migration, a remote
//! exit or a mode change's walk revokes the bias with a `membarrier(2)` call instead. The kill
//! check before each poll is a load: the `Killable` takes the link's lock
//! only at the task's first poll (or when its waker changes), where it used to take it at
//! every poll (a compare-and-swap and an exchange, about as much as the rest of the hooks
//! together). The design's switch is inlined into the hooks, so the per-switch path is the
//! hooks' own loads and stores around that one lock.
//!
//! The running task is one pointer per worker, as the kernel's `current` is: the hooks used to
//! keep two thread-local cells (the task's IDs here, its space, size and CID in
//! [`cid::current`]) and copy several words into each at switch-in and out of each at
//! switch-out. Now the record the cell points at lives in the task's data and changes only in
//! its CID word; readers follow the pointer. A 1-worker ping-pong (each pair a process, the
//! `process_switch` driver of the lab) under callgrind runs 132 instructions per switch more
//! than with no hooks, against 153 with the two cells (the bitmap's hooks add about 315, the
//! lazy design's 300). In CPU time the rework added about 18 ns per switch over no hooks
//! (medians of 15 interleaved runs on the lab's shared 2-core machine), of which the runqueue
//! lock's compare-and-swap was about 11; with the lock biased to the worker, the `process`
//! experiment's paired medians read 5 to 13 ns in four runs. On one thread, a rework switch-in
//! and switch-out went from 21 to 11 ns (the `cid` experiment's switch table).

use std::future::Future;

use super::design::{CidDesign, PidDesign, TableDesign};
use super::error::ProcessError;
use super::kill::Killable;
use super::processes::Processes;
use super::thread::Thread;
use crate::cid::{self, Rework};
use crate::pid::{NsId, PerCpu};
use crate::sched::{Exit, Handle, Hooks, JoinHandle, Runtime, TaskId};
use crate::sync::Arc;
use crate::table::ScaledHash;

/// What the running task is, as [`current`] reports it.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use idspace::pid::ROOT;
/// use idspace::process::{self, Current, ProcessHooks};
/// use idspace::sched::Builder;
///
/// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
/// let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
/// let me: Option<Current> = runtime.spawn_process(ROOT, async { process::current() })?.join()?;
/// let me = me.expect("a task of a process");
/// // The model holds the root namespace's init (process 1): the first process spawned is 2.
/// assert_eq!((me.tid, me.pid), (2, 2));
/// assert_eq!((me.root_tid, me.root_pid), (2, 2), "the root namespace is its own");
/// assert!(me.cid.is_some_and(|cid| cid < 2), "a CID below the worker count");
/// assert_eq!(process::current(), None, "outside a task");
/// drop(runtime);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current {
    /// Its TID in its own namespace.
    pub tid: u32,
    /// Its process's PID in its own namespace.
    pub pid: u32,
    /// Its TID in the root namespace.
    pub root_tid: u32,
    /// Its process's PID in the root namespace.
    pub root_pid: u32,
    /// The CID it runs with, from its process's space (below the worker count).
    pub cid: Option<u32>,
}

/// The running task's IDs and CID, if the caller is a task of a process.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use idspace::pid::ROOT;
/// use idspace::process::{self, ProcessHooks};
/// use idspace::sched::Builder;
///
/// let hooks: ProcessHooks = ProcessHooks::for_workers(1)?;
/// let model = Arc::clone(hooks.model());
/// let runtime = Builder::new().workers(1).hooks(Arc::new(hooks)).build()?;
/// let ns = model.ns_new(ROOT)?;
/// let me = runtime.spawn_process(ns, async { process::current() })?.join()?;
/// let me = me.expect("a task of a process");
/// assert_eq!((me.tid, me.pid), (1, 1), "the init of its namespace");
/// assert_ne!(me.root_tid, 1, "not the root's");
/// drop(runtime);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn current() -> Option<Current> {
    let running = cid::current::get()?;
    let [tid, pid, root_tid, root_pid] = running.ids;
    Some(Current {
        tid,
        pid,
        root_tid,
        root_pid,
        cid: running.cid,
    })
}

/// Each task's data: its thread (if it belongs to a process) and the CID it holds while it
/// runs.
///
/// # Examples
///
/// ```
/// use idspace::process::{ProcessHooks, TaskIds};
/// use idspace::sched::{Hooks, TaskId};
///
/// let hooks: ProcessHooks = ProcessHooks::for_workers(1)?;
/// // A plain spawn (not `spawn_process`) belongs to no process: no thread, never a CID.
/// let plain: TaskIds<_> = hooks.created(TaskId(7), None);
/// hooks.switched_in(TaskId(7), &plain, 0);
/// assert!(plain.thread().is_none());
/// assert_eq!(plain.cid(), None);
/// hooks.switched_out(TaskId(7), &plain, 0);
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
pub struct TaskIds<C> {
    thread: Option<Arc<Thread<C>>>,
    /// What the running-task cell points at while the task runs: its process's space, the
    /// space's size and the thread's IDs, made once at spawn (they never change), and the CID
    /// it holds, written at each switch.
    record: cid::current::Record,
}

impl<C: cid::CidAllocator> TaskIds<C> {
    /// A task of `thread`.
    fn of(thread: Arc<Thread<C>>) -> TaskIds<C> {
        let process = thread.process();
        let ids = [
            thread.tid_in_own_ns(),
            process.pid_in_own_ns(),
            thread.tid(),
            process.pid(),
        ];
        let space = Arc::as_ptr(process).addr();
        let record = cid::current::Record::new(space, process.cids().cpus(), ids);
        TaskIds {
            thread: Some(thread),
            record,
        }
    }
}

impl<C> TaskIds<C> {
    /// A task of no process: its record is never published.
    fn plain() -> TaskIds<C> {
        TaskIds {
            thread: None,
            record: cid::current::Record::new(0, 0, [0; 4]),
        }
    }

    /// The thread the task runs, if any.
    pub fn thread(&self) -> Option<&Arc<Thread<C>>> {
        self.thread.as_ref()
    }

    /// The CID the task holds while it runs.
    pub fn cid(&self) -> Option<u32> {
        self.record.cid()
    }
}

/// The runtime hooks that make tasks threads of processes. Build the model with the runtime's
/// worker count, so that the CID spaces' CPUs are the workers.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use idspace::pid::ROOT;
/// use idspace::process::{self, ProcessHooks, Processes};
/// use idspace::sched::Builder;
///
/// // The annotation picks the default designs (`PerCpu`, `Rework`, `ScaledHash`).
/// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
/// let model: Arc<Processes> = Arc::clone(hooks.model());
/// let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
/// let leader = runtime.spawn_process(ROOT, {
///     let model = Arc::clone(&model);
///     async move {
///         let me = process::current().expect("a task of a process");
///         // While it runs, the model knows the thread.
///         assert!(model.thread(me.root_tid).is_some());
///         me.root_pid
///     }
/// })?;
/// let pid = leader.join()?;
/// assert_eq!(pid, 2, "after the root's init, which the model starts with");
/// assert_eq!(model.cpus(), 2);
/// drop(runtime);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ProcessHooks<P = PerCpu, C = Rework, T = ScaledHash<()>> {
    model: Arc<Processes<P, C, T>>,
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> ProcessHooks<P, C, T> {
    /// Hooks over `model`.
    pub fn new(model: Arc<Processes<P, C, T>>) -> Self {
        ProcessHooks { model }
    }

    /// Hooks over a fresh model for a runtime of `workers` workers, holding the root
    /// namespace's init (process 1, without a task:
    /// [`Processes::with_designs_and_init`]), so that the processes spawned start at PID 2.
    ///
    /// # Errors
    /// [`ProcessError::BadCpuCount`] outside `1..=64`.
    pub fn for_workers(workers: usize) -> Result<Self, ProcessError> {
        Processes::with_designs_and_init(workers).map(|model| ProcessHooks::new(Arc::new(model)))
    }

    /// The model.
    pub fn model(&self) -> &Arc<Processes<P, C, T>> {
        &self.model
    }
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> Hooks for ProcessHooks<P, C, T> {
    type Data = TaskIds<C>;

    /// Worker `worker` is the only thread that switches tasks in on CPU `worker` of every
    /// process's CID space: it binds itself there, so that its runqueue locks become biased.
    fn worker_started(&self, worker: usize) {
        cid::bind_current_thread(Some(worker));
    }

    fn worker_stopped(&self, _worker: usize) {
        cid::bind_current_thread(None);
    }

    /// A plain spawn belongs to no process.
    fn created(&self, _task: TaskId, _worker: Option<usize>) -> TaskIds<C> {
        TaskIds::plain()
    }

    // Inlined into the worker's switch, as the design's switch is into this one: a call
    // saved and restored six registers for about as many instructions of its own work.
    #[inline]
    fn switched_in(&self, _task: TaskId, data: &TaskIds<C>, worker: usize) {
        let Some(thread) = &data.thread else {
            return;
        };
        let cid = thread.switch_in(worker);
        data.record.set_cid(cid);
        // SAFETY: the record lives in the task's data, which lives (in place, in the task's
        // allocation) as long as the task, so at least until its switch-out, which clears the
        // cell before anything else; nothing after this line can unwind past it.
        unsafe { cid::current::set(Some(&data.record)) };
    }

    #[inline]
    fn switched_out(&self, _task: TaskId, data: &TaskIds<C>, worker: usize) {
        let Some(thread) = &data.thread else {
            return;
        };
        // SAFETY: clearing the cell leaves no pointer behind.
        unsafe { cid::current::set(None) };
        thread.switch_out(worker);
        data.record.set_cid(None);
    }

    /// The thread stops running (taking the model's lock): it exits, its IDs freed or, for a
    /// leader with live threads, held by a zombie; a killed thread's IDs, held until now, are
    /// freed.
    fn exited(&self, _task: TaskId, data: &TaskIds<C>, worker: Option<usize>, _how: Exit) {
        if let Some(thread) = &data.thread {
            self.model.task_stopped(thread, worker.unwrap_or(0));
        }
    }
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> Handle<ProcessHooks<P, C, T>> {
    /// Creates a process in namespace `ns` whose leader runs `future`.
    ///
    /// # Errors
    /// As [`Processes::fork`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idspace::pid::ROOT;
    /// use idspace::process::{self, ProcessHooks};
    /// use idspace::sched::Builder;
    ///
    /// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
    /// let model = Arc::clone(hooks.model());
    /// let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
    /// let ns = model.ns_new(ROOT)?;
    /// let handle = runtime.handle();
    /// let first = handle.spawn_process(ns, async { process::current().map(|me| me.pid) })?;
    /// assert_eq!(first.join()?, Some(1), "the init of the new namespace");
    /// drop(runtime);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_process<F>(
        &self,
        ns: NsId,
        future: F,
    ) -> Result<JoinHandle<F::Output>, ProcessError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_task(|model, cpu| model.fork(ns, cpu), future)
    }

    /// Adds a thread running `future` to process `pid` (its root-level PID).
    ///
    /// # Errors
    /// As [`Processes::clone_thread`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idspace::pid::ROOT;
    /// use idspace::process::{self, ProcessHooks};
    /// use idspace::sched::Builder;
    ///
    /// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
    /// let model = Arc::clone(hooks.model());
    /// let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
    /// // A process made in the model, without a task: a thread of it runs on the runtime.
    /// let pid = model.fork(ROOT, 0)?.tid();
    /// let thread = runtime.handle().spawn_thread_of(pid, async {
    ///     process::current().map(|me| me.root_pid)
    /// })?;
    /// assert_eq!(thread.join()?, Some(pid));
    /// assert!(runtime.handle().spawn_thread_of(pid + 100, async {}).is_err(), "no such process");
    /// drop(runtime);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_thread_of<F>(
        &self,
        pid: u32,
        future: F,
    ) -> Result<JoinHandle<F::Output>, ProcessError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_task(|model, cpu| model.clone_thread(pid, cpu), future)
    }

    /// Makes a thread in the model with `make` (given the model and the CPU to start on: the
    /// calling worker's, or 0 from outside the runtime) and spawns `future` as its task.
    fn spawn_task<F>(
        &self,
        make: impl FnOnce(&Processes<P, C, T>, usize) -> Result<Arc<Thread<C>>, ProcessError>,
        future: F,
    ) -> Result<JoinHandle<F::Output>, ProcessError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let cpu = self.current_worker().unwrap_or(0);
        // The model's timers fire on this runtime, unless it was given another.
        let _ = self.hooks().model.attach_wheel(self);
        let thread = make(&self.hooks().model, cpu)?;
        Ok(self.spawn_attached(thread, future))
    }

    /// Spawns `future` as the task of `thread`, a thread of the model made without a task.
    /// If it was killed meanwhile, the task stops at its first poll, running nothing.
    pub(super) fn spawn_attached<F>(
        &self,
        thread: Arc<Thread<C>>,
        future: F,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.hooks().model.attach_task(&thread) {
            let killable = Killable::new(Some(Arc::clone(&thread)), future);
            self.spawn_with(TaskIds::of(thread), killable)
        } else {
            self.spawn_with(TaskIds::plain(), Killable::<C, F>::new(None, future))
        }
    }
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> Runtime<ProcessHooks<P, C, T>> {
    /// Creates a process in namespace `ns` whose leader runs `future`; see
    /// [`Handle::spawn_process`].
    ///
    /// # Errors
    /// As [`Processes::fork`].
    pub fn spawn_process<F>(
        &self,
        ns: NsId,
        future: F,
    ) -> Result<JoinHandle<F::Output>, ProcessError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle().spawn_process(ns, future)
    }
}

/// Adds a thread running `future` to the calling task's process, in a runtime with the default
/// designs ([`spawn_thread_in`] names others).
///
/// # Errors
/// [`ProcessError::NotInProcess`] outside a task of a process; else as
/// [`Processes::clone_thread`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use idspace::pid::ROOT;
/// use idspace::process::{self, ProcessHooks};
/// use idspace::sched::Builder;
///
/// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
/// let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
/// let leader = runtime.spawn_process(ROOT, async {
///     let me = process::current().expect("the leader");
///     let thread = process::spawn_thread(async { process::current().expect("a thread") })
///         .expect("spawned in the leader's process");
///     let other = thread.await.expect("the thread ran");
///     (me, other)
/// })?;
/// let (me, other) = leader.join()?;
/// assert_eq!(other.pid, me.pid, "one process");
/// assert_ne!(other.tid, me.tid, "two threads");
/// assert!(process::spawn_thread(async {}).is_err(), "outside a task of a process");
/// drop(runtime);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn spawn_thread<F>(future: F) -> Result<JoinHandle<F::Output>, ProcessError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_thread_in::<PerCpu, Rework, ScaledHash<()>, F>(future)
}

/// [`spawn_thread`] in a runtime whose processes use the designs `P`, `C` and `T`.
///
/// # Errors
/// [`ProcessError::NotInProcess`] outside a task of such a runtime's process; else as
/// [`Processes::clone_thread`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use idspace::cid::BitmapCids;
/// use idspace::pid::{PerCpu, ROOT};
/// use idspace::process::{self, ProcessError, ProcessHooks};
/// use idspace::sched::Builder;
/// use idspace::table::ScaledHash;
///
/// type Hooks = ProcessHooks<PerCpu, BitmapCids, ScaledHash<()>>;
/// let hooks: Hooks = ProcessHooks::for_workers(2)?;
/// let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
/// let leader = runtime.spawn_process(ROOT, async {
///     // `spawn_thread` looks for a runtime of the default designs: not this one.
///     let refused = process::spawn_thread(async {}).err();
///     let thread = process::spawn_thread_in::<PerCpu, BitmapCids, ScaledHash<()>, _>(async {
///         process::current().is_some()
///     })
///     .expect("spawned");
///     (refused, thread.await.expect("the thread ran"))
/// })?;
/// assert_eq!(leader.join()?, (Some(ProcessError::NotInProcess), true));
/// drop(runtime);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn spawn_thread_in<P, C, T, F>(future: F) -> Result<JoinHandle<F::Output>, ProcessError>
where
    P: PidDesign,
    C: CidDesign,
    T: TableDesign,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let me = current().ok_or(ProcessError::NotInProcess)?;
    let handle =
        Handle::<ProcessHooks<P, C, T>>::current().map_err(|_| ProcessError::NotInProcess)?;
    handle.spawn_thread_of(me.root_pid, future)
}
