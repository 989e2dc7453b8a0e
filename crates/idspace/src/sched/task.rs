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
//!
//! # The task and its scheduler
//!
//! A [`TaskCell<S>`] is generic over the scheduler that runs it, through the narrow [`Schedule`]
//! trait: all a task ever asks of the runtime is to queue it once a wakeup claimed it, and to
//! hear that it was dropped unfinished. This file therefore knows nothing of workers or of the
//! runtime; the runtime plugs in its shared state as `S`, held by value in the task, with no
//! trait object, no extra allocation and no lock.
//!
//! # Header and body
//!
//! The state word, the wakelist link, the last worker, the ID, the scheduler and the per-task
//! data are the task's *header*: read by wakers, workers and hooks at any time. The *body* (the
//! future and its join slot) sits in a [`sync::UnsafeCell`](crate::sync::UnsafeCell) that only
//! the owner of the task's state may enter (the rule `TaskCell`'s `Sync` rests on; under loom every
//! entry is checked against it). The per-task data that the life-cycle hooks receive by
//! reference (a PID, a CID, timers) is a header field whose type the scheduler names
//! ([`Schedule::Data`]), never part of the body: the worker hands it to the hooks at switch-in
//! and switch-out while the poll owns the body, and the exit paths have the whole task at hand
//! (`Schedule::abandoned` receives `&TaskCell`). It is immutable as far as the task is concerned
//! (`Sync`, shared by reference), so it needs no ownership rule of its own.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use super::join::{JoinError, JoinSlot};
use super::wakelist::Linked;
use super::{Exit, TaskId};
use crate::sync::{Arc, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, UnsafeCell};

const SLEEPING: u32 = 0;
const QUEUED: u32 = 1;
const RUNNING: u32 = 2;
const RUNNING_WOKEN: u32 = 3;
const DONE: u32 = 4;

/// What a task needs from the scheduler that runs it, and nothing more.
pub(crate) trait Schedule: Send + Sync + Sized + 'static {
    /// What each task carries for the scheduler's hooks, in its header.
    type Data: Send + Sync + 'static;

    /// Gets `task` onto a run queue or wakelist: the rest of `try_to_wake_up`, after a wakeup
    /// claimed the task (it is `QUEUED`, and the caller owns that state).
    fn schedule(&self, task: Arc<TaskCell<Self>>);

    /// `task` is being dropped unfinished (its last reference went, so nothing can wake it any
    /// more); its future is already dropped and its join handle told.
    fn abandoned(&self, task: &TaskCell<Self>);
}

/// A spawned future with its result slot, type-erased.
pub(crate) trait Body: Send {
    /// Polls the future; on completion, keeps its output for the join handle (delivered when
    /// the body is dropped).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()>;
    /// Drops the future and makes `error` the outcome, instead of any output it produced.
    fn fail(self: Pin<&mut Self>, error: JoinError);
}

/// The future of a task and the slot its join handle reads. The outcome is delivered when
/// `Spawned` is dropped, once the task is `DONE` and its `switched_out` hook has run (so a
/// panic there can still be reported), and always after the future itself is dropped, so a
/// joiner never sees the outcome while the future's resources still live. Dropped unfinished
/// (cancellation), it tells the slot so.
struct Spawned<F: Future> {
    future: ManuallyDrop<F>,
    /// Whether `future` has not been dropped yet.
    live: bool,
    /// The outcome, from the poll that ended the future (or from [`Body::fail`]).
    outcome: Option<Result<F::Output, JoinError>>,
    slot: Arc<JoinSlot<F::Output>>,
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
        // place; `live`, `outcome` and `slot` are not pinned.
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
                this.outcome = Some(Ok(output));
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn fail(self: Pin<&mut Self>, error: JoinError) {
        // SAFETY: the future is only dropped in place, never moved.
        let this = unsafe { self.get_unchecked_mut() };
        // An output already produced gives way to the error: a hook failed at this task. Set
        // first, so that it stands even if dropping the future panics.
        this.outcome = Some(Err(error));
        this.drop_future();
    }
}

impl<F: Future> Drop for Spawned<F> {
    fn drop(&mut self) {
        // A future whose destructor panics still gets its handle an answer.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| self.drop_future()));
        let outcome = self.outcome.take().unwrap_or(Err(JoinError::Cancelled));
        self.slot.finish(outcome);
    }
}

/// One task. Shared by the run queue or wakelist that holds it, the worker running it and its
/// wakers (a `Waker` is a counted reference to the task).
pub(crate) struct TaskCell<S: Schedule> {
    state: AtomicU32,
    /// The wakelist link (`p->wake_entry`).
    wake_next: AtomicPtr<TaskCell<S>>,
    /// The worker that ran it last (`task_cpu(p)`); a hint for where to wake it.
    last_worker: AtomicUsize,
    /// Its record as a waker (`last_wakee` and `wakee_flips`, packed; see `placement.rs`),
    /// which decides `wake_wide`. Only the worker polling the task reads and writes it.
    wakees: AtomicU64,
    id: TaskId,
    /// The scheduler that queues it when it is woken.
    scheduler: S,
    /// The task's own data for the life-cycle hooks (a PID, a CID slot), set at spawn.
    data: S::Data,
    /// Entered only by the thread that owns the task's state: the worker that moved it to
    /// `RUNNING`, a canceller holding it `QUEUED`, or the last owner in `Drop`.
    body: UnsafeCell<Option<Pin<Box<dyn Body>>>>,
}

// SAFETY: `body` is only entered under the ownership rule above (a state the entering thread
// alone moved the task into, or the last reference), every other field is atomic, immutable or
// the scheduler and the data (`Sync` by the `Schedule` bounds), and `Body: Send`.
unsafe impl<S: Schedule> Sync for TaskCell<S> {}

impl<S: Schedule> Linked for TaskCell<S> {
    fn link(&self) -> &AtomicPtr<TaskCell<S>> {
        &self.wake_next
    }
}

/// What became of a task after one poll.
pub(crate) enum Polled<S: Schedule> {
    /// It is waiting: nothing more to do, unless the runtime is shutting down.
    Sleeping(Arc<TaskCell<S>>),
    /// It was woken while running: the caller must queue it again.
    Requeue(Arc<TaskCell<S>>),
    /// It finished; the caller holds the last worker's reference for the exit hooks.
    Exited(Arc<TaskCell<S>>, Exit),
}

/// How a poll ended, decided while the body was entered.
enum Outcome {
    /// The future is pending.
    Pending,
    /// The task ended; the body, taken out of the cell, is dropped once the task is `DONE`.
    Finished(Option<Pin<Box<dyn Body>>>, Exit),
}

impl<S: Schedule> TaskCell<S> {
    /// A task for `future`, created in the `QUEUED` state: the caller queues it.
    pub(crate) fn spawned<F>(
        scheduler: S,
        id: TaskId,
        worker: usize,
        data: S::Data,
        future: F,
        slot: Arc<JoinSlot<F::Output>>,
    ) -> Arc<Self>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let body: Pin<Box<dyn Body>> = Box::pin(Spawned {
            future: ManuallyDrop::new(future),
            live: true,
            outcome: None,
            slot,
        });
        Arc::new(TaskCell {
            state: AtomicU32::new(QUEUED),
            wake_next: AtomicPtr::new(ptr::null_mut()),
            last_worker: AtomicUsize::new(worker),
            wakees: AtomicU64::new(0),
            id,
            scheduler,
            data,
            body: UnsafeCell::new(Some(body)),
        })
    }

    pub(crate) fn id(&self) -> TaskId {
        self.id
    }

    /// The task's own data, set at spawn.
    pub(crate) fn data(&self) -> &S::Data {
        &self.data
    }

    pub(crate) fn last_worker(&self) -> usize {
        self.last_worker.load(Ordering::Relaxed)
    }

    /// The task's waker record, read at switch-in. Relaxed: only the worker polling the task
    /// touches it, and the state word (Release at the end of a poll, Acquire at the start of
    /// the next) orders one worker's write before the next worker's read.
    pub(crate) fn wakees(&self) -> u64 {
        self.wakees.load(Ordering::Relaxed)
    }

    /// Stores the task's waker record at switch-out (Relaxed: see [`wakees`](Self::wakees)).
    pub(crate) fn set_wakees(&self, record: u64) {
        self.wakees.store(record, Ordering::Relaxed);
    }

    /// Polls `task` once on `worker`. The caller took it off a queue, so it is `QUEUED`.
    ///
    /// After the poll, `switched_out` runs the switch-out hook: when it returns an error (the
    /// hook panicked), the task ends there with that error, whatever its poll returned. Then a
    /// task that ended is marked `DONE` and its outcome delivered, and only then does `leave`
    /// close the poll (the worker's waker record goes back into the task): a joiner woken by
    /// the delivery is woken from inside the poll, a sync wakeup like any made by the future.
    ///
    /// Both run before a task that goes on leaves `RUNNING`: no other worker can switch the
    /// task in until they return, so switch-in and switch-out hooks of one task never overlap,
    /// and what they write into the task reaches the next switch-in through the state word
    /// (Release below, Acquire at the next `run`).
    pub(crate) fn run(
        task: Arc<Self>,
        worker: usize,
        switched_out: impl FnOnce(&Self) -> Option<JoinError>,
        leave: impl FnOnce(&Self),
    ) -> Polled<S> {
        // Acquire pairs with the Release of whoever last changed the state (the previous poll's
        // `RUNNING -> SLEEPING`, then a waker's CAS): the body's last writes are visible.
        let previous = task.state.swap(RUNNING, Ordering::Acquire);
        debug_assert_eq!(previous, QUEUED, "a task ran without being queued");
        task.last_worker.store(worker, Ordering::Relaxed);
        let outcome = Self::poll_body(&task);
        let outcome = match switched_out(&task) {
            None => outcome,
            Some(error) => task.fail_running(outcome, error),
        };
        let Outcome::Finished(body, how) = outcome else {
            leave(&task);
            // Release pairs with the next waker's Acquire CAS: the body's writes from this
            // poll reach whoever runs it next.
            return match task.state.compare_exchange(
                RUNNING,
                SLEEPING,
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => Polled::Sleeping(task),
                Err(_) => {
                    // RUNNING_WOKEN: a wakeup came during the poll and left the queueing to us.
                    task.state.store(QUEUED, Ordering::Relaxed);
                    Polled::Requeue(task)
                }
            };
        };
        task.finish(body);
        leave(&task);
        Polled::Exited(task, how)
    }

    /// Polls the body of a task this thread moved to `RUNNING`.
    fn poll_body(task: &Arc<Self>) -> Outcome {
        // The poll borrows the caller's reference for its waker: a waker the future keeps is a
        // clone, which takes a reference of its own.
        // SAFETY: the data is this live task's pointer from `Arc::as_ptr`, the vtable's
        // contract; the task outlives the waker, and `ManuallyDrop` keeps the waker from giving
        // back a reference it never took.
        let waker = ManuallyDrop::new(unsafe { Waker::from_raw(Self::raw_waker(task)) });
        let mut cx = Context::from_waker(&waker);
        task.body.with_mut(|body| {
            // This thread moved the task to RUNNING: no one else enters the body until the
            // state leaves RUNNING / RUNNING_WOKEN, which happens after this access ends.
            // SAFETY: so this is the only reference to the body while it lives.
            let body = unsafe { &mut *body };
            let Some(future) = body.as_mut() else {
                return Outcome::Finished(None, Exit::Cancelled);
            };
            match panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
                Ok(Poll::Pending) => Outcome::Pending,
                Ok(Poll::Ready(())) => Outcome::Finished(body.take(), Exit::Completed),
                Err(payload) => {
                    // Dropping a future that just panicked may panic again; the worker survives
                    // that too (the join handle still reports the first panic).
                    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
                        future.as_mut().fail(JoinError::panicked(payload))
                    }));
                    Outcome::Finished(body.take(), Exit::Panicked)
                }
            }
        })
    }

    /// Ends a task still `RUNNING` on this thread with `error` instead of the poll's `outcome`.
    fn fail_running(&self, outcome: Outcome, error: JoinError) -> Outcome {
        let body = match outcome {
            Outcome::Pending => self.body.with_mut(|body| {
                // SAFETY: the caller moved the task to RUNNING and it is still there: no one
                // else enters the body.
                unsafe { (*body).take() }
            }),
            Outcome::Finished(body, _) => body,
        };
        let Some(mut body) = body else {
            return Outcome::Finished(None, Exit::Cancelled);
        };
        // Dropping the future may panic; the error stays the outcome all the same.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| body.as_mut().fail(error)));
        Outcome::Finished(Some(body), Exit::Panicked)
    }

    /// Ends a task the caller took off a queue, without polling it, with `error` (its
    /// `switched_in` hook panicked).
    pub(crate) fn fail(task: &Self, error: JoinError) {
        debug_assert_eq!(task.state.load(Ordering::Relaxed), QUEUED);
        let body = task.body.with_mut(|body| {
            // SAFETY: the caller owns the task's QUEUED state: it is on no list and not running,
            // so no one else enters the body.
            unsafe { (*body).take() }
        });
        let body = body.map(|mut body| {
            let _ = panic::catch_unwind(AssertUnwindSafe(|| body.as_mut().fail(error)));
            body
        });
        task.finish(body);
    }

    /// Marks the task `DONE`, then drops the body taken out of it (outside any lock).
    fn finish(&self, body: Option<Pin<Box<dyn Body>>>) {
        self.state.store(DONE, Ordering::Release);
        // A future whose destructor panics must not take the worker down.
        let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(body)));
    }

    /// Cancels a task the caller took off a queue (or could not queue): drops its future, and
    /// its join handle reports [`JoinError::Cancelled`].
    pub(crate) fn cancel(task: &Self) {
        debug_assert_eq!(task.state.load(Ordering::Relaxed), QUEUED);
        let body = task.body.with_mut(|body| {
            // SAFETY: the caller owns the task's QUEUED state: it is on no list and not running,
            // so no one else enters the body.
            unsafe { (*body).take() }
        });
        task.finish(body);
    }

    /// The waker's half of `try_to_wake_up`: returns whether this wakeup claimed the right (and
    /// the duty) to queue the task.
    pub(crate) fn claim_wakeup(&self) -> bool {
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

/// Wakers. A waker's data is a task pointer from `Arc::into_raw` / `Arc::as_ptr`, and every
/// waker but the one a poll borrows owns one counted reference to the task. The vtable is ours
/// rather than `std::task::Wake`'s, so that the reference is the facade's `Arc` (loom's under
/// `--cfg loom`) and a poll's waker can borrow the worker's reference instead of taking one.
impl<S: Schedule> TaskCell<S> {
    const WAKER: RawWakerVTable = RawWakerVTable::new(
        Self::clone_waker,
        Self::wake_by_value,
        Self::wake_by_ref,
        Self::drop_waker,
    );

    fn raw_waker(task: &Arc<Self>) -> RawWaker {
        RawWaker::new(Arc::as_ptr(task).cast(), &Self::WAKER)
    }

    /// # Safety
    /// `data` is a waker's task pointer and the task is alive.
    unsafe fn clone_waker(data: *const ()) -> RawWaker {
        let task = data.cast::<Self>();
        // SAFETY: `task` came from the facade's `Arc` and is alive (the caller's contract).
        unsafe { Arc::increment_strong_count(task) };
        RawWaker::new(data, &Self::WAKER)
    }

    /// # Safety
    /// `data` is a waker's task pointer and the task is alive for the call.
    unsafe fn wake_by_ref(data: *const ()) {
        let raw = data.cast::<Self>();
        // SAFETY: the task is alive for this call (the caller's contract).
        let task = unsafe { &*raw };
        if task.claim_wakeup() {
            // The scheduler gets a reference of its own; ours (`task`) keeps the task, and
            // with it the scheduler, alive until `schedule` returns.
            // SAFETY: `raw` came from the facade's `Arc` and the task is alive.
            let queued = unsafe {
                Arc::increment_strong_count(raw);
                Arc::from_raw(raw)
            };
            task.scheduler.schedule(queued);
        }
    }

    /// # Safety
    /// `data` is a waker's task pointer and the waker owns one reference, given up here.
    unsafe fn wake_by_value(data: *const ()) {
        // SAFETY: the waker's own reference keeps the task alive through the wakeup (the
        // scheduler may run the task to its end before `schedule` returns), and is then given
        // up.
        unsafe {
            Self::wake_by_ref(data);
            Self::drop_waker(data);
        }
    }

    /// # Safety
    /// `data` is a waker's task pointer and the waker owns one reference, given up here.
    unsafe fn drop_waker(data: *const ()) {
        // SAFETY: the reference came from the facade's `Arc` (the caller's contract).
        unsafe { Arc::decrement_strong_count(data.cast::<Self>()) };
    }
}

impl<S: Schedule> Drop for TaskCell<S> {
    fn drop(&mut self) {
        // The last reference is gone while the task still had a future: nothing can wake it any
        // more. Dropping the future tells its join handle the task was cancelled.
        let body = self.body.with_mut(|body| {
            // SAFETY: this is the last reference, so no other thread can enter the body; the
            // last `Arc` drop ordered every earlier entry before this one.
            unsafe { (*body).take() }
        });
        if let Some(future) = body {
            let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(future)));
            self.scheduler.abandoned(self);
        }
    }
}
