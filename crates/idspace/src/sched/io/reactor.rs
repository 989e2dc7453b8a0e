//! A poller: a `mio::Poll` (edge-triggered epoll), its eventfd waker, and the resources
//! registered with it. One per worker, or one for the whole runtime ([`Poller`]).
//!
//! One thread at a time polls: the one that holds the poller ([`Reactor::hold`], a try-lock,
//! as tokio's driver sits behind a `TryLock`). With a poller per worker only its worker ever
//! tries, so the hold always succeeds; a shared poller is held by at most one worker at a
//! time, and the others do without it. Any thread registers and deregisters (epoll's control
//! calls are thread-safe) and wakes the holder through the eventfd. A resource's token is the
//! address of its [`IoState`], which the reactor keeps alive while it is registered and, after
//! it is deregistered, until the next turn begins (under the hold): events for it may sit in the
//! batch being dispatched, but none can come from an `epoll_wait` that starts after
//! `EPOLL_CTL_DEL` returned.
//!
//! [`Poller`]: super::Poller

use std::collections::HashMap;
use std::io;
use std::time::Duration;

use mio::event::Source;
use mio::{Events, Interest, Poll, Registry, Token};

use super::readiness::{self, IoState};
// Not under loom (mio is not modeled): std's primitives through the facade.
use crate::sync::unmodeled::{Arc, Mutex, MutexGuard};
use crate::sync::{self, AtomicUsize, Ordering};

/// The token of the eventfd waker: no `IoState` lives at address 0.
const WAKE: Token = Token(0);

/// Events one `epoll_wait` returns at most (tokio's `nevents` is 1024); more wait for the next
/// turn.
const EVENTS: usize = 1024;

struct Polling {
    poll: Poll,
    events: Events,
}

struct Sources {
    /// Registered resources by token.
    live: HashMap<usize, Arc<IoState>>,
    /// Deregistered resources whose tokens may still be in a batch being dispatched: freed at
    /// the owning worker's next turn.
    released: Vec<Arc<IoState>>,
    /// Set at runtime shutdown: registrations are refused from then on.
    closed: bool,
}

/// A poller (a worker's, or the runtime's shared one).
pub(crate) struct Reactor {
    polling: Mutex<Polling>,
    registry: Registry,
    waker: mio::Waker,
    sources: Mutex<Sources>,
    /// `sources.live.len()`, readable without the lock: whether the worker must sleep in
    /// `epoll_wait` rather than on its futex, and whether a busy worker polls.
    count: AtomicUsize,
}

impl Reactor {
    /// A poller with its waker registered.
    pub(crate) fn new() -> io::Result<Reactor> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = mio::Waker::new(poll.registry(), WAKE)?;
        Ok(Reactor {
            polling: Mutex::new(Polling {
                poll,
                events: Events::with_capacity(EVENTS),
            }),
            registry,
            waker,
            sources: Mutex::new(Sources {
                live: HashMap::new(),
                released: Vec::new(),
                closed: false,
            }),
            count: AtomicUsize::new(0),
        })
    }

    /// Resources registered now.
    pub(crate) fn sources(&self) -> usize {
        // Relaxed: a hint for the poll cadence; the idle handshake orders the read with its
        // fence (the count is published like work, see `Registration::new`).
        self.count.load(Ordering::Relaxed)
    }

    /// Registers `source` for `interest`, edge-triggered; its events go to the returned state.
    pub(crate) fn register(
        &self,
        source: &mut impl Source,
        interest: Interest,
    ) -> io::Result<Arc<IoState>> {
        let state = Arc::new(IoState::new());
        // Before the kernel can report the source to any poller (see `IoState::publish`).
        state.publish();
        // Exposed: `turn` turns the token back into the pointer.
        let token = Arc::as_ptr(&state).expose_provenance();
        // Under the lock, so that a shutdown's close sees every registration or refuses it.
        let mut sources = sync::lock(&self.sources);
        if sources.closed {
            return Err(readiness::shut_down_error());
        }
        self.registry.register(source, Token(token), interest)?;
        sources.live.insert(token, Arc::clone(&state));
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(state)
    }

    /// Deregisters `source`, whose state is `state`. The state stays alive until the owning
    /// worker's next turn (see the module docs).
    pub(crate) fn deregister(&self, source: &mut impl Source, state: &Arc<IoState>) {
        // After a shutdown the poller may be gone with its worker; the descriptor is closed by
        // its owner right after this anyway (closing removes it from every epoll set).
        let _ = self.registry.deregister(source);
        let token = Arc::as_ptr(state).expose_provenance();
        let mut sources = sync::lock(&self.sources);
        if let Some(state) = sources.live.remove(&token) {
            sources.released.push(state);
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Wakes the holder out of `epoll_wait` (an eventfd write). A wakeup that finds no one in
    /// the wait makes the next wait return at once: harmless.
    pub(crate) fn wake(&self) {
        // An eventfd write fails only if the counter would overflow, which mio handles by
        // resetting it; any other error leaves nothing to do but let the wait time out.
        let _ = self.waker.wake();
    }

    /// Takes the poller if no other thread holds it: the holder alone waits in it and
    /// dispatches its events. `None` while another worker holds it (a shared poller).
    pub(crate) fn hold(&self) -> Option<Held<'_>> {
        let polling = sync::try_lock(&self.polling)?;
        Some(Held {
            reactor: self,
            polling,
        })
    }

    /// Polls with a zero timeout if the poller is free ([`hold`](Self::hold)): the events
    /// delivered, 0 if another thread holds it (that one delivers them).
    pub(crate) fn poll_now(&self) -> usize {
        self.hold()
            .map_or(0, |mut held| held.turn(Some(Duration::ZERO)))
    }
    /// Sets the readiness of each event's resource, waking its waiters.
    fn deliver(events: &Events) -> usize {
        let mut delivered = 0;
        for event in events.iter() {
            if event.token() == WAKE {
                continue;
            }
            let ready = ready_bits(event);
            // SAFETY: the token is the address of an `IoState` that `sources` keeps alive:
            // in `live` while registered, then in `released` until the start of the next turn,
            // after this batch is dispatched (see the module docs).
            let state = unsafe { &*std::ptr::with_exposed_provenance::<IoState>(event.token().0) };
            state.set_readiness(ready);
            delivered += 1;
        }
        delivered
    }

    /// Refuses registrations from now on and fails every registered resource's operations
    /// with the shutdown error, waking their waiters. Called at runtime shutdown, once the
    /// workers have stopped.
    pub(crate) fn close(&self) {
        let (live, released) = {
            let mut sources = sync::lock(&self.sources);
            sources.closed = true;
            self.count.store(0, Ordering::Relaxed);
            (
                std::mem::take(&mut sources.live),
                std::mem::take(&mut sources.released),
            )
        };
        drop(released);
        // Woken outside the lock: a woken task's drop may deregister.
        for state in live.into_values() {
            state.shut_down();
        }
    }
}

/// The poller, held: its holder waits in it and dispatches its events. Dropping it lets the
/// next worker take the poller.
pub(crate) struct Held<'a> {
    reactor: &'a Reactor,
    polling: MutexGuard<'a, Polling>,
}

impl Held<'_> {
    /// Polls for events for at most `timeout` (`None`: until one arrives) and delivers them to
    /// their resources' states, whose wakers run the runtime's wakeup path. Returns how many
    /// resource events it delivered (the waker's event not counted).
    pub(crate) fn turn(&mut self, timeout: Option<Duration>) -> usize {
        // Freed before the wait, under the hold: their tokens were in no batch still being
        // dispatched (the previous holder's dispatch ended before it let go).
        let released = std::mem::take(&mut sync::lock(&self.reactor.sources).released);
        drop(released);
        let Polling { poll, events } = &mut *self.polling;
        if let Err(error) = poll.poll(events, timeout) {
            // EINTR (a signal) ends the wait early like a spurious wakeup; anything else
            // would recur, and the worker's loop goes on with its other work.
            if error.kind() != io::ErrorKind::Interrupted {
                debug_assert!(false, "epoll_wait failed: {error}");
            }
            return 0;
        }
        super::while_delivering(|| Reactor::deliver(events))
    }
}

/// The readiness bits of a mio event.
fn ready_bits(event: &mio::event::Event) -> usize {
    let mut ready = 0;
    if event.is_readable() {
        ready |= readiness::READABLE;
    }
    if event.is_writable() {
        ready |= readiness::WRITABLE;
    }
    if event.is_read_closed() {
        ready |= readiness::READ_CLOSED;
    }
    if event.is_write_closed() {
        ready |= readiness::WRITE_CLOSED;
    }
    if event.is_error() {
        ready |= readiness::ERROR;
    }
    ready
}
