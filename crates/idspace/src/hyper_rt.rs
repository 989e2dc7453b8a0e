//! hyper 1.x on the runtime: its I/O, executor and timer traits over ours (feature `hyper`).
//!
//! hyper is runtime-neutral: a connection is a future over something that implements
//! [`hyper::rt::Read`] and [`hyper::rt::Write`], HTTP/2 spawns through a
//! [`hyper::rt::Executor`], and timeouts sleep on a [`hyper::rt::Timer`]. This module gives
//! each over the runtime's own parts, so `http1::Builder::serve_connection` and the client's
//! `handshake` run on our workers, our pollers and our timer wheels, with no tokio runtime
//! (hyper itself links only tokio's `sync` primitives):
//!
//! * [`HyperIo`] wraps a [`TcpStream`] or a [`UnixStream`]; reads go straight into hyper's
//!   uninitialised buffers (no zeroing), writes are vectored. A read that returns fewer bytes
//!   than hyper's buffer holds clears the stream's readiness, as `EAGAIN` would: hyper reads
//!   again after every answer, and without it that read would be a system call failing with
//!   `EAGAIN` on every request of a keep-alive connection (tokio's streams do the same).
//! * [`HyperExecutor`] spawns onto a runtime.
//! * [`HyperTimer`] sleeps on the runtime's timer wheels. Give it to the builders
//!   (`.timer(..)`): without a timer hyper skips its header-read timeout, and a timeout set
//!   explicitly without one panics inside hyper.
//!
//! ```
//! use bytes::Bytes;
//! use http_body_util::{BodyExt, Empty, Full};
//! use hyper::{service::service_fn, Request, Response};
//! use idspace::hyper_rt::{HyperIo, HyperTimer};
//! use idspace::net::{TcpListener, TcpStream};
//! use idspace::sched::{spawn, Policy, Runtime};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::new(2, Policy::Wakelist)?;
//! let body = runtime.block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0")?;
//!     let addr = listener.local_addr()?;
//!     let timer = HyperTimer::current()?;
//!     spawn(async move {
//!         let (stream, _) = listener.accept().await.expect("a connection");
//!         let hello = service_fn(|_request: Request<hyper::body::Incoming>| async {
//!             Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from("hello"))))
//!         });
//!         hyper::server::conn::http1::Builder::new()
//!             .timer(timer)
//!             .serve_connection(HyperIo::new(stream), hello)
//!             .await
//!     })?;
//!     let stream = TcpStream::connect(addr).await?;
//!     let (mut sender, connection) =
//!         hyper::client::conn::http1::handshake(HyperIo::new(stream)).await?;
//!     spawn(connection)?;
//!     let request = Request::get("/").body(Empty::<Bytes>::new())?;
//!     let response = sender.send_request(request).await?;
//!     let body = response.into_body().collect().await?.to_bytes();
//!     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(body)
//! })?
//! .map_err(|error| error.to_string())?;
//! assert_eq!(body, "hello");
//! # Ok(())
//! # }
//! ```
//!
//! [`TcpStream`]: crate::net::TcpStream
//! [`UnixStream`]: crate::net::UnixStream

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::net::{TcpStream, UnixStream};
use crate::sched::time::{deadline_after, Driver, Sleep};
use crate::sched::{Handle, Hooks, NoHooks, NoRuntime};
use crate::sync::unmodeled::Arc;

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::net::TcpStream {}
    impl Sealed for crate::net::UnixStream {}
}

/// The streams [`HyperIo`] adapts: [`TcpStream`] and [`UnixStream`].
pub trait HyperStream: sealed::Sealed + Unpin {
    #[doc(hidden)]
    fn poll_read_into(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>>;
    #[doc(hidden)]
    fn poll_write_from(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;
    #[doc(hidden)]
    fn poll_write_vectored_from(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>>;
    #[doc(hidden)]
    fn shutdown_write(&self) -> io::Result<()>;
}

macro_rules! hyper_stream {
    ($ty:ty) => {
        impl HyperStream for $ty {
            fn poll_read_into(
                &self,
                cx: &mut Context<'_>,
                buf: &mut [std::mem::MaybeUninit<u8>],
            ) -> Poll<io::Result<usize>> {
                self.poll_read_uninit(cx, buf)
            }

            fn poll_write_from(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                self.poll_write(cx, buf)
            }

            fn poll_write_vectored_from(
                &self,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                futures_io::AsyncWrite::poll_write_vectored(Pin::new(&mut &*self), cx, bufs)
            }

            fn shutdown_write(&self) -> io::Result<()> {
                self.shutdown(std::net::Shutdown::Write)
            }
        }
    };
}

hyper_stream!(TcpStream);
hyper_stream!(UnixStream);

/// One of our streams as hyper's I/O ([`hyper::rt::Read`] and [`hyper::rt::Write`]).
///
/// See the [module](self) for a server and a client.
#[derive(Debug)]
pub struct HyperIo<T>(T);

impl<T: HyperStream> HyperIo<T> {
    /// Wraps `stream`.
    pub fn new(stream: T) -> Self {
        HyperIo(stream)
    }

    /// The stream.
    pub fn get_ref(&self) -> &T {
        &self.0
    }

    /// Unwraps the stream.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T: HyperStream> hyper::rt::Read for HyperIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: `poll_read_into` only writes into the slice (never de-initialises bytes),
        // and `advance` counts only the `n` bytes the read wrote.
        let n = match self.0.poll_read_into(cx, unsafe { buf.as_mut() }) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            Poll::Pending => return Poll::Pending,
        };
        // SAFETY: the read initialised the first `n` bytes of the unfilled part.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T: HyperStream> hyper::rt::Write for HyperIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_write_from(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Writes go straight to the kernel.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.0.shutdown_write())
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_write_vectored_from(cx, bufs)
    }
}

/// Spawns hyper's background futures (HTTP/2 streams, `auto` connections) as tasks of a
/// runtime.
///
/// ```
/// use hyper::rt::Executor;
/// use idspace::hyper_rt::HyperExecutor;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let (done, finished) = std::sync::mpsc::channel();
/// HyperExecutor::new(runtime.handle()).execute(async move { done.send(7).unwrap() });
/// assert_eq!(finished.recv()?, 7);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct HyperExecutor<H: Hooks = NoHooks>(Handle<H>);

impl<H: Hooks> Clone for HyperExecutor<H> {
    fn clone(&self) -> Self {
        HyperExecutor(self.0.clone())
    }
}

impl<H: Hooks> HyperExecutor<H> {
    /// An executor spawning onto `handle`'s runtime.
    pub fn new(handle: &Handle<H>) -> Self {
        HyperExecutor(handle.clone())
    }
}

impl HyperExecutor {
    /// An executor spawning onto the runtime (without hooks) running the calling code; with
    /// hooks, use [`new`](Self::new) with [`Handle::current`].
    ///
    /// # Errors
    /// [`NoRuntime`] outside such a runtime.
    pub fn current() -> Result<Self, NoRuntime> {
        Handle::current().map(HyperExecutor)
    }
}

impl<H, F> hyper::rt::Executor<F> for HyperExecutor<H>
where
    H: Hooks,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        // Detached: hyper does not join its background futures.
        drop(self.0.spawn(future));
    }
}

/// hyper's timer on a runtime's timer wheels.
///
/// ```
/// use std::time::Duration;
/// use hyper::rt::Timer;
/// use idspace::hyper_rt::HyperTimer;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let timer = HyperTimer::new(runtime.handle());
/// // Pollable anywhere: the timer holds its runtime.
/// runtime.block_on(timer.sleep(Duration::from_millis(2)))?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct HyperTimer {
    driver: Arc<dyn Driver>,
}

impl std::fmt::Debug for HyperTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HyperTimer").finish_non_exhaustive()
    }
}

impl HyperTimer {
    /// A timer on `handle`'s runtime.
    pub fn new<H: Hooks>(handle: &Handle<H>) -> Self {
        HyperTimer {
            driver: handle.driver(),
        }
    }

    /// A timer on the runtime running the calling code.
    ///
    /// # Errors
    /// [`NoRuntime`] outside a runtime.
    pub fn current() -> Result<Self, NoRuntime> {
        crate::sched::current_driver()
            .map(|driver| HyperTimer { driver })
            .ok_or(NoRuntime)
    }
}

impl hyper::rt::Timer for HyperTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(deadline_after(duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(Sleep::new(
            deadline,
            Some(Arc::clone(&self.driver)),
        )))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            Some(ours) => ours.get_mut().0.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// A sleep on the wheel, as hyper's [`Sleep`](hyper::rt::Sleep). Once the runtime shut down it
/// completes (hyper then sees its timeout) rather than panic.
struct HyperSleep(Sleep);

impl Future for HyperSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().0.poll_checked(cx).map(|_| ())
    }
}

impl hyper::rt::Sleep for HyperSleep {}
