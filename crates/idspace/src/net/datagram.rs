//! Datagram sockets: UDP and Unix-domain.

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use mio::Interest;

use super::stream::as_fd;
use crate::sched::io::readiness::Direction;
use crate::sched::io::IoSource;

/// A UDP socket registered with the runtime's poller.
///
/// ```
/// use idspace::net::UdpSocket;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// runtime.block_on(async {
///     let a = UdpSocket::bind("127.0.0.1:0")?;
///     let b = UdpSocket::bind("127.0.0.1:0")?;
///     a.send_to(b"ping", b.local_addr()?).await?;
///     let mut buf = [0; 8];
///     let (n, from) = b.recv_from(&mut buf).await?;
///     assert_eq!((&buf[..n], from), (&b"ping"[..], a.local_addr()?));
///     b.connect(from)?;
///     b.send(b"pong").await?;
///     let n = a.recv(&mut buf).await?;
///     assert_eq!(&buf[..n], b"pong");
///     Ok::<_, std::io::Error>(())
/// })??;
/// # Ok(())
/// # }
/// ```
pub struct UdpSocket {
    io: IoSource<mio::net::UdpSocket>,
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.fmt(f)
    }
}

/// Resolves `addr` (blocking for host names) and tries `f` on each address until one works.
fn first_working<T>(
    addr: impl ToSocketAddrs,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for addr in addr.to_socket_addrs()? {
        match f(addr) {
            Ok(done) => return Ok(done),
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address given")))
}

impl UdpSocket {
    /// Binds to the first address of `addr` that works.
    ///
    /// # Errors
    /// No runtime is current; no address could be bound.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let socket = first_working(addr, mio::net::UdpSocket::bind)?;
        UdpSocket::register(socket)
    }

    /// Takes over a bound std socket (made non-blocking here).
    ///
    /// # Errors
    /// No runtime is current; the registration failed.
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        UdpSocket::register(mio::net::UdpSocket::from_std(socket))
    }

    fn register(socket: mio::net::UdpSocket) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            io: IoSource::new(socket, Interest::READABLE | Interest::WRITABLE)?,
        })
    }

    /// Sets the default peer for [`send`](Self::send) and filters what
    /// [`recv`](Self::recv) receives.
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        first_working(addr, |addr| self.io.get_ref().connect(addr))
    }

    /// Sends a datagram to `target`.
    pub async fn send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        self.io
            .io(Direction::Write, |socket| socket.send_to(buf, target))
            .await
    }

    /// Receives a datagram and its sender's address.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io
            .io(Direction::Read, |socket| socket.recv_from(buf))
            .await
    }

    /// Sends a datagram to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .io(Direction::Write, |socket| socket.send(buf))
            .await
    }

    /// Receives a datagram from the connected peer.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.io(Direction::Read, |socket| socket.recv(buf)).await
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }
}

/// A Unix-domain datagram socket registered with the runtime's poller.
///
/// ```
/// use idspace::net::UnixDatagram;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// runtime.block_on(async {
///     let (a, b) = UnixDatagram::pair()?;
///     a.send(b"one").await?;
///     a.send(b"two").await?;
///     let mut buf = [0; 8];
///     let n = b.recv(&mut buf).await?;
///     assert_eq!(&buf[..n], b"one", "datagrams keep their boundaries");
///     Ok::<_, std::io::Error>(())
/// })??;
/// # Ok(())
/// # }
/// ```
pub struct UnixDatagram {
    io: IoSource<mio::net::UnixDatagram>,
}

impl fmt::Debug for UnixDatagram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.fmt(f)
    }
}

impl UnixDatagram {
    /// Binds to `path`.
    ///
    /// # Errors
    /// No runtime is current; the bind failed.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        UnixDatagram::register(mio::net::UnixDatagram::bind(path)?)
    }

    /// A socket bound to no address.
    ///
    /// # Errors
    /// No runtime is current; the system refused the socket.
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::register(mio::net::UnixDatagram::unbound()?)
    }

    /// A connected pair.
    ///
    /// # Errors
    /// No runtime is current; the system refused the sockets.
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = mio::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::register(a)?, UnixDatagram::register(b)?))
    }

    fn register(socket: mio::net::UnixDatagram) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            io: IoSource::new(socket, Interest::READABLE | Interest::WRITABLE)?,
        })
    }

    /// Sets the default peer.
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.io.get_ref().connect(path)
    }

    /// Sends a datagram to the socket at `path`.
    pub async fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let path = path.as_ref();
        self.io
            .io(Direction::Write, |socket| socket.send_to(buf, path))
            .await
    }

    /// Receives a datagram and its sender's address.
    pub async fn recv_from(
        &self,
        buf: &mut [u8],
    ) -> io::Result<(usize, std::os::unix::net::SocketAddr)> {
        self.io
            .io(Direction::Read, |socket| socket.recv_from(buf))
            .await
    }

    /// Sends a datagram to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .io(Direction::Write, |socket| socket.send(buf))
            .await
    }

    /// Receives a datagram from the connected peer.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.io(Direction::Read, |socket| socket.recv(buf)).await
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<std::os::unix::net::SocketAddr> {
        self.io.get_ref().local_addr()
    }
}

as_fd!(UdpSocket, UnixDatagram);
