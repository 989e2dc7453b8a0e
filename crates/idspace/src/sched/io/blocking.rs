//! The blocking pool: threads beside the workers for work that must block (file I/O, DNS,
//! a C library's blocking call), so that no worker is stopped by it.
//!
//! At most `max` threads (the builder's `blocking_threads`); jobs beyond that wait in a FIFO
//! queue for the next free thread. A thread idle for [`KEEP_ALIVE`] exits. At runtime shutdown
//! the queued jobs are cancelled (their handles report `Cancelled`) and idle threads exit;
//! running jobs finish on their threads and deliver their results, since a blocking call
//! cannot be interrupted.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use crate::sched::join::{JoinError, JoinHandle, JoinSlot};
use crate::sched::runtime::{self, NoRuntime};
use crate::sched::TaskId;
// Statics-free but outside every model: the pool's threads are real threads.
use crate::sync::unmodeled::{Arc, Mutex};
use crate::sync::{self, Condvar};

/// How long an idle blocking thread waits for work before it exits.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A queued job: runs its closure and delivers the result, or, dropped unrun, reports
/// `Cancelled` to its handle.
trait Job: Send {
    fn run(&mut self);
}

struct BlockingJob<F, R> {
    f: Option<F>,
    slot: crate::sync::Arc<JoinSlot<R>>,
}

impl<F: FnOnce() -> R + Send, R: Send> Job for BlockingJob<F, R> {
    fn run(&mut self) {
        if let Some(f) = self.f.take() {
            let outcome = panic::catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::panicked);
            self.slot.finish(outcome);
        }
    }
}

impl<F, R> Drop for BlockingJob<F, R> {
    fn drop(&mut self) {
        if self.f.take().is_some() {
            self.slot.finish(Err(JoinError::Cancelled));
        }
    }
}

struct PoolState {
    queue: VecDeque<Box<dyn Job>>,
    threads: usize,
    idle: usize,
    shutdown: bool,
}

struct Inner {
    state: Mutex<PoolState>,
    work: Condvar,
    max: usize,
}

/// A runtime's blocking pool.
pub(crate) struct BlockingPool {
    inner: Arc<Inner>,
}

impl BlockingPool {
    /// A pool of at most `max` threads (at least one), none started yet.
    pub(crate) fn new(max: usize) -> Self {
        BlockingPool {
            inner: Arc::new(Inner {
                state: Mutex::new(PoolState {
                    queue: VecDeque::new(),
                    threads: 0,
                    idle: 0,
                    shutdown: false,
                }),
                work: Condvar::new(),
                max: max.max(1),
            }),
        }
    }

    /// Queues `f` for a blocking thread, starting one if none is idle and fewer than the
    /// maximum run.
    pub(crate) fn spawn<F, R>(&self, id: TaskId, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let slot = JoinSlot::new();
        let handle = JoinHandle::new(crate::sync::Arc::clone(&slot), id);
        let job: Box<dyn Job> = Box::new(BlockingJob { f: Some(f), slot });
        let mut state = sync::lock(&self.inner.state);
        if state.shutdown {
            drop(state);
            drop(job); // reports Cancelled
            return handle;
        }
        state.queue.push_back(job);
        if state.idle > 0 {
            drop(state);
            self.inner.work.notify_one();
            return handle;
        }
        if state.threads < self.inner.max {
            state.threads += 1;
            drop(state);
            let inner = Arc::clone(&self.inner);
            let started = std::thread::Builder::new()
                .name("idspace-blocking".into())
                .spawn(move || inner.serve());
            if started.is_err() {
                self.refused_thread();
            }
        }
        handle
    }

    /// The system refused a thread: without any thread the queue would wait forever, so its
    /// jobs are cancelled.
    fn refused_thread(&self) {
        let cancelled = {
            let mut state = sync::lock(&self.inner.state);
            state.threads -= 1;
            if state.threads == 0 {
                std::mem::take(&mut state.queue)
            } else {
                VecDeque::new()
            }
        };
        drop(cancelled);
    }

    /// Cancels the queued jobs and lets idle threads exit; refuses jobs from now on.
    pub(crate) fn shut_down(&self) {
        let cancelled = {
            let mut state = sync::lock(&self.inner.state);
            state.shutdown = true;
            std::mem::take(&mut state.queue)
        };
        self.inner.work.notify_all();
        // Dropped outside the lock: each reports Cancelled to its handle, which may wake a task.
        drop(cancelled);
    }
}

impl Inner {
    /// A blocking thread's loop: run queued jobs, wait up to [`KEEP_ALIVE`] for more, exit.
    fn serve(&self) {
        let mut state = sync::lock(&self.state);
        loop {
            if let Some(mut job) = state.queue.pop_front() {
                drop(state);
                job.run();
                drop(job);
                state = sync::lock(&self.state);
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            let (next, timeout) = self
                .work
                .wait_timeout(state, KEEP_ALIVE)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            state = next;
            state.idle -= 1;
            if timeout.timed_out() && state.queue.is_empty() {
                break;
            }
        }
        state.threads -= 1;
    }
}

/// Runs `f` on the blocking pool of the runtime running the calling code (from inside its
/// tasks or its `block_on`), so that a call that blocks does not stop a worker. See
/// [`Handle::spawn_blocking`](crate::sched::Handle::spawn_blocking).
///
/// # Errors
/// [`NoRuntime`] when the caller is not inside a runtime.
///
/// ```
/// use idspace::sched::{spawn_blocking, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let size = runtime.block_on(async {
///     let read = spawn_blocking(|| std::fs::metadata("/proc/self/status").map(|m| m.len()));
///     read.expect("inside a runtime").await
/// })???;
/// assert_eq!(size, 0, "procfs files report no size");
/// # Ok(())
/// # }
/// ```
pub fn spawn_blocking<F, R>(f: F) -> Result<JoinHandle<R>, NoRuntime>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let driver = runtime::current_driver().ok_or(NoRuntime)?;
    Ok(driver.blocking().spawn(driver.next_task_id(), f))
}
