//! The kernel's own checkpoint/restore path for a process's POSIX timers, the column the
//! checkpoint/restore table compares our designs with.
//!
//! CRIU checkpoints a process's timers by reading `/proc/PID/timers` and restores them by
//! switching the process into restore mode (`prctl(PR_TIMER_CREATE_RESTORE_IDS)`, Linux 6.15)
//! and calling `timer_create` with each requested ID. This column does exactly that, in the
//! lab's own process, for the same 2048 timers 512 apart. It covers the timers only: thread IDs
//! and namespaces are restored by CRIU through `clone3`'s `set_tid`, one system call per thread,
//! which this column does not include.

use std::fs;
use std::time::Instant;

use crate::timers::kernel::{set_restore_mode, KernelTimers};
use crate::timers::subjects::Subject;

/// Timers, and the gap between their IDs, as in the model's subject.
const TIMERS: u32 = 2048;
const SPACING: u32 = 512;

/// Deletes the timers it holds when dropped, so a failed measurement leaves none behind, and
/// leaves restore mode.
struct Held(Vec<u32>);

impl Held {
    fn restore(&mut self, ids: impl Iterator<Item = u32>) -> Result<(), String> {
        if !set_restore_mode(true) {
            return Err(
                "the kernel refuses PR_TIMER_CREATE_RESTORE_IDS (it needs Linux 6.15 or later)"
                    .into(),
            );
        }
        for id in ids {
            if !KernelTimers.create_exact(0, id) {
                set_restore_mode(false);
                return Err(format!(
                    "timer_create in restore mode did not give ID {id}: {}",
                    std::io::Error::last_os_error()
                ));
            }
            self.0.push(id);
        }
        set_restore_mode(false);
        Ok(())
    }

    fn delete_all(&mut self) {
        for id in self.0.drain(..) {
            KernelTimers.delete(0, id);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.delete_all();
    }
}

/// Checkpoints (reads `/proc/self/timers`) and restores (restore mode plus `timer_create` per
/// ID) 2048 timers 512 apart; microseconds for each.
pub(super) fn checkpoint_restore() -> Result<Vec<f64>, String> {
    let ids = || (0..TIMERS).map(|i| i * SPACING);
    let mut held = Held(Vec::with_capacity(TIMERS as usize));
    held.restore(ids())?;

    let start = Instant::now();
    let listing = fs::read_to_string("/proc/self/timers")
        .map_err(|e| format!("cannot read /proc/self/timers: {e}"))?;
    let checkpointed: Vec<u32> = listing
        .lines()
        .filter_map(|line| line.strip_prefix("ID: "))
        .filter_map(|id| id.trim().parse().ok())
        .collect();
    let checkpoint = start.elapsed();
    // The checkpoint must have seen every timer (other timers of the lab may be listed too).
    if let Some(missing) = ids().find(|id| !checkpointed.contains(id)) {
        return Err(format!("/proc/self/timers does not list timer {missing}"));
    }

    held.delete_all();
    let start = Instant::now();
    held.restore(ids())?;
    let restore = start.elapsed();
    Ok(vec![
        checkpoint.as_secs_f64() * 1e6,
        restore.as_secs_f64() * 1e6,
    ])
}
