//! The accept loop and the connections, written once over any runtime: a runtime supplies a
//! listener whose `accept` yields hyper I/O, a way to spawn a task, and hyper's timer.
//!
//! Graceful stop: when the stop signal is raised the loop stops accepting and drops the
//! listening socket; every connection is asked to finish (hyper answers the request in flight
//! and closes an idle keep-alive connection at once); the loop then waits for the last
//! connection, at most [`GRACE`].

use std::convert::Infallible;
use std::future::{poll_fn, ready, Future, Ready};
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::rt::{Read, Timer, Write};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Response;
use tokio::sync::{watch, Notify};

use crate::api::Service;
use crate::stop::{StopSignal, Stopped};

/// How long a graceful stop waits for connections to finish.
pub(crate) const GRACE: Duration = Duration::from_secs(10);

/// How long a connection may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest buffer a connection reads a request's head into (a header flood beyond it is
/// refused with 431).
const MAX_HEAD: usize = 64 * 1024;

/// A listening socket of some runtime.
pub(crate) trait Listener {
    /// A connection, as hyper reads and writes it.
    type Io: Read + Write + Unpin + Send + 'static;
    /// The next connection.
    fn accept(&self) -> impl Future<Output = io::Result<Self::Io>>;
}

/// A task of the connection loop, boxed for any runtime's spawn.
pub(crate) type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Connections open, and a wakeup when the last one closes.
#[derive(Default)]
struct Open {
    count: AtomicUsize,
    closed: Notify,
}

/// One open connection, counted in [`Open`] from its accept until it is dropped: with its
/// connection's future, whether that ran to its end or was never spawned.
struct Opened(Arc<Open>);

impl Opened {
    fn count(open: &Arc<Open>) -> Opened {
        open.count.fetch_add(1, Ordering::Relaxed);
        Opened(open.clone())
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        // Release pairs with the Acquire loads of the graceful stop.
        if self.0.count.fetch_sub(1, Ordering::Release) == 1 {
            self.0.closed.notify_waiters();
        }
    }
}

/// A request's answer, as hyper's handler future: ready, or awaiting the store (boxed: the
/// rare case pays for its size).
enum Answering {
    Now(Ready<Response<Full<Bytes>>>),
    Later(Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send>>),
}

impl Future for Answering {
    type Output = Result<Response<Full<Bytes>>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Answering::Now(ready) => Pin::new(ready).poll(cx).map(Ok),
            Answering::Later(future) => future.as_mut().poll(cx).map(Ok),
        }
    }
}

/// The first of two futures to finish.
enum First<A, B> {
    Left(A),
    Right(B),
}

async fn first<A: Future, B: Future>(a: A, b: B) -> First<A::Output, B::Output> {
    let (mut a, mut b) = (pin!(a), pin!(b));
    poll_fn(|cx| {
        if let Poll::Ready(value) = a.as_mut().poll(cx) {
            return Poll::Ready(First::Left(value));
        }
        b.as_mut().poll(cx).map(First::Right)
    })
    .await
}

/// Serves `listener` until `stop` turns true, then stops gracefully.
pub(crate) async fn serve<L, T>(
    listener: L,
    spawn: impl Fn(Task),
    timer: T,
    service: Arc<Service>,
    mut stop: watch::Receiver<bool>,
) where
    L: Listener,
    T: Timer + Clone + Send + Sync + 'static,
{
    let open = Arc::new(Open::default());
    let stopping = Arc::new(StopSignal::default());
    let mut last_complaint: Option<Instant> = None;
    loop {
        let accepted = match first(listener.accept(), stop.wait_for(|stop| *stop)).await {
            First::Left(accepted) => accepted,
            First::Right(_) => break,
        };
        let io = match accepted {
            Ok(io) => io,
            Err(error) => {
                // Out of descriptors (EMFILE) or a connection reset before accept: complain
                // at most once a second and go on after a pause.
                if last_complaint.is_none_or(|at| at.elapsed() > Duration::from_secs(1)) {
                    crate::log(&format!("accept failed: {error}"));
                    last_complaint = Some(Instant::now());
                }
                timer.sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let opened = Opened::count(&open);
        spawn(Box::pin(connection(
            io,
            timer.clone(),
            service.clone(),
            stopping.stopped(),
            opened,
        )));
    }
    drop(listener);
    stopping.stop();
    let deadline = Instant::now() + GRACE;
    // Acquire pairs with the Release decrement in `connection`.
    while open.count.load(Ordering::Acquire) > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let count = open.count.load(Ordering::Relaxed);
            crate::log(&format!(
                "{count} connections still open after {GRACE:?}; stopping"
            ));
            break;
        }
        let closed = open.closed.notified();
        // Checked again after registering, so that a close in between is not missed.
        if open.count.load(Ordering::Acquire) == 0 {
            break;
        }
        let _ = first(closed, timer.sleep(left.min(Duration::from_millis(100)))).await;
    }
}

/// One connection, served until it closes; asked to finish when `stop` turns true.
async fn connection<I, T>(io: I, timer: T, service: Arc<Service>, stop: Stopped, opened: Opened)
where
    I: Read + Write + Unpin + Send + 'static,
    T: Timer + Send + Sync + 'static,
{
    // Nearly every request is answered in the handler's call (`Service::answer_now`), and
    // hyper gets a ready future. The rest own a clone of the service (hyper's handler futures
    // must own what they use); that writes the node-wide `Arc`'s count from every worker, but
    // only for a space's first request, space creation and health checks.
    let handler = service_fn(move |request| match service.answer_now(request) {
        Ok(response) => Answering::Now(ready(response)),
        Err(later) => {
            let service = service.clone();
            Answering::Later(Box::pin(async move { service.answer_later(later).await }))
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(timer)
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .keep_alive(true)
        // Without half-close, hyper polls the socket for a read once more between a request's
        // head and its answer, to notice a client gone meanwhile, and drops the answer of a
        // client that shut its sending side down after its request. The handlers answer
        // without waiting (but a space's first request, which starts its node), so nothing is
        // saved by noticing; with half-close that poll is skipped, and such a client gets its
        // answer, as HTTP/1.1 allows.
        .half_close(true);
    let mut conn = pin!(builder.serve_connection(io, handler));
    let stopped = matches!(first(conn.as_mut(), stop).await, First::Right(_));
    if stopped {
        conn.as_mut().graceful_shutdown();
        let _ = conn.await;
    }
    drop(opened);
}

/// A listening TCP socket on `address` (address reuse on, a backlog of 4096, non-blocking),
/// for any runtime to take over.
pub(crate) fn bind(address: std::net::SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(address),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}
