//! The POSIX timer API: `timer_create`, `timer_settime`, `timer_gettime`, `timer_getoverrun`,
//! `timer_delete`, waiting for a notification, and the runtime whose wheel fires them (see
//! the [`timers`](crate::process::timers) docs for the cells and the wheel).

use std::time::Instant;
// std's `Arc`, as the timer cells' (see `timers::cell`).
use std::sync::Arc;

use super::Processes;
use crate::process::design::{CidDesign, PidDesign, TableDesign};
use crate::process::error::ProcessError;
use crate::process::posix_timer::{Clock, ITimerSpec, Now, PosixTimer, When};
use crate::process::timers::{mono_of, Notify, TimerCell, TimerWait, WheelLink};
use crate::sched::{Handle, Hooks};
use crate::sync;

impl<P: PidDesign, C: CidDesign, T: TableDesign> Processes<P, C, T> {
    /// A new timer of process `pid`: the first free ID at or after its cursor. It is a
    /// disarmed monotonic timer without notification (`SIGEV_NONE`); see
    /// [`timer_create_with`](Self::timer_create_with).
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::Full`].
    pub fn timer_create(&self, pid: u32) -> Result<u32, ProcessError> {
        self.timer_create_with(pid, Clock::Monotonic, Notify::None)
    }

    /// A new disarmed timer of process `pid` on `clock`, notifying `notify`: the first free ID
    /// at or after its cursor.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::Full`].
    pub fn timer_create_with(
        &self,
        pid: u32,
        clock: Clock,
        notify: Notify,
    ) -> Result<u32, ProcessError> {
        let state = sync::lock(&self.state);
        let record = state
            .processes
            .get(&pid)
            .ok_or(ProcessError::UnknownProcess)?;
        let id = self
            .timers
            .create(record.process.owner(), ())
            .map_err(|_| ProcessError::Full)?;
        record
            .process
            .timers()
            .insert(id, PosixTimer::new(clock), notify);
        Ok(id)
    }

    /// Deletes timer `timer` of process `pid`.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`].
    pub fn timer_delete(&self, pid: u32, timer: u32) -> Result<(), ProcessError> {
        let state = sync::lock(&self.state);
        let record = state
            .processes
            .get(&pid)
            .ok_or(ProcessError::UnknownProcess)?;
        self.timers
            .remove(record.process.owner(), timer)
            .map(drop)
            .map_err(|_| ProcessError::NotFound)?;
        record.process.timers().delete(timer);
        Ok(())
    }

    /// The runtime whose wheel the timers fire on.
    pub(crate) fn wheel(&self) -> &WheelLink {
        &self.wheel
    }

    /// Timer `timer` of live process `pid`.
    fn timer_cell(&self, pid: u32, timer: u32) -> Result<Arc<TimerCell>, ProcessError> {
        self.live_process(pid)?.timers().get(timer)
    }

    /// `timer_settime`: arms timer `timer` of process `pid` (relative or absolute, one-shot or
    /// with an interval), or disarms it with a zero value; returns the old setting. A
    /// notification of the old setting still pending is dropped and the overrun count
    /// cleared.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`] (no such timer, or
    /// deleted), [`ProcessError::Timer`] for a negative or unnormalised time. A refused call
    /// changes nothing.
    pub fn timer_settime(
        &self,
        pid: u32,
        timer: u32,
        when: When,
        setting: ITimerSpec,
    ) -> Result<ITimerSpec, ProcessError> {
        self.timer_cell(pid, timer)?
            .settime(when, setting, self.wheel())
    }

    /// `timer_gettime`: the time left to the next expiry and the interval of timer `timer` of
    /// process `pid` (both zero when disarmed).
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`].
    pub fn timer_gettime(&self, pid: u32, timer: u32) -> Result<ITimerSpec, ProcessError> {
        let at = Now {
            mono: mono_of(Instant::now()),
            real: 0,
        };
        self.timer_cell(pid, timer)?.with(|state| state.gettime(at))
    }

    /// `timer_getoverrun`: the expirations that happened while the last delivered
    /// notification of timer `timer` was pending, capped at
    /// [`DELAYTIMER_MAX`](crate::process::DELAYTIMER_MAX).
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`].
    pub fn timer_getoverrun(&self, pid: u32, timer: u32) -> Result<u32, ProcessError> {
        self.timer_cell(pid, timer)?
            .with(|state| state.getoverrun())
    }

    /// Waits for the next notification of timer `timer` of process `pid` (made with
    /// [`Notify::Wake`]) and takes it: the future gives its overrun count, or
    /// [`ProcessError::NotFound`] if the timer is deleted meanwhile (or the process exits). A
    /// notification already pending is taken at once.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], [`ProcessError::NotFound`]; the future gives
    /// [`ProcessError::NotWaitable`] for a timer that notifies otherwise.
    pub fn timer_wait(&self, pid: u32, timer: u32) -> Result<TimerWait, ProcessError> {
        Ok(TimerWait::new(self.timer_cell(pid, timer)?))
    }

    /// Makes the timers of this model fire on `handle`'s runtime (its workers' timer wheels),
    /// arming every timer already set. [`Handle::spawn_process`] attaches its runtime by
    /// itself; timers of a model without a runtime keep their settings but never fire.
    ///
    /// # Errors
    /// [`ProcessError::OtherWheel`] if another runtime is attached already.
    pub fn attach_wheel<H: Hooks>(&self, handle: &Handle<H>) -> Result<(), ProcessError> {
        match self.wheel().attach(&handle.driver()) {
            None => return Err(ProcessError::OtherWheel),
            Some(false) => return Ok(()),
            Some(true) => {}
        }
        for pid in self.process_ids() {
            let Ok(process) = self.live_process(pid) else {
                continue;
            };
            for cell in process.timers().cells() {
                cell.arm_if_unarmed(self.wheel());
            }
        }
        Ok(())
    }

    /// How many timers process `pid` has.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`].
    pub fn timer_count(&self, pid: u32) -> Result<usize, ProcessError> {
        Ok(self.live_process(pid)?.timers().len())
    }
}
