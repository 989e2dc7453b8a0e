//! The running task's CID, per thread: which CID space the task running on this thread takes
//! its CIDs from, how many CPUs that space has, the CID it holds, and the IDs the runtime names
//! it by.
//!
//! A runtime that gives its tasks CIDs (the process hooks do, at every switch-in) keeps one
//! [`Record`] per task, in the task's own data, and points this thread's cell at the running
//! task's record with [`set`] between polls; per-CID structures indexed by the running task's
//! CID ([`IndexSource::TaskCid`](crate::percid::IndexSource::TaskCid)) and
//! [`process::current`](crate::process::current) read it with [`get`] on their hot path.
//!
//! # One pointer per switch
//!
//! The cell is one pointer: a switch-in stores the task's CID into the task's record and the
//! record's address into the cell, a switch-out clears the cell. Everything else in the record
//! (the space, its size, the task's IDs) is written once, when the task is made. The cell used
//! to hold a copy of the space, its size and the CID, and the process hooks kept the task's
//! IDs in a second thread-local: two multi-word copies in and two out at every switch, where
//! the kernel's switch writes `current` once. A reader pays one more dependent load (the
//! record, on a line the switch-in just wrote), and only on the paths that ask.

use std::cell::Cell;
use std::ptr;

use crate::sync::{self, AtomicU32, Ordering};

/// No CID in [`Record`]'s CID word.
const NO_CID: u32 = u32::MAX;

/// What the running task is to its CID space, as [`get`] reports it.
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
    /// The IDs the runtime names the task by (the process hooks: its TID and PID in its own
    /// namespace, then in the root one); carried here so that one cell serves every reader.
    pub(crate) ids: [u32; 4],
}

/// A task's record, kept in its data for its whole life: the fixed part written when the task
/// is made, the CID at each switch-in. Only the worker running the task writes it.
#[derive(Debug)]
pub(crate) struct Record {
    space: usize,
    cpus: usize,
    ids: [u32; 4],
    /// Written at switch-in and switch-out by the worker running the task, read by it (and by
    /// whoever asks what the task holds): Relaxed, as the runtime's hand-off of the task
    /// orders one worker's switch-out before the next one's switch-in.
    cid: AtomicU32,
}

impl Record {
    /// The record of a task of the space identified by `space`, of `cpus` CPUs, named `ids`.
    pub(crate) fn new(space: usize, cpus: usize, ids: [u32; 4]) -> Record {
        Record {
            space,
            cpus,
            ids,
            cid: AtomicU32::new(NO_CID),
        }
    }

    /// The CID the task holds while it runs.
    #[inline]
    pub(crate) fn cid(&self) -> Option<u32> {
        let cid = self.cid.load(Ordering::Relaxed);
        (cid != NO_CID).then_some(cid)
    }

    /// The task runs with `cid` from now on (`None`: none).
    #[inline]
    pub(crate) fn set_cid(&self, cid: Option<u32>) {
        self.cid.store(cid.unwrap_or(NO_CID), Ordering::Relaxed);
    }

    #[inline]
    fn running(&self) -> Running {
        Running {
            space: self.space,
            cpus: self.cpus,
            cid: self.cid(),
            ids: self.ids,
        }
    }
}

#[cfg(not(loom))]
sync::thread_local! {
    /// The record of the task this thread runs, if it runs one with a CID space (else null):
    /// set at switch-in, cleared at switch-out.
    static RUNNING: Cell<*const Record> = const { Cell::new(ptr::null()) };
}

// loom's `thread_local!` takes no `const` initialisers.
#[cfg(loom)]
sync::thread_local! {
    static RUNNING: Cell<*const Record> = Cell::new(ptr::null());
}

/// Points this thread's cell at `record`, the task it runs from now on (`None`: none). Called
/// by the runtime's switch hooks only, so between polls: at switch-in after the task took its
/// CID (and stored it in `record`), at switch-out before it gives it back, so that the cell
/// never shows a CID its task does not hold (per-CID structures rely on it).
///
/// # Safety
///
/// `record` must stay alive, at the same address, until this thread's cell is pointed
/// elsewhere (the task's switch-out clears it; a task's data outlives its polls).
#[inline]
pub(crate) unsafe fn set(record: Option<&Record>) {
    let record = record.map_or(ptr::null(), ptr::from_ref);
    RUNNING.with(|cell| cell.set(record));
}

/// The task this thread runs, if the caller is one with a CID space (between its switch-in and
/// switch-out, that is within one poll).
#[inline]
pub(crate) fn get() -> Option<Running> {
    // During the thread's teardown (a destructor using a per-CID structure), no task runs.
    #[cfg(not(loom))]
    let record = RUNNING.try_with(Cell::get).ok()?;
    #[cfg(loom)]
    let record = RUNNING.with(Cell::get);
    // SAFETY: a non-null pointer in the cell was stored by `set`, whose caller keeps the record
    // alive and in place until the cell is pointed elsewhere; this thread is the only one that
    // reads or writes its cell, so the record is alive for this read.
    unsafe { record.as_ref() }.map(Record::running)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_cell_is_per_thread_and_cleared_by_none() {
        let record = Record::new(0x1000, 4, [1, 2, 3, 4]);
        record.set_cid(Some(2));
        assert_eq!(get(), None);
        // SAFETY: `record` lives until the end of the test, after the cell is cleared.
        unsafe { set(Some(&record)) };
        let me = Running {
            space: 0x1000,
            cpus: 4,
            cid: Some(2),
            ids: [1, 2, 3, 4],
        };
        assert_eq!(get(), Some(me));
        record.set_cid(None);
        assert_eq!(get().map(|running| running.cid), Some(None), "read through");
        let other = sync::thread::spawn(get).join().unwrap();
        assert_eq!(other, None, "another thread runs nothing");
        // SAFETY: clearing the cell needs no record.
        unsafe { set(None) };
        assert_eq!(get(), None);
    }
}
