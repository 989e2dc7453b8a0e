//! The future of [`Processes::timer_wait`](crate::process::Processes::timer_wait): a task
//! waiting for a timer's notification, as `sigwaitinfo` does for a signal.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
// std's `Arc`, as the timer cells' (see `cell`).
use std::sync::Arc;

use super::cell::TimerCell;
use crate::process::error::ProcessError;

/// The future of [`Processes::timer_wait`](crate::process::Processes::timer_wait): it gives
/// the overrun count of the notification it takes, or [`ProcessError::NotFound`] once the
/// timer is deleted.
///
/// # Examples
///
/// A process's leader waits for its own interval timer, twice:
///
/// ```
/// use std::sync::Arc;
///
/// use idspace::pid::ROOT;
/// use idspace::process::{
///     self, Clock, ITimerSpec, Notify, ProcessHooks, Processes, TimeSpec, When,
/// };
/// use idspace::sched::Builder;
///
/// let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
/// let model: Arc<Processes> = Arc::clone(hooks.model());
/// let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
/// let waits = runtime.spawn_process(ROOT, {
///     let model = Arc::clone(&model);
///     async move {
///         let pid = process::current().expect("a task of a process").root_pid;
///         let timer = model.timer_create_with(pid, Clock::Monotonic, Notify::Wake)?;
///         let ms = TimeSpec::new(0, 1_000_000);
///         model.timer_settime(pid, timer, When::Relative, ITimerSpec::every(ms, ms))?;
///         let mut taken = 0;
///         for _ in 0..2 {
///             model.timer_wait(pid, timer)?.await?;
///             taken += 1;
///         }
///         model.timer_delete(pid, timer)?;
///         Ok::<u32, process::ProcessError>(taken)
///     }
/// })?;
/// assert_eq!(waits.join()??, 2);
/// drop(runtime);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TimerWait {
    cell: Arc<TimerCell>,
}

impl TimerWait {
    pub(crate) fn new(cell: Arc<TimerCell>) -> TimerWait {
        TimerWait { cell }
    }
}

impl Future for TimerWait {
    type Output = Result<u32, ProcessError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.cell.poll_wait(cx.waker())
    }
}

impl fmt::Debug for TimerWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerWait")
            .field("pid", &self.cell.pid)
            .field("timer", &self.cell.id)
            .finish()
    }
}
