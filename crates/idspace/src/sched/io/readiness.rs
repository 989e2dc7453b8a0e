//! One I/O resource's readiness word and waker slots (tokio's `ScheduledIo` is the reference
//! shape).
//!
//! # The word
//!
//! | bits   | field                                                          |
//! |--------|----------------------------------------------------------------|
//! | 0..5   | readiness: readable, writable, read closed, write closed, error |
//! | 5      | shut down: the runtime closed the resource; every poll fails    |
//! | 16..32 | tick: how many readiness events the poller delivered (wraps)    |
//!
//! The poller *sets* readiness (or-ing bits in and bumping the tick); a task *clears* the bits
//! of the event it acted on once the system call said `WouldBlock`, and only if the tick is
//! still the one it read: a clear never wipes out an event that arrived after the task's
//! look (the stale-clear race of edge-triggered readiness).
//!
//! # Why no readiness is lost
//!
//! A task that finds no readiness takes the waiter lock, adds its waker to the waiters of its
//! direction (readers or writers), and reads the word again *under the lock*. The poller writes
//! the word *before* it takes the same lock to collect the wakers. The lock orders the two:
//! either the poller's collection comes second and finds the waker, or the task's look under
//! the lock comes second and sees the new bits. Wakers are woken after the lock is released,
//! since waking runs the runtime's wakeup path (which may take run-queue locks).
//!
//! # Several waiters
//!
//! Each direction keeps a list of wakers, not one slot: hackbench's twenty senders write to
//! one socket, and with one slot each new waiter would push out the last, which would then
//! never be woken. An event wakes every waiter of its direction (they retry; those that find
//! `WouldBlock` wait again), and a waker already on the list is not added twice. tokio keeps one
//! slot per direction for `poll_read`/`poll_write` and a list for its `readiness()` futures;
//! here one list serves both. A waiter whose future was dropped stays on the list until the
//! next event, which wakes it once for nothing.

use std::io;
use std::task::{Context, Poll, Waker};

use smallvec::SmallVec;

use crate::sync::{self, AtomicUsize, Mutex, Ordering};

/// The resource can be read (or accepted from).
pub(crate) const READABLE: usize = 1;
/// The resource can be written (or its connection finished).
pub(crate) const WRITABLE: usize = 1 << 1;
/// The peer closed its writing side: reads return 0 from now on.
pub(crate) const READ_CLOSED: usize = 1 << 2;
/// The peer closed its reading side (or the connection broke): writes fail from now on.
pub(crate) const WRITE_CLOSED: usize = 1 << 3;
/// An error is pending on the resource; the next system call reports it.
pub(crate) const ERROR: usize = 1 << 4;
const SHUTDOWN: usize = 1 << 5;
const READY_MASK: usize = READABLE | WRITABLE | READ_CLOSED | WRITE_CLOSED | ERROR;
const TICK_SHIFT: u32 = 16;
const TICK_MASK: usize = 0xffff;

/// Which way a task waits: each has its own waker slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Reads and accepts.
    Read,
    /// Writes and connects.
    Write,
}

impl Direction {
    /// The readiness bits that end a wait this way: its own readiness, its side's closure, an
    /// error (the system call will report the error or the end of the stream).
    fn mask(self) -> usize {
        match self {
            Direction::Read => READABLE | READ_CLOSED | ERROR,
            Direction::Write => WRITABLE | WRITE_CLOSED | ERROR,
        }
    }
}

/// What a task saw when it found its resource ready: the bits, and the tick that a later
/// [`IoState::clear_readiness`] must still find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadyEvent {
    ready: usize,
    tick: usize,
}

/// The error of every operation on a resource whose runtime shut down.
pub(crate) fn shut_down_error() -> io::Error {
    io::Error::other("the runtime that registered this I/O resource shut down")
}

/// The wakers waiting one way: usually one, inline.
type WakerList = SmallVec<[Waker; 1]>;

#[derive(Default)]
struct Waiters {
    readers: WakerList,
    writers: WakerList,
}

impl Waiters {
    fn of(&mut self, direction: Direction) -> &mut WakerList {
        match direction {
            Direction::Read => &mut self.readers,
            Direction::Write => &mut self.writers,
        }
    }
}

/// One registered resource's state, shared by its handle (the socket) and its poller. Padded
/// to its own cache lines (128 bytes: the adjacent-line prefetcher pairs lines on x86_64), so
/// that two sockets' words never share a line.
#[repr(align(128))]
pub(crate) struct IoState {
    word: AtomicUsize,
    waiters: Mutex<Waiters>,
}

impl IoState {
    /// A fresh resource, assumed readable and writable: the first system call finds out, and
    /// its `WouldBlock` clears the bits (with tick 0, so an event delivered meanwhile stays).
    pub(crate) fn new() -> Self {
        IoState {
            word: AtomicUsize::new(READABLE | WRITABLE),
            waiters: Mutex::new(Waiters::default()),
        }
    }

    /// Publishes a new state to the thread that will poll its events: the registering thread
    /// calls it once the state is made, before the source reaches the poller.
    ///
    /// The poller finds the state through the token the kernel hands back from `epoll_wait`,
    /// and the kernel's own ordering (the registration's `epoll_ctl` before the wait that
    /// reports it) is invisible to the language's memory model and to ThreadSanitizer. With
    /// the shared poller the thread that polls is often not the one that registered; this
    /// store and the Acquire load that starts [`set_readiness`](Self::set_readiness) order the
    /// state's construction before the poller's first access in the language itself.
    #[cfg_attr(loom, allow(dead_code))] // Its one caller, the reactor, is not built under loom.
    pub(crate) fn publish(&self) {
        // Release pairs with the Acquire load at the start of `set_readiness`.
        self.word.store(READABLE | WRITABLE, Ordering::Release);
    }

    /// The poller delivers `ready` (some of the readiness bits): ors them in, bumps the tick,
    /// then wakes the waiters they concern. Returns how many wakers it woke.
    pub(crate) fn set_readiness(&self, ready: usize) -> usize {
        let ready = ready & READY_MASK;
        // Acquire pairs with the Release store of `publish` (the state's construction, on the
        // registering thread). The Release of the exchange below pairs with the Acquire loads
        // of `poll_ready`; the lock below is what rules out a lost wakeup (see the module
        // docs). A read-modify-write, so that concurrent clears and sets form one chain.
        let mut current = self.word.load(Ordering::Acquire);
        loop {
            let tick = ((current >> TICK_SHIFT) + 1) & TICK_MASK;
            let new = (current & !(TICK_MASK << TICK_SHIFT)) | ready | (tick << TICK_SHIFT);
            match self
                .word
                .compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        self.wake(ready)
    }

    /// Marks the resource shut down and wakes every waiter: their next poll fails.
    #[cfg(not(loom))]
    pub(crate) fn shut_down(&self) {
        // AcqRel as in `set_readiness`: the waiter lock then orders it against registrations.
        self.word.fetch_or(SHUTDOWN, Ordering::AcqRel);
        self.wake(READY_MASK);
    }

    /// Wakes the waiters whose direction `ready` concerns, outside the lock.
    fn wake(&self, ready: usize) -> usize {
        let (readers, writers) = {
            let mut waiters = sync::lock(&self.waiters);
            let mut take = |direction: Direction| {
                if ready & direction.mask() != 0 {
                    std::mem::take(waiters.of(direction))
                } else {
                    WakerList::new()
                }
            };
            (take(Direction::Read), take(Direction::Write))
        };
        let woken = readers.len() + writers.len();
        readers.into_iter().chain(writers).for_each(Waker::wake);
        woken
    }

    /// Whether the resource is ready for `direction`: the event to clear later if so; the
    /// shutdown error if the runtime closed it; otherwise `Pending`, with the waker stored so
    /// that the next event for `direction` wakes it.
    pub(crate) fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        direction: Direction,
    ) -> Poll<io::Result<ReadyEvent>> {
        // Acquire pairs with the poller's AcqRel write of the word.
        if let Some(ready) = Self::decode(self.word.load(Ordering::Acquire), direction) {
            return Poll::Ready(ready);
        }
        let mut waiters = sync::lock(&self.waiters);
        let list = waiters.of(direction);
        let added = !list.iter().any(|waker| waker.will_wake(cx.waker()));
        if added {
            list.push(cx.waker().clone());
        }
        // The look under the lock: a poller that set the word before we locked is seen here;
        // one that sets it after will find our waker (its collection takes this lock).
        match Self::decode(self.word.load(Ordering::Acquire), direction) {
            Some(ready) => {
                // Ready after all: the waker just added is not needed (the list is ours while
                // the lock is held, so it is still the last one).
                if added {
                    list.pop();
                }
                Poll::Ready(ready)
            }
            None => Poll::Pending,
        }
    }

    fn decode(word: usize, direction: Direction) -> Option<io::Result<ReadyEvent>> {
        if word & SHUTDOWN != 0 {
            return Some(Err(shut_down_error()));
        }
        let ready = word & direction.mask();
        (ready != 0).then_some(Ok(ReadyEvent {
            ready,
            tick: (word >> TICK_SHIFT) & TICK_MASK,
        }))
    }

    /// The task acted on `event` and the system call said `WouldBlock`: clears the event's
    /// readable, writable and error bits, unless the tick moved (a newer event arrived, which
    /// must stay). The closed bits are never cleared: a closed side stays closed. The error bit
    /// is: the system call that reported the error cleared it in the kernel too (a socket's
    /// `SO_ERROR`), and a kept bit would make every later poll ready, a busy loop.
    pub(crate) fn clear_readiness(&self, event: ReadyEvent) {
        let clear = event.ready & (READABLE | WRITABLE | ERROR);
        let mut current = self.word.load(Ordering::Relaxed);
        loop {
            if (current >> TICK_SHIFT) & TICK_MASK != event.tick {
                return;
            }
            // Relaxed: the clear publishes nothing; a set racing it fails this CAS (or comes
            // after and its bits stay).
            match self.word.compare_exchange_weak(
                current,
                current & !clear,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// The readiness bits now (for tests and models).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn readiness(&self) -> usize {
        self.word.load(Ordering::Relaxed) & READY_MASK
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as Count;
    use std::sync::Arc;
    use std::task::Wake;

    #[derive(Default)]
    struct Counter(Count);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn counting_waker() -> (Arc<Counter>, Waker) {
        let counter = Arc::new(Counter::default());
        (Arc::clone(&counter), Waker::from(counter))
    }

    fn woken(counter: &Counter) -> usize {
        counter.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn a_stale_clear_keeps_the_newer_event() {
        let state = IoState::new();
        let (_, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let Poll::Ready(Ok(seen)) = state.poll_ready(&mut cx, Direction::Read) else {
            panic!("a fresh resource is assumed readable");
        };
        // An event arrives between the task's look and its WouldBlock.
        state.set_readiness(READABLE);
        state.clear_readiness(seen);
        assert_eq!(
            state.readiness() & READABLE,
            READABLE,
            "the newer event stays"
        );
        // Acting on the newer event and clearing with its tick does clear.
        let Poll::Ready(Ok(newer)) = state.poll_ready(&mut cx, Direction::Read) else {
            panic!("readable");
        };
        state.clear_readiness(newer);
        assert_eq!(state.readiness() & READABLE, 0);
        assert_eq!(
            state.readiness() & WRITABLE,
            WRITABLE,
            "the other side untouched"
        );
    }

    #[test]
    fn each_direction_wakes_only_its_own_waiter() {
        let state = IoState::new();
        let (readers, reader) = counting_waker();
        let (writers, writer) = counting_waker();
        for direction in [Direction::Read, Direction::Write] {
            let Poll::Ready(Ok(event)) =
                state.poll_ready(&mut Context::from_waker(&reader), direction)
            else {
                panic!("fresh: ready both ways");
            };
            state.clear_readiness(event);
        }
        assert!(state
            .poll_ready(&mut Context::from_waker(&reader), Direction::Read)
            .is_pending());
        assert!(state
            .poll_ready(&mut Context::from_waker(&writer), Direction::Write)
            .is_pending());
        assert_eq!(state.set_readiness(WRITABLE), 1);
        assert_eq!((woken(&readers), woken(&writers)), (0, 1));
        assert_eq!(state.set_readiness(READABLE), 1);
        assert_eq!((woken(&readers), woken(&writers)), (1, 1));
        // Closure and errors end either wait.
        assert!(state
            .poll_ready(&mut Context::from_waker(&writer), Direction::Write)
            .is_ready());
        assert!(matches!(
            state.poll_ready(&mut Context::from_waker(&reader), Direction::Read),
            Poll::Ready(Ok(_))
        ));
    }

    #[test]
    fn every_waiter_of_a_direction_is_woken_and_none_twice() {
        let state = IoState::new();
        let (first, first_waker) = counting_waker();
        let (second, second_waker) = counting_waker();
        let Poll::Ready(Ok(event)) =
            state.poll_ready(&mut Context::from_waker(&first_waker), Direction::Write)
        else {
            panic!("fresh: writable");
        };
        state.clear_readiness(event);
        // Two writers wait on one socket (the second one twice): neither pushes out the other.
        for waker in [&first_waker, &second_waker, &second_waker] {
            assert!(state
                .poll_ready(&mut Context::from_waker(waker), Direction::Write)
                .is_pending());
        }
        let wakeups = state.set_readiness(WRITABLE);
        if cfg!(miri) {
            // The repeat is recognised by `Waker::will_wake`, which compares vtable addresses:
            // Rust does not promise one address per vtable, and Miri gives each use its own,
            // so there the repeat may stay in the list and be woken twice (harmless: a spurious
            // wakeup). Every writer is still woken.
            assert!((2..=3).contains(&wakeups), "{wakeups} wakeups");
            assert_eq!(woken(&first), 1);
            assert!(woken(&second) >= 1);
        } else {
            assert_eq!(wakeups, 2);
            assert_eq!((woken(&first), woken(&second)), (1, 1));
        }
        assert_eq!(state.set_readiness(WRITABLE), 0, "the list was taken");
    }

    #[test]
    fn closure_is_final_and_shutdown_fails_every_poll() {
        let state = IoState::new();
        let (_, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        state.set_readiness(READ_CLOSED);
        let Poll::Ready(Ok(event)) = state.poll_ready(&mut cx, Direction::Read) else {
            panic!("closed reads are ready");
        };
        state.clear_readiness(event);
        assert!(
            state.poll_ready(&mut cx, Direction::Read).is_ready(),
            "still closed"
        );
        let (sleepers, sleeper) = counting_waker();
        let Poll::Ready(Ok(event)) =
            state.poll_ready(&mut Context::from_waker(&sleeper), Direction::Write)
        else {
            panic!("writable");
        };
        state.clear_readiness(event);
        assert!(state
            .poll_ready(&mut Context::from_waker(&sleeper), Direction::Write)
            .is_pending());
        state.shut_down();
        assert_eq!(woken(&sleepers), 1, "a waiter is woken by the shutdown");
        match state.poll_ready(&mut cx, Direction::Write) {
            Poll::Ready(Err(error)) => assert!(error.to_string().contains("shut down")),
            _ => panic!("a shut-down resource fails"),
        }
    }

    #[test]
    fn the_tick_wraps_without_touching_the_bits() {
        let state = IoState::new();
        for _ in 0..=TICK_MASK + 2 {
            state.set_readiness(0);
        }
        assert_eq!(state.readiness(), READABLE | WRITABLE);
    }
}
