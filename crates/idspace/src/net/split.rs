//! A stream's two directions as separate values, for a reader task and a writer task.
//!
//! A stream reads and writes through shared references (each direction has its own waker
//! slot), so the halves are thin: the borrowed ones hold `&S`, the owned ones an `Arc<S>`.

use std::io;
use std::pin::Pin;
// Outside every loom model (the I/O types do not exist under loom).
use crate::sync::unmodeled::Arc;
use std::task::{Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};

/// The reading half of a stream borrowed by [`split`](super::TcpStream::split).
///
/// An echo, written once over futures-io's traits, on a socket's two halves:
///
/// ```
/// use std::future::poll_fn;
/// use std::io;
/// use std::pin::Pin;
///
/// use futures_io::{AsyncRead, AsyncWrite};
/// use idspace::net::{ReadHalf, UnixStream, WriteHalf};
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// /// Copies what `from` reads into `to` until the end of the stream.
/// async fn copy(
///     mut from: impl AsyncRead + Unpin,
///     mut to: impl AsyncWrite + Unpin,
/// ) -> io::Result<usize> {
///     let (mut buf, mut copied) = ([0; 64], 0);
///     loop {
///         let n = poll_fn(|cx| Pin::new(&mut from).poll_read(cx, &mut buf)).await?;
///         if n == 0 {
///             return Ok(copied);
///         }
///         let mut written = 0;
///         while written < n {
///             written += poll_fn(|cx| Pin::new(&mut to).poll_write(cx, &buf[written..n])).await?;
///         }
///         copied += n;
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// let echoed = runtime.block_on(async {
///     let (client, mut server) = UnixStream::pair()?;
///     let echo = spawn(async move {
///         let (reader, writer): (ReadHalf<'_, _>, WriteHalf<'_, _>) = server.split();
///         copy(reader, writer).await
///     })
///     .expect("inside the runtime");
///     client.write_all(b"ping").await?;
///     client.shutdown(std::net::Shutdown::Write)?; // the end of the echo's input
///     let mut back = [0; 4];
///     client.read_exact(&mut back).await?;
///     assert_eq!(&back, b"ping");
///     echo.await.map_err(io::Error::other)?
/// })??;
/// assert_eq!(echoed, 4);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ReadHalf<'a, S>(pub(crate) &'a S);

/// The writing half of a stream borrowed by [`split`](super::TcpStream::split).
///
/// [`poll_close`](AsyncWrite::poll_close) shuts the writing side down; the reading half still
/// reads:
///
/// ```
/// use std::future::poll_fn;
/// use std::io;
/// use std::pin::Pin;
///
/// use futures_io::{AsyncRead, AsyncWrite};
/// use idspace::net::{ReadHalf, UnixStream, WriteHalf};
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let answer = runtime.block_on(async {
///     let (mut here, there) = UnixStream::pair()?;
///     let (mut reader, mut writer): (ReadHalf<'_, _>, WriteHalf<'_, _>) = here.split();
///     let sent = poll_fn(|cx| Pin::new(&mut writer).poll_write(cx, b"bye")).await?;
///     poll_fn(|cx| Pin::new(&mut writer).poll_close(cx)).await?;
///     let mut got = vec![0; sent];
///     there.read_exact(&mut got).await?;
///     assert_eq!(got, b"bye");
///     assert_eq!(there.read(&mut [0; 1]).await?, 0, "the peer read the end of the stream");
///     there.write_all(b"ok").await?;
///     let mut answer = [0; 2];
///     let n = poll_fn(|cx| Pin::new(&mut reader).poll_read(cx, &mut answer)).await?;
///     Ok::<_, io::Error>(answer[..n].to_vec())
/// })??;
/// assert_eq!(answer, b"ok");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct WriteHalf<'a, S>(pub(crate) &'a S);

/// The reading half of a stream taken by [`into_split`](super::TcpStream::into_split). The
/// stream is closed once both halves are dropped.
///
/// A task of its own counts what a TCP peer sends:
///
/// ```
/// use std::future::poll_fn;
/// use std::io;
/// use std::pin::Pin;
///
/// use futures_io::AsyncRead;
/// use idspace::net::{OwnedReadHalf, TcpListener, TcpStream};
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// let counted = runtime.block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0")?;
///     let client = TcpStream::connect(listener.local_addr()?).await?;
///     let (server, from) = listener.accept().await?;
///     let (mut reader, _writer): (OwnedReadHalf<TcpStream>, _) = server.into_split();
///     assert_eq!(reader.stream().peer_addr()?, from);
///     let counter = spawn(async move {
///         let (mut total, mut buf) = (0, [0; 16]);
///         loop {
///             match poll_fn(|cx| Pin::new(&mut reader).poll_read(cx, &mut buf)).await? {
///                 0 => return Ok::<_, io::Error>(total),
///                 n => total += n,
///             }
///         }
///     })
///     .expect("inside the runtime");
///     client.write_all(b"twelve bytes").await?;
///     drop(client); // the counter reads the end of the stream
///     counter.await.map_err(io::Error::other)?
/// })??;
/// assert_eq!(counted, 12);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct OwnedReadHalf<S>(pub(crate) Arc<S>);

/// The writing half of a stream taken by [`into_split`](super::TcpStream::into_split).
/// [`poll_close`](AsyncWrite::poll_close) shuts the writing side down (the peer reads the
/// end of the stream); the stream is closed once both halves are dropped.
///
/// A task sends a request and closes its half; the reading half, still held, reads the reply:
///
/// ```
/// use std::future::poll_fn;
/// use std::io;
/// use std::pin::Pin;
///
/// use futures_io::AsyncWrite;
/// use idspace::net::{OwnedWriteHalf, UnixStream};
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// let reply = runtime.block_on(async {
///     let (here, there) = UnixStream::pair()?;
///     let (reader, mut writer): (_, OwnedWriteHalf<UnixStream>) = here.into_split();
///     let sender = spawn(async move {
///         writer.stream().write_all(b"request").await?;
///         poll_fn(|cx| Pin::new(&mut writer).poll_close(cx)).await
///     })
///     .expect("inside the runtime");
///     let (mut request, mut buf) = (Vec::new(), [0; 16]);
///     loop {
///         match there.read(&mut buf).await? {
///             0 => break, // the sender closed its half
///             n => request.extend_from_slice(&buf[..n]),
///         }
///     }
///     assert_eq!(request, b"request");
///     there.write_all(b"reply").await?;
///     let mut reply = [0; 5];
///     reader.stream().read_exact(&mut reply).await?;
///     sender.await.map_err(io::Error::other)??;
///     Ok::<_, io::Error>(reply)
/// })??;
/// assert_eq!(&reply, b"reply");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct OwnedWriteHalf<S>(pub(crate) Arc<S>);

impl<S> OwnedReadHalf<S> {
    /// The stream both halves share.
    pub fn stream(&self) -> &S {
        &self.0
    }
}

impl<S> OwnedWriteHalf<S> {
    /// The stream both halves share.
    pub fn stream(&self) -> &S {
        &self.0
    }
}

fn read<S>(stream: &S, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>
where
    for<'a> &'a S: AsyncRead,
{
    Pin::new(&mut &*stream).poll_read(cx, buf)
}

fn write<S>(stream: &S, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>
where
    for<'a> &'a S: AsyncWrite,
{
    Pin::new(&mut &*stream).poll_write(cx, buf)
}

fn close<S>(stream: &S, cx: &mut Context<'_>) -> Poll<io::Result<()>>
where
    for<'a> &'a S: AsyncWrite,
{
    Pin::new(&mut &*stream).poll_close(cx)
}

impl<S> AsyncRead for ReadHalf<'_, S>
where
    for<'a> &'a S: AsyncRead,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        read(self.0, cx, buf)
    }
}

impl<S> AsyncRead for OwnedReadHalf<S>
where
    for<'a> &'a S: AsyncRead,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        read(&*self.0, cx, buf)
    }
}

impl<S> AsyncWrite for WriteHalf<'_, S>
where
    for<'a> &'a S: AsyncWrite,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        write(self.0, cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        close(self.0, cx)
    }
}

impl<S> AsyncWrite for OwnedWriteHalf<S>
where
    for<'a> &'a S: AsyncWrite,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        write(&*self.0, cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        close(&*self.0, cx)
    }
}
