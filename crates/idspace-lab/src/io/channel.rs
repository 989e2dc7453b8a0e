//! The byte channels the messaging workloads run over, one type per runtime and kind of file
//! descriptor, so that the workloads are written once and every runtime runs the same futures.
//!
//! A channel has one reading end, owned by one task, and one writing end that any number of
//! tasks share by reference (hackbench's 20 senders all write into one receiver's socket). Each
//! runtime's channel uses that runtime's own types and its usual way of waiting: tokio's
//! `readable`/`writable` with `try_read`/`try_write` (the calls tokio offers on a shared `&`
//! reference), ours `futures_io`'s `AsyncRead`/`AsyncWrite`.

use std::future::Future;
use std::io;

/// A kind of byte channel: a socketpair or a pipe, of one runtime.
pub(crate) trait Channel: 'static {
    /// The reading end, owned by one task.
    type Rx: Send + 'static;
    /// The writing end, shared by the tasks that write into the channel.
    type Tx: Send + Sync + 'static;

    /// Opens a channel; called inside the runtime, whose reactor registers the ends.
    fn open() -> io::Result<(Self::Rx, Self::Tx)>;

    /// Reads at most `buf.len()` bytes, waiting until some arrive; 0 at the end of the stream.
    fn read<'a>(
        rx: &'a mut Self::Rx,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a;

    /// Writes some of `buf`, waiting while the channel is full; returns how many bytes.
    fn write<'a>(
        tx: &'a Self::Tx,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a;
}

/// Reads exactly `buf.len()` bytes from `rx`.
pub(crate) async fn read_exact<C: Channel>(rx: &mut C::Rx, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match C::read(rx, &mut buf[done..]).await? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => done += n,
        }
    }
    Ok(())
}

/// Writes all of `buf` into `tx`.
pub(crate) async fn write_all<C: Channel>(tx: &C::Tx, buf: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match C::write(tx, &buf[done..]).await? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => done += n,
        }
    }
    Ok(())
}

/// tokio's `UnixStream::pair`: a socketpair, as hackbench's default.
pub(crate) struct TokioSocketpair;

/// tokio's `net::unix::pipe`: a pipe, as `hackbench -p` and UnixBench's context switching.
pub(crate) struct TokioPipe;

/// Retries `attempt` until it stops answering `WouldBlock`, waiting on `ready` in between:
/// tokio's loop for `try_read`/`try_write` on a shared reference.
async fn retry<R, A>(mut ready: impl FnMut() -> R, mut attempt: A) -> io::Result<usize>
where
    R: Future<Output = io::Result<()>>,
    A: FnMut() -> io::Result<usize>,
{
    loop {
        ready().await?;
        match attempt() {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            done => return done,
        }
    }
}

impl Channel for TokioSocketpair {
    type Rx = tokio::net::UnixStream;
    type Tx = tokio::net::UnixStream;

    fn open() -> io::Result<(Self::Rx, Self::Tx)> {
        tokio::net::UnixStream::pair()
    }

    fn read<'a>(
        rx: &'a mut Self::Rx,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        let rx = &*rx;
        retry(|| rx.readable(), move || rx.try_read(buf))
    }

    fn write<'a>(
        tx: &'a Self::Tx,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        retry(|| tx.writable(), move || tx.try_write(buf))
    }
}

impl Channel for TokioPipe {
    type Rx = tokio::net::unix::pipe::Receiver;
    type Tx = tokio::net::unix::pipe::Sender;

    fn open() -> io::Result<(Self::Rx, Self::Tx)> {
        let (tx, rx) = tokio::net::unix::pipe::pipe()?;
        Ok((rx, tx))
    }

    fn read<'a>(
        rx: &'a mut Self::Rx,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        let rx = &*rx;
        retry(|| rx.readable(), move || rx.try_read(buf))
    }

    fn write<'a>(
        tx: &'a Self::Tx,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        retry(|| tx.writable(), move || tx.try_write(buf))
    }
}
