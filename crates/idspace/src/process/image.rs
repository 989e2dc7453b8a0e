//! Checkpoint images: what CRIU keeps of a process's IDs, and of its timers their state and
//! the kind of their notification.

use serde::{Deserialize, Serialize};

use super::error::ProcessError;
use super::posix_timer::{Clock, PosixTimer, TimerSnapshot};
use crate::table::MAX_ID;

/// A process's IDs as [`checkpoint`](super::Processes::checkpoint) saw them. It carries IDs,
/// not code: whoever restores it supplies each thread's work.
///
/// # Examples
///
/// ```
/// use idspace::pid::ROOT;
/// use idspace::process::{Image, Processes};
///
/// let model = Processes::with_init(2)?;
/// let ns = model.ns_new(ROOT)?;
/// let leader = model.fork(ns, 0)?;
/// let thread = model.clone_thread(leader.tid(), 1)?;
/// model.timer_create(leader.tid())?;
/// let image: Image = model.checkpoint(leader.tid())?;
/// assert_eq!(image.threads[0].ids, leader.ids(), "the leader first");
/// assert_eq!(image.threads[1].ids, thread.ids());
/// assert_eq!(image.timers, [0]);
/// assert!(image.timer_states.is_empty(), "a plain timer keeps no state");
/// // Restored in a fresh namespace of another model: the same IDs there.
/// let target = Processes::with_init(2)?;
/// let into = target.ns_new(ROOT)?;
/// let restored = target.restore(into, &image, 0)?;
/// assert_eq!(restored.leader.tid_in_own_ns(), leader.tid_in_own_ns());
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use idspace::pid::ROOT;
/// use idspace::process::{Processes, ThreadImage};
///
/// let model = Processes::new(1)?;
/// let leader = model.fork(ROOT, 0)?;
/// let thread = model.clone_thread(leader.tid(), 0)?;
/// model.exit(leader.tid(), 0)?;
/// let image = model.checkpoint(leader.tid())?;
/// let zombie = ThreadImage { ids: leader.ids(), zombie: true };
/// let live = ThreadImage { ids: thread.ids(), zombie: false };
/// assert_eq!(image.threads, [zombie, live]);
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
///
/// use idspace::pid::ROOT;
/// use idspace::process::{Clock, Notify, NotifyKind, ProcessError, Processes};
///
/// let model = Processes::new(1)?;
/// let pid = model.fork(ROOT, 0)?.tid();
/// let (tx, _rx) = mpsc::channel();
/// model.timer_create_with(pid, Clock::Monotonic, Notify::Channel(tx))?;
/// let image = model.checkpoint(pid)?;
/// assert_eq!(image.timer_states[0].notify, NotifyKind::Channel);
///
/// // `restore` cannot make up a channel; `restore_with` is given one for each such timer.
/// let target = Processes::new(1)?;
/// assert!(matches!(target.restore(ROOT, &image, 0), Err(ProcessError::BadImage(_))));
/// let (tx, _rx) = mpsc::channel();
/// let mut tx = Some(tx);
/// let restored = target.restore_with(ROOT, &image, 0, |_, kind| match kind {
///     NotifyKind::Channel => tx.take().map(Notify::Channel),
///     // Wake and None need no target; kinds added later get none here either.
///     _ => None,
/// })?;
/// assert_eq!(target.timer_count(restored.leader.tid())?, 1);
/// # Ok::<(), ProcessError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NotifyKind {
    /// [`Notify::None`](crate::process::Notify::None).
    None,
    /// [`Notify::Wake`](crate::process::Notify::Wake).
    Wake,
    /// [`Notify::Channel`](crate::process::Notify::Channel).
    Channel,
}

/// A timer as a checkpoint keeps it.
///
/// # Examples
///
/// ```
/// use idspace::pid::ROOT;
/// use idspace::process::{
///     Clock, ITimerSpec, Notify, NotifyKind, Processes, TimeSpec, TimerImage, When,
/// };
///
/// const HOUR: u64 = 3600 * 1_000_000_000;
/// let model = Processes::new(1)?;
/// let pid = model.fork(ROOT, 0)?.tid();
/// let timer = model.timer_create_with(pid, Clock::Realtime, Notify::Wake)?;
/// let in_an_hour = ITimerSpec::once(TimeSpec::new(3600, 0));
/// model.timer_settime(pid, timer, When::Relative, in_an_hour)?;
/// let image = model.checkpoint(pid)?;
/// let state: &TimerImage = &image.timer_states[0];
/// assert_eq!((state.id, state.notify), (timer, NotifyKind::Wake));
/// assert_eq!(state.state.clock, Clock::Realtime);
/// assert!(state.state.remaining.is_some_and(|left| left <= HOUR), "relative to the checkpoint");
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
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
