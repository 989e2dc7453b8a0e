//! Tasks: a future, its scheduling state and its wakelist link in one allocation.
//!
//! The state word is the runtime's `p->__state` / `p->on_rq` / `p->on_cpu` rolled into one:
//!
//! | state          | meaning                                              |
//! |----------------|------------------------------------------------------|
//! | `SLEEPING`     | blocked: not queued anywhere, not running            |
//! | `QUEUED`       | on exactly one run queue or wakelist                 |
//! | `RUNNING`      | being polled by exactly one worker                   |
//! | `RUNNING_WOKEN`| woken while being polled: its worker will requeue it |
//! | `DONE`         | completed, panicked or cancelled; the future is gone |
//!
//! Only a waker's successful `SLEEPING -> QUEUED` compare-and-swap puts a task on a queue, so a
//! task is on at most one list at a time (the kernel's `TASK_WAKING` guarantee), and only the
//! worker that takes it off moves it to `RUNNING`, so no task is ever polled twice at once.

use std::cell::UnsafeCell;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::join::{JoinError, JoinSlot};
use super::runtime::Shared;
use super::wakelist::Linked;
use super::{Exit, TaskId};
use crate::sync::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

const SLEEPING: u32 = 0;
const QUEUED: u32 = 1;
const RUNNING: u32 = 2;
const RUNNING_WOKEN: u32 = 3;
const DONE: u32 = 4;

/// A spawned future with its result slot, type-erased.
pub(crate) trait Body: Send {
    /// Polls the future; on completion, delivers its output to the join handle.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()>;
    /// Delivers `error` to the join handle instead of an output.
    fn fail(self: Pin<&mut Self>, error: JoinError);
}

/// The future of a task and the slot its join handle reads. The future is dropped before the
/// slot is filled, so a joiner never sees the outcome while the future's resources still live;
/// if `Spawned` itself is dropped unfinished (cancellation), the slot learns so.
struct Spawned<F: Future> {
    future: ManuallyDrop<F>,
    /// Whether `future` has not been dropped yet.
    live: bool,
    slot: Option<Arc<JoinSlot<F::Output>>>,
}

impl<F: Future> Spawned<F> {
    /// Drops the future where it is pinned, once.
    fn drop_future(&mut self) {
        if std::mem::replace(&mut self.live, false) {
            // Dropping in place keeps the pinning guarantee (no move).
            // SAFETY: `live` was true, so the future was not dropped yet and is never used again.
            unsafe { ManuallyDrop::drop(&mut self.future) };
        }
    }
}

impl<F> Body for Spawned<F>
where
    F: Future + Send,
    F::Output: Send,
{
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // `future` is structurally pinned: never moved out of a pinned `Spawned`, only dropped in
        // place; `live` and `slot` are not pinned.
        // SAFETY: nothing below moves `future` out of `this`.
        let this = unsafe { self.get_unchecked_mut() };
        if !this.live {
            return Poll::Ready(());
        }
        // SAFETY: as above, `this.future` stays where it is until it is dropped in place.
        let future = unsafe { Pin::new_unchecked(&mut *this.future) };
        match future.poll(cx) {
            Poll::Ready(output) => {
                this.drop_future();
                if let Some(slot) = this.slot.take() {
                    slot.finish(Ok(output));
                }
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn fail(self: Pin<&mut Self>, error: JoinError) {
        // SAFETY: the future is only dropped in place, never moved.
        let this = unsafe { self.get_unchecked_mut() };
        this.drop_future();
        if let Some(slot) = this.slot.take() {
            slot.finish(Err(error));
        }
    }
}

impl<F: Future> Drop for Spawned<F> {
    fn drop(&mut self) {
        self.drop_future();
        if let Some(slot) = self.slot.take() {
            slot.finish(Err(JoinError::Cancelled));
        }
    }
}

/// One task. Shared by the run queue or wakelist that holds it, the worker running it and its
/// wakers (a `Waker` is an `Arc<Task>`).
pub(crate) struct Task {
    state: AtomicU32,
    /// The wakelist link (`p->wake_entry`).
    wake_next: AtomicPtr<Task>,
    /// The worker that ran it last (`task_cpu(p)`); a hint for where to wake it.
    last_worker: AtomicUsize,
    id: TaskId,
    runtime: Arc<Shared>,
    /// Touched only by the thread that owns the task's state: the worker that moved it to
    /// `RUNNING`, a canceller holding it `QUEUED`, or the last owner in `Drop`.
    body: UnsafeCell<Option<Pin<Box<dyn Body>>>>,
}

// SAFETY: `body` is only accessed under the ownership rules above (a state the accessing thread
// alone moved the task into), every other field is atomic or immutable, and `Body: Send`.
unsafe impl Sync for Task {}

impl Linked for Task {
    fn link(&self) -> &AtomicPtr<Task> {
        &self.wake_next
    }
}

/// What became of a task after one poll.
pub(crate) enum Polled {
    /// It is waiting; nothing more to do.
    Sleeping,
    /// It was woken while running: the caller must queue it again.
    Requeue(Arc<Task>),
    /// It finished.
    Exited(Exit),
}

impl Task {
    /// A task for `future`, created in the `QUEUED` state: the caller queues it.
    pub(crate) fn spawned<F>(
        runtime: Arc<Shared>,
        id: TaskId,
        worker: usize,
        future: F,
        slot: Arc<JoinSlot<F::Output>>,
    ) -> Arc<Task>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let body: Pin<Box<dyn Body>> = Box::pin(Spawned {
            future: ManuallyDrop::new(future),
            live: true,
            slot: Some(slot),
        });
        Arc::new(Task {
            state: AtomicU32::new(QUEUED),
            wake_next: AtomicPtr::new(ptr::null_mut()),
            last_worker: AtomicUsize::new(worker),
            id,
            runtime,
            body: UnsafeCell::new(Some(body)),
        })
    }

    pub(crate) fn id(&self) -> TaskId {
        self.id
    }

    pub(crate) fn last_worker(&self) -> usize {
        self.last_worker.load(Ordering::Relaxed)
    }

    /// Polls the task once on `worker`. The caller took it off a queue, so it is `QUEUED`.
    pub(crate) fn run(self: Arc<Self>, worker: usize) -> Polled {
        // Acquire pairs with the Release of whoever last changed the state (the previous poll's
        // `RUNNING -> SLEEPING`, then a waker's CAS): the body's last writes are visible.
        let previous = self.state.swap(RUNNING, Ordering::Acquire);
        debug_assert_eq!(previous, QUEUED, "a task ran without being queued");
        self.last_worker.store(worker, Ordering::Relaxed);
        let waker = Waker::from(Arc::clone(&self));
        let mut cx = Context::from_waker(&waker);
        // This thread moved the task to RUNNING: no one else touches the body until the state
        // leaves RUNNING / RUNNING_WOKEN.
        // SAFETY: so this is the only reference to the body while it lives.
        let body = unsafe { &mut *self.body.get() };
        let Some(future) = body.as_mut() else {
            return Polled::Exited(Exit::Cancelled);
        };
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
        drop(waker);
        match outcome {
            Ok(Poll::Pending) => {
                // Release pairs with the next waker's Acquire CAS: the body's writes from this
                // poll reach whoever runs it next.
                match self.state.compare_exchange(
                    RUNNING,
                    SLEEPING,
                    Ordering::Release,
                    Ordering::Acquire,
                ) {
                    Ok(_) => Polled::Sleeping,
                    Err(_) => {
                        // RUNNING_WOKEN: a wakeup came during the poll and left the queueing to us.
                        self.state.store(QUEUED, Ordering::Relaxed);
                        Polled::Requeue(self)
                    }
                }
            }
            Ok(Poll::Ready(())) => {
                self.finish(body);
                Polled::Exited(Exit::Completed)
            }
            Err(payload) => {
                if let Some(future) = body.as_mut() {
                    // Dropping a future that just panicked may panic again; the worker survives
                    // that too (the join handle then reports a cancellation).
                    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
                        future.as_mut().fail(JoinError::Panicked(payload))
                    }));
                }
                self.finish(body);
                Polled::Exited(Exit::Panicked)
            }
        }
    }

    /// Drops the future (outside any lock) and marks the task `DONE`.
    fn finish(&self, body: &mut Option<Pin<Box<dyn Body>>>) {
        let future = body.take();
        self.state.store(DONE, Ordering::Release);
        // A future whose destructor panics must not take the worker down.
        let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(future)));
    }

    /// Cancels a task the caller took off a queue (or could not queue): drops its future, and
    /// its join handle reports [`JoinError::Cancelled`].
    pub(crate) fn cancel(self: Arc<Self>) {
        debug_assert_eq!(self.state.load(Ordering::Relaxed), QUEUED);
        // SAFETY: the caller owns the task's QUEUED state: it is on no list and not running.
        let body = unsafe { &mut *self.body.get() };
        self.finish(body);
    }

    /// The waker's half of `try_to_wake_up`: returns whether this wakeup claimed the right (and
    /// the duty) to queue the task.
    fn claim_wakeup(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let next = match state {
                SLEEPING => QUEUED,
                RUNNING => RUNNING_WOKEN,
                // Already queued, already to be requeued, or finished: nothing to do.
                _ => return false,
            };
            // Acquire pairs with the poll's Release `RUNNING -> SLEEPING` (the body is then
            // handed to whichever worker we queue it on); Release orders our own writes before
            // the wakeup, so the woken task sees what its waker did.
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return next == QUEUED,
                Err(actual) => state = actual,
            }
        }
    }
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        if self.claim_wakeup() {
            let runtime = Arc::clone(&self.runtime);
            runtime.wake(self);
        }
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.claim_wakeup() {
            self.runtime.wake(Arc::clone(self));
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // The last reference is gone while the task still had a future: nothing can wake it any
        // more. Dropping the future tells its join handle the task was cancelled.
        if let Some(future) = self.body.get_mut().take() {
            let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(future)));
            self.runtime.exited(self.id, None, Exit::Cancelled);
        }
    }
}
