//! Configuring a runtime: the [`Builder`], its settings' ranges, the wakeup [`Policy`], and
//! why a build fails ([`BuildError`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::hooks::{Hooks, NoHooks};
use super::io::Poller;
use super::placement::Placement;
use super::runtime::{Runtime, RuntimeState};
use super::worker::{self, PollBudget};
// The runtime's state, type-erased elsewhere (see `runtime`).
use crate::sync::thread;
use crate::sync::unmodeled::Arc;

/// The most workers a runtime can have.
pub const MAX_WORKERS: usize = 1024;

/// The longest idle poll a runtime accepts ([`Builder::poll`]). An idle worker that polled
/// longer would burn a CPU for a whole scheduler time slice and more; the kernel's idle
/// polling lasts tens of microseconds.
pub const MAX_POLL: Duration = Duration::from_secs(1);

/// The blocking pool's default size ([`Builder::blocking_threads`]).
pub const DEFAULT_BLOCKING_THREADS: usize = 64;

/// The poller shape a [`Builder`] starts with (see [`Poller`]).
pub const DEFAULT_POLLER: Poller = Poller::Shared;

/// How a wakeup reaches a task's target worker.
///
/// ```
/// use idspace::sched::{BuildError, Policy};
///
/// // Names as the lab and the CLI spell them.
/// let names: Vec<&str> = Policy::ALL.iter().map(|policy| policy.name()).collect();
/// assert_eq!(names, ["locked", "wakelist", "wakelist-always"]);
/// assert_eq!("wakelist".parse::<Policy>(), Ok(Policy::Wakelist));
/// assert_eq!(Policy::WakelistAlways.to_string(), "wakelist-always");
/// assert_eq!("fifo".parse::<Policy>(), Err(BuildError::UnknownPolicy("fifo".into())));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Policy {
    /// Lock the target's run queue, enqueue, notify it if it idles (the kernel before the
    /// wakelist, and `TTWU_QUEUE` off).
    Locked,
    /// Push onto the target's wakelist when it is idle (nothing running, nothing queued, no
    /// wakeups pending), otherwise lock and enqueue: the kernel's `ttwu_queue_cond` since
    /// f3dd3f674555.
    Wakelist,
    /// Always push onto the target's wakelist, busy or not (the `TTWU_QUEUE_DEFAULT`
    /// experiment that regressed upstream).
    WakelistAlways,
}

impl Policy {
    /// Every policy, in the order the lab reports them.
    pub const ALL: [Policy; 3] = [Policy::Locked, Policy::Wakelist, Policy::WakelistAlways];

    /// The policy's name: `locked`, `wakelist` or `wakelist-always`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Locked => "locked",
            Policy::Wakelist => "wakelist",
            Policy::WakelistAlways => "wakelist-always",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = BuildError;

    fn from_str(name: &str) -> Result<Policy, BuildError> {
        Policy::ALL
            .into_iter()
            .find(|policy| policy.name() == name)
            .ok_or_else(|| BuildError::UnknownPolicy(name.to_string()))
    }
}

/// Why a runtime could not be built.
///
/// ```
/// use std::time::Duration;
/// use idspace::sched::{BuildError, Builder, Placement, MAX_WORKERS};
///
/// assert_eq!(Builder::new().workers(0).build().err(), Some(BuildError::Workers(0)));
/// let too_many = Builder::new().workers(MAX_WORKERS + 1).build().err();
/// assert_eq!(too_many, Some(BuildError::Workers(MAX_WORKERS + 1)));
/// // Every value is checked before a thread starts, and the error names the field.
/// let poll = Builder::new().poll(Duration::MAX).build().unwrap_err();
/// assert_eq!(poll, BuildError::Poll(Duration::MAX));
/// assert!(poll.to_string().starts_with("poll: "));
/// let unknown = "nearest".parse::<Placement>().unwrap_err();
/// assert_eq!(unknown, BuildError::UnknownPlacement("nearest".into()));
/// assert_eq!(unknown.to_string(), "unknown wakee placement \"nearest\" (known: kernel, remote)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The worker count ([`Builder::workers`]) is 0 or above [`MAX_WORKERS`].
    Workers(usize),
    /// The idle poll ([`Builder::poll`]) is longer than [`MAX_POLL`].
    Poll(Duration),
    /// A policy name that is none of `locked`, `wakelist`, `wakelist-always`.
    UnknownPolicy(String),
    /// A placement name that is neither `kernel` nor `remote`.
    UnknownPlacement(String),
    /// The operating system refused a worker thread.
    Spawn(String),
    /// The operating system refused a worker's poller (an epoll instance or an eventfd).
    Poller(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Workers(n) => {
                write!(
                    f,
                    "workers: a runtime needs 1 to {MAX_WORKERS} workers, not {n}"
                )
            }
            BuildError::Poll(poll) => {
                write!(
                    f,
                    "poll: an idle poll lasts at most {MAX_POLL:?}, not {poll:?}"
                )
            }
            BuildError::UnknownPolicy(name) => write!(
                f,
                "unknown wakeup policy \"{name}\" (known: locked, wakelist, wakelist-always)"
            ),
            BuildError::UnknownPlacement(name) => write!(
                f,
                "unknown wakee placement \"{name}\" (known: kernel, remote)"
            ),
            BuildError::Spawn(error) => write!(f, "cannot start a worker thread: {error}"),
            BuildError::Poller(error) => write!(f, "cannot create a worker's poller: {error}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// Configures and starts a [`Runtime`] whose tasks carry the data of hooks `H`.
///
/// ```
/// use std::time::Duration;
/// use idspace::sched::{Builder, Placement, Policy};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Builder::new()
///     .workers(2)
///     .policy(Policy::Locked)
///     .placement(Placement::Remote)
///     .poll(Duration::ZERO) // idle workers park at once
///     .build()?;
/// let handle = runtime.handle();
/// assert_eq!(handle.workers(), 2);
/// assert_eq!((handle.policy(), handle.placement()), (Policy::Locked, Placement::Remote));
/// assert_eq!(runtime.block_on(async { 20 + 22 })?, 42);
///
/// // The defaults: a worker per CPU, the wakelist, the kernel's placement, no hooks.
/// let defaults = Builder::new().build()?;
/// let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
/// assert_eq!(defaults.handle().workers(), cpus);
/// assert_eq!(defaults.handle().policy(), Policy::Wakelist);
/// # Ok(())
/// # }
/// ```
pub struct Builder<H: Hooks = NoHooks> {
    workers: usize,
    policy: Policy,
    placement: Placement,
    poller: Poller,
    poll: Duration,
    hooks: Arc<H>,
    blocking_threads: usize,
}

impl<H: Hooks> Clone for Builder<H> {
    fn clone(&self) -> Self {
        Builder {
            workers: self.workers,
            policy: self.policy,
            placement: self.placement,
            poller: self.poller,
            poll: self.poll,
            hooks: Arc::clone(&self.hooks),
            blocking_threads: self.blocking_threads,
        }
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl<H: Hooks> fmt::Debug for Builder<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("policy", &self.policy)
            .field("placement", &self.placement)
            .field("poller", &self.poller)
            .field("poll", &self.poll)
            .field("blocking_threads", &self.blocking_threads)
            .field("hooks", &std::any::type_name::<H>())
            .finish()
    }
}

impl Builder {
    /// One worker per available CPU, the `wakelist` policy, the kernel's placement, 50 µs of
    /// idle polling, no hooks, at most [`DEFAULT_BLOCKING_THREADS`] blocking threads.
    pub fn new() -> Self {
        Builder {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            policy: Policy::Wakelist,
            placement: Placement::Kernel,
            poller: DEFAULT_POLLER,
            poll: Duration::from_micros(50),
            hooks: Arc::new(NoHooks),
            blocking_threads: DEFAULT_BLOCKING_THREADS,
        }
    }
}

impl<H: Hooks> Builder<H> {
    /// The number of workers (1 to [`MAX_WORKERS`], checked by [`build`](Self::build)).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// The wakeup policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Where woken tasks run: [`Placement::Kernel`] (the default) runs a task woken by a
    /// running task next on the waker's worker, capped against starvation and not for fan-out
    /// wakers, and idle workers steal; [`Placement::Remote`] sends every wakeup made on a worker
    /// to another worker and never steals, so that the wakeup [`Policy`] decides how every one
    /// of them travels (the lab's forced-remote runs).
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// How the workers share epoll: a poller each ([`Poller::PerWorker`]) or one for the whole
    /// runtime, held by one parked worker at a time ([`Poller::Shared`], tokio's shape). The
    /// default is [`DEFAULT_POLLER`].
    pub fn poller(mut self, poller: Poller) -> Self {
        self.poller = poller;
        self
    }

    /// The longest an idle worker polls its queues before it parks. The kernel's idle polling
    /// lasts roughly 10–60 µs; zero parks at once. Within it, each worker adapts its poll to
    /// its recent idle periods, and polls only while another worker runs (see `idle.rs`). At
    /// most [`MAX_POLL`], checked by [`build`](Self::build).
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// The most threads the blocking pool runs at once ([`Handle::spawn_blocking`]); jobs
    /// beyond them wait for a free thread. Zero counts as one.
    ///
    /// [`Handle::spawn_blocking`]: super::Handle::spawn_blocking
    pub fn blocking_threads(mut self, threads: usize) -> Self {
        self.blocking_threads = threads;
        self
    }

    /// Life-cycle hooks called at task creation, switch-in, switch-out and exit; every task of
    /// the runtime then carries the hooks' [`Data`](Hooks::Data).
    pub fn hooks<K: Hooks>(self, hooks: Arc<K>) -> Builder<K> {
        Builder {
            workers: self.workers,
            policy: self.policy,
            placement: self.placement,
            poller: self.poller,
            poll: self.poll,
            hooks,
            blocking_threads: self.blocking_threads,
        }
    }

    /// Checks every setting, then starts the workers.
    ///
    /// # Errors
    /// [`BuildError::Workers`] or [`BuildError::Poll`] for a setting out of its range (before
    /// any thread starts), [`BuildError::Spawn`] if the system refuses a worker thread.
    pub fn build(self) -> Result<Runtime<H>, BuildError> {
        self.check()?;
        let workers = self.workers;
        let shared = self.try_shared()?;
        let mut runtime = Runtime::starting(Arc::clone(&shared));
        for index in 0..workers {
            let shared = Arc::clone(&shared);
            match spawn_worker(index, shared) {
                Ok(thread) => runtime.started(thread),
                // Dropping the runtime stops the workers already started.
                Err(error) => return Err(BuildError::Spawn(error)),
            }
        }
        Ok(runtime)
    }
}

impl<H: Hooks> Builder<H> {
    /// Every setting in its range. The policy, the placement and the hooks are valid by their
    /// types.
    fn check(&self) -> Result<(), BuildError> {
        if self.workers == 0 || self.workers > MAX_WORKERS {
            return Err(BuildError::Workers(self.workers));
        }
        if self.poll > MAX_POLL {
            return Err(BuildError::Poll(self.poll));
        }
        Ok(())
    }

    /// The shared state of a runtime with this configuration, without its worker threads.
    pub(super) fn try_shared(self) -> Result<Arc<RuntimeState<H>>, BuildError> {
        RuntimeState::new(
            self.workers,
            (self.policy, self.placement, self.poller),
            PollBudget(self.poll),
            self.hooks,
            self.blocking_threads,
        )
    }

    /// [`try_shared`](Self::try_shared) for the unit tests and models.
    #[cfg(test)]
    pub(super) fn shared(self) -> Arc<RuntimeState<H>> {
        self.try_shared().expect("a poller per worker")
    }
}

#[cfg(not(loom))]
fn spawn_worker<H: Hooks>(
    index: usize,
    shared: Arc<RuntimeState<H>>,
) -> Result<thread::JoinHandle<()>, String> {
    thread::Builder::new()
        .name(format!("idspace-worker-{index}"))
        .spawn(move || worker::run(shared, index))
        .map_err(|e| e.to_string())
}

#[cfg(loom)]
fn spawn_worker<H: Hooks>(
    index: usize,
    shared: Arc<RuntimeState<H>>,
) -> Result<thread::JoinHandle<()>, String> {
    Ok(thread::spawn(move || worker::run(shared, index)))
}
