//! Anonymous pipes on the runtime: UnixBench's context-switch channel.
//!
//! [`pipe`] makes a non-blocking, close-on-exec pipe and registers both ends with the
//! runtime's poller (see [`net`](crate::net) for the registration and its contracts). The
//! [`Receiver`] reads ([`futures_io::AsyncRead`]); the [`Sender`] writes
//! ([`futures_io::AsyncWrite`]); dropping the sender ends the receiver's stream.

use std::fmt;
use std::io;

use mio::Interest;

use crate::net::stream::{as_fd, read_stream, write_stream};
use crate::sched::io::IoSource;

/// A new pipe: its writing end and its reading end.
///
/// # Errors
/// No runtime is current; the system refused the pipe.
///
/// ```
/// use idspace::pipe::pipe;
/// use idspace::sched::{spawn, Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// let total = runtime.block_on(async {
///     let (sender, receiver) = pipe()?;
///     let writer = spawn(async move {
///         for round in 0..3u8 {
///             sender.write_all(&[round; 4]).await?;
///         }
///         Ok::<_, std::io::Error>(()) // dropping the sender ends the stream
///     })
///     .expect("inside the runtime");
///     let mut total = 0;
///     let mut buf = [0; 16];
///     loop {
///         match receiver.read(&mut buf).await? {
///             0 => break,
///             n => total += n,
///         }
///     }
///     writer.await.expect("the writer ran")?;
///     Ok::<_, std::io::Error>(total)
/// })??;
/// assert_eq!(total, 12);
/// # Ok(())
/// # }
/// ```
pub fn pipe() -> io::Result<(Sender, Receiver)> {
    let (sender, receiver) = mio::unix::pipe::new()?;
    Ok((
        Sender {
            io: IoSource::new(sender, Interest::WRITABLE)?,
        },
        Receiver {
            io: IoSource::new(receiver, Interest::READABLE)?,
        },
    ))
}

/// The writing end of a [`pipe`].
///
/// ```
/// use idspace::pipe::pipe;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// runtime.block_on(async {
///     let (sender, receiver) = pipe()?;
///     drop(receiver);
///     let broken = sender.write(b"x").await.unwrap_err();
///     assert_eq!(broken.kind(), std::io::ErrorKind::BrokenPipe);
///     Ok::<_, std::io::Error>(())
/// })??;
/// # Ok(())
/// # }
/// ```
pub struct Sender {
    io: IoSource<mio::unix::pipe::Sender>,
}

/// The reading end of a [`pipe`].
///
/// ```
/// use idspace::pipe::pipe;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// runtime.block_on(async {
///     let (sender, receiver) = pipe()?;
///     sender.write_all(b"ab").await?;
///     let mut buf = [0; 2];
///     receiver.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"ab");
///     Ok::<_, std::io::Error>(())
/// })??;
/// # Ok(())
/// # }
/// ```
pub struct Receiver {
    io: IoSource<mio::unix::pipe::Receiver>,
}

impl fmt::Debug for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.fmt(f)
    }
}

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.fmt(f)
    }
}

as_fd!(Sender, Receiver);
read_stream!(Receiver);
// A pipe has no half-close: the writing end ends the stream when it is dropped.
write_stream!(Sender, |_| Ok(()));
