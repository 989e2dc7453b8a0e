//! The model: namespaces, processes and threads under one lock (the kernel's `tasklist_lock`),
//! with IDs from the PID design, timers in the table design and a CID space per process.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::mem::size_of;
use std::sync::Arc;

use super::design::{CidDesign, PidDesign, TableDesign};
use super::image::{Image, ThreadImage};
use super::thread::{Process, Thread};
use super::timers::{self, Notify, NotifyKind, Wheel};
use super::{Clock, PosixTimer, ProcessError};
use crate::cid::{CidAllocator, MAX_CPUS};
use crate::pid::{NsId, PerCpu, Pid, MAX_LEVEL, PID_MAX_LIMIT, PID_MAX_MIN, ROOT};
use crate::sync::{self, Mutex};
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
    /// Freed namespaces, by number, with their parents: a fork into one answers as into a dead
    /// namespace, which takes (and gives back) an ID at each living ancestor first.
    freed: HashMap<NsId, NsId>,
    processes: BTreeMap<u32, Record<C>>,
    /// Root-level TID -> root-level PID, for every thread whose IDs are held.
    threads: HashMap<u32, u32>,
    next_owner: Owner,
}

/// What a successful [`Processes::exit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exited {
    /// The thread's process ended with it.
    pub process_exited: bool,
}

/// A restored process: its leader, then its other threads in restore order (ascending by
/// root-level ID), each to be given its code by the caller.
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
pub struct Processes<P = PerCpu, C = crate::cid::Rework, T = ScaledHash<()>> {
    pids: P,
    timers: T,
    cpus: usize,
    state: Mutex<State<C>>,
    /// The runtime whose wheel the timers fire on.
    wheel: Wheel,
}

impl<P, C, T> fmt::Debug for Processes<P, C, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Processes")
            .field("cpus", &self.cpus)
            .finish_non_exhaustive()
    }
}

/// Bytes the model keeps for each freed namespace: its number and its parent's, so that the
/// number goes on answering as a dead namespace (see [`Processes::model_bytes`]).
pub const FREED_NS_BYTES: usize = 2 * size_of::<NsId>();

/// The affinity that allows every CPU of a space of `cpus` CPUs.
fn all_cpus(cpus: usize) -> u64 {
    if cpus >= 64 {
        u64::MAX
    } else {
        (1u64 << cpus) - 1
    }
}

impl Processes {
    /// The default designs (PerCpu PIDs, Rework CIDs, ScaledHash timers) for `cpus` CPUs.
    ///
    /// # Errors
    /// [`ProcessError::BadCpuCount`] outside `1..=64`.
    pub fn new(cpus: usize) -> Result<Self, ProcessError> {
        Self::with_designs(cpus)
    }
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> Processes<P, C, T> {
    /// The designs `P`, `C` and `T` for `cpus` CPUs (the runtime's workers; the `cpu` arguments
    /// below are below it). Only the root namespace exists, without a process.
    ///
    /// # Errors
    /// [`ProcessError::BadCpuCount`] outside `1..=64`.
    pub fn with_designs(cpus: usize) -> Result<Self, ProcessError> {
        if !(1..=MAX_CPUS).contains(&cpus) || C::with_cpus(cpus).is_err() {
            return Err(ProcessError::BadCpuCount(cpus));
        }
        let mut namespaces = HashMap::new();
        namespaces.insert(
            ROOT,
            Namespace {
                parent: None,
                level: 0,
                children: 0,
                held: 0,
                dead: false,
            },
        );
        Ok(Processes {
            pids: P::with_cpus(cpus),
            timers: T::empty(),
            cpus,
            state: Mutex::new(State {
                namespaces,
                freed: HashMap::new(),
                processes: BTreeMap::new(),
                threads: HashMap::new(),
                next_owner: 1,
            }),
            wheel: Wheel::default(),
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

    /// Why `ns`, which the model no longer keeps, refuses: freed (dead) or never created.
    fn gone(state: &State<C>, ns: NsId) -> ProcessError {
        if state.freed.contains_key(&ns) {
            ProcessError::NsDead
        } else {
            ProcessError::UnknownNs
        }
    }

    /// A fork into freed namespace `ns`, refused as one into a dead namespace: the kernel's
    /// `alloc_pid` takes an ID at every level before it sees that the namespace is dead, so
    /// the living ancestors' cursors move (and a full one answers `Full`). The freed levels
    /// are empty and can refuse nothing, so an allocation in the nearest living ancestor,
    /// given back at once, has exactly those effects. (Were it to take some level's ID 1,
    /// freeing it would kill that level; but a level with a freed descendant has allocated
    /// before, so its ID 1 is free only if its init is gone and it is dead already.)
    fn refuse_freed(&self, state: &State<C>, ns: NsId, cpu: usize) -> ProcessError {
        let mut up = ns;
        while let Some(&parent) = state.freed.get(&up) {
            up = parent;
        }
        match self.pids.alloc(up, &[], cpu) {
            Ok(pid) => {
                let _ = self.pids.free(pid.ns(), pid.ids()[0], cpu);
                ProcessError::NsDead
            }
            Err(error) => match ProcessError::from_pid(error) {
                ProcessError::Full => ProcessError::Full,
                _ => ProcessError::NsDead,
            },
        }
    }

    /// Creates a namespace below `parent`.
    ///
    /// # Errors
    /// [`ProcessError::UnknownNs`], [`ProcessError::NsDead`] (the parent's init ended),
    /// [`ProcessError::TooDeep`] past 32 levels, [`ProcessError::TooManyNamespaces`].
    pub fn ns_new(&self, parent: NsId) -> Result<NsId, ProcessError> {
        let mut state = sync::lock(&self.state);
        let Some(up) = state.namespaces.get(&parent) else {
            return Err(Self::gone(&state, parent));
        };
        if up.dead {
            return Err(ProcessError::NsDead);
        }
        let level = up.level + 1;
        if level > MAX_LEVEL {
            return Err(ProcessError::TooDeep);
        }
        let ns = self.pids.new_ns(parent).map_err(ProcessError::from_pid)?;
        state.namespaces.insert(
            ns,
            Namespace {
                parent: Some(parent),
                level,
                children: 0,
                held: 0,
                dead: false,
            },
        );
        if let Some(up) = state.namespaces.get_mut(&parent) {
            up.children += 1;
        }
        Ok(ns)
    }

    /// Sets a namespace's `pid_max`.
    ///
    /// # Errors
    /// [`ProcessError::Invalid`] outside `301..=4194304`, [`ProcessError::UnknownNs`].
    pub fn set_pid_max(&self, ns: NsId, max: u32) -> Result<(), ProcessError> {
        let state = sync::lock(&self.state);
        if state.freed.contains_key(&ns) {
            // As on a dead namespace: accepted, and it changes nothing anyone can see.
            return if (PID_MAX_MIN..=PID_MAX_LIMIT).contains(&max) {
                Ok(())
            } else {
                Err(ProcessError::Invalid)
            };
        }
        self.pids
            .set_pid_max(ns, max)
            .map_err(ProcessError::from_pid)
    }

    /// Whether the model still keeps `ns` (created, and not freed).
    pub fn ns_exists(&self, ns: NsId) -> bool {
        sync::lock(&self.state).namespaces.contains_key(&ns)
    }

    /// A new process in `ns` with one thread, its leader (fork), allocated on `cpu`.
    ///
    /// # Errors
    /// As the PID design's `alloc`: [`ProcessError::UnknownNs`], [`ProcessError::Full`],
    /// [`ProcessError::NsDead`].
    pub fn fork(&self, ns: NsId, cpu: usize) -> Result<Arc<Thread<C>>, ProcessError> {
        let mut state = sync::lock(&self.state);
        if state.freed.contains_key(&ns) {
            return Err(self.refuse_freed(&state, ns, cpu));
        }
        let pid = self
            .pids
            .alloc(ns, &[], cpu)
            .map_err(ProcessError::from_pid)?;
        let (leader, _) = self.start_process(&mut state, pid, false, cpu)?;
        Ok(leader)
    }

    /// Makes a process whose leader holds `pid`; a zombie leader gets no CID task.
    fn start_process(
        &self,
        state: &mut State<C>,
        pid: Pid,
        zombie: bool,
        cpu: usize,
    ) -> Result<(Arc<Thread<C>>, Owner), ProcessError> {
        let cids = match C::with_cpus(self.cpus) {
            Ok(cids) => cids,
            Err(_) => {
                let _ = self.pids.free(pid.ns(), pid.ids()[0], cpu);
                return Err(ProcessError::BadCpuCount(self.cpus));
            }
        };
        let owner = state.next_owner;
        state.next_owner += 1;
        let process = Arc::new(Process::new(&pid, owner, cids));
        let leader = self.new_thread(state, &process, pid, zombie, cpu)?;
        let mut threads = BTreeMap::new();
        threads.insert(leader.tid(), Arc::clone(&leader));
        state.processes.insert(
            process.pid(),
            Record {
                process,
                threads,
                zombie_leader: zombie,
            },
        );
        Ok((leader, owner))
    }

    /// A thread of `process` holding `pid`, counted in every namespace it has an ID in; a
    /// zombie (restored) gets no CID task.
    fn new_thread(
        &self,
        state: &mut State<C>,
        process: &Arc<Process<C>>,
        pid: Pid,
        zombie: bool,
        cpu: usize,
    ) -> Result<Arc<Thread<C>>, ProcessError> {
        let cid = match process.cids().fork(all_cpus(self.cpus)) {
            Ok(cid) => cid,
            Err(_) => {
                let _ = self.pids.free(pid.ns(), pid.ids()[0], cpu);
                return Err(ProcessError::BadCpuCount(self.cpus));
            }
        };
        if zombie {
            // Forked so that every thread has a task; a zombie leaves the space at once.
            let _ = process.cids().exit(&cid);
        }
        for &(ns, _) in pid.levels() {
            if let Some(space) = state.namespaces.get_mut(&ns) {
                space.held += 1;
            }
        }
        let thread = Arc::new(Thread::new(Arc::clone(process), pid, cid));
        state.threads.insert(thread.tid(), process.pid());
        Ok(thread)
    }

    /// A new thread of process `pid` in its namespace (clone with `CLONE_THREAD`).
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`], then as `alloc`: [`ProcessError::Full`],
    /// [`ProcessError::NsDead`].
    pub fn clone_thread(&self, pid: u32, cpu: usize) -> Result<Arc<Thread<C>>, ProcessError> {
        let mut state = sync::lock(&self.state);
        let process = match state.processes.get(&pid) {
            Some(record) => Arc::clone(&record.process),
            None => return Err(ProcessError::UnknownProcess),
        };
        let id = self
            .pids
            .alloc(process.ns(), &[], cpu)
            .map_err(ProcessError::from_pid)?;
        let thread = self.new_thread(&mut state, &process, id, false, cpu)?;
        if let Some(record) = state.processes.get_mut(&pid) {
            record.threads.insert(thread.tid(), Arc::clone(&thread));
        }
        Ok(thread)
    }

    /// Thread `tid` (root-level) exits on `cpu`: it leaves the CID space and its IDs are freed,
    /// unless it is a leader with other live threads (then it stays a zombie). The last live
    /// thread ends the process; an ended init ends every process of its namespace.
    ///
    /// # Errors
    /// [`ProcessError::UnknownThread`] if no live thread has `tid` (a zombie leader included).
    pub fn exit(&self, tid: u32, cpu: usize) -> Result<Exited, ProcessError> {
        let mut state = sync::lock(&self.state);
        let Some(&pid) = state.threads.get(&tid) else {
            return Err(ProcessError::UnknownThread);
        };
        let Some(record) = state.processes.get_mut(&pid) else {
            return Err(ProcessError::UnknownThread);
        };
        let leader = tid == pid;
        if leader && record.zombie_leader {
            return Err(ProcessError::UnknownThread);
        }
        if record.live_threads() == 1 {
            self.end_processes(&mut state, vec![pid], cpu);
            return Ok(Exited {
                process_exited: true,
            });
        }
        let gone = if leader {
            record.zombie_leader = true;
            if let Some(thread) = record.threads.get(&tid) {
                let _ = record.process.cids().exit(thread.cid_task());
            }
            None
        } else {
            let thread = record.threads.remove(&tid);
            if let Some(thread) = &thread {
                let _ = record.process.cids().exit(thread.cid_task());
            }
            thread
        };
        if let Some(thread) = gone {
            let mut touched = BTreeSet::new();
            let mut zap = Vec::new();
            self.release(&mut state, &thread, cpu, &mut touched, &mut zap);
            // A thread cloned into a namespace before any process there took its ID 1 holds
            // that 1 at the outer level, and freeing it kills that namespace.
            self.zap_and_free(&mut state, zap, touched, cpu);
        }
        Ok(Exited {
            process_exited: false,
        })
    }

    /// Ends process `pid`: every live thread exits. Returns how many were live (a zombie
    /// leader is not).
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`].
    pub fn kill(&self, pid: u32, cpu: usize) -> Result<usize, ProcessError> {
        let mut state = sync::lock(&self.state);
        let Some(record) = state.processes.get(&pid) else {
            return Err(ProcessError::UnknownProcess);
        };
        let live = record.live_threads();
        self.end_processes(&mut state, vec![pid], cpu);
        Ok(live)
    }

    /// Frees a thread's IDs and forgets it; notes the namespaces whose counts changed and
    /// those whose ID 1 went (they die).
    fn release(
        &self,
        state: &mut State<C>,
        thread: &Thread<C>,
        cpu: usize,
        touched: &mut BTreeSet<NsId>,
        zap: &mut Vec<NsId>,
    ) {
        let pid = thread.pid();
        // Freeing by the innermost ID releases every level; the model holds the object, so the
        // design finds it.
        let _ = self.pids.free(pid.ns(), pid.ids()[0], cpu);
        state.threads.remove(&thread.tid());
        for &(ns, id) in pid.levels() {
            if let Some(space) = state.namespaces.get_mut(&ns) {
                space.held -= 1;
                if id == 1 {
                    space.dead = true;
                    zap.push(ns);
                }
            }
            touched.insert(ns);
        }
    }

    /// Ends the processes in `pids`, then every process with an ID in a namespace that died
    /// on the way (`zap_pid_ns_processes`), then frees the namespaces left dead and empty.
    fn end_processes(&self, state: &mut State<C>, pids: Vec<u32>, cpu: usize) {
        let mut touched = BTreeSet::new();
        let mut zap = Vec::new();
        for pid in pids {
            self.end_one(state, pid, cpu, &mut touched, &mut zap);
        }
        self.zap_and_free(state, zap, touched, cpu);
    }

    fn end_one(
        &self,
        state: &mut State<C>,
        pid: u32,
        cpu: usize,
        touched: &mut BTreeSet<NsId>,
        zap: &mut Vec<NsId>,
    ) {
        let Some(record) = state.processes.remove(&pid) else {
            return;
        };
        self.timers.remove_owner(record.process.owner());
        record.process.timers().delete_all();
        for (tid, thread) in &record.threads {
            if !(*tid == pid && record.zombie_leader) {
                let _ = record.process.cids().exit(thread.cid_task());
            }
            self.release(state, thread, cpu, touched, zap);
        }
    }

    fn zap_and_free(
        &self,
        state: &mut State<C>,
        mut zap: Vec<NsId>,
        mut touched: BTreeSet<NsId>,
        cpu: usize,
    ) {
        while let Some(ns) = zap.pop() {
            let doomed: Vec<u32> = state
                .processes
                .iter()
                .filter(|(_, record)| record.process_has_id_in(ns))
                .map(|(&pid, _)| pid)
                .collect();
            for pid in doomed {
                self.end_one(state, pid, cpu, &mut touched, &mut zap);
            }
        }
        // Free what is dead and empty, then its parents, which may have become so.
        let mut candidates: Vec<NsId> = touched.into_iter().collect();
        while let Some(ns) = candidates.pop() {
            let Some(space) = state.namespaces.get(&ns) else {
                continue;
            };
            if ns == ROOT || !space.dead || space.held != 0 || space.children != 0 {
                continue;
            }
            let parent = space.parent;
            // Dead, with no IDs and no children in the model, so none in the design either:
            // the design gives the space's memory back; its number answers as dead from now on.
            let freed = self.pids.free_ns(ns);
            debug_assert_eq!(
                freed,
                Ok(()),
                "the PID design refused to free namespace {ns}"
            );
            state.namespaces.remove(&ns);
            if let Some(parent) = parent {
                state.freed.insert(ns, parent);
            }
            if let Some(parent) = parent {
                if let Some(up) = state.namespaces.get_mut(&parent) {
                    up.children -= 1;
                }
                candidates.push(parent);
            }
        }
    }

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
    pub(super) fn wheel(&self) -> &Wheel {
        &self.wheel
    }

    /// Live process `pid`.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`].
    pub(super) fn live_process(&self, pid: u32) -> Result<Arc<Process<C>>, ProcessError> {
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

    /// The process and thread (root-level IDs) that have `id` in `ns`.
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

    /// The image of process `pid`: every thread's IDs (leader first, a zombie leader marked,
    /// then ascending by root-level ID), its timer IDs and its timer cursor.
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`].
    pub fn checkpoint(&self, pid: u32) -> Result<Image, ProcessError> {
        let state = sync::lock(&self.state);
        let record = state
            .processes
            .get(&pid)
            .ok_or(ProcessError::UnknownProcess)?;
        let mut threads = Vec::with_capacity(record.threads.len());
        if let Some(leader) = record.threads.get(&pid) {
            threads.push(ThreadImage {
                ids: leader.ids(),
                zombie: record.zombie_leader,
            });
        }
        threads.extend(
            record
                .threads
                .iter()
                .filter(|(&tid, _)| tid != pid)
                .map(|(_, thread)| ThreadImage {
                    ids: thread.ids(),
                    zombie: false,
                }),
        );
        Ok(Image {
            threads,
            timers: self.timers.ids(record.process.owner()),
            timer_cursor: self.timers.cursor(record.process.owner()),
            timer_states: record.process.timers().images(timers::now().mono),
        })
    }

    /// Recreates the process of `image` in `ns`, allocating on `cpu`: the leader first, then
    /// the other threads ascending by root-level ID, each with its checkpointed IDs as
    /// `set_tid` (innermost first, as many as `ns`'s depth allows; outer levels are allocated
    /// normally); then its timers with their exact IDs (restore mode) and its timer cursor.
    ///
    /// # Errors
    /// [`ProcessError::BadImage`]; [`ProcessError::UnknownNs`]; then, the first error in
    /// restore order: [`ProcessError::Exists`], [`ProcessError::Invalid`],
    /// [`ProcessError::Full`], [`ProcessError::NsDead`]. A refused restore holds no IDs and
    /// makes no timers (see the module docs for the one thing it cannot undo). An image with
    /// a timer notifying a channel is refused ([`ProcessError::BadImage`]): give its channel
    /// with [`restore_with`](Self::restore_with).
    pub fn restore(
        &self,
        ns: NsId,
        image: &Image,
        cpu: usize,
    ) -> Result<Restored<C>, ProcessError> {
        self.restore_with(ns, image, cpu, |_, kind| match kind {
            NotifyKind::None => Some(Notify::None),
            NotifyKind::Wake => Some(Notify::Wake),
            NotifyKind::Channel => None,
        })
    }

    /// [`restore`](Self::restore), with each timer's notification target from `notify`,
    /// asked (before anything changes) for every timer of the image's
    /// [`timer_states`](Image::timer_states) with its ID and kind; `None` refuses the restore.
    /// Restored timers keep their IDs, clocks, overrun state and remaining times (counted
    /// from the restore), and a notification pending at the checkpoint is sent again.
    ///
    /// # Errors
    /// As [`restore`](Self::restore); [`ProcessError::BadImage`] when `notify` gives `None`.
    pub fn restore_with(
        &self,
        ns: NsId,
        image: &Image,
        cpu: usize,
        mut notify: impl FnMut(u32, NotifyKind) -> Option<Notify>,
    ) -> Result<Restored<C>, ProcessError> {
        image.check()?;
        let targets = image
            .timer_states
            .iter()
            .map(|timer| {
                notify(timer.id, timer.notify).ok_or_else(|| {
                    ProcessError::BadImage(format!(
                        "no target for timer {}'s {:?} notification",
                        timer.id, timer.notify
                    ))
                })
            })
            .collect::<Result<Vec<Notify>, ProcessError>>()?;
        let mut state = sync::lock(&self.state);
        let Some(target) = state.namespaces.get(&ns) else {
            return Err(Self::gone(&state, ns));
        };
        let depth = target.level as usize + 1;
        let mut order: Vec<&ThreadImage> = image.threads.iter().skip(1).collect();
        order.sort_by_key(|thread| thread.root());
        order.insert(0, &image.threads[0]);
        let set_tids: Vec<&[u32]> = order
            .iter()
            .map(|thread| &thread.ids[..thread.ids.len().min(depth)])
            .collect();
        self.check_free(&state, ns, &set_tids)?;
        let mut allocated: Vec<Pid> = Vec::with_capacity(order.len());
        for set_tid in &set_tids {
            match self.pids.alloc(ns, set_tid, cpu) {
                Ok(pid) => allocated.push(pid),
                Err(error) => {
                    for pid in allocated {
                        let _ = self.pids.free(pid.ns(), pid.ids()[0], cpu);
                    }
                    return Err(ProcessError::from_pid(error));
                }
            }
        }
        let mut pids = allocated.into_iter();
        let Some(leader_pid) = pids.next() else {
            return Err(ProcessError::BadImage("no threads".to_string()));
        };
        let zombie = image.threads[0].zombie;
        let rest: Vec<Pid> = pids.collect();
        let (leader, owner) = match self.start_process(&mut state, leader_pid, zombie, cpu) {
            Ok(started) => started,
            Err(error) => {
                for pid in rest {
                    let _ = self.pids.free(pid.ns(), pid.ids()[0], cpu);
                }
                return Err(error);
            }
        };
        let process = Arc::clone(leader.process());
        let mut threads = Vec::with_capacity(rest.len());
        for pid in rest {
            let thread = self.new_thread(&mut state, &process, pid, false, cpu)?;
            threads.push(thread);
        }
        if let Some(record) = state.processes.get_mut(&process.pid()) {
            for thread in &threads {
                record.threads.insert(thread.tid(), Arc::clone(thread));
            }
        }
        self.restore_timers(owner, image);
        process
            .timers()
            .restore(image, targets, timers::now().mono, &self.wheel);
        Ok(Restored {
            leader,
            zombie_leader: zombie,
            threads,
        })
    }

    /// Refuses, before anything changes, a `set_tid` entry that is taken or that two threads of
    /// the image ask for: the allocation would refuse it too, after IDs were already taken.
    fn check_free(
        &self,
        state: &State<C>,
        ns: NsId,
        set_tids: &[&[u32]],
    ) -> Result<(), ProcessError> {
        let mut chain = vec![ns];
        while chain.len() < set_tids.iter().map(|s| s.len()).max().unwrap_or(0) {
            let parent = chain
                .last()
                .and_then(|ns| state.namespaces.get(ns))
                .and_then(|space| space.parent);
            match parent {
                Some(parent) => chain.push(parent),
                None => break,
            }
        }
        let mut asked = BTreeSet::new();
        for set_tid in set_tids {
            for (&id, &level) in set_tid.iter().zip(&chain) {
                let taken = matches!(self.pids.lookup(level, id), Ok(Some(_)));
                if taken || !asked.insert((level, id)) {
                    return Err(ProcessError::Exists);
                }
            }
        }
        Ok(())
    }

    /// Recreates the image's timers under `owner` with their exact IDs (restore mode, as
    /// CRIU's `PR_TIMER_CREATE_RESTORE_IDS`), then sets the owner's cursor where the image had
    /// it.
    fn restore_timers(&self, owner: Owner, image: &Image) {
        self.timers.set_restore(owner, true);
        for &id in &image.timers {
            // Cannot fail: the owner is new, the IDs distinct and in range (`Image::check`).
            let _ = self.timers.create_at(owner, id, ());
        }
        self.timers.set_restore(owner, false);
        // Cannot fail: `Image::check` refused a cursor above the largest ID.
        let _ = self.timers.set_cursor(owner, image.timer_cursor);
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
    /// [`FREED_NS_BYTES`] (its number and its parent's: its number answers as a dead
    /// namespace for good, and a fork into it moves its living ancestors' cursors as one into
    /// a dead namespace does).
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
            + threads
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
