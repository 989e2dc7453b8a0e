//! The running task's CID, per thread: which CID space the task running on this thread takes
//! its CIDs from, how many CPUs that space has, and the CID it holds.
//!
//! A runtime that gives its tasks CIDs (the process hooks do, at every switch-in) writes the
//! cell with [`set`] between polls; per-CID structures indexed by the running task's CID
//! ([`IndexSource::TaskCid`](crate::percid::IndexSource::TaskCid)) read it with [`get`] on
//! their hot path. Both are a thread-local load or store of a few words: no reference
//! counting, no atomics.

use std::cell::Cell;

use crate::sync;

/// What the running task is to its CID space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Running {
    /// The identity of the task's CID space: distinct for spaces alive at once, and the space
    /// stays alive while any of its tasks runs. (The process hooks use the address of the
    /// process that owns the space.)
    pub(crate) space: usize,
    /// The CPU count of the space: its CIDs are below it.
    pub(crate) cpus: usize,
    /// The CID the task runs with (`None` if its space refused one).
    pub(crate) cid: Option<u32>,
}

#[cfg(not(loom))]
sync::thread_local! {
    /// The task this thread runs, if it runs one with a CID space: set at switch-in, cleared
    /// at switch-out.
    static RUNNING: Cell<Option<Running>> = const { Cell::new(None) };
}

// loom's `thread_local!` takes no `const` initialisers.
#[cfg(loom)]
sync::thread_local! {
    static RUNNING: Cell<Option<Running>> = Cell::new(None);
}

/// Records the task this thread runs from now on (`None`: none). Called by the runtime's
/// switch hooks only, so between polls: at switch-in after the task took its CID, at
/// switch-out before it gives it back, so that the cell never shows a CID its task does not
/// hold (per-CID structures rely on it).
#[inline]
pub(crate) fn set(running: Option<Running>) {
    RUNNING.with(|cell| cell.set(running));
}

/// The task this thread runs, if the caller is one with a CID space (between its switch-in and
/// switch-out, that is within one poll).
#[inline]
pub(crate) fn get() -> Option<Running> {
    // During the thread's teardown (a destructor using a per-CID structure), no task runs.
    #[cfg(not(loom))]
    return RUNNING.try_with(Cell::get).ok().flatten();
    #[cfg(loom)]
    return RUNNING.with(Cell::get);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_cell_is_per_thread_and_cleared_by_none() {
        let me = Running {
            space: 0x1000,
            cpus: 4,
            cid: Some(2),
        };
        assert_eq!(get(), None);
        set(Some(me));
        assert_eq!(get(), Some(me));
        let other = sync::thread::spawn(get).join().unwrap();
        assert_eq!(other, None, "another thread runs nothing");
        set(None);
        assert_eq!(get(), None);
    }
}
