//! Processes and threads as their users hold them: the handles a runtime task carries.

use std::fmt;

use super::kill::TaskLink;
use super::timers::ProcessTimers;
use crate::cid::{self, CidAllocator};
use crate::pid::{NsId, Pid};
use crate::sync::Arc;
use crate::table::Owner;

/// A process (the kernel's `signal_struct` plus its `mm`): its PID, its namespace, its timers'
/// owner and its CID space.
///
/// # Examples
///
/// ```
/// use idspace::cid::CidAllocator;
/// use idspace::pid::ROOT;
/// use idspace::process::Processes;
///
/// let model = Processes::with_init(2)?;
/// let ns = model.ns_new(ROOT)?;
/// let leader = model.fork(ns, 0)?;
/// let process = leader.process();
/// assert_eq!(process.pid(), leader.tid());
/// assert_eq!(process.ns(), ns);
/// assert_eq!(process.pid_in_own_ns(), 1);
/// assert_eq!(process.ids(), leader.ids());
/// assert_eq!(process.cids().cpus(), 2, "one CPU per worker of the model");
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
pub struct Process<C> {
    pid: u32,
    ns: NsId,
    /// The leader's IDs, innermost first: the process's ID at every level.
    ids: Vec<u32>,
    owner: Owner,
    cids: C,
    /// Its POSIX timers by ID.
    timers: ProcessTimers,
}

impl<C: CidAllocator> Process<C> {
    pub(crate) fn new(leader: &Pid, owner: Owner, cids: C) -> Process<C> {
        let ids = leader.ids();
        let pid = ids.last().copied().unwrap_or(0);
        Process {
            pid,
            ns: leader.ns(),
            ids,
            owner,
            cids,
            timers: ProcessTimers::new(pid),
        }
    }

    /// The process's root-level ID (its leader's root-level TID).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The namespace its threads live in.
    pub fn ns(&self) -> NsId {
        self.ns
    }

    /// Its ID at every level, innermost first (the leader's).
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Its ID in its own namespace.
    pub fn pid_in_own_ns(&self) -> u32 {
        self.ids.first().copied().unwrap_or(0)
    }

    /// The owner naming its timers in the table.
    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }

    /// Its CID space.
    pub fn cids(&self) -> &C {
        &self.cids
    }
}

impl<C> Process<C> {
    /// Its POSIX timers.
    pub(crate) fn timers(&self) -> &ProcessTimers {
        &self.timers
    }
}

impl<C> fmt::Debug for Process<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Process")
            .field("pid", &self.pid)
            .field("ns", &self.ns)
            .field("ids", &self.ids)
            .finish()
    }
}

/// A thread (a task of a process): its IDs at every level and its task in the process's CID
/// space.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use idspace::pid::ROOT;
/// use idspace::process::Processes;
///
/// let model = Processes::with_init(2)?;
/// let ns = model.ns_new(ROOT)?;
/// let leader = model.fork(ns, 0)?;
/// let thread = model.clone_thread(leader.tid(), 1)?;
/// assert!(leader.is_leader() && !thread.is_leader());
/// assert!(Arc::ptr_eq(thread.process(), leader.process()));
/// assert_eq!(thread.tid_in_own_ns(), thread.ids()[0]);
/// assert_eq!(Some(&thread.tid()), thread.ids().last());
/// // Switched in on CPU 1, it runs with a CID of its process's space.
/// let cid = thread.switch_in(1).expect("a CID");
/// assert!(cid < 2);
/// thread.switch_out(1);
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
pub struct Thread<C> {
    process: Arc<Process<C>>,
    pid: Pid,
    cid: cid::Task,
    /// The runtime task that runs it, if any.
    task: TaskLink,
}

impl<C: CidAllocator> Thread<C> {
    pub(crate) fn new(process: Arc<Process<C>>, pid: Pid, cid: cid::Task) -> Thread<C> {
        Thread {
            process,
            pid,
            cid,
            task: TaskLink::default(),
        }
    }

    /// The process it belongs to.
    pub fn process(&self) -> &Arc<Process<C>> {
        &self.process
    }

    /// Its root-level ID.
    pub fn tid(&self) -> u32 {
        self.pid.levels().last().map_or(0, |&(_, id)| id)
    }

    /// Its ID in its own namespace.
    pub fn tid_in_own_ns(&self) -> u32 {
        self.pid.levels().first().map_or(0, |&(_, id)| id)
    }

    /// Its ID at every level, innermost first.
    pub fn ids(&self) -> Vec<u32> {
        self.pid.ids()
    }

    /// Its PID object.
    pub fn pid(&self) -> &Pid {
        &self.pid
    }

    /// Whether it is its process's leader.
    pub fn is_leader(&self) -> bool {
        self.tid() == self.process.pid
    }

    /// Its task in the process's CID space.
    pub(crate) fn cid_task(&self) -> &cid::Task {
        &self.cid
    }

    /// The thread is switched in on `cpu` (a worker): returns the CID it runs with, from its
    /// process's space. Takes no lock of the model; `None` if the CID space refused (the thread
    /// has exited, or `cpu` is out of range).
    #[inline]
    pub fn switch_in(&self, cpu: usize) -> Option<u32> {
        self.process
            .cids
            .switch(cpu, Some(&self.cid))
            .ok()
            .flatten()
    }

    /// The thread is switched out of `cpu`: the CPU runs nothing of this process any more.
    #[inline]
    pub fn switch_out(&self, cpu: usize) {
        // Only a CPU number out of range is refused, and `switch_in` would have refused it too.
        let _ = self.process.cids.switch(cpu, None);
    }
}

impl<C> Thread<C> {
    /// Its link to the runtime task that runs it.
    pub(crate) fn task(&self) -> &TaskLink {
        &self.task
    }
}

impl<C> fmt::Debug for Thread<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Thread")
            .field("process", &self.process.pid)
            .field("ids", &self.pid.ids())
            .finish()
    }
}
