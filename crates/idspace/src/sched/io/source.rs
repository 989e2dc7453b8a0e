//! A mio source registered with one worker's poller, as the public I/O types hold it.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::os::fd::AsRawFd;
use std::task::{ready, Context, Poll};

use mio::event::Source;
use mio::unix::SourceFd;
use mio::Interest;

use super::readiness::{Direction, IoState};
use crate::sched::runtime;
use crate::sched::time::Driver;
use crate::sync::unmodeled::{Arc, AtomicBool};
use crate::sync::{AtomicUsize, Ordering};

/// The error of creating an I/O resource where no runtime is current.
fn no_runtime_error() -> io::Error {
    io::Error::other(
        "no runtime here: create I/O resources inside a runtime's task or its block_on \
         (idspace::sched::Runtime::block_on)",
    )
}

/// A source registered with a worker's poller: the resource, the runtime, and the
/// resource's readiness state. Dropping it deregisters the source, then closes it.
///
/// The first worker of the runtime that polls the source takes it into its own poller if
/// another worker's has it (see [`settle`](Self::settle)): a resource is created where it is
/// accepted or connected, but used by the task that serves it, which often runs elsewhere.
pub(crate) struct IoSource<S: Source> {
    /// `Some` until the source is dropped or taken back.
    io: Option<S>,
    driver: Arc<dyn Driver>,
    /// The worker whose poller has the source. Written once at most, by `settle`, which
    /// only one thread runs; Relaxed: the poller a source is in is decided by the kernel's
    /// `epoll_ctl` calls, and this records it for `Drop`, which runs after every poll.
    worker: AtomicUsize,
    /// Whether the source may still move to the poller of the first worker that polls it.
    unsettled: AtomicBool,
    interest: Interest,
    state: Arc<IoState>,
}

impl<S: Source + fmt::Debug> fmt::Debug for IoSource<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoSource")
            .field("io", &self.io)
            .field("worker", &self.worker.load(Ordering::Relaxed))
            .finish()
    }
}

impl<S: Source + AsRawFd> IoSource<S> {
    /// Registers `io` with the poller of the calling worker, or, from a thread that is not a
    /// worker (a `block_on`), of a worker chosen round-robin, which is then notified so that
    /// it sleeps in its poller from now on rather than on its futex.
    ///
    /// # Errors
    /// No runtime is current; the runtime shut down; the kernel refused the registration.
    pub(crate) fn new(mut io: S, interest: Interest) -> io::Result<Self> {
        let driver = runtime::current_driver().ok_or_else(no_runtime_error)?;
        let here = driver.here();
        let worker = here.unwrap_or_else(|| driver.io_home());
        let state = driver.reactor(worker).register(&mut io, interest)?;
        if here != Some(worker) {
            // The registration raised the worker's source count (the published work); the
            // notification's fence orders it before the read of the worker's idle word.
            driver.kick(worker);
        }
        Ok(IoSource {
            io: Some(io),
            driver,
            worker: AtomicUsize::new(worker),
            unsettled: AtomicBool::new(true),
            interest,
            state,
        })
    }

    /// Moves the source into the calling worker's poller if another worker's has it, once:
    /// the first poll from a worker of the runtime decides. A resource accepted by one task
    /// and served by another would otherwise have every event delivered by the acceptor's
    /// worker and every wakeup of its server cross workers (the kernel steers a flow's
    /// packets to the CPU its reader runs on for the same reason: receive flow steering).
    /// Later polls from other workers (a task that migrated, the other half of a split
    /// stream) leave it where it is: a move costs two `epoll_ctl` calls.
    #[inline]
    fn settle(&self) {
        // Relaxed: a hint that the move was made or given up; `settle_slow` decides under a
        // swap, so one thread at most moves the source.
        if self.unsettled.load(Ordering::Relaxed) {
            self.settle_slow();
        }
    }

    #[cold]
    fn settle_slow(&self) {
        let Some(here) = self.driver.here() else {
            return; // a `block_on` thread: a worker's poll decides later
        };
        if !self.unsettled.swap(false, Ordering::Relaxed) {
            return;
        }
        let from = self.worker.load(Ordering::Relaxed);
        let (old, new) = (self.driver.reactor(from), self.driver.reactor(here));
        if from == here || std::ptr::eq(old, new) {
            return; // already here, or one poller shared by all
        }
        let fd = self.get_ref().as_raw_fd();
        // A failed move leaves the source where it was (or, if even that failed, its state
        // shut down, which the caller's poll reports); the poll goes on either way.
        if old
            .hand_over(&mut SourceFd(&fd), self.interest, &self.state, new)
            .is_ok()
        {
            self.worker.store(here, Ordering::Relaxed);
        }
    }

    /// The resource.
    pub(crate) fn get_ref(&self) -> &S {
        self.io.as_ref().expect("present until dropped")
    }

    /// Runs `op` until it does not say `WouldBlock`, waiting for readiness in `direction`
    /// between tries: a `WouldBlock` clears the readiness it acted on (unless a newer event
    /// came), and the next look registers the waker.
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        direction: Direction,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.settle();
        loop {
            let event = ready!(self.state.poll_ready(cx, direction))?;
            match op(self.get_ref()) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.state.clear_readiness(event);
                }
                result => return Poll::Ready(result),
            }
        }
    }

    /// [`poll_io`](Self::poll_io) for a read of a stream socket into `len` bytes: a read that
    /// returns some bytes but fewer than `len` emptied the socket's receive queue, so it also
    /// clears the readiness it acted on (unless a newer event came), as a `WouldBlock` would.
    /// The next read then waits for the poller instead of failing with `EAGAIN` first (one
    /// system call less per request of a request-response protocol). Bytes that arrive after
    /// the read are a new edge of the edge-triggered poller, which sets readiness again; the
    /// closed bits are never cleared, so an end of stream behind the bytes is still seen.
    #[cfg(feature = "hyper")]
    pub(crate) fn poll_read_stream(
        &self,
        cx: &mut Context<'_>,
        len: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.settle();
        loop {
            let event = ready!(self.state.poll_ready(cx, Direction::Read))?;
            match op(self.get_ref()) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.state.clear_readiness(event);
                }
                Ok(n) if n > 0 && n < len => {
                    self.state.clear_readiness(event);
                    return Poll::Ready(Ok(n));
                }
                result => return Poll::Ready(result),
            }
        }
    }

    /// [`poll_io`](Self::poll_io) as a future.
    pub(crate) async fn io<R>(
        &self,
        direction: Direction,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        poll_fn(|cx| self.poll_io(cx, direction, &mut op)).await
    }

    /// A sleep on the resource's runtime's timers, pollable anywhere (for backoffs).
    pub(crate) fn sleep(&self, duration: std::time::Duration) -> crate::sched::time::Sleep {
        crate::sched::time::Sleep::new(
            crate::sched::time::deadline_after(duration),
            Some(Arc::clone(&self.driver)),
        )
    }
}

impl<S: Source> Drop for IoSource<S> {
    fn drop(&mut self) {
        if let Some(mut io) = self.io.take() {
            self.driver
                .reactor(*self.worker.get_mut())
                .deregister(&mut io, &self.state);
            // `io` is closed here, after it left the poller.
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;
    use crate::sched::{Builder, Poller};

    /// A pipe whose read end is registered from the `block_on` thread (with a worker chosen
    /// round-robin), with bytes already written, then read by a task: where the read end's
    /// registration ends up, and the worker the task ran on.
    fn first_read_from_a_task(poller: Poller) -> (usize, usize, usize) {
        let runtime = Builder::new().workers(2).poller(poller).build().unwrap();
        let (mut sender, receiver) = mio::unix::pipe::new().unwrap();
        let (source, registered) = runtime
            .block_on(async move {
                // The round-robin's first worker is also where tasks spawned from outside
                // start: a first registration there sends the pipe's to the other worker.
                let (_, first) = mio::unix::pipe::new().unwrap();
                drop(IoSource::new(first, Interest::READABLE).unwrap());
                let source = IoSource::new(receiver, Interest::READABLE).unwrap();
                let registered = source.worker.load(Ordering::Relaxed);
                (source, registered)
            })
            .unwrap();
        // The edge comes before any task polls: the poller that had the pipe saw it (or will).
        sender.write_all(b"moved").unwrap();
        let task = runtime.spawn(async move {
            let mut buf = [0; 8];
            let n = source
                .io(Direction::Read, |mut r| r.read(&mut buf))
                .await
                .unwrap();
            assert_eq!(&buf[..n], b"moved");
            let ran_on = runtime::current_driver().unwrap().here().unwrap();
            (source.worker.load(Ordering::Relaxed), ran_on)
        });
        let (now, ran_on) = task.join().unwrap();
        (registered, now, ran_on)
    }

    #[test]
    fn a_source_moves_to_the_poller_of_the_first_worker_that_polls_it() {
        // Both workers are tried: the registration goes round-robin, the task where it runs.
        let mut moved = false;
        for _ in 0..8 {
            let (registered, now, ran_on) = first_read_from_a_task(Poller::PerWorker);
            assert_eq!(
                now, ran_on,
                "the source stays with the worker that polled it first"
            );
            moved |= registered != ran_on;
        }
        assert!(
            moved,
            "in 8 tries no task ran on the other worker: nothing was moved"
        );
    }

    #[test]
    fn with_one_shared_poller_nothing_moves() {
        for _ in 0..4 {
            let (registered, now, _) = first_read_from_a_task(Poller::Shared);
            assert_eq!(registered, now);
        }
    }
}
