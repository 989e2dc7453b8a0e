//! Killing a thread that a runtime task runs: the kernel's SIGKILL, which a thread acts on at
//! its next return to user space, and whose IDs are freed only once the thread is gone
//! (`release_task`).
//!
//! Each thread has a [`TaskLink`]. When a runtime task starts running the thread, the model
//! marks it *attached* (under its lock); from then on the model never frees the thread's IDs
//! itself: a kill (or an init's end, or an exit asked from outside) marks the thread *killed*
//! and wakes its task, and the IDs are freed by the task's exit hook, once no worker polls it
//! any more. The task's future is wrapped in a [`Killable`], which checks the mark before each
//! poll and, if it is set, ends the task without polling the user's future again: it unwinds
//! with [`JoinError::Killed`], so that the join handle reports the kill.
//!
//! # The wakeup
//!
//! A killed task may be asleep, waiting for something that never comes, so the kill must wake
//! it. Before its first poll (and whenever its waker changes), [`Killable`] leaves the task's
//! waker in the link and only then reads the mark; a kill sets the mark and only then takes
//! the waker. Both take the link's lock, so either the kill finds the waker (and wakes the
//! task, which then polls again and sees the mark), or the poll's read comes after the kill's
//! write and sees the mark. No kill is lost.
//!
//! Every other poll takes no lock: the [`Killable`] keeps a clone of the waker it left, and
//! when the poll's waker is the same (always, in this runtime: a task's waker is the task)
//! it only reads the mark (Relaxed). That read may miss a kill in progress, but the kill then
//! finds the waker: the link's waker is taken only by a kill, after its mark, or by the exit
//! hook, after the task's last poll. So the kill wakes the task, whose next poll comes after
//! the wakeup (the runtime's state word orders them) and so after the mark. A switch thus
//! costs a load here instead of a lock and an unlock (two atomic read-modify-writes): the
//! kernel checks a pending SIGKILL with a load of the thread's flags on its way back to user
//! space too. `loom_tests` models the race.
//!
//! The link holds the waker for the task's whole life, so a task of a process is not dropped
//! when every other waker of it is gone (as a plain task is, reporting
//! [`JoinError::Cancelled`]): like a blocked thread, it waits until its process is killed or
//! its runtime shuts down. The exit hook takes the waker back, which ends the cycle between the
//! thread and its task.

use std::future::Future;
use std::panic;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::thread::Thread;
use crate::sched::JoinError;
use crate::sync::{self, Arc, AtomicBool, Mutex, Ordering};

/// A thread's link to the runtime task that runs it, if any.
pub(crate) struct TaskLink {
    /// A runtime task runs the thread: the model leaves its IDs to the task's exit hook.
    /// Read and written under the model's lock only: Relaxed.
    attached: AtomicBool,
    /// The task must stop at its next poll. Written before `waker` is taken and read after it
    /// is stored, both under `waker`'s lock, which orders them (see the module docs): Relaxed.
    killed: AtomicBool,
    /// The waker of the task's latest poll.
    waker: Mutex<Option<Waker>>,
}

impl Default for TaskLink {
    /// No task: not attached, not killed.
    fn default() -> Self {
        TaskLink {
            attached: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            waker: Mutex::new(None),
        }
    }
}

impl TaskLink {
    /// Whether a runtime task runs the thread. Call with the model's lock held.
    pub(crate) fn is_attached(&self) -> bool {
        self.attached.load(Ordering::Relaxed)
    }

    /// A runtime task runs the thread from now on. Call with the model's lock held.
    pub(crate) fn attach(&self) {
        self.attached.store(true, Ordering::Relaxed);
    }

    /// The task stopped: returns whether one was attached, and the waker it left (to be
    /// dropped outside the model's lock). Call with the model's lock held.
    pub(crate) fn detach(&self) -> (bool, Option<Waker>) {
        let was = self.attached.swap(false, Ordering::Relaxed);
        (was, sync::lock(&self.waker).take())
    }

    /// Marks the thread killed: returns whether it was not already.
    pub(crate) fn kill(&self) -> bool {
        !self.killed.swap(true, Ordering::Relaxed)
    }

    /// Wakes the killed thread's task, so that it polls again and stops. Call without the
    /// model's lock: waking may cancel the task (its runtime is shutting down), whose exit
    /// hook takes that lock.
    pub(crate) fn wake(&self) {
        let waker = sync::lock(&self.waker).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Before a poll: makes sure the link holds the task's waker, then returns whether the
    /// thread may run. `left` is the waker the task's previous polls left here (kept by the
    /// caller, which only the task's polls touch): when `waker` is the same, the link still
    /// holds it or a kill took it, so only the mark is read (module docs).
    #[inline]
    fn watch(&self, left: &mut Option<Waker>, waker: &Waker) -> bool {
        if !left.as_ref().is_some_and(|held| held.will_wake(waker)) {
            self.leave(left, waker);
        }
        // Relaxed: a stale `false` is harmless, as the kill that set it wakes the task (module
        // docs); after `leave`, its lock orders this read after a kill's write before it.
        !self.killed.load(Ordering::Relaxed)
    }

    /// Leaves `waker` in the link, under its lock, and keeps a clone in `left`.
    #[cold]
    fn leave(&self, left: &mut Option<Waker>, waker: &Waker) {
        let mut slot = sync::lock(&self.waker);
        if !slot.as_ref().is_some_and(|held| held.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
        drop(slot);
        *left = Some(waker.clone());
    }
}

/// A task's future that stops when its thread is killed: before each poll it checks the
/// thread's [`TaskLink`], and a killed thread's task unwinds with [`JoinError::Killed`]
/// instead of running the future again. Without a thread (it was killed before its task could
/// be attached), the first poll stops it.
pub(crate) struct Killable<C, F> {
    thread: Option<Arc<Thread<C>>>,
    /// The waker the task's polls left in the thread's link (see [`TaskLink::watch`]).
    left: Option<Waker>,
    future: F,
}

impl<C, F> Killable<C, F> {
    /// `future`, run by `thread` (`None`: already killed).
    pub(crate) fn new(thread: Option<Arc<Thread<C>>>, future: F) -> Self {
        Killable {
            thread,
            left: None,
            future,
        }
    }
}

impl<C, F: Future> Future for Killable<C, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: `Killable` never moves it out and gives no
        // `&mut` to it but the pinned one made here; `thread` and `left` are not pinned (they
        // are moved and replaced freely, never pinned in place).
        let this = unsafe { self.get_unchecked_mut() };
        let runs = this
            .thread
            .as_ref()
            .is_some_and(|thread| thread.task().watch(&mut this.left, cx.waker()));
        if !runs {
            kill_unwind();
        }
        // SAFETY: see above: `future` is pinned as `self` was, and never moved.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        future.poll(cx)
    }
}

/// Ends the killed task's poll where the runtime catches panics, before any user code runs;
/// the runtime tells the join handle it was killed. No panic hook runs for this.
#[cold]
fn kill_unwind() -> ! {
    panic::resume_unwind(Box::new(JoinError::Killed))
}

#[cfg(all(test, loom))]
mod loom_tests;
