//! TCP: a listener and its connections.

use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
// Outside every loom model (the I/O types do not exist under loom).
use crate::sync::unmodeled::Arc;
use std::task::{Context, Poll};

use mio::Interest;

use super::accept::accept_with_backoff;
use super::split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
use super::stream::{as_fd, read_stream, write_stream};
use crate::sched::io::readiness::Direction;
use crate::sched::io::IoSource;

/// A TCP socket listening for connections, registered with the runtime's poller.
///
/// ```
/// use idspace::net::{TcpListener, TcpStream};
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// let reply = runtime.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0")?;
///     let addr = listener.local_addr()?;
///     let server = spawn(async move {
///         let (stream, _peer) = listener.accept().await?;
///         stream.write_all(b"hello").await
///     })
///     .expect("inside the runtime");
///     let client = TcpStream::connect(addr).await?;
///     let mut reply = [0; 5];
///     client.read_exact(&mut reply).await?;
///     server.await.expect("the server task ran")?;
///     Ok::<_, std::io::Error>(reply)
/// })??;
/// assert_eq!(&reply, b"hello");
/// # Ok(())
/// # }
/// ```
pub struct TcpListener {
    io: IoSource<mio::net::TcpListener>,
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.fmt(f)
    }
}

impl TcpListener {
    /// Binds to the first address of `addr` that works (with `SO_REUSEADDR`, as mio sets it) and
    /// listens. A host name is resolved here, blocking: pass addresses, or resolve names with
    /// [`spawn_blocking`](crate::sched::spawn_blocking).
    ///
    /// # Errors
    /// No runtime is current; no address could be bound (the last error); resolution failed.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let mut last = None;
        for addr in addr.to_socket_addrs()? {
            match mio::net::TcpListener::bind(addr) {
                Ok(listener) => return TcpListener::register(listener),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no address to bind to")
        }))
    }

    /// Takes over a bound, listening std listener (made non-blocking here).
    ///
    /// # Errors
    /// No runtime is current; the registration failed.
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        TcpListener::register(mio::net::TcpListener::from_std(listener))
    }

    fn register(listener: mio::net::TcpListener) -> io::Result<TcpListener> {
        Ok(TcpListener {
            io: IoSource::new(listener, Interest::READABLE)?,
        })
    }

    /// The next connection. Running out of descriptors or memory (`EMFILE`, `ENFILE`,
    /// `ENOBUFS`, `ENOMEM`) does not end the accept loop: the error is written to standard
    /// error and the accept is retried after a backoff (1 ms doubling up to 1 s), the
    /// connection waiting in the backlog meanwhile; a connection aborted before it was taken is
    /// skipped. Cancel-safe: dropping the future loses no connection.
    ///
    /// # Errors
    /// Other accept errors; the runtime shut down.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (stream, peer) = accept_with_backoff(
            &self.io,
            || {
                self.local_addr()
                    .map_or_else(|_| "an unknown address".into(), |addr| addr.to_string())
            },
            |listener| listener.accept(),
        )
        .await?;
        Ok((TcpStream::register_accepted(stream)?, peer))
    }

    /// One attempt at [`accept`](Self::accept) as a poll function, without the backoff:
    /// every error is returned.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        self.io
            .poll_io(cx, Direction::Read, |listener| listener.accept())
            .map(|accepted| {
                let (stream, peer) = accepted?;
                Ok((TcpStream::register_accepted(stream)?, peer))
            })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }
}

/// A TCP connection, registered with the runtime's poller. Reads and writes through shared
/// references too, so one task can read while another writes (or use the split halves);
/// dropping an unfinished read or write loses nothing, and dropping the stream deregisters and
/// closes it.
///
/// ```
/// use futures_io::AsyncWrite;
/// use idspace::net::{TcpListener, TcpStream};
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// runtime.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0")?;
///     let client = TcpStream::connect(listener.local_addr()?).await?;
///     client.set_nodelay(true)?;
///     let (server, peer) = listener.accept().await?;
///     assert_eq!(peer, client.local_addr()?);
///     // Halves for two tasks: one echoes what the other half reads.
///     let (reader, writer) = server.into_split();
///     let echo = spawn(async move {
///         let mut buf = [0; 4];
///         reader.stream().read_exact(&mut buf).await?;
///         writer.stream().write_all(&buf).await
///     })
///     .expect("inside the runtime");
///     client.write_all(b"ping").await?;
///     client.shutdown(std::net::Shutdown::Write)?;
///     let mut back = [0; 4];
///     client.read_exact(&mut back).await?;
///     assert_eq!(&back, b"ping");
///     echo.await.expect("echo ran")
/// })??;
/// # Ok(())
/// # }
/// ```
pub struct TcpStream {
    io: IoSource<mio::net::TcpStream>,
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.fmt(f)
    }
}

impl TcpStream {
    /// Connects to the first address of `addr` that accepts. A host name is resolved here,
    /// blocking, as in [`TcpListener::bind`].
    ///
    /// # Errors
    /// No runtime is current; every address refused (the last error); resolution failed.
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let mut last = None;
        for addr in addr.to_socket_addrs()? {
            match TcpStream::connect_one(addr).await {
                Ok(stream) => return Ok(stream),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to")
        }))
    }

    async fn connect_one(addr: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream::register(mio::net::TcpStream::connect(addr)?)?;
        // Writable means connected or failed: the pending error says which. Not connected yet
        // (a spurious wakeup) waits again.
        stream
            .io
            .io(Direction::Write, |socket| {
                if let Some(error) = socket.take_error()? {
                    return Err(error);
                }
                match socket.peer_addr() {
                    Ok(_) => Ok(()),
                    Err(error) if error.kind() == io::ErrorKind::NotConnected => {
                        Err(io::ErrorKind::WouldBlock.into())
                    }
                    Err(error) => Err(error),
                }
            })
            .await?;
        Ok(stream)
    }

    /// Takes over a connected std stream (made non-blocking here).
    ///
    /// # Errors
    /// No runtime is current; the registration failed.
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        TcpStream::register(mio::net::TcpStream::from_std(stream))
    }

    fn register(stream: mio::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            io: IoSource::new(stream, Interest::READABLE | Interest::WRITABLE)?,
        })
    }

    /// A connection a listener accepted: registered with the workers' pollers in turn, not
    /// with the accepting worker's (see `IoSource::new_spread`).
    fn register_accepted(stream: mio::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            io: IoSource::new_spread(stream, Interest::READABLE | Interest::WRITABLE)?,
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Sets `TCP_NODELAY` (no Nagle delay for small writes).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.get_ref().set_nodelay(nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.get_ref().nodelay()
    }

    /// Shuts down the reading side, the writing side (the peer reads the end of the stream),
    /// or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    /// Borrowed halves, for a reader and a writer in the same task (or scope).
    pub fn split(&mut self) -> (ReadHalf<'_, TcpStream>, WriteHalf<'_, TcpStream>) {
        (ReadHalf(self), WriteHalf(self))
    }

    /// Owned halves, for a reader task and a writer task.
    pub fn into_split(self) -> (OwnedReadHalf<TcpStream>, OwnedWriteHalf<TcpStream>) {
        let stream = Arc::new(self);
        (OwnedReadHalf(Arc::clone(&stream)), OwnedWriteHalf(stream))
    }
}

as_fd!(TcpListener, TcpStream);
read_stream!(TcpStream);
write_stream!(TcpStream, |stream| stream.shutdown(Shutdown::Write));
