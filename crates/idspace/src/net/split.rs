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
#[derive(Debug)]
pub struct ReadHalf<'a, S>(pub(crate) &'a S);

/// The writing half of a stream borrowed by [`split`](super::TcpStream::split).
#[derive(Debug)]
pub struct WriteHalf<'a, S>(pub(crate) &'a S);

/// The reading half of a stream taken by [`into_split`](super::TcpStream::into_split). The
/// stream is closed once both halves are dropped.
#[derive(Debug)]
pub struct OwnedReadHalf<S>(pub(crate) Arc<S>);

/// The writing half of a stream taken by [`into_split`](super::TcpStream::into_split).
/// [`poll_close`](AsyncWrite::poll_close) shuts the writing side down (the peer reads the
/// end of the stream); the stream is closed once both halves are dropped.
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
