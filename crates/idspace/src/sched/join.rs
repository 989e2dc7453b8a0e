//! Join handles: how a task's result (or its panic, or its cancellation) reaches whoever waits
//! for it, from inside the runtime (`.await`) or from any thread ([`JoinHandle::join`]).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::TaskId;
use crate::sync::{self, Arc, Condvar, Mutex};

/// Why a task produced no value.
///
/// ```
/// use idspace::sched::{JoinError, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let boom = runtime.spawn(async { panic!("boom") }).join().unwrap_err();
/// assert_eq!(boom.panic_message(), Some("boom"));
/// assert_eq!(boom.to_string(), "task panicked: boom");
/// // A future that drops its waker can never be woken: the task is cancelled at once.
/// let stuck = runtime.spawn(std::future::pending::<u8>());
/// assert!(matches!(stuck.join(), Err(JoinError::Cancelled)));
/// # Ok(())
/// # }
/// ```
#[non_exhaustive]
pub enum JoinError {
    /// The task panicked; the payload is the panic's.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The task was dropped before it completed: the runtime shut down with the task queued or
    /// asleep, or every waker of a sleeping task was dropped so that nothing could ever wake it.
    Cancelled,
    /// This handle already returned the task's result.
    Consumed,
    /// The task was killed: it belonged to a process that was killed, or whose namespace's
    /// init ended, and stopped at its next poll (see [`Processes::kill`]). A task ends so by
    /// unwinding with this value as its payload (`resume_unwind(Box::new(JoinError::Killed))`),
    /// as glibc's `pthread_cancel` unwinds the thread it cancels; the exit hook is told
    /// [`Exit::Panicked`](super::Exit::Panicked).
    ///
    /// [`Processes::kill`]: crate::process::Processes::kill
    Killed,
}

impl JoinError {
    /// The panic message, when the task panicked with a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(payload) => payload
                .downcast_ref::<&'static str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str)),
            _ => None,
        }
    }
}

impl JoinError {
    /// A task that unwound with [`JoinError::Killed`] as its payload was killed, not panicked.
    fn killed_if_marked(self) -> JoinError {
        match self {
            JoinError::Panicked(payload)
                if matches!(payload.downcast_ref::<JoinError>(), Some(JoinError::Killed)) =>
            {
                JoinError::Killed
            }
            other => other,
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => match self.panic_message() {
                Some(message) => write!(f, "task panicked: {message}"),
                None => write!(f, "task panicked (with a non-string payload)"),
            },
            JoinError::Cancelled => write!(
                f,
                "task cancelled: the runtime shut down, or nothing was left that could wake it"
            ),
            JoinError::Consumed => write!(f, "the task's result was already taken"),
            JoinError::Killed => write!(f, "task killed: its process was killed"),
        }
    }
}

impl std::error::Error for JoinError {}

/// Where a task's outcome waits for its handle.
pub(crate) struct JoinSlot<T> {
    state: Mutex<SlotState<T>>,
    finished: Condvar,
}

struct SlotState<T> {
    outcome: Option<Result<T, JoinError>>,
    done: bool,
    waker: Option<Waker>,
}

impl<T> JoinSlot<T> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(JoinSlot {
            state: Mutex::new(SlotState {
                outcome: None,
                done: false,
                waker: None,
            }),
            finished: Condvar::new(),
        })
    }

    /// Stores the outcome and wakes whoever waits. Called once per task.
    pub(crate) fn finish(&self, outcome: Result<T, JoinError>) {
        let outcome = outcome.map_err(JoinError::killed_if_marked);
        let waker = {
            let mut state = sync::lock(&self.state);
            state.outcome = Some(outcome);
            state.done = true;
            state.waker.take()
        };
        self.finished.notify_all();
        // Woken outside the lock: the waiter may run on this thread.
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn take(state: &mut SlotState<T>) -> Result<T, JoinError> {
        state.outcome.take().unwrap_or(Err(JoinError::Consumed))
    }
}

/// The right to a spawned task's result: await it inside a runtime, or [`join`](Self::join)
/// from any other thread. Dropping the handle detaches the task; it still runs to completion.
///
/// ```
/// use std::sync::mpsc;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// // Dropping a handle detaches its task, which still runs.
/// let (done, finished) = mpsc::channel();
/// drop(runtime.spawn(async move { done.send(6 * 7).unwrap() }));
/// assert_eq!(finished.recv()?, 42);
///
/// let quick = runtime.spawn(async { "done" });
/// while !quick.is_finished() {
///     std::thread::yield_now();
/// }
/// assert_eq!(quick.join()?, "done");
/// # Ok(())
/// # }
/// ```
pub struct JoinHandle<T> {
    slot: Arc<JoinSlot<T>>,
    id: TaskId,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(slot: Arc<JoinSlot<T>>, id: TaskId) -> Self {
        JoinHandle { slot, id }
    }

    /// The task's ID.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// Whether the task has completed, panicked or been cancelled.
    pub fn is_finished(&self) -> bool {
        sync::lock(&self.slot.state).done
    }

    /// Blocks this thread until the task finishes. Call it from outside the runtime: a worker
    /// blocked here cannot run the tasks it waits for (await the handle instead).
    pub fn join(self) -> Result<T, JoinError> {
        let mut state = sync::lock(&self.slot.state);
        while !state.done {
            state = sync::wait(&self.slot.finished, state);
        }
        JoinSlot::take(&mut state)
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.id).finish()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = sync::lock(&self.slot.state);
        if state.done {
            return Poll::Ready(JoinSlot::take(&mut state));
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}
