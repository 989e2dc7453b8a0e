//! Unix-domain stream sockets: a listener, its connections, and connected pairs.

use std::fmt;
use std::io;
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::task::{Context, Poll};

use mio::Interest;

use super::accept::accept_with_backoff;
use super::split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
use super::stream::{as_fd, read_stream, write_stream};
use crate::sched::io::readiness::Direction;
use crate::sched::io::IoSource;
// Outside every loom model (the I/O types do not exist under loom).
use crate::sync::unmodeled::Arc;

/// A connected pair of Unix stream sockets (`socketpair(AF_UNIX, SOCK_STREAM)`), both
/// registered with the runtime's poller: hackbench's channel.
///
/// # Errors
/// No runtime is current; the system refused the sockets.
///
/// ```
/// use idspace::net::socketpair;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let got = runtime.block_on(async {
///     let (left, right) = socketpair()?;
///     left.write_all(b"ping").await?;
///     drop(left); // the peer then reads the end of the stream
///     let mut got = Vec::new();
///     let mut buf = [0; 8];
///     loop {
///         match right.read(&mut buf).await? {
///             0 => break,
///             n => got.extend_from_slice(&buf[..n]),
///         }
///     }
///     Ok::<_, std::io::Error>(got)
/// })??;
/// assert_eq!(got, b"ping");
/// # Ok(())
/// # }
/// ```
pub fn socketpair() -> io::Result<(UnixStream, UnixStream)> {
    UnixStream::pair()
}

/// A Unix-domain socket listening for connections.
///
/// ```
/// use idspace::net::{UnixListener, UnixStream};
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let path = std::env::temp_dir().join(format!("idspace-doc-{}.sock", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// runtime.block_on(async {
///     let listener = UnixListener::bind(&path)?;
///     let client = UnixStream::connect(&path).await?;
///     let (server, _) = listener.accept().await?;
///     client.write_all(b"hi").await?;
///     let mut buf = [0; 2];
///     server.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"hi");
///     Ok::<_, std::io::Error>(())
/// })??;
/// std::fs::remove_file(&path)?;
/// # Ok(())
/// # }
/// ```
pub struct UnixListener {
    io: IoSource<mio::net::UnixListener>,
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.fmt(f)
    }
}

impl UnixListener {
    /// Binds to `path` (which must not exist) and listens.
    ///
    /// # Errors
    /// No runtime is current; the bind failed.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        Ok(UnixListener {
            io: IoSource::new(mio::net::UnixListener::bind(path)?, Interest::READABLE)?,
        })
    }

    /// Takes over a bound, listening std listener (made non-blocking here).
    ///
    /// # Errors
    /// No runtime is current; the registration failed.
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        Ok(UnixListener {
            io: IoSource::new(
                mio::net::UnixListener::from_std(listener),
                Interest::READABLE,
            )?,
        })
    }

    /// The next connection, with the same resilience as [`TcpListener::accept`]
    /// (backoff when out of descriptors).
    ///
    /// [`TcpListener::accept`]: super::TcpListener::accept
    ///
    /// # Errors
    /// Other accept errors; the runtime shut down.
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (stream, peer) = accept_with_backoff(
            &self.io,
            || {
                self.local_addr()
                    .map_or_else(|_| "an unknown address".into(), |addr| format!("{addr:?}"))
            },
            |listener| listener.accept(),
        )
        .await?;
        Ok((UnixStream::register_accepted(stream)?, peer))
    }

    /// One attempt at [`accept`](Self::accept) as a poll function, without the backoff.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        self.io
            .poll_io(cx, Direction::Read, |listener| listener.accept())
            .map(|accepted| {
                let (stream, peer) = accepted?;
                Ok((UnixStream::register_accepted(stream)?, peer))
            })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }
}

/// A Unix-domain stream connection, as [`TcpStream`](super::TcpStream) is for TCP.
///
/// ```
/// use idspace::net::UnixStream;
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// runtime.block_on(async {
///     let (here, there) = UnixStream::pair()?;
///     let (reader, writer) = there.into_split();
///     let echo = spawn(async move {
///         let mut buf = [0; 3];
///         reader.stream().read_exact(&mut buf).await?;
///         writer.stream().write_all(&buf).await
///     })
///     .expect("inside the runtime");
///     here.write_all(b"abc").await?;
///     let mut back = [0; 3];
///     here.read_exact(&mut back).await?;
///     assert_eq!(&back, b"abc");
///     echo.await.expect("echo ran")
/// })??;
/// # Ok(())
/// # }
/// ```
pub struct UnixStream {
    io: IoSource<mio::net::UnixStream>,
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.fmt(f)
    }
}

impl UnixStream {
    /// Connects to the socket at `path`.
    ///
    /// # Errors
    /// No runtime is current; the connection was refused.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let stream = UnixStream::register(mio::net::UnixStream::connect(path)?)?;
        stream
            .io
            .io(Direction::Write, |socket| match socket.take_error()? {
                Some(error) => Err(error),
                None => Ok(()),
            })
            .await?;
        Ok(stream)
    }

    /// A connected pair (see [`socketpair`]).
    ///
    /// # Errors
    /// No runtime is current; the system refused the sockets.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (left, right) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::register(left)?, UnixStream::register(right)?))
    }

    /// Takes over a connected std stream (made non-blocking here).
    ///
    /// # Errors
    /// No runtime is current; the registration failed.
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        UnixStream::register(mio::net::UnixStream::from_std(stream))
    }

    fn register(stream: mio::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
            io: IoSource::new(stream, Interest::READABLE | Interest::WRITABLE)?,
        })
    }

    /// A connection a listener accepted: registered with the workers' pollers in turn, not
    /// with the accepting worker's (see `IoSource::new_spread`).
    fn register_accepted(stream: mio::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
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

    /// Shuts down the reading side, the writing side, or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    /// Borrowed halves.
    pub fn split(&mut self) -> (ReadHalf<'_, UnixStream>, WriteHalf<'_, UnixStream>) {
        (ReadHalf(self), WriteHalf(self))
    }

    /// Owned halves, for a reader task and a writer task.
    pub fn into_split(self) -> (OwnedReadHalf<UnixStream>, OwnedWriteHalf<UnixStream>) {
        let stream = Arc::new(self);
        (OwnedReadHalf(Arc::clone(&stream)), OwnedWriteHalf(stream))
    }
}

as_fd!(UnixListener, UnixStream);
read_stream!(UnixStream);
write_stream!(UnixStream, |stream| stream.shutdown(Shutdown::Write));
