//! Join handles: how a task's result (or its panic, or its cancellation) reaches whoever waits
//! for it, from inside the runtime (`.await`) or from any thread ([`JoinHandle::join`]).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::TaskId;
// The payload's lock only makes a panic `Sync`; it is never contended, so loom need not see it.
use crate::sync::unmodeled::Mutex as StdMutex;
use crate::sync::{self, Arc, Condvar, Mutex};

/// Why a task produced no value.
///
/// It is `Send + Sync + 'static`, so `?` turns it into a `Box<dyn Error + Send + Sync>` (or
/// any error type built on one).
///
/// ```
/// use idspace::sched::{JoinError, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let boom = runtime.spawn(async { panic!("boom") }).join().unwrap_err();
/// assert_eq!(boom.panic_message(), Some("boom"));
/// assert_eq!(boom.to_string(), "task panicked: boom");
/// // The payload comes back out, to be inspected or re-raised with `resume_unwind`.
/// let payload = boom.try_into_panic().expect("a panic");
/// assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
/// // A future that drops its waker can never be woken: the task is cancelled at once.
/// let stuck = runtime.spawn(std::future::pending::<u8>());
/// assert!(matches!(stuck.join(), Err(JoinError::Cancelled)));
/// // `?` converts it like any error that is `Send + Sync`.
/// runtime.spawn(async {}).join()?;
/// # Ok(())
/// # }
/// ```
#[non_exhaustive]
pub enum JoinError {
    /// The task's future panicked.
    Panicked(Panic),
    /// One of the runtime's [`Hooks`](super::Hooks) panicked at this task's life-cycle point:
    /// `hook` names the method (`switched_in` or `switched_out`). The task was dropped there
    /// (an output it had already produced is dropped too); the worker goes on.
    HookPanicked {
        /// The name of the hook method that panicked.
        hook: &'static str,
        /// Its panic.
        panic: Panic,
    },
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
    /// The task's own panic, caught with `payload`.
    pub(crate) fn panicked(payload: Box<dyn Any + Send + 'static>) -> JoinError {
        JoinError::Panicked(Panic::new(payload))
    }

    /// The panic of the hook method `hook` at this task, caught with `payload`.
    pub(crate) fn hook_panicked(hook: &'static str, payload: Box<dyn Any + Send>) -> JoinError {
        JoinError::HookPanicked {
            hook,
            panic: Panic::new(payload),
        }
    }

    /// The panic message, when the task (or a hook at it) panicked with a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(panic) | JoinError::HookPanicked { panic, .. } => panic.message(),
            _ => None,
        }
    }

    /// The panic's payload, for [`std::panic::resume_unwind`], or the error itself back when
    /// it is not a panic.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self {
            JoinError::Panicked(panic) | JoinError::HookPanicked { panic, .. } => {
                Ok(panic.into_payload())
            }
            other => Err(other),
        }
    }
}

impl JoinError {
    /// A task that unwound with [`JoinError::Killed`] as its payload was killed, not panicked.
    fn killed_if_marked(self) -> JoinError {
        match self {
            JoinError::Panicked(panic) if panic.is_kill() => JoinError::Killed,
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
            JoinError::Panicked(panic) => write!(f, "task panicked: {panic}"),
            JoinError::HookPanicked { hook, panic } => {
                write!(
                    f,
                    "the runtime's {hook} hook panicked at this task: {panic}"
                )
            }
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

/// A caught panic: its message (when the payload is a string) and its payload.
///
/// ```
/// use idspace::sched::{JoinError, Panic, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let task = runtime.spawn(async {
///     let cheese = 0;
///     if cheese == 0 {
///         panic!("out of cheese after {cheese} rounds");
///     }
///     cheese
/// });
/// let panic: Panic = match task.join() {
///     Err(JoinError::Panicked(panic)) => panic,
///     other => panic!("the task should have panicked: {other:?}"),
/// };
/// assert_eq!(panic.message(), Some("out of cheese after 0 rounds"));
/// assert_eq!(panic.to_string(), "out of cheese after 0 rounds");
/// // A formatted message's payload is a `String`, as `catch_unwind` gives it.
/// let payload = panic.into_payload();
/// assert!(payload.downcast_ref::<String>().is_some());
/// // The runtime lives on after a task's panic.
/// assert_eq!(runtime.spawn(async { 7 }).join()?, 7);
/// # Ok(())
/// # }
/// ```
///
/// The payload is kept behind a lock so that the panic, and a [`JoinError`] holding it, is
/// `Sync` although a payload need only be `Send`.
pub struct Panic {
    message: Option<String>,
    payload: StdMutex<Box<dyn Any + Send + 'static>>,
}

impl Panic {
    fn new(payload: Box<dyn Any + Send + 'static>) -> Panic {
        let message = payload
            .downcast_ref::<&'static str>()
            .map(|message| message.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned());
        Panic {
            message,
            payload: StdMutex::new(payload),
        }
    }

    /// The panic message, when the payload is a `&str` or a `String`.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// Whether the task unwound with [`JoinError::Killed`]: it was killed, not panicked.
    fn is_kill(&self) -> bool {
        // Nothing panics while the lock is held, so it is never poisoned.
        let payload = match self.payload.lock() {
            Ok(payload) => payload,
            Err(poisoned) => poisoned.into_inner(),
        };
        matches!(payload.downcast_ref::<JoinError>(), Some(JoinError::Killed))
    }

    /// The payload, as `catch_unwind` returned it.
    pub fn into_payload(self) -> Box<dyn Any + Send + 'static> {
        // The lock is never taken while a panic could poison it: only this and `is_kill` read
        // it.
        match self.payload.into_inner() {
            Ok(payload) => payload,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl fmt::Debug for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Panic")
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(message) => f.write_str(message),
            None => f.write_str("(a non-string payload)"),
        }
    }
}

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

/// The message of the panic of [`JoinHandle::join`] called on a worker thread.
const JOIN_IN_WORKER: &str = "JoinHandle::join was called from inside a runtime (a task, hook \
     or timer callback running on a worker thread): blocking that worker could keep the joined \
     task from ever running, a deadlock. Await the JoinHandle instead";

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

    /// Blocks this thread until the task finishes.
    ///
    /// # Panics
    /// When called on a runtime's worker thread (from a task, a hook or a timer callback),
    /// with a message saying so, even if the task has finished: a worker blocked here could
    /// not run the task it waits for. Await the handle there instead.
    pub fn join(self) -> Result<T, JoinError> {
        if super::worker::on_worker() {
            panic!("{JOIN_IN_WORKER}");
        }
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
