//! A mio source registered with one worker's poller, as the public I/O types hold it.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::task::{ready, Context, Poll};

use mio::event::Source;
use mio::Interest;

use super::readiness::{Direction, IoState};
use crate::sched::runtime;
use crate::sched::time::Driver;
use crate::sync::unmodeled::Arc;

/// The error of creating an I/O resource where no runtime is current.
fn no_runtime_error() -> io::Error {
    io::Error::other(
        "no runtime here: create I/O resources inside a runtime's task or its block_on \
         (idspace::sched::Runtime::block_on)",
    )
}

/// A source registered with a worker's poller: the resource, the runtime, and the
/// resource's readiness state. Dropping it deregisters the source, then closes it.
pub(crate) struct IoSource<S: Source> {
    /// `Some` until the source is dropped or taken back.
    io: Option<S>,
    driver: Arc<dyn Driver>,
    worker: usize,
    state: Arc<IoState>,
}

impl<S: Source + fmt::Debug> fmt::Debug for IoSource<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoSource")
            .field("io", &self.io)
            .field("worker", &self.worker)
            .finish()
    }
}

impl<S: Source> IoSource<S> {
    /// Registers `io` with the poller of the calling worker, or, from a thread that is not a
    /// worker (a `block_on`), of a worker chosen round-robin, which is then notified so that
    /// it sleeps in its poller from now on rather than on its futex.
    ///
    /// # Errors
    /// No runtime is current; the runtime shut down; the kernel refused the registration.
    pub(crate) fn new(io: S, interest: Interest) -> io::Result<Self> {
        Self::register_with(io, interest, |driver, here| {
            here.unwrap_or_else(|| driver.io_home())
        })
    }

    /// Registers `io` with the poller of a worker chosen round-robin, whoever calls: for the
    /// connections a listener accepts. Registered with the accepting worker, as [`new`](Self::new)
    /// would, every connection's events would be delivered by the one worker that runs the
    /// accept loop, and the other workers would get work only by stealing it; spread, each
    /// worker's poller delivers its share, as listeners per core (`SO_REUSEPORT`) spread
    /// connections in thread-per-core servers.
    ///
    /// # Errors
    /// As for [`new`](Self::new).
    pub(crate) fn new_spread(io: S, interest: Interest) -> io::Result<Self> {
        Self::register_with(io, interest, |driver, _| driver.io_home())
    }

    fn register_with(
        mut io: S,
        interest: Interest,
        choose: impl FnOnce(&dyn Driver, Option<usize>) -> usize,
    ) -> io::Result<Self> {
        let driver = runtime::current_driver().ok_or_else(no_runtime_error)?;
        let here = driver.here();
        let worker = choose(&*driver, here);
        let state = driver.reactor(worker).register(&mut io, interest)?;
        if here != Some(worker) {
            // The registration raised the worker's source count (the published work); the
            // notification's fence orders it before the read of the worker's idle word.
            driver.kick(worker);
        }
        Ok(IoSource {
            io: Some(io),
            driver,
            worker,
            state,
        })
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
                .reactor(self.worker)
                .deregister(&mut io, &self.state);
            // `io` is closed here, after it left the poller.
        }
    }
}
