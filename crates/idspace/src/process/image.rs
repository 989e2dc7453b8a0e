//! Checkpoint images: what CRIU keeps of a process's IDs, and of its timers their state and
//! the kind of their notification.

use serde::{Deserialize, Serialize};

use super::error::ProcessError;
use super::posix_timer::{Clock, PosixTimer, TimerSnapshot};
use crate::table::MAX_ID;

/// A process's IDs as [`checkpoint`](super::Processes::checkpoint) saw them. It carries IDs,
/// not code: whoever restores it supplies each thread's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// Every thread whose IDs were held, the leader first, then ascending by root-level ID.
    pub threads: Vec<ThreadImage>,
    /// The process's timer IDs, ascending.
    pub timers: Vec<u32>,
    /// Where the process's next timer ID search starts.
    pub timer_cursor: u32,
    /// The state of every timer that is not plain (monotonic, no notification, disarmed, no
    /// overruns: what [`timer_create`](super::Processes::timer_create) makes), ascending by
    /// ID; left out of the serialised image when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timer_states: Vec<TimerImage>,
}

/// One thread of an [`Image`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadImage {
    /// Its ID at every level, innermost first.
    pub ids: Vec<u32>,
    /// Whether it is a zombie leader (exited, IDs held until the group ends).
    pub zombie: bool,
}

impl Image {
    /// Checks what restore relies on; a refusal names the first thing wrong.
    pub(crate) fn check(&self) -> Result<(), ProcessError> {
        let bad = |why: &str| Err(ProcessError::BadImage(why.to_string()));
        let Some(leader) = self.threads.first() else {
            return bad("no threads");
        };
        if self.threads.iter().any(|thread| thread.ids.is_empty()) {
            return bad("a thread without IDs");
        }
        if self.threads.iter().any(|t| t.ids.len() != leader.ids.len()) {
            return bad("threads at different depths");
        }
        if self.threads.iter().skip(1).any(|thread| thread.zombie) {
            return bad("a zombie that is not the leader");
        }
        if leader.zombie && self.threads.len() == 1 {
            return bad("a zombie leader without live threads");
        }
        if self.threads.iter().flat_map(|t| &t.ids).any(|&id| id == 0) {
            return bad("an ID of 0");
        }
        let mut roots: Vec<u32> = self.threads.iter().map(ThreadImage::root).collect();
        roots.sort_unstable();
        if roots.windows(2).any(|pair| pair[0] == pair[1]) {
            return bad("two threads with one root-level ID");
        }
        if self.timers.windows(2).any(|pair| pair[0] >= pair[1]) {
            return bad("timer IDs not strictly ascending");
        }
        if self.timers.last().is_some_and(|&id| id > MAX_ID) || self.timer_cursor > MAX_ID {
            return bad("a timer ID above the largest");
        }
        if self
            .timer_states
            .windows(2)
            .any(|pair| pair[0].id >= pair[1].id)
        {
            return bad("timer states not strictly ascending by ID");
        }
        for state in &self.timer_states {
            if self.timers.binary_search(&state.id).is_err() {
                return bad("a timer state for an ID that is no timer");
            }
            if let Err(why) = PosixTimer::restore(&state.state, 0) {
                return bad(&format!("timer {}: {why}", state.id));
            }
        }
        Ok(())
    }
}

/// The kind of a [`Notify`](crate::process::Notify), without its target: what an image keeps
/// of a timer's notification (a restore is given the target again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyKind {
    /// [`Notify::None`](crate::process::Notify::None).
    None,
    /// [`Notify::Wake`](crate::process::Notify::Wake).
    Wake,
    /// [`Notify::Channel`](crate::process::Notify::Channel).
    Channel,
}

/// A timer as a checkpoint keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerImage {
    /// Its ID.
    pub id: u32,
    /// Its notification's kind (the target itself is given again at restore).
    pub notify: NotifyKind,
    /// Its clock, times (relative to the checkpoint) and overrun state.
    pub state: TimerSnapshot,
}

impl TimerImage {
    /// Whether the timer is what `timer_create` without arguments makes and nothing changed
    /// since: monotonic, no notification, disarmed, no overruns. Images leave those out.
    pub(crate) fn is_plain(&self) -> bool {
        let plain = PosixTimer::new(Clock::Monotonic).snapshot(0);
        self.notify == NotifyKind::None && self.state == plain
    }
}

impl ThreadImage {
    /// The thread's root-level ID.
    pub(crate) fn root(&self) -> u32 {
        self.ids.last().copied().unwrap_or(0)
    }
}
