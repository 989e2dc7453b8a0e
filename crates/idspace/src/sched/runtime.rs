//! The runtime: workers, spawning, the wakeup path (`try_to_wake_up`) and shutdown.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::pin;
use std::task::{Context, Poll, Wake, Waker};

use super::builder::{BuildError, Builder, Policy};
use super::hooks::{Exit, Hooks, NoHooks, TaskId};
use super::io::Poller;
#[cfg(not(loom))]
use super::io::{BlockingPool, Reactor};
use super::join::{JoinHandle, JoinSlot};
use super::placement::{self, Affine, Placement};
use super::registry::Registry;
use super::stats::{Counters, Stats};
use super::task::{Schedule, TaskCell};
use super::time::{Driver, Timers};
use super::worker::{self, PollBudget, Worker};
// Type erasure: the runtime's state is reached as `Arc<dyn Driver>` and `Arc<dyn Any>`, and
// `block_on`'s waker is a `std::task::Wake`; loom's `Arc` can be neither.
use crate::sync::unmodeled::Arc;
use crate::sync::{self, thread, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;

/// One of a runtime's tasks, as queues and wakers hold it: its scheduler is the runtime's
/// shared state.
pub(crate) type TaskRef<H> = sync::Arc<TaskCell<Arc<RuntimeState<H>>>>;

/// `RuntimeState::detached` when no worker shut its own runtime down.
const NOT_DETACHED: usize = usize::MAX;

/// What the workers, the tasks and the handles share.
pub(crate) struct RuntimeState<H: Hooks> {
    workers: Box<[Worker<H>]>,
    /// Counters for wakeups made by threads that are not workers.
    external: CachePadded<Counters>,
    policy: Policy,
    placement: Placement,
    poll: PollBudget,
    /// Whether the workers share one poller.
    poller: Poller,
    hooks: Arc<H>,
    /// Every live task, for shutdown.
    registry: Registry<H>,
    /// Each worker's timer wheel.
    timers: Timers,
    shutdown: AtomicBool,
    /// The worker that shut the runtime down from one of its own polls, which shutdown could
    /// not wait for ([`NOT_DETACHED`] if none).
    detached: AtomicUsize,
    next_id: AtomicU64,
    /// Round-robin start for tasks spawned from outside the runtime.
    next_worker: AtomicUsize,
    /// Round-robin start for I/O resources registered from outside the runtime.
    #[cfg(not(loom))]
    next_io: AtomicUsize,
    /// Threads for work that must block.
    #[cfg(not(loom))]
    blocking: BlockingPool,
}

impl<H: Hooks> RuntimeState<H> {
    /// The shared state of a runtime of `workers` workers, before any thread starts.
    ///
    /// # Errors
    /// The system refused a poller (an epoll instance or its eventfd).
    pub(super) fn new(
        workers: usize,
        (policy, placement, poller): (Policy, Placement, Poller),
        poll: PollBudget,
        hooks: Arc<H>,
        blocking_threads: usize,
    ) -> Result<Arc<Self>, BuildError> {
        let count = workers;
        let workers = new_workers(count, poller)?;
        #[cfg(loom)]
        let _ = blocking_threads;
        Ok(Arc::new(RuntimeState {
            workers,
            external: CachePadded::new(Counters::default()),
            policy,
            placement,
            poll,
            poller,
            hooks,
            registry: Registry::new(),
            timers: Timers::new(count),
            shutdown: AtomicBool::new(false),
            detached: AtomicUsize::new(NOT_DETACHED),
            next_id: AtomicU64::new(1),
            next_worker: AtomicUsize::new(0),
            #[cfg(not(loom))]
            next_io: AtomicUsize::new(0),
            #[cfg(not(loom))]
            blocking: BlockingPool::new(blocking_threads),
        }))
    }
    pub(crate) fn worker(&self, index: usize) -> &Worker<H> {
        &self.workers[index]
    }

    /// Every distinct poller: each worker's, or the one they share.
    #[cfg(not(loom))]
    fn reactors(&self) -> impl Iterator<Item = &Reactor> {
        let distinct = match self.poller {
            Poller::PerWorker => self.workers.len(),
            Poller::Shared => 1,
        };
        self.workers[..distinct]
            .iter()
            .map(|worker| &**worker.reactor)
    }

    pub(crate) fn workers(&self) -> &[Worker<H>] {
        &self.workers
    }

    pub(crate) fn placement(&self) -> Placement {
        self.placement
    }

    /// The number of workers.
    #[cfg_attr(loom, allow(dead_code))] // Only the std build's poll budget counts them.
    pub(crate) fn worker_count(&self) -> usize {
        self.workers.len()
    }

    pub(crate) fn hooks(&self) -> &H {
        &self.hooks
    }

    pub(crate) fn timers(&self) -> &Timers {
        &self.timers
    }

    pub(crate) fn poll_budget(&self) -> PollBudget {
        self.poll
    }

    /// Whether worker `index` shut the runtime down from one of its own polls, so that what
    /// it still holds after that poll is its to cancel. Relaxed: written and read on that
    /// worker's thread.
    pub(crate) fn is_detached(&self, index: usize) -> bool {
        self.detached.load(Ordering::Relaxed) == index
    }

    /// Relaxed: the flag is published like any work (store, then `notify`'s fence) and read
    /// in the worker's fenced recheck.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    fn counters(&self, here: Option<usize>) -> &Counters {
        match here {
            Some(index) => &self.workers[index].counters,
            None => &self.external,
        }
    }

    /// Cancels a task that could not be queued (or was left queued) at shutdown.
    pub(crate) fn cancel(&self, task: TaskRef<H>, here: Option<usize>) {
        TaskCell::cancel(&task);
        self.counters(here).cancelled.add(1);
        self.exited(&task, here, Exit::Cancelled);
    }

    /// A task ended: it leaves the registry and the exit hook runs.
    /// A panic of the exit hook is caught: the task's outcome is already delivered, the panic
    /// hook has printed the message, and the thread (a worker, or whoever dropped the task's
    /// last waker) goes on.
    pub(crate) fn exited(&self, task: &TaskCell<Arc<Self>>, here: Option<usize>, how: Exit) {
        self.registry.remove(task.id());
        let exited = || self.hooks.exited(task.id(), task.data(), here, how);
        let _ = panic::catch_unwind(AssertUnwindSafe(exited));
    }

    /// `try_to_wake_up` after the task's state was claimed (it is `QUEUED` and ours): choose a
    /// target by the runtime's placement (`placement.rs`) and get the task onto it by its
    /// policy.
    fn wake(&self, task: TaskRef<H>) {
        let here = worker::current(self);
        // `wide`: the worker of a wide waker, whose wakee stays there if no worker is idle.
        let (task, wide) = match (here, self.placement) {
            (Some(this), Placement::Kernel) => {
                let worker = &self.workers[this];
                // The poller's worker delivering I/O events keeps the first wakee when nothing
                // else waits on it (see the protocol, section 8).
                #[cfg(not(loom))]
                if super::io::delivering() && worker.load() == 0 {
                    worker.counters.local.add(1);
                    if let Err(task) = worker.enqueue(task) {
                        self.cancel(task, here);
                    }
                    return;
                }
                match worker.local.wake_affine(task) {
                    Affine::Slotted(displaced) => {
                        worker.counters.affine.add(1);
                        if let Some(displaced) = displaced {
                            self.displaced(displaced, this);
                        }
                        return;
                    }
                    Affine::Wide(task) => (task, Some(this)),
                    Affine::No(task) => (task, None),
                }
            }
            _ => (task, None),
        };
        let prev = task.last_worker();
        let target = match (self.placement, wide) {
            (Placement::Kernel, Some(this)) => placement::select_wide(&self.workers, prev, this),
            (Placement::Kernel, None) => placement::select_idle(&self.workers, prev, here),
            (Placement::Remote, _) => placement::select_remote(&self.workers, prev, here),
        };
        self.queue(task, target, here);
    }

    /// A sync wakeup displaced `task` from worker `this`'s next slot: it goes to the back of
    /// `this`'s run queue, and an idle worker, if there is one, is notified to come and steal
    /// it (the only notification of the local path).
    fn displaced(&self, task: TaskRef<H>, this: usize) {
        let worker = &self.workers[this];
        worker.counters.local.add(1);
        if let Err(task) = worker.enqueue(task) {
            self.cancel(task, Some(this));
            return;
        }
        if let Some(idle) = placement::idle_worker(&self.workers, this, Some(this)) {
            self.workers[idle].notify(&worker.counters);
        }
    }

    fn queue(&self, task: TaskRef<H>, target: usize, here: Option<usize>) {
        let counters = self.counters(here);
        let worker = &self.workers[target];
        if here == Some(target) {
            // Waking onto our own worker: it is running (it is us), so no notification, and the
            // wakelist is never used for the local CPU (`cpu == smp_processor_id()`).
            counters.local.add(1);
            if let Err(task) = worker.enqueue(task) {
                self.cancel(task, here);
            }
            return;
        }
        let use_wakelist = match self.policy {
            Policy::Locked => false,
            Policy::Wakelist => worker.nothing_running(),
            Policy::WakelistAlways => true,
        };
        if use_wakelist {
            counters.wakelist.add(1);
            match worker.push_wakelist(task) {
                // Only the push that made the list non-empty notifies: the worker takes the
                // whole list at once, so later pushes ride on that notification.
                Ok(true) => worker.notify(counters),
                Ok(false) => {}
                Err(task) => self.cancel(task, here),
            }
        } else {
            counters.locked.add(1);
            match worker.enqueue(task) {
                Ok(()) => worker.notify(counters),
                Err(task) => self.cancel(task, here),
            }
        }
    }

    /// Spawns `future` with the data the hooks' `created` makes, or with `data` if given.
    fn spawn<F>(self: &Arc<Self>, data: Option<H::Data>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // Relaxed: IDs need only be unique.
        let id = TaskId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let here = worker::current(self);
        let home = here.unwrap_or_else(|| {
            // Relaxed: spreading external spawns is a heuristic.
            self.next_worker.fetch_add(1, Ordering::Relaxed) % self.workers.len()
        });
        let slot = JoinSlot::new();
        let data = data.unwrap_or_else(|| self.hooks.created(id, here));
        let task = TaskCell::spawned(
            Arc::clone(self),
            id,
            home,
            data,
            future,
            sync::Arc::clone(&slot),
        );
        self.registry.insert(&task);
        self.counters(here).spawned.add(1);
        // A new task is placed like a woken one (`wake_up_new_task`).
        let target = placement::select_idle(&self.workers, home, here);
        self.queue(task, target, here);
        JoinHandle::new(slot, id)
    }

    fn stats(&self) -> Stats {
        let mut total = Stats::default();
        for worker in self.workers.iter() {
            worker.counters.add_to(&mut total);
        }
        self.external.add_to(&mut total);
        total
    }
}

/// `count` workers, each with its own poller or all with one shared poller.
///
/// # Errors
/// The system refused a poller (an epoll instance or its eventfd).
fn new_workers<H: Hooks>(count: usize, poller: Poller) -> Result<Box<[Worker<H>]>, BuildError> {
    #[cfg(loom)]
    {
        let _ = poller;
        Ok((0..count).map(|_| Worker::new()).collect())
    }
    #[cfg(not(loom))]
    {
        let new_reactor = || {
            Reactor::new()
                .map(|reactor| Arc::new(CachePadded::new(reactor)))
                .map_err(|error| BuildError::Poller(error.to_string()))
        };
        let shared = match poller {
            Poller::PerWorker => None,
            Poller::Shared => Some(new_reactor()?),
        };
        (0..count)
            .map(|_| {
                let reactor = match &shared {
                    Some(shared) => Arc::clone(shared),
                    None => new_reactor()?,
                };
                Ok(Worker::new(reactor))
            })
            .collect()
    }
}

/// What tasks ask of the runtime. A task holds its runtime's `Arc<RuntimeState>` as its scheduler.
impl<H: Hooks> Schedule for Arc<RuntimeState<H>> {
    type Data = H::Data;

    fn schedule(&self, task: TaskRef<H>) {
        self.wake(task);
    }

    fn abandoned(&self, task: &TaskCell<Self>) {
        self.exited(task, None, Exit::Cancelled);
    }
}

/// The timers' view of a runtime: its wheels, and notifications for its workers.
impl<H: Hooks> Driver for RuntimeState<H> {
    fn timers(&self) -> &Timers {
        &self.timers
    }

    fn here(&self) -> Option<usize> {
        worker::current(self)
    }

    fn kick(&self, index: usize) {
        self.workers[index].notify(&self.external);
    }

    #[cfg(not(loom))]
    fn reactor(&self, worker: usize) -> &Reactor {
        &self.workers[worker].reactor
    }

    #[cfg(not(loom))]
    fn io_home(&self) -> usize {
        // Relaxed: spreading resources is a heuristic.
        self.next_io.fetch_add(1, Ordering::Relaxed) % self.workers.len()
    }

    #[cfg(not(loom))]
    fn blocking(&self) -> &BlockingPool {
        &self.blocking
    }

    #[cfg(not(loom))]
    fn next_task_id(&self) -> TaskId {
        // Relaxed: IDs need only be unique.
        TaskId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }
}

/// The current thread's runtime, type-erased twice: as `Any` for [`Handle::current`] to
/// downcast, and as the timers' [`Driver`] for the time futures, which know no hooks' type.
type Current = (Arc<dyn Any + Send + Sync>, Arc<dyn Driver>);

#[cfg(not(loom))]
sync::thread_local! {
    /// The runtime the current thread works for: set on its workers, and on a thread inside
    /// [`Runtime::block_on`]. Type-erased, as the runtime is generic over its hooks. Const
    /// initialised: the time futures look it up on every arm.
    static ENTERED: RefCell<Option<Current>> = const { RefCell::new(None) };
}

// loom's `thread_local!` takes no `const` initialisers.
#[cfg(loom)]
sync::thread_local! {
    static ENTERED: RefCell<Option<Current>> = RefCell::new(None);
}

/// Makes `shared` the current thread's runtime until the guard drops (then the previous one).
pub(crate) fn enter<H: Hooks>(shared: Arc<RuntimeState<H>>) -> Entered {
    let driver: Arc<dyn Driver> = Arc::clone(&shared) as Arc<dyn Driver>;
    let shared: Arc<dyn Any + Send + Sync> = shared;
    Entered(ENTERED.with(|entered| entered.borrow_mut().replace((shared, driver))))
}

/// The current thread's runtime, as the I/O resources and the blocking pool need it.
#[cfg(not(loom))]
pub(crate) fn current_driver() -> Option<Arc<dyn Driver>> {
    ENTERED.with(|entered| {
        entered
            .borrow()
            .as_ref()
            .map(|(_, driver)| Arc::clone(driver))
    })
}

/// Runs `f` with the timers of the current thread's runtime, if it has one (borrowed: no
/// reference count is taken).
pub(crate) fn with_current_driver<R>(f: impl FnOnce(Option<&dyn Driver>) -> R) -> R {
    ENTERED.with(|entered| f(entered.borrow().as_ref().map(|(_, driver)| driver.as_ref())))
}

/// Restores the previous runtime of the thread when dropped.
pub(crate) struct Entered(Option<Current>);

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.0.take();
        ENTERED.with(|entered| *entered.borrow_mut() = previous);
    }
}

/// Why [`Handle::current`] or [`spawn`] found no runtime.
///
/// ```
/// use idspace::sched::{spawn, NoRuntime};
///
/// assert_eq!(spawn(async {}).err(), Some(NoRuntime));
/// assert!(NoRuntime.to_string().contains("block_on"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRuntime;

impl fmt::Display for NoRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "not inside a runtime of this kind: call from one of its tasks or its block_on"
        )
    }
}

impl std::error::Error for NoRuntime {}

/// Spawns `future` onto the runtime (without hooks) that runs the calling code: from inside its
/// tasks or its [`Runtime::block_on`]. Within a runtime with hooks, use
/// [`Handle::current`] with the hooks' type.
///
/// # Errors
/// [`NoRuntime`] when the caller is not inside such a runtime.
///
/// ```
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// // Tasks spawn tasks without a handle at hand.
/// let fan_out = runtime.spawn(async {
///     let children: Vec<_> = (0..4u32).map(|n| spawn(async move { n * 10 }).unwrap()).collect();
///     let mut sum = 0;
///     for child in children {
///         sum += child.await.expect("completed");
///     }
///     sum
/// });
/// assert_eq!(fan_out.join()?, 60);
/// # Ok(())
/// # }
/// ```
pub fn spawn<F>(future: F) -> Result<JoinHandle<F::Output>, NoRuntime>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Handle::<NoHooks>::current().map(|handle| handle.spawn(future))
}

/// The message of the panic of [`Runtime::block_on`] called on a worker thread.
const BLOCK_ON_IN_WORKER: &str = "Runtime::block_on was called from inside a runtime (a task, \
     hook or timer callback running on a worker thread): blocking that worker would stop the \
     tasks and timers the future waits for, a deadlock. Await the future instead, or spawn it \
     and await its JoinHandle";

/// Wakes the thread blocked in [`Runtime::block_on`].
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A cheap, clonable handle that spawns onto a runtime, from inside its tasks or from any
/// thread.
///
/// ```
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// let handle = runtime.handle().clone();
/// // From another thread.
/// let from_thread = std::thread::spawn(move || {
///     let worker = handle.spawn(async {}).join();
///     (worker.is_ok(), handle.current_worker())
/// });
/// // Not a worker of the runtime: no worker index.
/// assert_eq!(from_thread.join().unwrap(), (true, None));
/// // Inside a task, the worker that polls it.
/// let inside = runtime.handle().clone();
/// let worker = runtime.spawn(async move { inside.current_worker() }).join()?;
/// assert!(worker.is_some_and(|index| index < 2));
/// assert!(runtime.handle().stats().spawned >= 2);
/// # Ok(())
/// # }
/// ```
pub struct Handle<H: Hooks = NoHooks> {
    shared: Arc<RuntimeState<H>>,
}

impl<H: Hooks> Clone for Handle<H> {
    fn clone(&self) -> Self {
        Handle {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<H: Hooks> fmt::Debug for Handle<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.shared.workers.len())
            .field("policy", &self.shared.policy)
            .field("placement", &self.shared.placement)
            .finish()
    }
}

impl<H: Hooks> Handle<H> {
    /// The handle of the runtime running the calling code (from inside one of its tasks, or
    /// inside its [`Runtime::block_on`]).
    ///
    /// # Errors
    /// [`NoRuntime`] outside a runtime, or inside one whose hooks are not `H`.
    ///
    /// ```
    /// use idspace::sched::{Handle, NoRuntime, Policy, Runtime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// assert_eq!(Handle::<idspace::sched::NoHooks>::current().err(), Some(NoRuntime));
    /// let runtime = Runtime::new(3, Policy::Locked)?;
    /// let workers = runtime.block_on(async {
    ///     let handle: Handle = Handle::current().expect("inside block_on");
    ///     (handle.workers(), handle.policy())
    /// })?;
    /// assert_eq!(workers, (3, Policy::Locked));
    /// # Ok(())
    /// # }
    /// ```
    pub fn current() -> Result<Handle<H>, NoRuntime> {
        ENTERED
            .with(|entered| {
                entered
                    .borrow()
                    .as_ref()
                    .map(|(shared, _)| Arc::clone(shared))
            })
            .and_then(|shared| shared.downcast::<RuntimeState<H>>().ok())
            .map(|shared| Handle { shared })
            .ok_or(NoRuntime)
    }

    /// Spawns `future` as a new task. After shutdown the task is cancelled at once and its
    /// handle reports [`JoinError::Cancelled`](super::JoinError::Cancelled).
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared.spawn(None, future)
    }

    /// Spawns `future` as a new task carrying `data` (the hooks' `created` is not called for
    /// it): for callers that know more about the new task than the hooks can, such as the
    /// process it belongs to.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use idspace::sched::{Builder, Exit, Hooks, TaskId};
    ///
    /// /// Tasks carry a name; the hooks record who ended.
    /// #[derive(Default)]
    /// struct Names(Mutex<Vec<&'static str>>);
    /// impl Hooks for Names {
    ///     type Data = &'static str;
    ///     fn created(&self, _task: TaskId, _worker: Option<usize>) -> &'static str {
    ///         "anonymous"
    ///     }
    ///     fn exited(&self, _task: TaskId, name: &&'static str, _: Option<usize>, _how: Exit) {
    ///         self.0.lock().unwrap().push(*name);
    ///     }
    /// }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let names = Arc::new(Names::default());
    /// let runtime = Builder::new().workers(1).hooks(Arc::clone(&names)).build()?;
    /// runtime.handle().spawn_with("logger", async {}).join()?;
    /// runtime.spawn(async {}).join()?;
    /// drop(runtime); // every exit hook has run once the workers stopped
    /// assert_eq!(*names.0.lock().unwrap(), ["logger", "anonymous"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn spawn_with<F>(&self, data: H::Data, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared.spawn(Some(data), future)
    }

    /// Runs `f` on the runtime's blocking pool: threads beside the workers, at most
    /// [`Builder::blocking_threads`](super::Builder::blocking_threads) at once, for work that
    /// must block (file I/O, DNS, a blocking C call) without stopping a worker. Await the
    /// handle inside the runtime or [`join`](JoinHandle::join) it from a thread. After
    /// shutdown, and for jobs still queued at shutdown, the handle reports
    /// [`JoinError::Cancelled`](super::JoinError::Cancelled); a panic in `f` is reported as
    /// [`JoinError::Panicked`](super::JoinError::Panicked).
    ///
    /// ```
    /// use idspace::sched::{Policy, Runtime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let runtime = Runtime::new(1, Policy::Wakelist)?;
    /// let handle = runtime.handle().clone();
    /// let hostname = runtime.block_on(async move {
    ///     handle.spawn_blocking(|| std::fs::read_to_string("/proc/sys/kernel/ostype")).await
    /// })???;
    /// assert_eq!(hostname.trim(), "Linux");
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(not(loom))]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let id = TaskId(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
        self.shared.blocking.spawn(id, f)
    }

    /// How many I/O resources (sockets, pipe ends) are registered with the workers' pollers
    /// now: each one from its creation until it is dropped.
    ///
    /// ```
    /// use idspace::net::socketpair;
    /// use idspace::sched::{Policy, Runtime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let runtime = Runtime::new(2, Policy::Wakelist)?;
    /// let pair = runtime.block_on(async { socketpair() })??;
    /// assert_eq!(runtime.handle().io_sources(), 2);
    /// drop(pair);
    /// assert_eq!(runtime.handle().io_sources(), 0);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(not(loom))]
    pub fn io_sources(&self) -> usize {
        self.shared.reactors().map(Reactor::sources).sum()
    }

    /// Whether the workers poll a poller each or share one.
    pub fn poller(&self) -> Poller {
        self.shared.poller
    }

    /// The runtime's hooks.
    pub fn hooks(&self) -> &H {
        self.shared.hooks()
    }

    /// The runtime's wakeup policy.
    pub fn policy(&self) -> Policy {
        self.shared.policy
    }

    /// The runtime's wakee placement.
    pub fn placement(&self) -> Placement {
        self.shared.placement
    }

    /// The number of workers.
    pub fn workers(&self) -> usize {
        self.shared.workers.len()
    }

    /// The index of the worker running the calling code, if it runs on one of this runtime's
    /// workers.
    pub fn current_worker(&self) -> Option<usize> {
        worker::current(&self.shared)
    }

    /// Counters of how wakeups travelled so far.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// The runtime's timers, its hooks' type erased.
    pub(crate) fn driver(&self) -> Arc<dyn Driver> {
        Arc::clone(&self.shared) as Arc<dyn Driver>
    }
}

/// A running runtime: its workers and a [`Handle`]. Dropping it shuts it down, as
/// [`Runtime::shutdown`] describes (also for a runtime dropped by one of its own tasks, and for
/// its timers still pending elsewhere).
///
/// ```
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// let answer = runtime.block_on(async { 6 * 7 })?;
/// assert_eq!(answer, 42);
///
/// // Tasks spawn tasks and await their handles; a panic is reported, not propagated.
/// let handle = runtime.handle().clone();
/// let sum = runtime.block_on(async move {
///     let parts: Vec<_> = (1..=4u64).map(|n| handle.spawn(async move { n * n })).collect();
///     let mut sum = 0;
///     for part in parts {
///         sum += part.await.expect("the task completed");
///     }
///     sum
/// })?;
/// assert_eq!(sum, 30);
/// let failed = runtime.spawn(async { panic!("boom") }).join();
/// assert_eq!(failed.unwrap_err().panic_message(), Some("boom"));
/// # Ok(())
/// # }
/// ```
pub struct Runtime<H: Hooks = NoHooks> {
    handle: Handle<H>,
    threads: Vec<thread::JoinHandle<()>>,
    cancelled: usize,
}

impl<H: Hooks> fmt::Debug for Runtime<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("handle", &self.handle)
            .finish()
    }
}

impl Runtime {
    /// A runtime with `workers` workers and `policy`, the other settings at their defaults.
    pub fn new(workers: usize, policy: Policy) -> Result<Runtime, BuildError> {
        Builder::new().workers(workers).policy(policy).build()
    }
}

impl<H: Hooks> Runtime<H> {
    /// The runtime over `shared`, before its workers start ([`started`](Self::started) adds
    /// them one by one; dropping it stops those already started).
    pub(super) fn starting(shared: Arc<RuntimeState<H>>) -> Self {
        let workers = shared.workers.len();
        Runtime {
            handle: Handle { shared },
            threads: Vec::with_capacity(workers),
            cancelled: 0,
        }
    }

    /// The next worker's thread has started.
    pub(super) fn started(&mut self, thread: thread::JoinHandle<()>) {
        self.threads.push(thread);
    }

    /// A handle for spawning.
    pub fn handle(&self) -> &Handle<H> {
        &self.handle
    }

    /// Spawns `future`; see [`Handle::spawn`].
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// Runs `future` on the calling thread, parking it while the future waits, until it
    /// finishes; the future may borrow from the caller and need not be `Send`. Inside it,
    /// [`Handle::current`] and [`spawn`] reach this runtime, and awaiting the runtime's tasks
    /// works as anywhere. The future is not one of the runtime's tasks (no hooks see it).
    ///
    /// Nested inside another runtime's `block_on` it works (the thread is not a worker), but
    /// not from a task or a timer callback of any runtime: a worker blocked here could not run
    /// the tasks and fire the timers its future waits for.
    ///
    /// # Errors
    /// [`JoinError::Panicked`](super::JoinError::Panicked) if the future panicked.
    ///
    /// # Panics
    /// When called on a runtime's worker thread (from a task, a hook or a timer callback), with
    /// a message saying so: await the future there instead.
    ///
    /// ```
    /// use idspace::sched::{Policy, Runtime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let runtime = Runtime::new(1, Policy::Wakelist)?;
    /// // The future may borrow from the caller.
    /// let mut words = vec!["id", "space"];
    /// let joined = runtime.block_on(async {
    ///     words.push("!");
    ///     words.concat()
    /// })?;
    /// assert_eq!(joined, "idspace!");
    /// // A panic comes back as an error; the runtime goes on.
    /// let failed = runtime.block_on(async { panic!("inside block_on") });
    /// assert_eq!(failed.unwrap_err().panic_message(), Some("inside block_on"));
    /// assert_eq!(runtime.block_on(async { 1 })?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn block_on<F: Future>(&self, future: F) -> Result<F::Output, super::JoinError> {
        if worker::on_worker() {
            panic!("{BLOCK_ON_IN_WORKER}");
        }
        let _entered = enter(Arc::clone(&self.handle.shared));
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            match panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
                Ok(Poll::Ready(output)) => return Ok(output),
                // A wakeup before the park leaves its token: the park returns at once.
                Ok(Poll::Pending) => std::thread::park(),
                Err(payload) => return Err(super::JoinError::panicked(payload)),
            }
        }
    }

    /// Counters of how wakeups travelled so far.
    pub fn stats(&self) -> Stats {
        self.handle.stats()
    }

    /// Stops the workers (each finishes the poll it is in), then cancels every task still
    /// queued and every task asleep (their futures are dropped and their handles report
    /// [`JoinError::Cancelled`](super::JoinError::Cancelled), even while something still holds
    /// their wakers); wakeups and spawns from then on cancel their task instead of queueing it.
    /// Returns how many tasks shutting down cancelled (a later call cancels nothing more and
    /// returns the same count). Idempotent; dropping the runtime does it too.
    ///
    /// Sleeps and timeouts of this runtime that are pending elsewhere (made by
    /// [`Handle::sleep`] or [`Handle::timeout`] and polled on another thread or runtime) are
    /// woken: a sleep then panics at its next poll, saying that its runtime shut down, and a
    /// timeout fails with an [`Elapsed`](super::time::Elapsed) that
    /// [`is_shut_down`](super::time::Elapsed::is_shut_down); neither waits forever.
    ///
    /// Called (or the runtime dropped) from one of the runtime's own tasks or timer callbacks,
    /// it cannot wait for the worker it runs on: that worker is detached and stops as soon as
    /// the current poll returns, and the calling task is cancelled then unless it completes in
    /// that poll. Everything else happens as from outside, before the call returns.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idspace::sched::time::sleep;
    /// use idspace::sched::{JoinError, Policy, Runtime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut runtime = Runtime::new(1, Policy::Wakelist)?;
    /// let sleeper = runtime.spawn(sleep(Duration::from_secs(3600)));
    /// assert_eq!(runtime.shutdown(), 1);
    /// assert!(matches!(sleeper.join(), Err(JoinError::Cancelled)));
    /// assert_eq!(runtime.shutdown(), 1, "idempotent: the same count again");
    /// // Spawns after shutdown are cancelled at once.
    /// assert!(runtime.spawn(async {}).join().is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn shutdown(&mut self) -> usize {
        let shared = &self.handle.shared;
        // Published like work: `notify` below fences before reading each idle word.
        shared.shutdown.store(true, Ordering::Relaxed);
        for worker in shared.workers.iter() {
            worker.notify(&shared.external);
        }
        // Called from one of this runtime's own tasks (or timer callbacks), the calling worker
        // cannot wait for itself: it is detached instead, and stops once the current poll
        // returns (see `worker::run`).
        let here = worker::current(shared);
        if let Some(index) = here {
            shared.detached.store(index, Ordering::Relaxed);
        }
        for (index, thread) in self.threads.drain(..).enumerate() {
            if here == Some(index) {
                continue;
            }
            // A worker thread ends only by returning (hooks' panics are caught); if it did
            // panic, the other workers and the queues are still shut down below.
            let _ = thread.join();
        }
        for worker in shared.workers.iter() {
            for task in worker.close() {
                shared.cancel(task, None);
                self.cancelled += 1;
            }
        }
        // The sleepers: claimed as a wakeup claims them (so a racing waker or a task that just
        // ended is left alone), then cancelled as a wakeup onto a closed queue would be.
        for task in shared.registry.drain() {
            if task.claim_wakeup() {
                shared.cancel(task, None);
                self.cancelled += 1;
            }
        }
        // Armed timers are dropped, outside the wheels' locks: their wakers and targets may
        // hold the runtime (a cycle through the wheel that this breaks), and arms from now on
        // are refused. Sleeping futures polled outside the runtime are woken, to find it gone.
        shared.timers.close();
        // The I/O resources still registered (held by futures outside the runtime, or by
        // nobody's task any more) fail from now on, and their waiters are woken to see it; the
        // blocking pool cancels its queue.
        #[cfg(not(loom))]
        {
            for reactor in shared.reactors() {
                reactor.close();
            }
            shared.blocking.shut_down();
        }
        self.cancelled
    }
}

impl<H: Hooks> Drop for Runtime<H> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Runtimes without worker threads and tasks nothing runs, for the unit tests and models of
/// the scheduler's parts.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// The shared state of a runtime of `workers` workers without threads.
    pub(crate) fn shared(workers: usize) -> Arc<RuntimeState<NoHooks>> {
        Builder::new().workers(workers).shared()
    }

    /// A task for `shared` that nothing runs: the workers have no threads.
    pub(crate) fn idle_task(
        shared: &Arc<RuntimeState<NoHooks>>,
        home: usize,
        id: u64,
    ) -> TaskRef<NoHooks> {
        TaskCell::spawned(
            Arc::clone(shared),
            TaskId(id),
            home,
            (),
            async {},
            JoinSlot::<()>::new(),
        )
    }

    /// Closes every worker of `shared` and returns the IDs of the tasks left on them, after
    /// checking that each worker held exactly what its queued and pending counts said.
    #[cfg(loom)]
    pub(crate) fn close_all(shared: &RuntimeState<NoHooks>) -> Vec<u64> {
        let mut left_ids = Vec::new();
        for worker in shared.workers() {
            let (queued, pending) = (worker.queued(), worker.pending());
            let left = worker.close();
            assert_eq!(left.len(), queued + pending);
            left_ids.extend(left.iter().map(|task| task.id().0));
        }
        left_ids
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::test_support::idle_task;
    use super::*;

    fn select(shared: &RuntimeState<NoHooks>, prev: usize, here: Option<usize>) -> usize {
        placement::select_idle(&shared.workers, prev, here)
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri has no sockets")]
    fn accepted_connections_are_spread_over_the_workers_pollers() {
        let runtime = Builder::new()
            .workers(2)
            .poller(Poller::PerWorker)
            .build()
            .expect("a runtime");
        let per_worker = runtime
            .block_on(async {
                let listener =
                    crate::net::TcpListener::bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
                let addr = listener.local_addr()?;
                let clients = std::thread::spawn(move || {
                    (0..4)
                        .map(|_| std::net::TcpStream::connect(addr))
                        .collect::<std::io::Result<Vec<_>>>()
                });
                let mut accepted = Vec::new();
                for _ in 0..4 {
                    accepted.push(listener.accept().await?.0);
                }
                let clients = clients.join().expect("the client thread")?;
                // The listener itself is registered with one poller; the four connections
                // alternate between both.
                let shared = &runtime.handle().shared;
                let counts: Vec<usize> = shared.reactors().map(Reactor::sources).collect();
                drop((accepted, clients));
                std::io::Result::Ok(counts)
            })
            .expect("block_on")
            .expect("loopback connections");
        assert_eq!(per_worker.iter().sum::<usize>(), 5, "{per_worker:?}");
        assert!(per_worker.iter().all(|&n| n >= 2), "{per_worker:?}");
    }

    #[test]
    fn pending_wakeups_count_as_load_when_choosing_a_target() {
        let shared = Builder::new().workers(3).shared();
        for worker in shared.workers.iter() {
            worker.idle.start_polling();
        }
        assert_eq!(select(&shared, 0, None), 0, "an idle last worker is kept");
        // A wakeup pending on worker 0's wakelist makes it busy: the next one goes elsewhere
        // instead of stacking on it (d6962c4fe8f9).
        assert!(matches!(
            shared.workers[0].push_wakelist(idle_task(&shared, 0, 1)),
            Ok(true)
        ));
        assert_eq!(select(&shared, 0, None), 1);
        assert!(matches!(
            shared.workers[1].push_wakelist(idle_task(&shared, 0, 1)),
            Ok(true)
        ));
        assert_eq!(select(&shared, 0, None), 2);
        // Queued tasks are load too; with no idle worker left, the last worker is kept.
        assert!(shared.workers[2].enqueue(idle_task(&shared, 2, 1)).is_ok());
        assert_eq!(select(&shared, 0, None), 0);
        assert_eq!(select(&shared, 2, None), 2);
        // A waker on a worker with a shorter queue than the last worker's takes the task
        // (wake-affine); with equal queues the last worker keeps it.
        assert!(shared.workers[2].enqueue(idle_task(&shared, 2, 1)).is_ok());
        assert_eq!(select(&shared, 2, Some(0)), 0);
        assert_eq!(select(&shared, 0, Some(1)), 0);
        // A wide waker's wakee stays with the waker, whatever the queues' lengths.
        assert_eq!(placement::select_wide(&shared.workers, 0, 1), 1);
        assert_eq!(
            placement::select_wide(&shared.workers, 0, 2),
            2,
            "the longest queue"
        );
        // Closing hands the tasks back, so the test leaves nothing behind.
        for worker in shared.workers.iter() {
            drop(worker.close());
        }
    }

    #[test]
    fn the_wakelist_policy_queues_only_where_nothing_runs() {
        for (policy, expect_wakelist) in [
            (Policy::Locked, [false, false, false, false]),
            (Policy::Wakelist, [true, true, false, false]),
            (Policy::WakelistAlways, [true, true, true, true]),
        ] {
            let shared = Builder::new().workers(2).policy(policy).shared();
            shared.workers[1].idle.start_polling();
            // Worker 1 idles: the first wakeup onto it.
            shared.queue(idle_task(&shared, 1, 1), 1, None);
            // A wakeup pending on its wakelist is not running there (`nr_running` does not
            // count `ttwu_pending`): the second joins the first's batch, with no notification.
            shared.queue(idle_task(&shared, 1, 1), 1, None);
            // A task on its run queue is: the third is queued under the lock.
            assert!(shared.workers[1].enqueue(idle_task(&shared, 1, 1)).is_ok());
            shared.queue(idle_task(&shared, 1, 1), 1, None);
            let stats = shared.stats();
            let via_wakelist = expect_wakelist[..3].iter().filter(|&&w| w).count() as u64;
            assert_eq!(stats.wakelist, via_wakelist, "{policy}: {stats:?}");
            assert_eq!(stats.locked, 3 - via_wakelist, "{policy}: {stats:?}");
            // Only the first notification found the worker polling; it is notified since.
            assert_eq!(stats.notify_polling, 1, "{policy}: {stats:?}");
            for worker in shared.workers.iter() {
                drop(worker.close());
            }
            // Both workers below are `RUNNING`, queues empty. One polling a task is busy; one
            // whose last task's poll returned, looking for more, is about to be idle: the
            // wakelist again (under `wakelist`).
            for (current, expect) in [(true, expect_wakelist[3]), (false, expect_wakelist[0])] {
                let shared = Builder::new().workers(2).policy(policy).shared();
                shared.workers[1].idle.set_current(current);
                shared.queue(idle_task(&shared, 1, 1), 1, None);
                let stats = shared.stats();
                assert_eq!(
                    stats.wakelist,
                    u64::from(expect),
                    "{policy}, {current}: {stats:?}"
                );
                assert_eq!(stats.notify_polling + stats.notify_futex, 0, "{policy}");
                drop(shared.workers[1].close());
            }
        }
    }
}
