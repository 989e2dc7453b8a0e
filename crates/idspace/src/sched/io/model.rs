//! The reactor's races as loom can run them (built only under `--cfg loom`; the models are in
//! `tests/loom_io.rs`).
//!
//! mio is not modeled, so its parts the races involve are stood in for with loom's primitives:
//! the poller's eventfd, the kernel's socket buffer, and (for the shared poller) the try-lock
//! that decides who holds it. Everything else is the crate's own code: the idle word with its
//! `PARKED_POLLER` state, and the resource's readiness word with its waker slots.

use std::task::{Context, Poll, Waker};

use super::readiness::{Direction, IoState, ReadyEvent, READABLE};
use crate::sched::idle::{Idle, Notice};
use crate::sync::{self, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};

/// What the model's poller has to report: the eventfd's wakeup, a resource's event.
#[derive(Default)]
struct Pending {
    eventfd: bool,
    event: bool,
}

/// A worker's idle word and its poller, with `epoll_wait` stood in for by flags and a
/// condition variable: a write before the wait makes the wait return at once (the event stays
/// pending until reported), as with the real eventfd. The worker sleeps in the poller only
/// while resources are registered with it, else on its futex, as `worker::park` decides.
pub struct IdlePoller {
    idle: Idle,
    sources: AtomicUsize,
    pending: Mutex<Pending>,
    signalled: Condvar,
    events_seen: AtomicUsize,
}

impl Default for IdlePoller {
    fn default() -> Self {
        IdlePoller {
            idle: Idle::new(),
            sources: AtomicUsize::new(0),
            pending: Mutex::new(Pending::default()),
            signalled: Condvar::new(),
            events_seen: AtomicUsize::new(0),
        }
    }
}

impl IdlePoller {
    /// One pass of the worker's idle loop: announce idle, recheck with `has_work`, then sleep
    /// in the poller (resources registered) or on the futex (none), then back to running.
    pub fn idle_once(&self, has_work: impl Fn() -> bool) {
        self.idle.start_polling();
        if !has_work() {
            // Relaxed, after the fence of `start_polling`: the registration's count is
            // published like work (see `register`).
            if self.sources.load(Ordering::Relaxed) > 0 {
                self.idle.park_in_poller(|| self.epoll_wait());
            } else {
                self.idle.park(None);
            }
        }
        self.idle.stop_idling();
    }

    fn epoll_wait(&self) {
        let mut pending = sync::lock(&self.pending);
        while !pending.eventfd && !pending.event {
            pending = sync::wait(&self.signalled, pending);
        }
        // Reported: an edge-triggered event is delivered once.
        if std::mem::take(&mut pending.event) {
            self.events_seen.fetch_add(1, Ordering::Relaxed);
        }
        pending.eventfd = false;
    }

    /// A waker that published work notifies the worker: through the eventfd if it sleeps in
    /// its poller, through the futex if it sleeps there.
    pub fn notify(&self) {
        if self.idle.notify() == Notice::WakePoller {
            sync::lock(&self.pending).eventfd = true;
            self.signalled.notify_one();
        }
    }

    /// Another thread registers a resource with this worker's poller: the count is the
    /// published work, the notification gets a worker asleep on its futex to sleep in its
    /// poller instead (`IoSource::new`).
    pub fn register(&self) {
        self.sources.fetch_add(1, Ordering::Relaxed);
        self.notify();
    }

    /// The kernel reports an event on a registered resource: only the poller sees it.
    pub fn event(&self) {
        sync::lock(&self.pending).event = true;
        self.signalled.notify_one();
    }

    /// How many resource events the worker's waits reported.
    pub fn events_seen(&self) -> usize {
        self.events_seen.load(Ordering::Relaxed)
    }
}

/// What a shared poller's epoll has to report, and whom a model's worker would run.
#[derive(Default)]
struct SharedPending {
    eventfd: bool,
    event: bool,
}

/// A runtime of two workers sharing one poller (`Poller::Shared`), as `worker::park` runs it:
/// an idle worker with resources registered tries to hold the poller; the holder sleeps in
/// `epoll_wait` (`PARKED_POLLER`), the other on its futex (`PARKED`). The real try-lock is
/// the poller's mutex's `try_lock`; here it is a flag taken with a compare-and-swap (Acquire)
/// and cleared with a Release store, the same semantics: loom 0.7 counts a thread about to
/// `try_lock` a held mutex as blocked until its release, which would turn the holder's wait
/// into a deadlock that no real `try_lock` has. A worker's work is a task that
/// writes to a socket, so that its peer's event arrives once the task ran; a resource's event,
/// once a holder's wait reports it, wakes a task that stops the runtime (both workers
/// notified). Each model ends only if the event was polled and every notification got through:
/// a lost one leaves a thread blocked, which loom reports.
pub struct SharedPoller {
    idle: [Idle; 2],
    /// The poller's hold: held by at most one worker, from before its CAS to `PARKED_POLLER`
    /// until after its CAS back.
    poller: AtomicBool,
    sources: AtomicUsize,
    pending: Mutex<SharedPending>,
    signalled: Condvar,
    work: [AtomicUsize; 2],
    stopped: AtomicUsize,
}

impl Default for SharedPoller {
    fn default() -> Self {
        SharedPoller {
            idle: [Idle::new(), Idle::new()],
            poller: AtomicBool::new(false),
            sources: AtomicUsize::new(0),
            pending: Mutex::new(SharedPending::default()),
            signalled: Condvar::new(),
            work: [AtomicUsize::new(0), AtomicUsize::new(0)],
            stopped: AtomicUsize::new(0),
        }
    }
}

impl SharedPoller {
    /// Worker `me`'s loop: run its work, else idle, until the runtime stops.
    pub fn run_worker(&self, me: usize) {
        loop {
            // Relaxed: published like work, read after the fenced announcement or taken here.
            if self.work[me].swap(0, Ordering::Relaxed) > 0 {
                // The task writes to a socket: its peer's readable edge.
                self.event();
                continue;
            }
            if self.stopped.load(Ordering::Relaxed) > 0 {
                return;
            }
            self.idle_once(me);
        }
    }

    fn has_work(&self, me: usize) -> bool {
        self.work[me].load(Ordering::Relaxed) > 0 || self.stopped.load(Ordering::Relaxed) > 0
    }

    /// One idle period of worker `me`, as `worker::idle` and `worker::park` run it.
    fn idle_once(&self, me: usize) {
        let idle = &self.idle[me];
        idle.start_polling();
        if !self.has_work(me) {
            // Relaxed, after the fence of `start_polling`, as in `worker::park`.
            if self.sources.load(Ordering::Relaxed) > 0 && self.try_hold() {
                idle.park_in_poller(|| self.epoll_wait());
                // Let go after the CAS back, as `worker::park` drops its hold. Release pairs
                // with the next holder's Acquire, as a mutex's unlock with its lock.
                self.poller.store(false, Ordering::Release);
            } else {
                idle.park(None);
            }
        }
        idle.stop_idling();
    }

    /// Takes the poller if no one holds it (a mutex's `try_lock`: Acquire on success).
    fn try_hold(&self) -> bool {
        self.poller
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The holder's wait: returns on the eventfd or on an event; an event wakes its task,
    /// which stops the runtime.
    fn epoll_wait(&self) {
        let mut pending = sync::lock(&self.pending);
        while !pending.eventfd && !pending.event {
            pending = sync::wait(&self.signalled, pending);
        }
        pending.eventfd = false;
        let event = std::mem::take(&mut pending.event);
        drop(pending);
        if event {
            self.stop();
        }
    }

    /// A waker publishes a task for worker `to` (one that writes to a socket: see the type's
    /// docs) and notifies it: an eventfd write if it holds the poller and sleeps in it, a futex
    /// wake if it sleeps on its futex.
    pub fn push_work(&self, to: usize) {
        self.work[to].fetch_add(1, Ordering::Relaxed);
        self.notify(to);
    }

    fn notify(&self, to: usize) {
        if self.idle[to].notify() == Notice::WakePoller {
            sync::lock(&self.pending).eventfd = true;
            self.signalled.notify_all();
        }
    }

    /// A thread that is not a worker registers a resource with the shared poller: the count
    /// is the published work, and worker `home` is notified (`IoSource::new`), so that it
    /// takes the poller if no one holds it.
    pub fn register(&self, home: usize) {
        self.sources.fetch_add(1, Ordering::Relaxed);
        self.notify(home);
    }

    /// The kernel reports an event on a registered resource: only the poller's holder sees it.
    pub fn event(&self) {
        sync::lock(&self.pending).event = true;
        self.signalled.notify_all();
    }

    /// The event's task shuts the runtime down: the flag is published like work, then both
    /// workers are notified.
    fn stop(&self) {
        self.stopped.fetch_add(1, Ordering::Relaxed);
        self.notify(0);
        self.notify(1);
    }
}

/// A socket's readiness word and a stand-in for the kernel's receive buffer: the task's side
/// reads bytes (`WouldBlock` when there are none), the poller's side makes a byte arrive and
/// delivers the edge.
pub struct Readiness {
    state: IoState,
    buffered: AtomicUsize,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness {
            state: IoState::new(),
            buffered: AtomicUsize::new(0),
        }
    }
}

impl Readiness {
    /// The kernel queues a byte, then the poller delivers its readable edge.
    pub fn deliver(&self) {
        // Release/Acquire stand for the kernel's own ordering of its buffer.
        self.buffered.fetch_add(1, Ordering::Release);
        self.state.set_readiness(READABLE);
    }

    /// The socket's read readiness, or `Pending` with the context's waker stored (the model
    /// never shuts down, so readiness never fails).
    fn read_ready(&self, cx: &mut Context<'_>) -> Poll<ReadyEvent> {
        match self.state.poll_ready(cx, Direction::Read) {
            Poll::Ready(Ok(event)) => Poll::Ready(event),
            Poll::Ready(Err(_)) => unreachable!("the model never shuts down"),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The task's read, as `IoSource::poll_io` does it: wait for readiness, try, and on
    /// `WouldBlock` clear what was acted on and look again. Ready with the byte, or `Pending`
    /// with `waker` stored.
    pub fn poll_read(&self, waker: &Waker) -> Poll<()> {
        let mut cx = Context::from_waker(waker);
        loop {
            let Poll::Ready(event) = self.read_ready(&mut cx) else {
                return Poll::Pending;
            };
            let taken = self
                .buffered
                .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| n.checked_sub(1));
            match taken {
                Ok(_) => return Poll::Ready(()),
                Err(_) => self.state.clear_readiness(event),
            }
        }
    }

    /// The task's read of a stream into a buffer larger than what is queued, as
    /// `IoSource::poll_read_stream` does it: every byte queued is taken at once (a short
    /// read), which clears the readiness acted on as `WouldBlock` does. Ready with the number
    /// of bytes taken, or `Pending` with `waker` stored.
    pub fn poll_read_short(&self, waker: &Waker) -> Poll<usize> {
        let mut cx = Context::from_waker(waker);
        loop {
            let Poll::Ready(event) = self.read_ready(&mut cx) else {
                return Poll::Pending;
            };
            // Acquire pairs with `deliver`'s Release, as above.
            let taken = self.buffered.swap(0, Ordering::Acquire);
            self.state.clear_readiness(event);
            if taken > 0 {
                return Poll::Ready(taken);
            }
        }
    }
}
