//! Restoring a process into a runtime: [`Processes::restore_with`] recreates it with its IDs
//! and timers, its timers fire on the runtime's wheel, and each restored thread runs the code
//! the caller gives it, as a task under its restored TID (CRIU's restore, then the threads
//! going back to user space).

use std::future::Future;

use super::design::{CidDesign, PidDesign, TableDesign};
use super::error::ProcessError;
use super::image::{Image, NotifyKind};
use super::processes::Processes;
use super::runtime::ProcessHooks;
use super::thread::Thread;
use super::timers::Notify;
use crate::pid::NsId;
use crate::sched::{Handle, JoinHandle, Runtime};
use crate::sync::Arc;

/// Each running thread of a restored process, by root-level TID (the leader first, unless it
/// was restored as a zombie, which runs nothing; then the others, ascending), with the join
/// handle of the task that runs it.
///
/// ```
/// use std::sync::Arc;
///
/// use idspace::pid::ROOT;
/// use idspace::process::{self, ProcessHooks, RestoredTasks};
/// use idspace::sched::Builder;
///
/// // A process of two threads, checkpointed from a model that no runtime runs...
/// let source: ProcessHooks = ProcessHooks::for_workers(1)?;
/// let model = Arc::clone(source.model());
/// let pid = model.fork(ROOT, 0)?.tid();
/// let second = model.clone_thread(pid, 0)?.tid();
/// let image = model.checkpoint(pid)?;
///
/// // ...restored on a runtime: a task per thread, the leader's first.
/// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
/// let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
/// let tasks: RestoredTasks<Option<u32>> = runtime.restore_process(ROOT, &image, |_| async {
///     process::current().map(|me| me.root_tid)
/// })?;
/// let tids: Vec<u32> = tasks.iter().map(|(tid, _)| *tid).collect();
/// assert_eq!(tids, [pid, second]);
/// for (tid, task) in tasks {
///     assert_eq!(task.join()?, Some(tid));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type RestoredTasks<T> = Vec<(u32, JoinHandle<T>)>;

impl<P: PidDesign, C: CidDesign, T: TableDesign> Handle<ProcessHooks<P, C, T>> {
    /// Restores the process of `image` into namespace `ns` of this runtime's model and runs
    /// it: [`Processes::restore`] recreates it with its exact IDs and its timers, whose armed
    /// ones fire on this runtime's wheel (the model is attached to it first, unless another
    /// runtime's already is), then each restored thread runs `code(thread)` as a task under
    /// its restored TID, so that [`current`](crate::process::current) in it gives the
    /// checkpointed IDs. A thread killed before its task started gets a task that stops at
    /// once ([`JoinError::Killed`](crate::sched::JoinError::Killed)).
    ///
    /// # Errors
    /// As [`Processes::restore`]: nothing is restored and nothing runs.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idspace::pid::ROOT;
    /// use idspace::process::{self, Clock, ITimerSpec, Notify, ProcessHooks, TimeSpec, When};
    /// use idspace::sched::Builder;
    ///
    /// // A process with a thread and an armed timer, checkpointed on one runtime's model...
    /// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
    /// let model = Arc::clone(hooks.model());
    /// let first = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
    /// let leader = model.fork(ROOT, 0)?;
    /// let pid = leader.tid();
    /// let thread = model.clone_thread(pid, 1)?.tid();
    /// let timer = model.timer_create_with(pid, Clock::Monotonic, Notify::Wake)?;
    /// let soon = ITimerSpec::once(TimeSpec::new(0, 10_000_000));
    /// model.timer_settime(pid, timer, When::Relative, soon)?;
    /// let image = model.checkpoint(pid)?;
    /// drop(first);
    ///
    /// // ...restored into a second runtime: the same TIDs run, and the timer fires there.
    /// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
    /// let target = Arc::clone(hooks.model());
    /// let second = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
    /// let tasks = second.handle().restore_process(ROOT, &image, |thread| {
    ///     let (target, leader) = (Arc::clone(&target), thread.is_leader());
    ///     async move {
    ///         if leader {
    ///             let wait = target.timer_wait(pid, timer).expect("the restored timer");
    ///             wait.await.expect("it fires");
    ///         }
    ///         process::current().expect("a restored thread").root_tid
    ///     }
    /// })?;
    /// let tids: Vec<u32> = tasks.iter().map(|(tid, _)| *tid).collect();
    /// assert_eq!(tids, [pid, thread]);
    /// for (tid, task) in tasks {
    ///     assert_eq!(task.join()?, tid, "each task runs under its restored TID");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore_process<F>(
        &self,
        ns: NsId,
        image: &Image,
        code: impl FnMut(&Arc<Thread<C>>) -> F,
    ) -> Result<RestoredTasks<F::Output>, ProcessError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.restore_process_with(ns, image, default_target, code)
    }

    /// [`restore_process`](Self::restore_process), with each timer's notification target from
    /// `notify`, as [`Processes::restore_with`] asks it.
    ///
    /// # Errors
    /// As [`Processes::restore_with`].
    pub fn restore_process_with<F>(
        &self,
        ns: NsId,
        image: &Image,
        notify: impl FnMut(u32, NotifyKind) -> Option<Notify>,
        mut code: impl FnMut(&Arc<Thread<C>>) -> F,
    ) -> Result<RestoredTasks<F::Output>, ProcessError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let model: &Processes<P, C, T> = self.hooks().model();
        // The restored timers are armed on the attached wheel: attach it first.
        let _ = model.attach_wheel(self);
        let cpu = self.current_worker().unwrap_or(0);
        let restored = model.restore_with(ns, image, cpu, notify)?;
        let leader = (!restored.zombie_leader).then_some(restored.leader);
        Ok(leader
            .into_iter()
            .chain(restored.threads)
            .map(|thread| {
                let future = code(&thread);
                (thread.tid(), self.spawn_attached(thread, future))
            })
            .collect())
    }
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> Runtime<ProcessHooks<P, C, T>> {
    /// Restores the process of `image` into namespace `ns` and runs `code` on each of its
    /// threads; see [`Handle::restore_process`].
    ///
    /// # Errors
    /// As [`Processes::restore`].
    pub fn restore_process<F>(
        &self,
        ns: NsId,
        image: &Image,
        code: impl FnMut(&Arc<Thread<C>>) -> F,
    ) -> Result<RestoredTasks<F::Output>, ProcessError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle().restore_process(ns, image, code)
    }
}

/// The targets [`Processes::restore`] gives: none or a wakeup; a channel cannot be recreated.
fn default_target(_timer: u32, kind: NotifyKind) -> Option<Notify> {
    match kind {
        NotifyKind::None => Some(Notify::None),
        NotifyKind::Wake => Some(Notify::Wake),
        NotifyKind::Channel => None,
    }
}
