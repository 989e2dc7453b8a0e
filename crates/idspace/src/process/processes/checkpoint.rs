//! Checkpoint and restore: a process's [`Image`], and recreating one with its IDs (`clone3`'s
//! `set_tid`), its timers' IDs (restore mode), its timer cursor and its timers' state.

use std::collections::BTreeSet;

use super::{Processes, Restored, State};
use crate::pid::{NsId, Pid};
use crate::process::design::{CidDesign, PidDesign, TableDesign};
use crate::process::error::ProcessError;
use crate::process::image::{Image, NotifyKind, ThreadImage};
use crate::process::thread::Thread;
use crate::process::timers::{self, Notify};
use crate::sync::{self, Arc};
use crate::table::Owner;

/// A restored process as [`Processes::start_restored`] makes it: its leader, its timers'
/// owner in the table, and its other threads.
type Started<C> = (Arc<Thread<C>>, Owner, Vec<Arc<Thread<C>>>);

impl<P: PidDesign, C: CidDesign, T: TableDesign> Processes<P, C, T> {
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
    /// Each thread's allocation is the kernel's `alloc_pid` for one `clone3`: level by level,
    /// innermost first, a `set_tid` entry is checked for range and init, then taken; a level
    /// without one takes the next ID from its cursor; a dead `ns` is refused after every level.
    /// The first refusal, in that order, is the answer, and nothing after it is tried.
    ///
    /// # Errors
    /// [`ProcessError::BadImage`]; [`ProcessError::UnknownNs`]; then the first refusal:
    /// [`ProcessError::Invalid`], [`ProcessError::Exists`], [`ProcessError::Full`],
    /// [`ProcessError::NsDead`] (a freed `ns` answers as a dead one, after the same checks).
    /// A refused restore frees the IDs it took and makes no timers, but leaves the PID
    /// cursors where its allocations moved them, as the kernel does, and a namespace whose
    /// ID 1 it had taken is left dead (see the module docs). An image with a timer notifying
    /// a channel is refused ([`ProcessError::BadImage`]): give its channel with
    /// [`restore_with`](Self::restore_with).
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
        notify: impl FnMut(u32, NotifyKind) -> Option<Notify>,
    ) -> Result<Restored<C>, ProcessError> {
        image.check()?;
        let targets = timer_targets(image, notify)?;
        // A refused restore may end processes (see `give_back`): their tasks are woken once
        // the lock is released.
        let mut state = self.lock();
        let depth = match state.namespaces.get(&ns) {
            Some(target) => target.level as usize + 1,
            None if state.freed.contains_key(&ns) => {
                // Only the leader's allocation is tried: it cannot succeed.
                let depth = Self::freed_depth(&state, ns);
                let leader = &image.threads[0].ids;
                let set_tid = &leader[..leader.len().min(depth)];
                return Err(self.refuse_freed(&state, ns, set_tid, cpu));
            }
            None => return Err(ProcessError::UnknownNs),
        };
        let mut order: Vec<&ThreadImage> = image.threads.iter().skip(1).collect();
        order.sort_by_key(|thread| thread.root());
        order.insert(0, &image.threads[0]);
        let set_tids = order
            .iter()
            .map(|thread| &thread.ids[..thread.ids.len().min(depth)]);
        let pids = self.alloc_set_tids(&mut state, ns, set_tids, cpu)?;
        let zombie = image.threads[0].zombie;
        let (leader, owner, threads) = self.start_restored(&mut state, pids, zombie, cpu)?;
        self.restore_timers(owner, image);
        leader
            .process()
            .timers()
            .restore(image, targets, timers::now().mono, &self.wheel);
        Ok(Restored {
            leader,
            zombie_leader: zombie,
            threads,
        })
    }

    /// Allocates one PID in `ns` per entry of `set_tids`, in order, as one `clone3` each. The
    /// first refusal is the answer: what the earlier entries took is freed, as the kernel's
    /// restore ends the processes it made (a namespace whose ID 1 goes dies with it).
    fn alloc_set_tids<'a>(
        &self,
        state: &mut State<C>,
        ns: NsId,
        set_tids: impl ExactSizeIterator<Item = &'a [u32]>,
        cpu: usize,
    ) -> Result<Vec<Pid>, ProcessError> {
        let mut allocated: Vec<Pid> = Vec::with_capacity(set_tids.len());
        for set_tid in set_tids {
            match self.pids.alloc(ns, set_tid, cpu) {
                Ok(pid) => allocated.push(pid),
                Err(error) => {
                    self.give_back(state, allocated, cpu);
                    return Err(ProcessError::from_pid(error));
                }
            }
        }
        Ok(allocated)
    }

    /// Frees the PIDs of a refused restore, which no thread holds yet. Where one of them was a
    /// namespace's ID 1, that namespace dies (the kernel's restore had made its init, and
    /// ends it): its processes end and, left empty, it is freed.
    fn give_back(&self, state: &mut State<C>, pids: Vec<Pid>, cpu: usize) {
        if pids.is_empty() {
            return;
        }
        let mut touched = BTreeSet::new();
        let mut zap = Vec::new();
        for pid in &pids {
            self.free_ids(state, pid, cpu, &mut touched, &mut zap);
        }
        self.zap_and_free(state, zap, touched, cpu);
    }

    /// Makes the restored process from its threads' PIDs (the leader's first): returns the
    /// leader, the process's timer owner and the other threads. A refusal frees the PIDs not
    /// yet given to a thread.
    fn start_restored(
        &self,
        state: &mut State<C>,
        pids: Vec<Pid>,
        zombie: bool,
        cpu: usize,
    ) -> Result<Started<C>, ProcessError> {
        let mut pids = pids.into_iter();
        let Some(leader_pid) = pids.next() else {
            return Err(ProcessError::BadImage("no threads".to_string()));
        };
        let rest: Vec<Pid> = pids.collect();
        let (leader, owner) = match self.start_process(state, leader_pid, zombie, cpu) {
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
            let thread = self.new_thread(state, &process, pid, false, cpu)?;
            threads.push(thread);
        }
        if let Some(record) = state.processes.get_mut(&process.pid()) {
            for thread in &threads {
                record.threads.insert(thread.tid(), Arc::clone(thread));
            }
        }
        Ok((leader, owner, threads))
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
}

/// The notification target of each timer state of `image`, asked of `notify` in order;
/// `None` for one refuses the restore.
fn timer_targets(
    image: &Image,
    mut notify: impl FnMut(u32, NotifyKind) -> Option<Notify>,
) -> Result<Vec<Notify>, ProcessError> {
    image
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
        .collect()
}
