//! Sockets on the runtime: TCP, UDP and Unix-domain, registered with the workers' pollers.
//!
//! # Design
//!
//! Each type wraps a non-blocking `mio` socket registered, when it is created, with the
//! poller of the worker running the creating code (or of a worker chosen round-robin from a
//! `block_on` thread). An operation tries the system call first; on `WouldBlock` it clears the
//! readiness it acted on and waits for the next edge (the protocol document's section 8 says
//! why no edge is lost in between). Reads and writes take `&self`: a reader and a writer may
//! wait at once, from one task or two (see the split halves), and several tasks may wait on
//! one socket the same way (hackbench's senders share their receiver's socket): an event wakes
//! every waiter of its direction.
//!
//! Streams implement [`futures_io::AsyncRead`] and [`futures_io::AsyncWrite`], the
//! runtime-neutral traits of the futures ecosystem, and have `read`/`write`/`read_exact`/
//! `write_all` futures of their own. `poll_close` shuts the writing side down.
//!
//! # Contracts
//!
//! * Creating a socket outside a runtime (not in one of its tasks or its `block_on`) fails
//!   with an error saying so.
//! * Dropping an unfinished read, write or accept loses nothing and leaves the socket usable.
//! * Dropping a socket deregisters it from its poller, then closes it.
//! * Once the runtime shuts down, every operation on a socket it registered fails with an
//!   error saying so, and tasks waiting on one are woken to see it (never a hang).
//! * Accepting goes on after the process runs out of descriptors: see
//!   [`TcpListener::accept`].
//!
//! # Where we differ from tokio
//!
//! tokio registers with one shared driver; here a socket stays with the poller of the worker
//! that created it (see `sched::io`). Host names in `bind`/`connect` are resolved in place,
//! blocking, rather than on the blocking pool: pass socket addresses, or resolve with
//! [`spawn_blocking`](crate::sched::spawn_blocking).

mod accept;
mod datagram;
mod split;
pub(crate) mod stream;
mod tcp;
mod unix;

pub use datagram::{UdpSocket, UnixDatagram};

pub use split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
pub use tcp::{TcpListener, TcpStream};
pub use unix::{socketpair, UnixListener, UnixStream};
