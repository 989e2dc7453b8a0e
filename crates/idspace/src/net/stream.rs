//! What every byte stream shares (TCP, Unix, the pipe's ends): reads and writes over a
//! registered source, as poll functions, futures and the `futures-io` traits.

use std::io::{self, Read, Write};
use std::task::{Context, Poll};

use mio::event::Source;

use crate::sched::io::readiness::Direction;
use crate::sched::io::IoSource;

/// Reads into `buf` once the source is readable.
pub(crate) fn poll_read<S>(
    io: &IoSource<S>,
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> Poll<io::Result<usize>>
where
    S: Source,
    for<'a> &'a S: Read,
{
    io.poll_io(cx, Direction::Read, |mut source| source.read(buf))
}

/// Writes from `buf` once the source is writable.
pub(crate) fn poll_write<S>(
    io: &IoSource<S>,
    cx: &mut Context<'_>,
    buf: &[u8],
) -> Poll<io::Result<usize>>
where
    S: Source,
    for<'a> &'a S: Write,
{
    io.poll_io(cx, Direction::Write, |mut source| source.write(buf))
}

/// Reads into uninitialised memory once the source is readable (hyper's read buffers are
/// uninitialised: zeroing them first would cost a memset per read).
#[cfg(feature = "hyper")]
pub(crate) fn poll_read_uninit<S>(
    io: &IoSource<S>,
    cx: &mut Context<'_>,
    buf: &mut [std::mem::MaybeUninit<u8>],
) -> Poll<io::Result<usize>>
where
    S: Source + std::os::fd::AsRawFd,
{
    // A short read clears the readiness (see `poll_read_stream`): hyper reads again after
    // every answer, and that read would otherwise fail with `EAGAIN` while the client has not
    // sent its next request yet.
    io.poll_read_stream(cx, buf.len(), |source| {
        // SAFETY: `read(2)` writes at most `buf.len()` bytes at `buf`, which is valid, writable
        // memory of that length owned by the caller for the call; `MaybeUninit` bytes need no
        // initialisation before being written, and the caller counts only the `n` written.
        let n = unsafe { libc::read(source.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n.unsigned_abs())
        }
    })
}

/// Writes vectored once the source is writable.
pub(crate) fn poll_write_vectored<S>(
    io: &IoSource<S>,
    cx: &mut Context<'_>,
    bufs: &[io::IoSlice<'_>],
) -> Poll<io::Result<usize>>
where
    S: Source,
    for<'a> &'a S: Write,
{
    io.poll_io(cx, Direction::Write, |mut source| {
        source.write_vectored(bufs)
    })
}

/// Implements, for a stream type `$ty` whose `io` field is an `IoSource` of a readable mio
/// source: the inherent `poll_read`, `read` and `read_exact`, and `futures_io::AsyncRead` for
/// the type and for shared references to it (a read and a write from two tasks at once, as
/// the split halves do).
macro_rules! read_stream {
    ($ty:ty) => {
        impl $ty {
            /// Reads into `buf` when data is there: `Ready(Ok(0))` at the end of the stream,
            /// `Pending` (the task woken when the stream becomes readable) otherwise.
            pub fn poll_read(
                &self,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::poll_read(&self.io, cx, buf)
            }

            /// Reads into `buf`, waiting for data; 0 at the end of the stream. Dropping the
            /// future before it completes loses nothing: no data was taken.
            pub async fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
                std::future::poll_fn(|cx| self.poll_read(cx, buf)).await
            }

            /// Fills `buf` entirely.
            ///
            /// # Errors
            /// `UnexpectedEof` if the stream ends first (what was read stays in `buf`).
            pub async fn read_exact(&self, mut buf: &mut [u8]) -> std::io::Result<()> {
                while !buf.is_empty() {
                    match self.read(buf).await? {
                        0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                        n => buf = &mut buf[n..],
                    }
                }
                Ok(())
            }
        }

        #[cfg(feature = "hyper")]
        impl $ty {
            /// Reads into uninitialised memory (for hyper's buffers).
            // A pipe's receiver has no use for it: hyper runs over sockets.
            #[allow(dead_code)]
            pub(crate) fn poll_read_uninit(
                &self,
                cx: &mut std::task::Context<'_>,
                buf: &mut [std::mem::MaybeUninit<u8>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::poll_read_uninit(&self.io, cx, buf)
            }
        }

        impl futures_io::AsyncRead for &$ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                <$ty>::poll_read(*self, cx, buf)
            }
        }

        impl futures_io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                <$ty>::poll_read(&*self, cx, buf)
            }
        }
    };
}

/// Implements, for a stream type `$ty` whose `io` field is an `IoSource` of a writable mio
/// source: the inherent `poll_write`, `write` and `write_all`, and `futures_io::AsyncWrite`
/// for the type and for shared references to it. `$close` is how `poll_close` ends the
/// writing side.
macro_rules! write_stream {
    ($ty:ty, $close:expr) => {
        impl $ty {
            /// Writes some of `buf` when the stream has room: `Pending` (the task woken when
            /// it becomes writable) while the peer does not read.
            pub fn poll_write(
                &self,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::poll_write(&self.io, cx, buf)
            }

            /// Writes some of `buf`, waiting for room; returns how much. Dropping the future
            /// before it completes writes nothing.
            pub async fn write(&self, buf: &[u8]) -> std::io::Result<usize> {
                std::future::poll_fn(|cx| self.poll_write(cx, buf)).await
            }

            /// Writes all of `buf`.
            ///
            /// # Errors
            /// `WriteZero` if the stream takes no more bytes.
            pub async fn write_all(&self, mut buf: &[u8]) -> std::io::Result<()> {
                while !buf.is_empty() {
                    match self.write(buf).await? {
                        0 => return Err(std::io::ErrorKind::WriteZero.into()),
                        n => buf = &buf[n..],
                    }
                }
                Ok(())
            }
        }

        impl futures_io::AsyncWrite for &$ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                <$ty>::poll_write(*self, cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::poll_write_vectored(&self.io, cx, bufs)
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                // Writes go straight to the kernel: nothing is buffered here.
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let close: fn(&$ty) -> std::io::Result<()> = $close;
                std::task::Poll::Ready(close(*self))
            }
        }

        impl futures_io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                <$ty>::poll_write(&*self, cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::poll_write_vectored(&self.io, cx, bufs)
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut &*self).poll_flush(cx)
            }

            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut &*self).poll_close(cx)
            }
        }
    };
}

/// Implements `AsFd` and `AsRawFd` for a type whose `io` field is an `IoSource` of a mio
/// source with a descriptor: for socket options the type has no method for. The descriptor
/// stays registered and owned by the type; do not close it or make it blocking.
macro_rules! as_fd {
    ($($ty:ty),*) => {
        $(
            impl std::os::fd::AsFd for $ty {
                fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                    self.io.get_ref().as_fd()
                }
            }

            impl std::os::fd::AsRawFd for $ty {
                fn as_raw_fd(&self) -> std::os::fd::RawFd {
                    self.io.get_ref().as_raw_fd()
                }
            }
        )*
    };
}

pub(crate) use {as_fd, read_stream, write_stream};
