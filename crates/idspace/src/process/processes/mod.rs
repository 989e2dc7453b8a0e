//! The model: namespaces, processes and threads under one lock (the kernel's `tasklist_lock`),
//! with IDs from the PID design, timers in the table design and a CID space per process.
//!
//! Every method of [`Processes`] lives in this directory, by concept: this file has the type,
//! its construction and its queries; `namespaces` creates and refuses namespaces; `lifecycle`
//! forks, clones, exits and kills (and frees what dies with them); `tasks` keeps the IDs of
//! threads that runtime tasks run until those tasks stop; `checkpoint` makes and restores
//! images; `timers` is the POSIX timer API.

mod checkpoint;
mod lifecycle;
mod namespaces;
mod tasks;
mod timers;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::mem::size_of;
use std::ops::{Deref, DerefMut};

use super::design::{CidDesign, PidDesign, TableDesign};
use super::error::ProcessError;
use super::thread::{Process, Thread};
use super::timers::WheelLink;
use crate::cid::{CidAllocator, MAX_CPUS};
use crate::pid::{NsId, PerCpu, PID_MAX_DEFAULT, ROOT};
use crate::sync::{self, Arc, Mutex, MutexGuard};
use crate::table::{Owner, ScaledHash};

/// A namespace the model still keeps: alive, or dead with IDs or child namespaces left.
struct Namespace {
    parent: Option<NsId>,
    level: u32,
    /// Child namespaces not yet freed.
    children: usize,
    /// Threads (zombie leaders included) with an ID here.
    held: usize,
    /// Its ID 1 was freed: nothing new enters it.
    dead: bool,
    /// The `pid_max` last set through [`Processes::set_pid_max`]: a freed namespace keeps it
    /// for the range check of a restore's `set_tid`.
    pid_max: u32,
}

/// What the model keeps of a freed namespace: enough for its number to answer as a dead
/// namespace does.
#[derive(Debug, Clone, Copy)]
struct Freed {
    parent: NsId,
    /// Its `pid_max`: a restore's `set_tid` entry at its level is still checked against it.
    pid_max: u32,
}

/// A live process: every thread whose IDs are held, by root-level TID.
struct Record<C> {
    process: Arc<Process<C>>,
    threads: BTreeMap<u32, Arc<Thread<C>>>,
    /// The leader exited while other threads lived: its IDs are held, it runs no more.
    zombie_leader: bool,
}

impl<C> Record<C> {
    fn live_threads(&self) -> usize {
        self.threads.len() - usize::from(self.zombie_leader)
    }
}

struct State<C> {
    namespaces: HashMap<NsId, Namespace>,
    /// Freed namespaces, by number, with their parents and `pid_max`: a fork or restore into
    /// one answers as into a dead namespace, which checks and takes an ID at each level first.
    freed: HashMap<NsId, Freed>,
    processes: BTreeMap<u32, Record<C>>,
    /// Root-level TID -> root-level PID, for every thread whose IDs are held.
    threads: HashMap<u32, u32>,
    /// Threads that exited or were killed while a runtime task ran them, by root-level TID:
    /// they belong to no record any more, but hold their IDs until their task stops.
    dying: HashMap<u32, Arc<Thread<C>>>,
    /// Killed threads whose tasks are to be woken once the lock is released (the kernel's
    /// `wake_q`): waking may cancel a task, whose exit hook takes the lock.
    wake_q: Vec<Arc<Thread<C>>>,
    next_owner: Owner,
}

/// What a successful [`Processes::exit`] did.
///
/// # Examples
///
/// ```
/// use idspace::pid::ROOT;
/// use idspace::process::{Exited, Processes};
///
/// let model = Processes::new(1)?;
/// let leader = model.fork(ROOT, 0)?;
/// let thread = model.clone_thread(leader.tid(), 0)?;
/// // The leader exits first: a zombie, holding its IDs until the group ends.
/// assert_eq!(model.exit(leader.tid(), 0)?, Exited { process_exited: false });
/// assert_eq!(model.threads(leader.tid())?.len(), 2);
/// // The last live thread ends the process.
/// assert_eq!(model.exit(thread.tid(), 0)?, Exited { process_exited: true });
/// assert!(model.process_ids().is_empty());
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exited {
    /// The thread's process ended with it.
    pub process_exited: bool,
}

/// A restored process: its leader, then its other threads in restore order (ascending by
/// root-level ID), each to be given its code by the caller.
///
/// # Examples
///
/// ```
/// use idspace::pid::ROOT;
/// use idspace::process::Processes;
///
/// let model = Processes::with_init(2)?;
/// let leader = model.fork(ROOT, 0)?;
/// let thread = model.clone_thread(leader.tid(), 1)?;
/// let timer = model.timer_create(leader.tid())?;
/// let image = model.checkpoint(leader.tid())?;
///
/// // Another model (another machine) restores it with the same IDs.
/// let target = Processes::with_init(2)?;
/// let restored = target.restore(ROOT, &image, 0)?;
/// assert_eq!(restored.leader.tid(), leader.tid());
/// assert!(!restored.zombie_leader);
/// assert_eq!(restored.threads.len(), 1);
/// assert_eq!(restored.threads[0].tid(), thread.tid());
/// assert_eq!(target.timers(leader.tid())?, [timer]);
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
pub struct Restored<C> {
    /// The leader (a zombie if the image said so: then it runs nothing).
    pub leader: Arc<Thread<C>>,
    /// Whether the leader was restored as a zombie.
    pub zombie_leader: bool,
    /// The other threads, ascending by root-level ID.
    pub threads: Vec<Arc<Thread<C>>>,
}

impl<C> fmt::Debug for Restored<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Restored")
            .field("leader", &self.leader)
            .field("zombie_leader", &self.zombie_leader)
            .field("threads", &self.threads)
            .finish()
    }
}

/// Namespaces, processes and threads with their IDs, CIDs and timers. See the
/// [module docs](super).
///
/// # Examples
///
/// ```
/// use idspace::pid::ROOT;
/// use idspace::process::Processes;
///
/// let model = Processes::new(2)?;
/// let init = model.fork(ROOT, 0)?;
/// assert_eq!(init.ids(), [1]);
/// // A process in a child namespace has an ID there (1: its init) and one in the root.
/// let ns = model.ns_new(ROOT)?;
/// let leader = model.fork(ns, 1)?;
/// assert_eq!(leader.ids().len(), 2);
/// assert_eq!(leader.tid_in_own_ns(), 1);
/// let pid = leader.tid();
/// let thread = model.clone_thread(pid, 0)?;
/// assert_eq!(model.lookup(ROOT, thread.tid())?, Some((pid, thread.tid())));
/// // Its init ends: the namespace dies, and every process with an ID there ends.
/// assert_eq!(model.kill(pid, 0)?, 2, "two live threads");
/// assert!(!model.ns_exists(ns), "dead and empty: freed");
/// assert_eq!(model.process_ids(), [init.tid()]);
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
pub struct Processes<P = PerCpu, C = crate::cid::Rework, T = ScaledHash<()>> {
    pids: P,
    timers: T,
    cpus: usize,
    state: Mutex<State<C>>,
    /// The runtime whose wheel the timers fire on.
    wheel: WheelLink,
}

impl<P, C, T> fmt::Debug for Processes<P, C, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Processes")
            .field("cpus", &self.cpus)
            .finish_non_exhaustive()
    }
}

/// Bytes the model keeps for each freed namespace: its number, its parent's and its `pid_max`,
/// so that the number goes on answering as a dead namespace (see [`Processes::model_bytes`]).
///
/// # Examples
///
/// ```
/// use idspace::pid::ROOT;
/// use idspace::process::{Processes, FREED_NS_BYTES};
///
/// let model = Processes::with_init(1)?;
/// let before = model.model_bytes();
/// let ns = model.ns_new(ROOT)?;
/// let init = model.fork(ns, 0)?;
/// // Its init ends: the namespace dies, is empty, and is freed but for its number.
/// model.exit(init.tid(), 0)?;
/// assert!(!model.ns_exists(ns));
/// assert_eq!(model.model_bytes(), before + FREED_NS_BYTES);
/// # Ok::<(), idspace::process::ProcessError>(())
/// ```
pub const FREED_NS_BYTES: usize = 2 * size_of::<NsId>() + size_of::<u32>();

/// The affinity that allows every CPU of a space of `cpus` CPUs.
fn all_cpus(cpus: usize) -> u64 {
    if cpus >= 64 {
        u64::MAX
    } else {
        (1u64 << cpus) - 1
    }
}

impl Processes {
    /// The default designs (PerCpu PIDs, Rework CIDs, ScaledHash timers) for `cpus` CPUs, with
    /// only the root namespace and no process: not even the root's init. Most users want
    /// [`with_init`](Self::with_init), which starts as every real system does.
    ///
    /// Without an init, the root's ID 1 goes to the first process forked anywhere, and the
    /// root namespace dies when that ID is freed (the kernel's rule when a namespace's init
    /// ends): if the first process is forked into a child namespace, it takes the root's ID 1
    /// along with its own, and when it ends every process ends and the root refuses new ones
    /// ([`ProcessError::NsDead`]). The replay protocol runs the model so, deciding every fork
    /// itself.
    ///
    /// # Errors
    /// [`ProcessError::BadCpuCount`] outside `1..=64`.
    ///
    /// # Examples
    ///
    /// ```
    /// use idspace::pid::ROOT;
    /// use idspace::process::{ProcessError, Processes};
    ///
    /// let model = Processes::new(1)?;
    /// let ns = model.ns_new(ROOT)?;
    /// // The first process, in a child namespace: its ID 1 there, and the root's ID 1 too.
    /// let first = model.fork(ns, 0)?;
    /// assert_eq!(first.ids(), [1, 1]);
    /// model.exit(first.tid(), 0)?;
    /// // The root's init ended: the root namespace is dead.
    /// assert_eq!(model.fork(ROOT, 0).unwrap_err(), ProcessError::NsDead);
    /// # Ok::<(), ProcessError>(())
    /// ```
    pub fn new(cpus: usize) -> Result<Self, ProcessError> {
        Self::with_designs(cpus)
    }

    /// The default designs for `cpus` CPUs, with the root namespace's init (process 1 of the
    /// root) already forked, as every real system starts: other processes' ends never end the
    /// root namespace. The init has no task; it lives until killed. [`ProcessHooks::for_workers`]
    /// builds its model so.
    ///
    /// [`ProcessHooks::for_workers`]: crate::process::ProcessHooks::for_workers
    ///
    /// # Errors
    /// [`ProcessError::BadCpuCount`] outside `1..=64`.
    ///
    /// # Examples
    ///
    /// ```
    /// use idspace::pid::ROOT;
    /// use idspace::process::Processes;
    ///
    /// let model = Processes::with_init(1)?;
    /// assert_eq!(model.process_ids(), [1], "the root's init");
    /// let ns = model.ns_new(ROOT)?;
    /// let first = model.fork(ns, 0)?;
    /// assert_eq!(first.ids(), [1, 2], "its namespace's init, the root's process 2");
    /// model.exit(first.tid(), 0)?;
    /// assert_eq!(model.fork(ROOT, 0)?.tid(), 3, "the root lives on");
    /// # Ok::<(), idspace::process::ProcessError>(())
    /// ```
    pub fn with_init(cpus: usize) -> Result<Self, ProcessError> {
        Self::with_designs_and_init(cpus)
    }
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> Processes<P, C, T> {
    /// [`with_designs`](Self::with_designs), with the root namespace's init already forked
    /// (see [`with_init`](Processes::with_init)).
    ///
    /// # Errors
    /// [`ProcessError::BadCpuCount`] outside `1..=64`.
    pub fn with_designs_and_init(cpus: usize) -> Result<Self, ProcessError> {
        let model = Self::with_designs(cpus)?;
        model.fork(ROOT, 0)?;
        Ok(model)
    }

    /// The designs `P`, `C` and `T` for `cpus` CPUs (the runtime's workers; the `cpu` arguments
    /// below are below it). Only the root namespace exists, without a process: see
    /// [`new`](Processes::new) for what that means, and
    /// [`with_designs_and_init`](Self::with_designs_and_init) for a model with the root's init.
    ///
    /// # Errors
    /// [`ProcessError::BadCpuCount`] outside `1..=64`.
    pub fn with_designs(cpus: usize) -> Result<Self, ProcessError> {
        if !(1..=MAX_CPUS).contains(&cpus) || C::with_cpus(cpus).is_err() {
            return Err(ProcessError::BadCpuCount(cpus));
        }
        let pids = P::with_cpus(cpus).map_err(|_| ProcessError::BadCpuCount(cpus))?;
        let mut namespaces = HashMap::new();
        namespaces.insert(
            ROOT,
            Namespace {
                parent: None,
                level: 0,
                children: 0,
                held: 0,
                dead: false,
                pid_max: PID_MAX_DEFAULT,
            },
        );
        Ok(Processes {
            pids,
            timers: T::empty(),
            cpus,
            state: Mutex::new(State {
                namespaces,
                freed: HashMap::new(),
                processes: BTreeMap::new(),
                threads: HashMap::new(),
                dying: HashMap::new(),
                wake_q: Vec::new(),
                next_owner: 1,
            }),
            wheel: WheelLink::default(),
        })
    }

    /// The CPU count of every process's CID space.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// The PID design.
    pub fn pids(&self) -> &P {
        &self.pids
    }

    /// Live process `pid`.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`].
    pub(crate) fn live_process(&self, pid: u32) -> Result<Arc<Process<C>>, ProcessError> {
        let state = sync::lock(&self.state);
        state
            .processes
            .get(&pid)
            .map(|record| Arc::clone(&record.process))
            .ok_or(ProcessError::UnknownProcess)
    }

    /// Process `pid`'s timer IDs, ascending.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`].
    pub fn timers(&self, pid: u32) -> Result<Vec<u32>, ProcessError> {
        let state = sync::lock(&self.state);
        let record = state
            .processes
            .get(&pid)
            .ok_or(ProcessError::UnknownProcess)?;
        Ok(self.timers.ids(record.process.owner()))
    }

    /// The root-level TIDs of process `pid`'s threads whose IDs are held (a zombie leader
    /// included), ascending.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`].
    pub fn threads(&self, pid: u32) -> Result<Vec<u32>, ProcessError> {
        let state = sync::lock(&self.state);
        let record = state
            .processes
            .get(&pid)
            .ok_or(ProcessError::UnknownProcess)?;
        Ok(record.threads.keys().copied().collect())
    }

    /// The live processes' root-level PIDs, ascending.
    pub fn process_ids(&self) -> Vec<u32> {
        sync::lock(&self.state).processes.keys().copied().collect()
    }

    /// The process and thread (root-level IDs) that have `id` in `ns`: a live thread, a zombie
    /// leader, or a killed thread whose task has not stopped yet (it still holds its IDs; see
    /// [`kill`](Self::kill)).
    ///
    /// # Errors
    /// [`ProcessError::UnknownNs`].
    pub fn lookup(&self, ns: NsId, id: u32) -> Result<Option<(u32, u32)>, ProcessError> {
        let state = sync::lock(&self.state);
        let found = self.pids.lookup(ns, id).map_err(ProcessError::from_pid)?;
        Ok(found.and_then(|pid| {
            let tid = pid.levels().last()?.1;
            state.threads.get(&tid).map(|&process| (process, tid))
        }))
    }

    /// The live thread or zombie leader with root-level ID `tid`.
    pub fn thread(&self, tid: u32) -> Option<Arc<Thread<C>>> {
        let state = sync::lock(&self.state);
        let pid = state.threads.get(&tid)?;
        state.processes.get(pid)?.threads.get(&tid).cloned()
    }

    /// Bytes held: the PID design's, the timer table's, and the model's own
    /// ([`model_bytes`](Self::model_bytes)).
    pub fn memory_bytes(&self) -> usize {
        self.pids.memory_bytes() + self.timers.memory_bytes() + self.model_bytes()
    }

    /// Bytes of the model's own records: namespaces, processes with their CID spaces, threads
    /// with their IDs, and the TID index. Ended processes hold none; a freed namespace holds
    /// [`FREED_NS_BYTES`] (its number, its parent's and its `pid_max`: its number answers as a
    /// dead namespace for good, and a fork or restore into it checks its `set_tid` and moves
    /// its living ancestors' cursors as one into a dead namespace does).
    pub fn model_bytes(&self) -> usize {
        let state = sync::lock(&self.state);
        let threads: usize = state
            .processes
            .values()
            .map(|record| {
                let ids = record.process.ids().len() * size_of::<(NsId, u32)>();
                record.threads.len() * (size_of::<Thread<C>>() + ids + size_of::<u32>())
            })
            .sum();
        state.namespaces.len() * (size_of::<NsId>() + size_of::<Namespace>())
            + state.freed.len() * FREED_NS_BYTES
            + state.processes.len() * (size_of::<Record<C>>() + size_of::<Process<C>>())
            + state.threads.len() * 2 * size_of::<u32>()
            + state.dying.len() * (size_of::<Thread<C>>() + size_of::<u32>())
            + threads
    }
}

/// The model's lock, held: on release, it wakes the tasks of the threads killed meanwhile
/// ([`State::wake_q`]). Every path that may kill a thread takes the lock through
/// [`Processes::lock`].
struct Locked<'a, C> {
    guard: Option<MutexGuard<'a, State<C>>>,
}

impl<C> Deref for Locked<'_, C> {
    type Target = State<C>;

    fn deref(&self) -> &State<C> {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<C> DerefMut for Locked<'_, C> {
    fn deref_mut(&mut self) -> &mut State<C> {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl<C> Drop for Locked<'_, C> {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else {
            return;
        };
        let killed = std::mem::take(&mut guard.wake_q);
        drop(guard);
        for thread in killed {
            thread.task().wake();
        }
    }
}

impl<P, C, T> Processes<P, C, T> {
    /// Takes the model's lock; the tasks of threads killed while it is held are woken when it
    /// is released.
    fn lock(&self) -> Locked<'_, C> {
        Locked {
            guard: Some(sync::lock(&self.state)),
        }
    }
}

impl<C: CidAllocator> Record<C> {
    /// Whether the process's threads have an ID in `ns` (all its threads share one chain).
    fn process_has_id_in(&self, ns: NsId) -> bool {
        self.threads
            .values()
            .next()
            .is_some_and(|thread| thread.pid().id_in(ns).is_some())
    }
}
