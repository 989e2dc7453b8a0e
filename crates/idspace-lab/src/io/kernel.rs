//! The kernel's column: the same two workloads on OS threads of the lab process that block in
//! `read` and `write` on socketpairs and pipes (hackbench `-T`, UnixBench's context switching
//! with threads), started together and timed like the runtimes.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use super::workloads::{expect, MESSAGE, SIDE};
use crate::sys::pipe::OsPipe;
use crate::wake::kernel::{run_threads, Body};
use crate::wake::workloads::Ran;

/// A kind of kernel channel with blocking ends, shared by the threads that use it.
pub(crate) trait Blocking: Send + Sync + Sized + 'static {
    /// Opens one.
    fn open() -> Result<Self, String>;
    /// Writes all of `bytes`, blocking while the channel is full.
    fn send(&self, bytes: &[u8]) -> Result<(), String>;
    /// Reads exactly `buffer.len()` bytes, blocking until they arrive.
    fn receive(&self, buffer: &mut [u8]) -> Result<(), String>;
}

impl Blocking for OsPipe {
    fn open() -> Result<OsPipe, String> {
        OsPipe::new()
    }

    fn send(&self, bytes: &[u8]) -> Result<(), String> {
        OsPipe::send(self, bytes)
    }

    fn receive(&self, buffer: &mut [u8]) -> Result<(), String> {
        OsPipe::receive(self, buffer)
    }
}

/// A `socketpair(AF_UNIX, SOCK_STREAM)`: bytes written into one end are read from the other.
pub(crate) struct OsSocketpair {
    rx: UnixStream,
    tx: UnixStream,
}

impl Blocking for OsSocketpair {
    fn open() -> Result<OsSocketpair, String> {
        let (rx, tx) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        Ok(OsSocketpair { rx, tx })
    }

    fn send(&self, bytes: &[u8]) -> Result<(), String> {
        (&self.tx)
            .write_all(bytes)
            .map_err(|e| format!("write: {e}"))
    }

    fn receive(&self, buffer: &mut [u8]) -> Result<(), String> {
        (&self.rx)
            .read_exact(buffer)
            .map_err(|e| format!("read: {e}"))
    }
}

/// hackbench `-T`'s shape on the lab's threads (see [`super::workloads::hackbench`]).
pub(crate) fn hackbench<K: Blocking>(groups: usize, loops: usize) -> Result<Ran, String> {
    let mut bodies: Vec<Body> = Vec::with_capacity(groups * 2 * SIDE);
    for group in 0..groups {
        let channels: Vec<Arc<K>> = (0..SIDE)
            .map(|_| K::open().map(Arc::new))
            .collect::<Result<_, _>>()?;
        for channel in &channels {
            let channel = Arc::clone(channel);
            bodies.push(Box::new(move || {
                let mut message = [0u8; MESSAGE];
                for _ in 0..SIDE * loops {
                    channel.receive(&mut message)?;
                }
                Ok(())
            }));
        }
        for sender in 0..SIDE {
            let channels = channels.clone();
            let message = [(group * SIDE + sender) as u8; MESSAGE];
            bodies.push(Box::new(move || {
                for _ in 0..loops {
                    for channel in &channels {
                        channel.send(&message)?;
                    }
                }
                Ok(())
            }));
        }
    }
    run_threads(bodies)
}

/// The context-switching shape on two threads (see [`super::workloads::switch`]).
pub(crate) fn switch<K: Blocking>(rounds: u64) -> Result<Ran, String> {
    let there = Arc::new(K::open()?);
    let back = Arc::new(K::open()?);
    let (there2, back2) = (Arc::clone(&there), Arc::clone(&back));
    let first: Body = Box::new(move || {
        let mut word = [0u8; 8];
        for round in 0..rounds {
            there.send(&round.to_ne_bytes())?;
            back.receive(&mut word)?;
            expect(round, word).map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    let second: Body = Box::new(move || {
        let mut word = [0u8; 8];
        for round in 0..rounds {
            there2.receive(&mut word)?;
            expect(round, word).map_err(|e| e.to_string())?;
            back2.send(&word)?;
        }
        Ok(())
    });
    run_threads(vec![first, second])
}
