//! The task-CID index source ([`IndexSource::TaskCid`](super::IndexSource::TaskCid)): inside the
//! idspace runtime with process hooks, the running task's CID from its process's CID space.
//!
//! # Why plain loads and stores are enough
//!
//! A structure on this source is bound to the process of the task that built it, and only that
//! process's running tasks use its slots (every other caller takes the structure's shared
//! fallback). Such a task's slot access is a plain load and a plain store (no read-modify-write,
//! no lock), which is sound because:
//!
//! * **Exclusive.** The CID designs give a CID to at most one running task of a process at a
//!   time (`cid`'s guarantee, checked at every switch-in by the runtime stress tests). The
//!   running task's space, its size and its CID come from the thread's
//!   [`cid::current`](crate::cid::current) cell, which the process hooks write at every
//!   switch-in, after the task took its CID, and clear at every switch-out, before it gives
//!   the CID back: the cell never shows a CID its task does not hold. The space is named
//!   there by the address of the `Process` owning it, which lives as long as any of its tasks
//!   runs, so two processes alive at once (in one model or several) never share a binding.
//! * **Not preempted within a poll.** The runtime is cooperative: a task's CID is taken at its
//!   switch-in and given back at its switch-out, both between polls, and nothing else runs on
//!   the worker's thread in between. So from the load to the store of one operation the task
//!   keeps its CID, and no other task can touch that slot (the rseq sources need a critical
//!   section for this very reason: a thread can be preempted anywhere).
//! * **Ordered hand-offs.** When a CID goes from one task to the next, the earlier holder's
//!   stores happen before the next holder's loads: on one worker, by program order; for one
//!   task moving between workers, by the runtime's own hand-off of the task; between two tasks
//!   on different workers, through the CID design, where giving a CID back and taking it are a
//!   lock's release and acquire (a task's or a runqueue's) or a release and an acquire on the
//!   CID bitmap.
//!
//! The slots are atomics accessed with `Relaxed` loads and stores: plain `mov`s, but ones that
//! `sum` and other readers may read at any time without a data race.

use crate::cid::current;

/// The process a structure is bound to: its identity and its CID space's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Binding {
    /// The identity of the process's CID space ([`current::Running::space`]).
    space: usize,
    cpus: usize,
}

impl Binding {
    /// The running task's process, if the caller is a runtime task of a process.
    pub(crate) fn of_running_task() -> Option<Binding> {
        current::get().map(|running| Binding {
            space: running.space,
            cpus: running.cpus,
        })
    }

    /// Slots the structure needs: one per CID of the process's space.
    pub(crate) fn slots(self) -> usize {
        self.cpus.max(1)
    }

    /// The calling task's CID if it is a running task of this process holding one: its slot
    /// is then its alone until it next yields (see the module docs).
    #[inline]
    pub(crate) fn cid(self) -> Option<usize> {
        let running = current::get()?;
        if running.space != self.space {
            return None;
        }
        running.cid.map(|cid| cid as usize)
    }
}
