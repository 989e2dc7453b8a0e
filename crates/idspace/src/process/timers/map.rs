//! A process's timers by ID (the kernel's `signal_struct::posix_timers`), in a map whose
//! hasher keeps a group of IDs together.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
// std's `Arc`, as the timer cells' (see `cell`).
use std::sync::Arc;

use super::cell::Notify;
use super::cell::TimerCell;
use super::wheel::WheelLink;
use crate::process::error::ProcessError;
use crate::process::image::{Image, TimerImage};
use crate::process::posix_timer::{Clock, PosixTimer};
use crate::sync::{self, Mutex};
use crate::util::hash::mix;

/// The hasher of a process's timer map: [`mix`]'s locality (the 64 IDs of a group in one
/// block of 64 neighbouring buckets, the blocks scattered), so that a process working through
/// its timers in ID order (they are created in that order) walks the map a block at a time
/// instead of missing the cache on every timer once the map outgrows it. The low bits of the
/// ID go into the top 7 bits too, which the map compares first: IDs of one group share their
/// block's mix, and would otherwise all compare equal there.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u32` keys are hashed; this is the generic path, kept correct.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
        self.0 = mix(0, self.0 as u32);
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = mix(0, id) ^ (u64::from(id) << 57);
    }
}

/// A process's timers by ID (the kernel's `signal_struct::posix_timers`).
pub(crate) struct ProcessTimers {
    pid: u32,
    by_id: Mutex<HashMap<u32, Arc<TimerCell>, BuildHasherDefault<IdHasher>>>,
}

impl ProcessTimers {
    pub(crate) fn new(pid: u32) -> ProcessTimers {
        ProcessTimers {
            pid,
            by_id: Mutex::new(HashMap::default()),
        }
    }

    /// Adds timer `id` (just created in the table).
    pub(crate) fn insert(&self, id: u32, timer: PosixTimer, notify: Notify) -> Arc<TimerCell> {
        let cell = Arc::new(TimerCell::new(self.pid, id, timer, notify));
        sync::lock(&self.by_id).insert(id, Arc::clone(&cell));
        cell
    }

    /// Timer `id`.
    pub(crate) fn get(&self, id: u32) -> Result<Arc<TimerCell>, ProcessError> {
        sync::lock(&self.by_id)
            .get(&id)
            .cloned()
            .ok_or(ProcessError::NotFound)
    }

    /// Deletes timer `id` (just removed from the table).
    pub(crate) fn delete(&self, id: u32) {
        let cell = sync::lock(&self.by_id).remove(&id);
        if let Some(cell) = cell {
            cell.delete();
        }
    }

    /// Deletes every timer (the process exits).
    pub(crate) fn delete_all(&self) {
        let cells: Vec<Arc<TimerCell>> = sync::lock(&self.by_id).drain().map(|(_, c)| c).collect();
        for cell in cells {
            cell.delete();
        }
    }

    /// The timers that are not plain, ascending by ID, with times relative to `now`.
    pub(crate) fn images(&self, now: u64) -> Vec<TimerImage> {
        let cells: Vec<Arc<TimerCell>> = sync::lock(&self.by_id).values().cloned().collect();
        let mut images: Vec<TimerImage> = cells.iter().filter_map(|cell| cell.image(now)).collect();
        images.sort_unstable_by_key(|image| image.id);
        images
    }

    /// Recreates the timers of `image` (a fresh process, its IDs just created in the table),
    /// the non-plain ones notifying `targets` (in the order of `image.timer_states`), their
    /// remaining times counted from `now`. A notification pending at the checkpoint is sent
    /// again: the one sent before was lost with the checkpointed process.
    pub(crate) fn restore(&self, image: &Image, targets: Vec<Notify>, now: u64, wheel: &WheelLink) {
        let mut states = image.timer_states.iter().zip(targets).peekable();
        for &id in &image.timers {
            let Some((state, notify)) = states.next_if(|(state, _)| state.id == id) else {
                self.insert(id, PosixTimer::new(Clock::Monotonic), Notify::None);
                continue;
            };
            // `Image::check` has restored each state once already: this cannot fail.
            let timer = PosixTimer::restore(&state.state, now)
                .unwrap_or_else(|_| PosixTimer::new(state.state.clock));
            self.insert(id, timer, notify).restart(wheel);
        }
    }

    /// Every timer's cell.
    pub(crate) fn cells(&self) -> Vec<Arc<TimerCell>> {
        sync::lock(&self.by_id).values().cloned().collect()
    }

    /// How many timers the process has.
    pub(crate) fn len(&self) -> usize {
        sync::lock(&self.by_id).len()
    }
}

impl Drop for ProcessTimers {
    /// A process dropped with timers (its model went away): their wheel entries go too.
    fn drop(&mut self) {
        self.delete_all();
    }
}
