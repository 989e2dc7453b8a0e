//! The reactor's two races as loom can run them (built only under `--cfg loom`; the models
//! are in `tests/loom_io.rs`).
//!
//! mio is not modeled, so its two parts the races involve are stood in for with loom's
//! primitives: the poller's eventfd and the kernel's socket buffer. Everything else is the
//! crate's own code: the idle word with its `PARKED_POLLER` state, and the resource's readiness
//! word with its waker slots.

use std::task::{Context, Poll, Waker};

use super::readiness::{Direction, IoState, READABLE};
use crate::sched::idle::{Idle, Notice};
use crate::sync::{self, AtomicUsize, Condvar, Mutex, Ordering};

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

    /// The task's read, as `IoSource::poll_io` does it: wait for readiness, try, and on
    /// `WouldBlock` clear what was acted on and look again. Ready with the byte, or `Pending`
    /// with `waker` stored.
    pub fn poll_read(&self, waker: &Waker) -> Poll<()> {
        let mut cx = Context::from_waker(waker);
        loop {
            let event = match self.state.poll_ready(&mut cx, Direction::Read) {
                Poll::Ready(Ok(event)) => event,
                Poll::Ready(Err(_)) => unreachable!("the model never shuts down"),
                Poll::Pending => return Poll::Pending,
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
}
