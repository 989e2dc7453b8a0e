//! A worker's idle state: the user-space `TIF_POLLING_NRFLAG` / `NEED_RESCHED` pair and the
//! sleep that stands in for the kernel's idle loop.
//!
//! One word per worker, written by the worker and by wakers:
//!
//! | state      | meaning                                   | who moves it out, to what           |
//! |------------|-------------------------------------------|-------------------------------------|
//! | `RUNNING`  | running tasks or looking for them         | the worker: `POLLING`               |
//! | `POLLING`  | idle, spinning on its queues              | a waker: `NOTIFIED` (no syscall); the worker: `PARKED` or `RUNNING` |
//! | `PARKED`   | asleep in `futex_wait` on this word       | a waker: `NOTIFIED`, then `futex_wake` |
//! | `PARKED_POLLER` | asleep in `epoll_wait` on its poller | a waker: `NOTIFIED`, then an eventfd write; the worker: `POLLING` once the wait returned |
//! | `NOTIFIED` | told to look at its queues                | the worker: `RUNNING`               |
//!
//! The full protocol, and why no wakeup is lost, is in the [`protocol`](super::protocol)
//! document.
//!
//! # How long to poll
//!
//! Polling trades CPU time for wakeup latency: a wakeup that finds its worker polling costs no
//! system call on either side, but every microsecond spent polling in vain is a microsecond of
//! CPU the machine could have used. Two rules keep the trade worth it:
//!
//! * **Poll only while it can pay** ([`worth_spinning`]): the wakeups a worker waits for come
//!   from running tasks. With no other worker running, a wakeup can only come from outside the
//!   runtime (a timer thread, a thread that spawns or wakes): the worker parks at once, as
//!   tokio's idle workers do. And polling workers are capped at the number of running ones, so
//!   that on a wide runtime with one busy worker one idle worker polls, not all of them (tokio
//!   caps its searching workers at half the workers for the same reason).
//! * **Poll as long as recent idle periods say** ([`PollGovernor`]): the kernel's `haltpoll`
//!   cpuidle governor and KVM's halt polling adapt the poll to the idle periods they see, and so
//!   do we. An idle period that ended by a wakeup soon after the worker parked (within a few
//!   times the configured maximum: a parked period includes futex wake times, see
//!   [`PollGovernor::REACH`]) would have been caught by a longer poll: the poll doubles. One
//!   that lasted longer could not have been: the poll halves, down to none. A period that ended
//!   while polling changes nothing.
//!
//! * **Poll only on a CPU nobody else wants** ([`PollGovernor::contended`]): before a poll,
//!   the worker reads its thread's count of involuntary context switches (`getrusage`, one
//!   system call per poll, none when no poll would follow). If it moved, the kernel took the
//!   CPU from the worker for a thread that waited for it (a client on the same machine, another
//!   process, the runtime's other worker on an oversubscribed machine): the worker skips the
//!   poll and the limit halves. An idle CPU in the kernel polls only with nothing else runnable
//!   on its run queue, which a user-space worker cannot see; being pushed off the CPU is how it
//!   learns. Without this rule a worker of a server sharing 2 CPUs with its load generator
//!   polled in the generator's time slices.
//!
//! Where we differ: the kernel polls whenever the governor says so, whatever other CPUs do
//! (guest halt polling has no view of the host's other work); we look at the other workers,
//! which a user-space runtime sees for free.

use std::time::{Duration, Instant};

use crate::sync::unmodeled::AtomicBool;
use crate::sync::{fence, AtomicU32, Ordering};
#[cfg(not(loom))]
use crate::sys::futex;

const RUNNING: u32 = 0;
const POLLING: u32 = 1;
const PARKED: u32 = 2;
const NOTIFIED: u32 = 3;
const PARKED_POLLER: u32 = 4;

/// How a notification reached its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// The worker was running (or already notified): it will see the work by itself.
    NotNeeded,
    /// The worker was polling: its flag was set, no system call (`set_nr_if_polling`).
    Polling,
    /// The worker was asleep: it was woken with a futex wake (the IPI).
    Woken,
    /// The worker was asleep in its poller: the caller must write the poller's eventfd.
    WakePoller,
}

/// One worker's idle word and, under loom, the lock and condition variable that model the
/// futex.
pub(crate) struct Idle {
    state: AtomicU32,
    /// Whether the worker has a task in hand: from taking a task until it finds nothing left
    /// to run (the `curr` that `rq->nr_running` counts). Written only on those transitions, so
    /// it shares the word's line, which wakers read anyway. A hint, like [`is_busy`](Self::is_busy):
    /// it only picks between two paths that each deliver the wakeup (the handshake never reads
    /// it), so loom need not explore its orderings, and a std atomic keeps it out of the
    /// models' state space; the models of each path (locked, wakelist) check the delivery.
    current: AtomicBool,
    #[cfg(loom)]
    sleep: (crate::sync::Mutex<()>, crate::sync::Condvar),
}

impl Idle {
    pub(crate) fn new() -> Self {
        Idle {
            state: AtomicU32::new(RUNNING),
            current: AtomicBool::new(false),
            #[cfg(loom)]
            sleep: (crate::sync::Mutex::new(()), crate::sync::Condvar::new()),
        }
    }

    /// Whether the worker is running or about to (the `curr != idle` part of `idle_cpu`).
    /// A hint for choosing targets; correctness never rests on it.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(self.state.load(Ordering::Relaxed), RUNNING | NOTIFIED)
    }

    /// The worker took a task after having none (`true`), or found nothing left to run
    /// (`false`). Relaxed: a hint for wakers choosing how to queue, never part of the handshake.
    pub(crate) fn set_current(&self, current: bool) {
        self.current.store(current, Ordering::Relaxed);
    }

    /// Whether the worker has a task in hand (see [`set_current`](Self::set_current)).
    pub(crate) fn has_current(&self) -> bool {
        self.current.load(Ordering::Relaxed)
    }

    /// The worker announces that it is idle and polling, then fences: the store is ordered
    /// before the worker's recheck of its queues. This SeqCst fence pairs with the one in
    /// [`notify`](Self::notify) (the Dekker handshake of the protocol, section 4): a fence pair
    /// rather than SeqCst accesses because that is what the C11 model guarantees for mixed
    /// orderings, and what loom checks.
    ///
    /// Every write to the word is a read-modify-write, so the word's history is one chain in
    /// which each write follows the value it replaced. With plain stores the handshake holds in
    /// the C11 model, but loom, which orders a plain store only after the writes its thread has
    /// seen, finds a lost wakeup; with read-modify-writes both agree, at no cost on the hot path
    /// (these writes happen only on the way into and out of idle).
    pub(crate) fn start_polling(&self) {
        self.state.swap(POLLING, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Whether a waker has set this worker's flag (`need_resched()` in the idle loop).
    pub(crate) fn is_notified(&self) -> bool {
        self.state.load(Ordering::Relaxed) == NOTIFIED
    }

    /// The worker goes back to running (a swap, like every write to the word). Relaxed: the
    /// word is a hint for wakers choosing a target; a stale `POLLING` only costs them a needless
    /// notification.
    pub(crate) fn stop_idling(&self) {
        self.state.swap(RUNNING, Ordering::Relaxed);
    }

    /// The worker, polling and still without work, sleeps in its poller: `wait` is the
    /// `epoll_wait` (bounded by the worker's next timer), which also returns when a waker writes
    /// the poller's eventfd after [`notify`](Self::notify) said [`Notice::WakePoller`]. Returns
    /// what `wait` returned, or `None` when a waker set the worker's flag first (no wait).
    ///
    /// When the wait returns, the word goes back to `POLLING` (unless a waker set `NOTIFIED`
    /// meanwhile): the worker delivers the events it got while it still counts as idle, and
    /// wakers in that window set its flag without an eventfd write.
    pub(crate) fn park_in_poller<R>(&self, wait: impl FnOnce() -> R) -> Option<R> {
        // Races the waker's CAS POLLING -> NOTIFIED, as in `park`.
        self.state
            .compare_exchange(POLLING, PARKED_POLLER, Ordering::Relaxed, Ordering::Relaxed)
            .ok()?;
        // The eventfd is the futex's counterpart: a write before the wait starts makes the
        // wait return at once (the event stays pending until reported), so a notification
        // between the CAS above and the wait is not lost.
        let waited = wait();
        // Fails only if a waker set NOTIFIED: then the flag stays, and the worker, about to
        // look at its queues anyway, sees it.
        let _ = self.state.compare_exchange(
            PARKED_POLLER,
            POLLING,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        Some(waited)
    }

    /// The worker, polling and still without work, goes to sleep until notified, or until
    /// `deadline` (its next timer) if it has one. Returns whether it slept (false when a waker
    /// set its flag first).
    ///
    /// A sleep that times out leaves the word `PARKED`; the worker's `stop_idling` then moves it
    /// to `RUNNING`, and a waker that raced it (`PARKED -> NOTIFIED` and a futex wake that finds
    /// no one) loses nothing: the worker goes back to its loop and looks at its queues anyway.
    pub(crate) fn park(&self, deadline: Option<Instant>) -> bool {
        // Races the waker's CAS POLLING -> NOTIFIED on the same word: exactly one of them wins.
        if self
            .state
            .compare_exchange(POLLING, PARKED, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.sleep_while_parked(deadline);
        true
    }

    #[cfg(not(loom))]
    fn sleep_while_parked(&self, deadline: Option<Instant>) {
        // Acquire pairs with the waker's AcqRel CAS PARKED -> NOTIFIED.
        while self.state.load(Ordering::Acquire) == PARKED {
            // The kernel compares the word with PARKED atomically with going to sleep, so a
            // waker that changes it first makes the call return at once (no lost wakeup).
            match deadline {
                None => futex::wait(&self.state, PARKED),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return;
                    }
                    futex::wait_timeout(&self.state, PARKED, left);
                }
            }
        }
    }

    /// Under loom time stands still while a worker sleeps: a deadline still ahead is never
    /// reached, so the sleep lasts until a notification, and one already passed ends it at once.
    #[cfg(loom)]
    fn sleep_while_parked(&self, deadline: Option<Instant>) {
        if deadline.is_some_and(|deadline| deadline <= Instant::now()) {
            return;
        }
        let (lock, condvar) = &self.sleep;
        let mut guard = crate::sync::lock(lock);
        while self.state.load(Ordering::Acquire) == PARKED {
            guard = crate::sync::wait(condvar, guard);
        }
    }

    /// A waker, having published work for this worker, makes sure the worker will look at it.
    /// The SeqCst fence orders the publish before the read of the idle word; it pairs with the
    /// fence in [`start_polling`](Self::start_polling).
    pub(crate) fn notify(&self) -> Notice {
        fence(Ordering::SeqCst);
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let from = match state {
                RUNNING | NOTIFIED => return Notice::NotNeeded,
                POLLING | PARKED | PARKED_POLLER => state,
                _ => unreachable!("idle state word holds only the five states"),
            };
            match self
                .state
                .compare_exchange(from, NOTIFIED, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) if from == POLLING => return Notice::Polling,
                Ok(_) if from == PARKED_POLLER => return Notice::WakePoller,
                Ok(_) => {
                    self.wake_sleeper();
                    return Notice::Woken;
                }
                Err(actual) => state = actual,
            }
        }
    }

    #[cfg(not(loom))]
    fn wake_sleeper(&self) {
        // The word is NOTIFIED already: the worker, once woken, sees it and stays up.
        futex::wake(&self.state, 1);
    }

    #[cfg(loom)]
    fn wake_sleeper(&self) {
        let (lock, condvar) = &self.sleep;
        // Taking the lock orders this wake after the sleeper's check of the state word.
        drop(crate::sync::lock(lock));
        condvar.notify_one();
    }
}

/// Whether an idle worker should poll, given the idle words of (some of) the other workers:
/// only while more of them are running than are polling already. With none running, the next
/// wakeup comes from outside the runtime, whose timing polling cannot catch; with as many
/// polling as running, one more poller would only race the others for the same wakeups.
/// Relaxed reads of hints: a wrong guess costs a needless futex wake or a short poll, never a
/// lost wakeup (the handshake does not depend on it).
#[cfg_attr(loom, allow(dead_code))] // Under loom a poll lasts the governor's limit alone.
pub(crate) fn worth_spinning<'a>(others: impl IntoIterator<Item = &'a Idle>) -> bool {
    let (mut running, mut polling) = (0usize, 0usize);
    for other in others {
        match other.state.load(Ordering::Relaxed) {
            RUNNING | NOTIFIED => running += 1,
            POLLING => polling += 1,
            _ => {}
        }
    }
    running > polling
}

/// One worker's adaptive poll limit (see the module docs): owned by the worker's thread, and
/// fed with each idle period that ended in a park.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PollGovernor {
    /// The configured poll (`Builder::poll`): the longest the governor allows.
    max: Duration,
    /// How long the next idle period polls before parking.
    limit: Duration,
    /// The thread's involuntary context switches when [`contended`](Self::contended) last
    /// looked.
    #[cfg_attr(loom, allow(dead_code))] // Under loom no worker is preempted.
    preempted: u64,
}

impl PollGovernor {
    /// Below this fraction of the maximum a halving poll stops altogether, and a growing one
    /// starts again from it.
    const FLOOR_DIVISOR: u32 = 16;

    /// How many times the maximum poll an idle period may last and still count as one a
    /// poll would have caught. More than once: a parked worker's idle period includes the
    /// time its futex wake took, and so does its partner's, whose reply it waits for; two
    /// workers waking each other through futexes see periods several polls long, which
    /// polling would have kept short. Counting only periods under one poll, they would stop
    /// polling for good.
    const REACH: u32 = 8;

    /// A governor that starts at the full `max`.
    pub(crate) fn new(max: Duration) -> PollGovernor {
        PollGovernor {
            max,
            limit: max,
            preempted: 0,
        }
    }

    /// How long to poll now.
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    /// Whether the CPU this worker would poll on is wanted by another thread: `preempted`, the
    /// worker thread's count of involuntary context switches, moved since the last look (the
    /// kernel took the CPU from it while it could run, which it does only for a thread that
    /// waits for one). Then the worker skips this poll and the limit halves, as after a long
    /// idle period: a poll burns a CPU that some thread waits for. An idle CPU in the kernel
    /// polls only with nothing else runnable on it; a user-space worker cannot see the run
    /// queue, but it sees that it was pushed off the CPU. Short idle periods grow the limit
    /// back ([`parked`](Self::parked)) once the preemptions stop.
    #[cfg_attr(loom, allow(dead_code))] // Under loom no worker is preempted.
    pub(crate) fn contended(&mut self, preempted: u64) -> bool {
        if preempted == self.preempted {
            return false;
        }
        self.preempted = preempted;
        self.halve();
        true
    }

    fn halve(&mut self) {
        self.limit /= 2;
        if self.limit < self.max / Self::FLOOR_DIVISOR {
            self.limit = Duration::ZERO;
        }
    }

    /// An idle period of `idle_for` (from announcing idleness to getting up) ended after the
    /// worker parked. `timer` says whether its own timer ended it rather than a wakeup: that
    /// end was known in advance and teaches nothing about wakeups.
    pub(crate) fn parked(&mut self, idle_for: Duration, timer: bool) {
        if timer {
            return;
        }
        if idle_for <= self.max * Self::REACH {
            // A longer poll would have caught this wakeup without a futex wake.
            let floor = self.max / Self::FLOOR_DIVISOR;
            self.limit = (self.limit * 2).max(floor).min(self.max);
        } else {
            // No poll within the maximum would have: stop paying for it.
            self.halve();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_poll_halves_on_long_idle_periods_and_grows_on_short_ones() {
        let max = Duration::from_micros(64);
        let mut governor = PollGovernor::new(max);
        assert_eq!(governor.limit(), max);
        governor.parked(Duration::from_millis(1), false);
        assert_eq!(governor.limit(), max / 2);
        for _ in 0..4 {
            governor.parked(Duration::from_millis(1), false);
        }
        assert_eq!(governor.limit(), Duration::ZERO, "below a sixteenth: none");
        // A timer's end teaches nothing.
        governor.parked(Duration::from_micros(10), true);
        assert_eq!(governor.limit(), Duration::ZERO);
        // A wakeup soon after parking: the poll comes back, and grows up to the maximum.
        governor.parked(Duration::from_micros(10), false);
        assert_eq!(governor.limit(), max / 16);
        governor.parked(max * PollGovernor::REACH, false);
        assert_eq!(
            governor.limit(),
            max / 8,
            "a period a few polls long still counts"
        );
        for _ in 0..8 {
            governor.parked(Duration::from_micros(10), false);
        }
        assert_eq!(governor.limit(), max);
    }

    #[test]
    fn a_preempted_worker_skips_its_poll_and_halves_it() {
        let max = Duration::from_micros(64);
        let mut governor = PollGovernor::new(max);
        assert!(!governor.contended(0), "no preemption yet");
        assert!(governor.contended(3));
        assert_eq!(governor.limit(), max / 2);
        assert!(!governor.contended(3), "only a moved count says contended");
        assert_eq!(governor.limit(), max / 2);
        for count in 4..8 {
            assert!(governor.contended(count));
        }
        assert_eq!(governor.limit(), Duration::ZERO);
        // Once the preemptions stop, short idle periods bring the poll back.
        governor.parked(Duration::from_micros(10), false);
        assert_eq!(governor.limit(), max / 16);
    }

    #[test]
    fn polling_pays_only_while_more_workers_run_than_poll() {
        let (running, polling, parked) = (Idle::new(), Idle::new(), Idle::new());
        polling.start_polling();
        parked.start_polling();
        // A deadline already passed: the worker parks and gets up at once, its word `PARKED`.
        assert!(parked.park(Some(Instant::now())));
        assert!(
            !worth_spinning([]),
            "a lone worker waits for outside wakeups"
        );
        assert!(!worth_spinning([&parked]), "nobody runs");
        assert!(worth_spinning([&running, &parked]));
        assert!(
            !worth_spinning([&running, &polling]),
            "one poller per runner"
        );
        let notified = Idle::new();
        notified.start_polling();
        assert_eq!(notified.notify(), Notice::Polling);
        assert!(worth_spinning([&notified, &running, &polling]));
    }
}
