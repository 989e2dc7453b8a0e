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
//!   explicitly without one panics inside hyper. hyper starts its header-read timeout anew for
//!   every request of a keep-alive connection and drops it, pending, once the head is in; a
//!   timer value (each clone: a connection's builder gets its own) keeps the last such sleep
//!   with its entry still armed, and the next one takes it over with its later deadline, so
//!   that a request costs no arm and no cancel on the wheel (tokio's timer, and ours before,
//!   did both). Where we differ from tokio: its entry fires once at the old deadline, and the
//!   connection's next poll of its sleep arms it for the rest.
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
use std::sync::Mutex;

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::net::TcpStream {}
    impl Sealed for crate::net::UnixStream {}
}

/// The streams [`HyperIo`] adapts: [`TcpStream`] and [`UnixStream`].
///
/// Sealed: it names what [`HyperIo`] needs of a stream, for code generic over the two.
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Empty, Full};
/// use hyper::{service::service_fn, Request, Response};
/// use idspace::hyper_rt::{HyperIo, HyperStream};
/// use idspace::net::UnixStream;
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// /// Serves one connection, over TCP or a Unix socket alike, answering "hello".
/// async fn hello<T: HyperStream + Send + 'static>(stream: T) -> hyper::Result<()> {
///     let hello = service_fn(|_request: Request<hyper::body::Incoming>| async {
///         Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from("hello"))))
///     });
///     hyper::server::conn::http1::Builder::new()
///         .serve_connection(HyperIo::new(stream), hello)
///         .await
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let body = runtime.block_on(async {
///     let (client, server) = UnixStream::pair()?;
///     let served = spawn(hello(server))?;
///     let (mut sender, connection) =
///         hyper::client::conn::http1::handshake(HyperIo::new(client)).await?;
///     spawn(connection)?;
///     let request = Request::get("/").body(Empty::<Bytes>::new())?;
///     let body = sender.send_request(request).await?.into_body().collect().await?;
///     // The client hangs up: the server's connection ends without an error.
///     drop(sender);
///     served.await??;
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(body.to_bytes())
/// })?
/// .map_err(|error| error.to_string())?;
/// assert_eq!(body, "hello");
/// # Ok(())
/// # }
/// ```
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
/// See the [module](self) for a server and a client. Here hyper's client talks to a server
/// that speaks HTTP/1.1 by hand on the stream's other end:
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Empty};
/// use hyper::Request;
/// use idspace::hyper_rt::HyperIo;
/// use idspace::net::UnixStream;
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let (status, body) = runtime.block_on(async {
///     let (here, there) = UnixStream::pair()?;
///     spawn(async move {
///         // Read the request's head, then answer it.
///         let (mut head, mut buf) = (Vec::new(), [0; 256]);
///         while !head.ends_with(b"\r\n\r\n") {
///             let n = there.read(&mut buf).await?;
///             assert!(n > 0, "the client hung up mid-request");
///             head.extend_from_slice(&buf[..n]);
///         }
///         assert!(head.starts_with(b"GET /hi HTTP/1.1\r\n"));
///         there.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello").await
///     })?;
///     let io = HyperIo::new(here);
///     assert!(io.get_ref().peer_addr()?.is_unnamed(), "a socket pair's end has no path");
///     let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
///     spawn(connection)?;
///     let request = Request::get("/hi").body(Empty::<Bytes>::new())?;
///     let response = sender.send_request(request).await?;
///     let status = response.status();
///     let body = response.into_body().collect().await?.to_bytes();
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, body))
/// })?
/// .map_err(|error| error.to_string())?;
/// assert_eq!((status.as_u16(), &body[..]), (200, &b"hello"[..]));
/// # Ok(())
/// # }
/// ```
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
pub struct HyperTimer {
    driver: Arc<TimerDriver>,
}

/// A [`HyperTimer`] value's own handle on its runtime's timers, which its sleeps share, and
/// the last armed sleep it dropped.
///
/// hyper makes a sleep per request (its header-read timeout, started when a keep-alive
/// connection waits for the next request's head, 30 s by default) and drops it once the head
/// is in, pending: each request cost an arm and a cancel on the wheel (two locks of the
/// worker's wheel, an insert and an unlink; under callgrind `idspace serve` spent about 770
/// instructions per request in hyper's timer, 490 now). A dropped sleep whose entry is pending
/// is kept here instead, and the next sleep of the same timer takes it over with its later
/// deadline ([`Sleep::extend`]): its entry stays armed for the old deadline, fires there once
/// (a wakeup the connection's next poll of the sleep answers by arming for the rest) and
/// costs nothing per request meanwhile. A kept entry on another worker's wheel than the caller's is
/// not extended but cancelled and armed again here, so that a connection that moved does not
/// reach into the other worker's wheel at every request. A kept entry holds its task's waker
/// until it fires or the timer is dropped (with its connection): a connection task that has no
/// other waker left is therefore cancelled when the old deadline passes, not at once.
///
/// The handle is the timer value's own (each clone makes one: a connection's builder gets its
/// own), so that its sleeps count their references, and take the kept sleep, on a line only
/// that connection writes, where a reference on the runtime itself would be a count every
/// worker writes twice per request. A sleep still holds its runtime alive, through this
/// handle, wherever it is polled.
struct TimerDriver {
    driver: Arc<dyn Driver>,
    /// The last pending sleep dropped, its entry still armed (taken without waiting: a timer
    /// shared by several connections keeps a sleep only when no one else holds the lock).
    kept: Mutex<Option<Sleep>>,
}

impl TimerDriver {
    /// A kept sleep, moved to `deadline`, or a new one.
    fn sleep_until(&self, deadline: Instant) -> Sleep {
        let kept = match self.kept.try_lock() {
            Ok(mut kept) => kept.take(),
            Err(_) => None,
        };
        let Some(mut sleep) = kept else {
            return Sleep::new(deadline, None);
        };
        let here = self.driver.here();
        if here.is_some_and(|here| sleep.is_on(self.driver.timers(), here)) {
            sleep.extend(deadline);
        } else {
            sleep.reset(deadline);
        }
        sleep
    }

    /// Keeps `sleep` if its entry is pending and no sleep is kept yet; else it is dropped (its
    /// entry cancelled) after the lock is let go: dropping a waker may drop a task, whose
    /// futures may drop sleeps of this timer.
    fn keep(&self, sleep: Sleep) {
        if !sleep.is_armed() {
            return;
        }
        let refused = match self.kept.try_lock() {
            Ok(mut kept) if kept.is_none() => {
                *kept = Some(sleep);
                None
            }
            _ => Some(sleep),
        };
        drop(refused);
    }
}

impl Clone for HyperTimer {
    /// A timer on the same runtime, with a handle of its own: its sleeps count their references,
    /// and keep the last one dropped, apart from the original's.
    fn clone(&self) -> Self {
        HyperTimer::on(Arc::clone(&self.driver.driver))
    }
}

impl std::fmt::Debug for HyperTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HyperTimer").finish_non_exhaustive()
    }
}

impl HyperTimer {
    /// A timer on `handle`'s runtime.
    pub fn new<H: Hooks>(handle: &Handle<H>) -> Self {
        HyperTimer::on(handle.driver())
    }

    fn on(driver: Arc<dyn Driver>) -> Self {
        HyperTimer {
            driver: Arc::new(TimerDriver {
                driver,
                kept: Mutex::new(None),
            }),
        }
    }

    /// A timer on the runtime running the calling code.
    ///
    /// # Errors
    /// [`NoRuntime`] outside a runtime.
    pub fn current() -> Result<Self, NoRuntime> {
        crate::sched::current_driver()
            .map(HyperTimer::on)
            .ok_or(NoRuntime)
    }
}

impl hyper::rt::Timer for HyperTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(deadline_after(duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep {
            sleep: self.driver.sleep_until(deadline),
            driver: Arc::clone(&self.driver),
        })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            Some(ours) => ours.get_mut().sleep.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// A sleep on the wheel, as hyper's [`Sleep`](hyper::rt::Sleep), armed on its timer's runtime
/// (held through the timer's [`TimerDriver`], which keeps it when it is dropped pending). Once
/// the runtime shut down it completes (hyper then sees its timeout) rather than panic.
struct HyperSleep {
    sleep: Sleep,
    driver: Arc<TimerDriver>,
}

impl Future for HyperSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let driver: &dyn Driver = &*this.driver.driver;
        this.sleep.poll_checked_on(Some(driver), cx).map(|_| ())
    }
}

impl Drop for HyperSleep {
    fn drop(&mut self) {
        // An unarmed stand-in: dropping it cancels nothing.
        let deadline = self.sleep.deadline();
        let sleep = std::mem::replace(&mut self.sleep, Sleep::new(deadline, None));
        self.driver.keep(sleep);
    }
}

impl hyper::rt::Sleep for HyperSleep {}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::pin::Pin;
    use std::task::Poll;
    use std::time::{Duration, Instant};

    use hyper::rt::Timer;

    use super::HyperTimer;
    use crate::sched::{Policy, Runtime};

    /// Polls `sleep` once: whether it is still pending.
    async fn pending_once(sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>) -> bool {
        poll_fn(|cx| Poll::Ready(sleep.as_mut().poll(cx).is_pending())).await
    }

    fn kept(timer: &HyperTimer) -> bool {
        timer.driver.kept.lock().unwrap().is_some()
    }

    #[test]
    fn a_dropped_pending_sleep_is_kept_and_the_next_one_fires_at_its_own_deadline() {
        let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
        let timer = HyperTimer::new(runtime.handle());
        let (start, done) = runtime
            .spawn(async move {
                let start = Instant::now();
                let mut first = timer.sleep_until(start + Duration::from_millis(20));
                assert!(pending_once(&mut first).await);
                drop(first);
                assert!(kept(&timer), "its entry stays armed");
                let second = timer.sleep_until(start + Duration::from_millis(150));
                assert!(!kept(&timer), "taken over");
                second.await;
                // A sleep never polled arms nothing, and nothing is kept of it.
                drop(timer.sleep(Duration::from_secs(30)));
                assert!(!kept(&timer));
                (start, Instant::now())
            })
            .join()
            .unwrap();
        assert!(
            done >= start + Duration::from_millis(150),
            "{:?}",
            done - start
        );
    }

    #[test]
    fn a_kept_sleep_taken_for_an_earlier_deadline_fires_then() {
        let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
        let timer = HyperTimer::new(runtime.handle());
        let took = runtime
            .spawn(async move {
                let start = Instant::now();
                let mut first = timer.sleep_until(start + Duration::from_secs(30));
                assert!(pending_once(&mut first).await);
                drop(first);
                assert!(kept(&timer));
                timer.sleep_until(start + Duration::from_millis(10)).await;
                start.elapsed()
            })
            .join()
            .unwrap();
        assert!(took < Duration::from_secs(10), "{took:?}");
    }

    #[test]
    fn clones_keep_apart() {
        let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
        let timer = HyperTimer::new(runtime.handle());
        let other = timer.clone();
        runtime
            .spawn(async move {
                let mut sleep = timer.sleep(Duration::from_secs(30));
                assert!(pending_once(&mut sleep).await);
                drop(sleep);
                assert!(kept(&timer) && !kept(&other));
            })
            .join()
            .unwrap();
    }
}
