//! Rescue: an idle worker takes the wakelist of a worker that is not running.
//!
//! In the kernel, a wakeup queued on an idle CPU's wakelist is taken within microseconds: the
//! IPI interrupts that CPU whatever it does. A worker here is a thread, and the host may take it
//! off its CPU for milliseconds when the process shares its CPUs with other busy threads (a load
//! generator, another service). A wakeup on that worker's run queue is stolen by the first
//! worker that goes idle (newidle balance), but one on its wakelist waited for it: on two CPUs
//! shared with `wrk`, that made the wakelist policy's HTTP p99 three times the locked policy's.
//!
//! The kernel meets the same problem under virtualisation, where the host can preempt a vCPU:
//! `available_idle_cpu()` skips a CPU for which `vcpu_is_preempted()` holds. A thread has no
//! such flag to read, so the test here is the wakelist itself:
//!
//! * a worker with nothing to do, before it sleeps, notes the head of every other worker's
//!   non-empty wakelist ([`Wakelist::mark`](super::wakelist::Wakelist::mark));
//! * it watches them for [`GRACE`], and stops at once if its own work arrives or every list it
//!   noted moved on (a running owner takes its list within a microsecond);
//! * a list whose head is still the one noted was not taken by its owner in all that time: the
//!   idle worker takes it whole, with one compare-and-swap from that head, queues the wakeups on
//!   its own run queue and runs them.
//!
//! Why nothing is lost or run twice: the compare-and-swap empties the list only if the head is
//! still the one noted, so it and the owner's swap never both take an item, and a closed list
//! (whose head is a sentinel, never a mark) is neither taken nor reopened. The taken wakeups are
//! `QUEUED` tasks, which the rescuer queues like a steal. The owner, if it was notified, wakes to
//! an empty list and sleeps again. `loom_rescue` in this file checks the race with the owner's
//! take, a new push and shutdown. Only kernel placement rescues, as only it steals: forced-remote
//! placement exists to measure the crossing that a rescue would undo.

use super::hooks::Hooks;
use super::runtime::{RuntimeState, TaskRef};
use super::worker::WakelistMark;
#[cfg(not(loom))]
use std::time::{Duration, Instant};

/// How long a wakelist's head must stay put before an idle worker takes the list. A running
/// owner takes its list within a microsecond of the push; one woken from its futex onto a free
/// CPU, within tens. A worker that has not after this long is most likely off its CPU, where it
/// can stay for milliseconds; a longer grace would only keep the rescuer spinning on a CPU the
/// owner may be waiting for.
#[cfg(not(loom))]
pub(crate) const GRACE: Duration = Duration::from_micros(20);

/// A rescuer looks at the wakelists of at most this many workers after it, as the idle poll
/// looks at their idle words: a bounded look on a large runtime.
const LOOK_AT: usize = 16;

/// Rescues the wakeups left on other workers' wakelists for [`GRACE`] into worker `me`'s run
/// queue, through `buffer` (left empty). Returns whether any were queued there. Call it from
/// the idle path, announced as polling, before the worker sleeps.
pub(crate) fn stalled_wakelists<H: Hooks>(
    shared: &RuntimeState<H>,
    me: usize,
    buffer: &mut Vec<TaskRef<H>>,
) -> bool {
    let workers = shared.workers();
    let n = workers.len();
    let mut noted: [Option<(usize, WakelistMark<H>)>; LOOK_AT] = [None; LOOK_AT];
    let mut any = false;
    for (slot, step) in noted.iter_mut().zip(1..n) {
        let victim = (me + step) % n;
        *slot = workers[victim].wakelist_mark().map(|mark| (victim, mark));
        any |= slot.is_some();
    }
    if !any || !still_stalled(shared, me, &noted) {
        return false;
    }
    let mut count = 0;
    for &(victim, mark) in noted.iter().flatten() {
        count += workers[victim].take_stalled(mark, buffer);
    }
    if count == 0 {
        return false;
    }
    let this = &workers[me];
    this.counters.rescued.add(count as u64);
    if !this.enqueue_all(buffer) {
        // Our queue closes only after this thread has stopped; should it be closed anyway,
        // the tasks are cancelled like any wakeup refused at shutdown.
        for task in buffer.drain(..) {
            shared.cancel(task, Some(me));
        }
        return false;
    }
    true
}

/// Watches the `noted` wakelists for [`GRACE`]: whether at least one still has the head noted
/// at the end, with no work or notification for worker `me` meanwhile.
#[cfg(not(loom))]
fn still_stalled<H: Hooks>(
    shared: &RuntimeState<H>,
    me: usize,
    noted: &[Option<(usize, WakelistMark<H>)>],
) -> bool {
    let workers = shared.workers();
    let this = &workers[me];
    let deadline = Instant::now() + GRACE;
    loop {
        for _ in 0..32 {
            if this.idle.is_notified() || this.has_work() || shared.is_shutting_down() {
                return false;
            }
            crate::sync::cpu_relax();
        }
        let unmoved = noted
            .iter()
            .flatten()
            .any(|&(victim, mark)| workers[victim].wakelist_mark() == Some(mark));
        if !unmoved {
            return false;
        }
        if Instant::now() >= deadline {
            return true;
        }
    }
}

/// Under loom no thread is ever off its CPU and time does not pass: the rescue is tried at
/// once, the harshest race with the owner's own take.
#[cfg(loom)]
fn still_stalled<H: Hooks>(
    _shared: &RuntimeState<H>,
    _me: usize,
    _noted: &[Option<(usize, WakelistMark<H>)>],
) -> bool {
    true
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sched::runtime::test_support::{idle_task, shared};
    use crate::sched::Stats;

    fn rescued<H: Hooks>(shared: &RuntimeState<H>) -> u64 {
        let mut total = Stats::default();
        for worker in shared.workers() {
            worker.counters.add_to(&mut total);
        }
        total.rescued
    }

    #[test]
    fn wakeups_left_past_the_grace_move_to_the_rescuer_in_order() {
        let shared = shared(3);
        for id in [1, 2] {
            assert!(shared.workers()[0]
                .push_wakelist(idle_task(&shared, 0, id))
                .is_ok());
        }
        assert!(shared.workers()[2]
            .push_wakelist(idle_task(&shared, 2, 3))
            .is_ok());
        let mut buffer = Vec::new();
        let started = Instant::now();
        assert!(stalled_wakelists(&shared, 1, &mut buffer));
        assert!(started.elapsed() >= GRACE);
        assert!(buffer.is_empty());
        let rescuer = &shared.workers()[1];
        assert_eq!(rescuer.queued(), 3);
        assert_eq!(rescued(&shared), 3);
        for victim in [0, 2] {
            assert_eq!(shared.workers()[victim].pending(), 0);
            assert!(shared.workers()[victim].wakelist_mark().is_none());
        }
        let ids: Vec<u64> = rescuer.close().iter().map(|task| task.id().0).collect();
        // Worker 2's list first (the next worker after the rescuer), each in push order.
        assert_eq!(ids, vec![3, 1, 2]);
        for victim in [0, 2] {
            assert!(shared.workers()[victim].close().is_empty());
        }
    }

    #[test]
    fn a_rescuer_with_work_of_its_own_takes_nothing() {
        let shared = shared(2);
        assert!(shared.workers()[0]
            .push_wakelist(idle_task(&shared, 0, 1))
            .is_ok());
        assert!(shared.workers()[1]
            .enqueue(idle_task(&shared, 1, 2))
            .is_ok());
        let mut buffer = Vec::new();
        assert!(!stalled_wakelists(&shared, 1, &mut buffer));
        assert_eq!(shared.workers()[0].pending(), 1);
        assert!(shared.workers()[0].wakelist_mark().is_some());
        assert_eq!(rescued(&shared), 0);
        // Closing drops the tasks, which hold the runtime's state: no cycle is left behind.
        let left: usize = shared.workers().iter().map(|w| w.close().len()).sum();
        assert_eq!(left, 2);
    }
}

/// Worker 1 rescues worker 0's wakelist while a waker pushes onto it and worker 0 takes its
/// next task, or while the list is closed: every task ends up exactly once (run by worker 0,
/// queued on worker 1, or left for the close), the pending counts end at zero, and a closed
/// list stays closed.
#[cfg(all(test, loom))]
mod loom_rescue {
    use super::*;
    use crate::sched::runtime::test_support::{close_all, idle_task, shared};
    use crate::sync::thread;
    use crate::sync::unmodeled::Arc;

    #[test]
    fn a_rescue_racing_the_owners_take_and_a_push_loses_and_doubles_nothing() {
        loom::model(|| {
            let shared = shared(2);
            assert!(shared.workers()[0]
                .push_wakelist(idle_task(&shared, 0, 1))
                .is_ok());
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
                    let task = idle_task(&shared, 0, 2);
                    assert!(shared.workers()[0].push_wakelist(task).is_ok());
                })
            };
            let mut buffer = Vec::new();
            let rescued = stalled_wakelists(&shared, 1, &mut buffer);
            assert!(buffer.is_empty());
            let ran_by_owner = owner.join().unwrap();
            waker.join().unwrap();
            assert_eq!(rescued, shared.workers()[1].queued() > 0);
            let mut seen: Vec<u64> = ran_by_owner.into_iter().collect();
            seen.extend(close_all(&shared));
            seen.sort_unstable();
            assert_eq!(seen, vec![1, 2]);
        });
    }

    #[test]
    fn a_rescue_racing_the_close_never_reopens_the_list() {
        loom::model(|| {
            let shared = shared(2);
            assert!(shared.workers()[0]
                .push_wakelist(idle_task(&shared, 0, 1))
                .is_ok());
            let closer = {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    let left = shared.workers()[0].close();
                    left.iter().map(|task| task.id().0).collect::<Vec<_>>()
                })
            };
            let mut buffer = Vec::new();
            stalled_wakelists(&shared, 1, &mut buffer);
            let mut seen = closer.join().unwrap();
            // The list stays closed: a later wakeup is refused, not stranded.
            assert!(shared.workers()[0]
                .push_wakelist(idle_task(&shared, 0, 2))
                .is_err());
            seen.extend(shared.workers()[1].close().iter().map(|task| task.id().0));
            assert_eq!(seen, vec![1]);
        });
    }
}
