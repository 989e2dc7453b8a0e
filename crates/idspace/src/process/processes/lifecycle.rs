//! Lifecycle: fork, clone, exit and kill, and what dies with them (a namespace whose ID 1 is
//! freed, its processes, and namespaces left dead and empty).

use std::collections::{BTreeMap, BTreeSet};

use super::{all_cpus, Exited, Freed, Processes, Record, State};
use crate::pid::{NsId, Pid, ROOT};
use crate::process::design::{CidDesign, PidDesign, TableDesign};
use crate::process::error::ProcessError;
use crate::process::thread::{Process, Thread};
use crate::sync::{self, Arc};
use crate::table::Owner;

impl<P: PidDesign, C: CidDesign, T: TableDesign> Processes<P, C, T> {
    /// A new process in `ns` with one thread, its leader (fork), allocated on `cpu`.
    ///
    /// # Errors
    /// As the PID design's `alloc`: [`ProcessError::UnknownNs`], [`ProcessError::Full`],
    /// [`ProcessError::NsDead`].
    pub fn fork(&self, ns: NsId, cpu: usize) -> Result<Arc<Thread<C>>, ProcessError> {
        let mut state = sync::lock(&self.state);
        if state.freed.contains_key(&ns) {
            return Err(self.refuse_freed(&state, ns, &[], cpu));
        }
        let pid = self
            .pids
            .alloc(ns, &[], cpu)
            .map_err(ProcessError::from_pid)?;
        let (leader, _) = self.start_process(&mut state, pid, false, cpu)?;
        Ok(leader)
    }

    /// Makes a process whose leader holds `pid`; a zombie leader gets no CID task.
    pub(super) fn start_process(
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
    pub(super) fn new_thread(
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
    /// A thread that a runtime task runs is killed instead: its task stops at its next poll,
    /// and only then does it leave the CID space and are its IDs freed (see
    /// [`kill`](Self::kill)).
    ///
    /// # Errors
    /// [`ProcessError::UnknownThread`] if no live thread has `tid` (a zombie leader included).
    pub fn exit(&self, tid: u32, cpu: usize) -> Result<Exited, ProcessError> {
        let mut state = self.lock();
        let (mut touched, mut zap) = (BTreeSet::new(), Vec::new());
        let exited = self.exit_locked(&mut state, tid, cpu, &mut touched, &mut zap);
        self.zap_and_free(&mut state, zap, touched, cpu);
        exited
    }

    /// [`exit`](Self::exit), under the model's lock.
    pub(super) fn exit_locked(
        &self,
        state: &mut State<C>,
        tid: u32,
        cpu: usize,
        touched: &mut BTreeSet<NsId>,
        zap: &mut Vec<NsId>,
    ) -> Result<Exited, ProcessError> {
        let Some(&pid) = state.threads.get(&tid) else {
            return Err(ProcessError::UnknownThread);
        };
        // A killed thread whose task still runs is in no record: it has exited already.
        let Some(record) = state.processes.get_mut(&pid) else {
            return Err(ProcessError::UnknownThread);
        };
        let leader = tid == pid;
        if leader && record.zombie_leader {
            return Err(ProcessError::UnknownThread);
        }
        if record.live_threads() == 1 {
            self.end_one(state, pid, cpu, touched, zap);
            return Ok(Exited {
                process_exited: true,
            });
        }
        if leader {
            record.zombie_leader = true;
            let Some(thread) = record.threads.get(&tid).cloned() else {
                return Err(ProcessError::UnknownThread);
            };
            // A zombie runs no more: it leaves the CID space now, or when its task stops.
            if !thread.task().is_attached() {
                let _ = record.process.cids().exit(thread.cid_task());
            } else if thread.task().kill() {
                state.wake_q.push(thread);
            }
        } else if let Some(thread) = record.threads.remove(&tid) {
            // A thread cloned into a namespace before any process there took its ID 1 holds
            // that 1 at the outer level, and freeing it kills that namespace.
            self.retire(state, thread, true, cpu, touched, zap);
        }
        Ok(Exited {
            process_exited: false,
        })
    }

    /// Ends process `pid`: every live thread exits, and its timers are deleted. Returns how
    /// many were live (a zombie leader is not).
    ///
    /// A thread with no runtime task (the model used alone, as the replay protocol does)
    /// leaves at once: its IDs are free when `kill` returns. A thread that a runtime task runs
    /// is killed, as SIGKILL kills it: its task stops at its next poll (the poll under way, if
    /// any, runs to its end; a sleeping task is woken), its join handle reports
    /// [`JoinError::Killed`](crate::sched::JoinError::Killed), and its IDs are freed by the
    /// task's exit hook, once no worker runs it (the kernel frees them at `release_task`).
    /// Until then they stay held, so no other thread can take them while the killed task may
    /// still see them in [`current`](crate::process::current). The process itself is gone at
    /// once: its timers, and its place in [`process_ids`](Self::process_ids).
    ///
    /// # Errors
    /// [`ProcessError::UnknownProcess`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::pending;
    /// use std::sync::Arc;
    ///
    /// use idspace::pid::ROOT;
    /// use idspace::process::ProcessHooks;
    /// use idspace::sched::{Builder, JoinError};
    ///
    /// let hooks: ProcessHooks = ProcessHooks::for_workers(1)?;
    /// let model = Arc::clone(hooks.model());
    /// let runtime = Builder::new().workers(1).hooks(Arc::new(hooks)).build()?;
    /// // A process whose leader waits for ever.
    /// let task = runtime.spawn_process(ROOT, pending::<()>())?;
    /// let pid = *model.process_ids().last().expect("the new process");
    /// assert_eq!(model.kill(pid, 0)?, 1);
    /// assert!(matches!(task.join(), Err(JoinError::Killed)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn kill(&self, pid: u32, cpu: usize) -> Result<usize, ProcessError> {
        let mut state = self.lock();
        let Some(record) = state.processes.get(&pid) else {
            return Err(ProcessError::UnknownProcess);
        };
        let live = record.live_threads();
        let (mut touched, mut zap) = (BTreeSet::new(), Vec::new());
        self.end_one(&mut state, pid, cpu, &mut touched, &mut zap);
        self.zap_and_free(&mut state, zap, touched, cpu);
        Ok(live)
    }

    /// Frees a thread's IDs and forgets it; notes the namespaces whose counts changed and
    /// those whose ID 1 went (they die).
    pub(super) fn release(
        &self,
        state: &mut State<C>,
        thread: &Thread<C>,
        cpu: usize,
        touched: &mut BTreeSet<NsId>,
        zap: &mut Vec<NsId>,
    ) {
        state.threads.remove(&thread.tid());
        for &(ns, _) in thread.pid().levels() {
            if let Some(space) = state.namespaces.get_mut(&ns) {
                space.held -= 1;
            }
        }
        self.free_ids(state, thread.pid(), cpu, touched, zap);
    }

    /// Frees `pid`'s IDs at every level; notes the namespaces it had an ID in, and marks dead
    /// (to be zapped) those where that ID was 1.
    pub(super) fn free_ids(
        &self,
        state: &mut State<C>,
        pid: &Pid,
        cpu: usize,
        touched: &mut BTreeSet<NsId>,
        zap: &mut Vec<NsId>,
    ) {
        // Freeing by the innermost ID releases every level; the caller holds the object, so
        // the design finds it.
        let _ = self.pids.free(pid.ns(), pid.ids()[0], cpu);
        for &(ns, id) in pid.levels() {
            if id == 1 {
                if let Some(space) = state.namespaces.get_mut(&ns) {
                    space.dead = true;
                    zap.push(ns);
                }
            }
            touched.insert(ns);
        }
    }

    /// Ends process `pid`: its timers go, and each of its threads is retired (a zombie leader
    /// has left the CID space already, unless its task still runs).
    pub(super) fn end_one(
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
        // While a task runs one of its threads, the leader's IDs (the process's PID, which
        // `current` reports in every thread) stay held: the kernel delays a group leader's
        // release until its last thread is gone.
        let tasks_run = record
            .threads
            .values()
            .any(|thread| thread.task().is_attached())
            || Self::threads_dying(state, &record.process) > 0;
        for (tid, thread) in record.threads {
            let in_cids = !(tid == pid && record.zombie_leader);
            if tid == pid && tasks_run && !thread.task().is_attached() {
                if in_cids {
                    let _ = thread.process().cids().exit(thread.cid_task());
                }
                state.dying.insert(tid, thread);
            } else {
                self.retire(state, thread, in_cids, cpu, touched, zap);
            }
        }
    }

    /// Ends every process with an ID in a namespace of `zap` (those dying, and those that die
    /// on the way), then frees the namespaces of `touched` left dead and empty, and their
    /// parents left so.
    pub(super) fn zap_and_free(
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
            let (parent, pid_max) = (space.parent, space.pid_max);
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
                state.freed.insert(ns, Freed { parent, pid_max });
            }
            if let Some(parent) = parent {
                if let Some(up) = state.namespaces.get_mut(&parent) {
                    up.children -= 1;
                }
                candidates.push(parent);
            }
        }
    }
}
