//! Load balancing: a worker about to go idle pulls half the busiest worker's queue (the
//! kernel's newidle balance), and a busy worker kicks an idle one to come and pull (the
//! kernel's nohz idle-balance kick).
//!
//! In the kernel, a CPU about to run its idle task first calls `newidle_balance`: it finds the
//! busiest run queue of its domain and detaches tasks from it until the imbalance is halved.
//! Idle CPUs do not run the periodic balance themselves (they sleep, tickless); a busy CPU whose
//! tick finds it overloaded (`nr_running > 1`) while some CPU idles kicks one idle CPU
//! (`nohz_balancer_kick`), which then balances on behalf of all.
//!
//! Here:
//!
//! * **newidle:** a worker that found nothing in its next slot, its wakelist or its run queue
//!   takes the back half (rounded up, [`steal_count`]) of the run queue with the most tasks
//!   waiting, runs the first and queues the rest on its own queue, before it announces idle.
//! * **periodic:** every [`BALANCE_PASSES`] passes of its loop, a worker with at least two
//!   tasks waiting notifies the first idle worker, which wakes up, finds its own queues empty
//!   and steals (newidle again). The same happens when a sync wakeup displaces a task from the
//!   next slot (see `placement.rs`).
//!
//! What is never stolen: the next slot (it is the running task's partner, and making it
//! stealable cost tokio 1.51 up to a third of its throughput before it was reverted, #8100). A
//! pending wakeup chose its target and stays on its wakelist, unless that worker leaves it
//! there so long that it is most likely off its CPU: then an idle worker rescues the whole list
//! (`rescue.rs`).
//!
//! A steal moves tasks between two run queues under their locks, one after the other and never
//! both at once: the victim's lock to detach them (into the stealer's own buffer, whose capacity
//! it keeps), the stealer's lock to queue them. Tasks stay `QUEUED` throughout and are owned by
//! exactly one queue or the stealer's buffer, so none is lost or run twice; the steal races
//! the victim's local pushes and its wakelist batches only through the victim's lock.
//! `loom_steal` below checks those races.

use super::hooks::Hooks;
use super::placement::idle_worker;
use super::runtime::{RuntimeState, TaskRef};
use super::worker::Worker;
// The runtime's state, type-erased elsewhere (see `runtime`).
use crate::sync::unmodeled::Arc;

/// A worker checks whether to kick an idle worker every this many passes of its loop.
pub(crate) const BALANCE_PASSES: u32 = 16;

/// How many tasks a steal takes from a queue of `len`: half, rounded up, so that a single
/// waiting task (its worker busy running another) moves too.
pub(crate) fn steal_count(len: usize) -> usize {
    len.div_ceil(2)
}

/// The worker other than `me` with the most tasks queued, if any has one (`find_busiest_queue`).
fn busiest<H: Hooks>(workers: &[Worker<H>], me: usize) -> Option<usize> {
    workers
        .iter()
        .enumerate()
        .filter(|&(index, _)| index != me)
        .map(|(index, worker)| (index, worker.queued()))
        .filter(|&(_, queued)| queued > 0)
        .max_by_key(|&(_, queued)| queued)
        .map(|(index, _)| index)
}

/// newidle balance for worker `me`: steals half the busiest queue through `stolen` (left
/// empty), queues all but the first on `me`'s queue and returns the first to run.
pub(crate) fn newidle<H: Hooks>(
    shared: &Arc<RuntimeState<H>>,
    me: usize,
    stolen: &mut Vec<TaskRef<H>>,
) -> Option<TaskRef<H>> {
    let workers = shared.workers();
    let victim = busiest(workers, me)?;
    let count = workers[victim].steal_half(stolen);
    if count == 0 {
        return None;
    }
    let this = &workers[me];
    this.counters.stolen.add(count as u64);
    // Run the oldest stolen task now; the others wait on our queue, in their order.
    let first = stolen.remove(0);
    if !this.enqueue_all(stolen) {
        // Our queue closes only after this thread has stopped; should it be closed anyway,
        // the tasks are cancelled like any wakeup refused at shutdown.
        for task in stolen.drain(..) {
            shared.cancel(task, Some(me));
        }
    }
    Some(first)
}

/// The periodic balance of worker `me`: with two or more tasks waiting on it, it notifies the
/// first idle worker, which will steal from it.
pub(crate) fn kick_idle<H: Hooks>(workers: &[Worker<H>], me: usize) {
    let this = &workers[me];
    if this.queued() < 2 {
        return;
    }
    if let Some(idle) = idle_worker(workers, me, Some(me)) {
        this.counters.kicks.add(1);
        workers[idle].notify(&this.counters);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    use crate::sched::runtime::test_support::{idle_task, shared};

    #[test]
    fn a_steal_takes_half_rounded_up() {
        assert_eq!(
            (0..6).map(steal_count).collect::<Vec<_>>(),
            vec![0, 1, 1, 2, 2, 3]
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A task queued on worker 0 or 1.
        Push(usize),
        /// A task pushed onto worker 0's or 1's wakelist (not stealable until queued).
        Wake(usize),
        /// Worker 0 or 1 takes its next task.
        Pop(usize),
        /// Worker 0 or 1, idle, steals from the busiest other worker.
        Steal(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..2usize).prop_map(Op::Push),
            2 => (0..2usize).prop_map(Op::Wake),
            2 => (0..2usize).prop_map(Op::Pop),
            2 => (0..2usize).prop_map(Op::Steal),
        ]
    }

    proptest! {
        /// Queues under pushes, wakelist pushes, pops and steals behave as two FIFO queues
        /// from whose back a steal moves half (rounded up), the oldest of them run at once, the
        /// rest queued in order; a pop first moves the wakelist's entries, in push order, to
        /// the back of its queue (a lone entry onto an empty queue is run straight away, which
        /// must come to the same); every task is accounted for exactly once.
        #[test]
        // Shorter sequences under Miri, which interprets every queue operation.
        fn steals_match_the_half_rule(ops in proptest::collection::vec(op(), 0..if cfg!(miri) { 16 } else { 120 })) {
            let shared = shared(2);
            let mut model: [VecDeque<u64>; 2] = Default::default();
            let mut pending: [Vec<u64>; 2] = Default::default();
            let mut next_id = 1u64;
            let mut ran = Vec::new();
            let mut scratch = Vec::new();
            for op in ops {
                match op {
                    Op::Push(w) => {
                        let task = idle_task(&shared, w, next_id);
                        prop_assert!(shared.workers()[w].enqueue(task).is_ok());
                        model[w].push_back(next_id);
                        next_id += 1;
                    }
                    Op::Wake(w) => {
                        let task = idle_task(&shared, w, next_id);
                        prop_assert!(shared.workers()[w].push_wakelist(task).is_ok());
                        pending[w].push(next_id);
                        next_id += 1;
                    }
                    Op::Pop(w) => {
                        model[w].extend(pending[w].drain(..));
                        let mut polls = 0;
                        let got = shared.workers()[w].next_task(&mut polls);
                        prop_assert_eq!(got.map(|t| t.id().0), model[w].pop_front());
                    }
                    Op::Steal(w) => {
                        let other = 1 - w;
                        let got = newidle(&shared, w, &mut scratch).map(|t| t.id().0);
                        prop_assert!(scratch.is_empty());
                        let take = steal_count(model[other].len());
                        let at = model[other].len() - take;
                        let mut moved: VecDeque<u64> = model[other].drain(at..).collect();
                        let first = moved.pop_front();
                        prop_assert_eq!(got, first);
                        ran.extend(first);
                        model[w].extend(moved);
                    }
                }
                for ((worker, model), pending) in shared.workers().iter().zip(&model).zip(&pending) {
                    prop_assert_eq!(worker.queued(), model.len());
                    prop_assert_eq!(worker.pending(), pending.len());
                }
            }
            let left: usize = shared.workers().iter().map(|w| w.close().len()).sum();
            let waiting: usize = model.iter().map(VecDeque::len).chain(pending.iter().map(Vec::len)).sum();
            prop_assert_eq!(left, waiting);
        }
    }
}

/// The steal races of a worker's queue, model-checked: worker 0 pushes onto its own queue and
/// takes its next task (its wakelist's batch joining the queue), a remote waker pushes onto
/// worker 0's wakelist, and worker 1, idle, steals half of worker 0's queue, all at once. Every
/// task ends up exactly once: run by one worker, or still queued or pending, and the load
/// counts match the queues.
#[cfg(all(test, loom))]
mod loom_steal {
    use super::*;
    use crate::sched::runtime::test_support::{close_all, idle_task, shared};
    use crate::sync::thread;

    #[test]
    fn a_steal_racing_a_local_push_and_a_wakelist_take_loses_and_doubles_nothing() {
        loom::model(|| {
            let shared = shared(2);
            for id in [1, 2] {
                assert!(shared.workers()[0]
                    .enqueue(idle_task(&shared, 0, id))
                    .is_ok());
            }
            let owner = {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    let worker = &shared.workers()[0];
                    assert!(worker.enqueue(idle_task(&shared, 0, 3)).is_ok());
                    let mut polls = 0;
                    worker.next_task(&mut polls).map(|task| task.id().0)
                })
            };
            let waker = {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    let task = idle_task(&shared, 0, 4);
                    assert!(shared.workers()[0].push_wakelist(task).is_ok());
                })
            };
            let mut stolen = Vec::new();
            let thief = newidle(&shared, 1, &mut stolen).map(|task| task.id().0);
            assert!(stolen.is_empty());
            let ran_by_owner = owner.join().unwrap();
            waker.join().unwrap();
            let mut seen: Vec<u64> = ran_by_owner.into_iter().chain(thief).collect();
            seen.extend(close_all(&shared));
            seen.sort_unstable();
            assert_eq!(seen, vec![1, 2, 3, 4]);
        });
    }

    /// The lone-wakeup path: worker 0, its queue empty, takes its next task while one waker
    /// pushes onto its wakelist (a batch of one, taken without the run-queue lock), another
    /// queues onto its run queue under the lock, and worker 1 steals. Every task ends up
    /// exactly once, and nothing is left counted as pending once the wakelist is empty.
    #[test]
    fn a_lone_wakeup_taken_past_the_queue_races_a_locked_wakeup_and_a_steal() {
        loom::model(|| {
            let shared = shared(2);
            let owner = {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    let mut polls = 0;
                    shared.workers()[0]
                        .next_task(&mut polls)
                        .map(|task| task.id().0)
                })
            };
            let waker = {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    let task = idle_task(&shared, 0, 1);
                    assert!(shared.workers()[0].push_wakelist(task).is_ok());
                })
            };
            assert!(shared.workers()[0]
                .enqueue(idle_task(&shared, 0, 2))
                .is_ok());
            let mut stolen = Vec::new();
            let thief = newidle(&shared, 1, &mut stolen).map(|task| task.id().0);
            let ran_by_owner = owner.join().unwrap();
            waker.join().unwrap();
            let mut seen: Vec<u64> = ran_by_owner.into_iter().chain(thief).collect();
            seen.extend(close_all(&shared));
            seen.sort_unstable();
            assert_eq!(seen, vec![1, 2]);
        });
    }
}
