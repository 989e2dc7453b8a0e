//! Threads that runtime tasks run: attaching a task to a thread, killing it (its task stops
//! at its next poll), and freeing its IDs once its task has stopped (see `process/kill.rs`).

use std::collections::BTreeSet;

use super::{Processes, State};
use crate::pid::NsId;
use crate::process::design::{CidDesign, PidDesign, TableDesign};
use crate::process::thread::{Process, Thread};
use crate::sync::{self, Arc};

impl<P: PidDesign, C: CidDesign, T: TableDesign> Processes<P, C, T> {
    /// Makes `thread` one that a runtime task runs: from now on its IDs are freed when that
    /// task stops ([`task_stopped`](Self::task_stopped)). Returns `false`, attaching nothing,
    /// if it no longer runs (it exited, or its process was killed, since it was made).
    pub(crate) fn attach_task(&self, thread: &Arc<Thread<C>>) -> bool {
        let state = sync::lock(&self.state);
        let live = state
            .processes
            .get(&thread.process().pid())
            .filter(|record| !(record.zombie_leader && thread.is_leader()))
            .and_then(|record| record.threads.get(&thread.tid()))
            .is_some_and(|held| Arc::ptr_eq(held, thread));
        if live {
            thread.task().attach();
        }
        live
    }

    /// The runtime task that ran `thread` stopped (completed, panicked, cancelled or killed),
    /// on `cpu`: a killed thread leaves the CID space and its IDs are freed now; a live one
    /// exits ([`exit`](Self::exit)); a zombie leader leaves the CID space.
    pub(crate) fn task_stopped(&self, thread: &Arc<Thread<C>>, cpu: usize) {
        let mut state = self.lock();
        let (attached, waker) = thread.task().detach();
        let (mut touched, mut zap) = (BTreeSet::new(), Vec::new());
        let tid = thread.tid();
        if !attached {
            // Not ours to end: its task was never attached.
        } else if state
            .dying
            .get(&tid)
            .is_some_and(|dying| Arc::ptr_eq(dying, thread))
        {
            let _ = thread.process().cids().exit(thread.cid_task());
            self.stopped_dying(&mut state, thread, cpu, &mut touched, &mut zap);
        } else if let Some(record) = state
            .processes
            .get(&thread.process().pid())
            .filter(|record| Arc::ptr_eq(&record.process, thread.process()))
        {
            if record.zombie_leader && thread.is_leader() {
                let _ = record.process.cids().exit(thread.cid_task());
            } else {
                let _ = self.exit_locked(&mut state, tid, cpu, &mut touched, &mut zap);
            }
        }
        self.zap_and_free(&mut state, zap, touched, cpu);
        drop(state);
        // The waker it left is a reference to its task: dropped outside the lock.
        drop(waker);
    }

    /// Ends a thread that left its record: one that a runtime task runs is killed, and holds
    /// its IDs until its task stops; any other leaves the CID space (if `in_cids`) and its IDs
    /// are freed.
    pub(super) fn retire(
        &self,
        state: &mut State<C>,
        thread: Arc<Thread<C>>,
        in_cids: bool,
        cpu: usize,
        touched: &mut BTreeSet<NsId>,
        zap: &mut Vec<NsId>,
    ) {
        if thread.task().is_attached() {
            if thread.task().kill() {
                state.wake_q.push(Arc::clone(&thread));
            }
            state.dying.insert(thread.tid(), thread);
            return;
        }
        if in_cids {
            let _ = thread.process().cids().exit(thread.cid_task());
        }
        self.release(state, &thread, cpu, touched, zap);
    }

    /// A killed thread's task stopped: its IDs are freed, but a leader's only with the last
    /// thread of its process (until then it stays held, stopped); the leader held for the
    /// threads goes with the last of them.
    fn stopped_dying(
        &self,
        state: &mut State<C>,
        thread: &Arc<Thread<C>>,
        cpu: usize,
        touched: &mut BTreeSet<NsId>,
        zap: &mut Vec<NsId>,
    ) {
        let process = thread.process();
        if thread.is_leader() && Self::threads_dying(state, process) > 1 {
            return;
        }
        state.dying.remove(&thread.tid());
        self.release(state, thread, cpu, touched, zap);
        if thread.is_leader() {
            return;
        }
        let held_leader = state
            .dying
            .get(&process.pid())
            .filter(|leader| Arc::ptr_eq(leader.process(), process))
            .filter(|leader| !leader.task().is_attached())
            .cloned();
        if let Some(leader) = held_leader {
            if Self::threads_dying(state, process) == 1 {
                state.dying.remove(&leader.tid());
                self.release(state, &leader, cpu, touched, zap);
            }
        }
    }

    /// How many threads of `process` are dying, its held leader included.
    pub(super) fn threads_dying(state: &State<C>, process: &Arc<Process<C>>) -> usize {
        state
            .dying
            .values()
            .filter(|thread| Arc::ptr_eq(thread.process(), process))
            .count()
    }
}
