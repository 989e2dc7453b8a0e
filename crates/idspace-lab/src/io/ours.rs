//! Our runtime's side of the experiment: its channels (`idspace::net::socketpair` and
//! `idspace::pipe`, whose writing ends many tasks share by reference), how it runs a messaging
//! workload, and hyper on it through `idspace::hyper_rt`.

use std::future::Future;
use std::io;
use std::time::Instant;

use idspace::hyper_rt::{HyperIo, HyperTimer};
use idspace::net::{TcpListener, UnixStream};
use idspace::pipe::{Receiver, Sender};
use idspace::sched::time::sleep;
use idspace::sched::{Builder, Handle, Placement, Policy, Poller, Runtime, Stats};

use super::channel::Channel;
use super::http::servers::{serve_connection, ACCEPT_BACKOFF};
use super::runner::succeeded;
use super::workloads::Workload;
use crate::cputime::CpuClock;
use crate::wake::workloads::Ran;

/// Our `socketpair`.
pub(crate) struct OursSocketpair;

/// Our `pipe`.
pub(crate) struct OursPipe;

impl Channel for OursSocketpair {
    type Rx = UnixStream;
    type Tx = UnixStream;

    fn open() -> io::Result<(UnixStream, UnixStream)> {
        idspace::net::socketpair()
    }

    fn read<'a>(
        rx: &'a mut UnixStream,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        rx.read(buf)
    }

    fn write<'a>(
        tx: &'a UnixStream,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        tx.write(buf)
    }
}

impl Channel for OursPipe {
    type Rx = Receiver;
    type Tx = Sender;

    fn open() -> io::Result<(Receiver, Sender)> {
        let (tx, rx) = idspace::pipe::pipe()?;
        Ok((rx, tx))
    }

    fn read<'a>(
        rx: &'a mut Receiver,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        rx.read(buf)
    }

    fn write<'a>(
        tx: &'a Sender,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        tx.write(buf)
    }
}

/// Runs a workload on our runtime with `policy`, `placement` and `poller`.
pub(crate) fn run(
    (policy, placement, poller): (Policy, Placement, Poller),
    workers: usize,
    make: impl FnOnce() -> io::Result<Workload>,
) -> Result<Ran, String> {
    let runtime = Builder::new()
        .workers(workers)
        .policy(policy)
        .placement(placement)
        .poller(poller)
        .build()
        .map_err(|e| e.to_string())?;
    // Opened inside the runtime, whose pollers register the channels.
    let workload = runtime
        .block_on(async move { make() })
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot open the channels: {e}"))?;
    let cpu = CpuClock::start()?;
    let start = Instant::now();
    let handles: Vec<_> = workload
        .tasks
        .into_iter()
        .map(|task| runtime.spawn(task))
        .collect();
    for handle in handles {
        handle.join().map_err(|e| e.to_string())?;
    }
    let elapsed = start.elapsed();
    let cpu = cpu.elapsed()?;
    succeeded(&workload.failed)?;
    Ok(Ran {
        elapsed,
        cpu,
        stats: Some(runtime.stats()),
    })
}

/// hyper on our runtime (the kernel's placement, the default): an accept loop that spawns a
/// task per connection.
pub(crate) struct HttpServer {
    runtime: Runtime,
}

impl HttpServer {
    /// Serves `listener` on a new runtime of `workers` workers.
    pub(crate) fn start(
        (policy, poller): (Policy, Poller),
        workers: usize,
        listener: std::net::TcpListener,
    ) -> Result<HttpServer, String> {
        let runtime = Builder::new()
            .workers(workers)
            .policy(policy)
            .poller(poller)
            .build()
            .map_err(|e| e.to_string())?;
        let listener = runtime
            .block_on(async move { TcpListener::from_std(listener) })
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot register the listener: {e}"))?;
        let handle = runtime.handle().clone();
        drop(runtime.spawn(accept(listener, handle)));
        Ok(HttpServer { runtime })
    }

    /// Shuts the runtime down (its connections close with it); its wakeup counters.
    pub(crate) fn stop(mut self) -> Result<Stats, String> {
        let stats = self.runtime.stats();
        self.runtime.shutdown();
        Ok(stats)
    }
}

/// Accepts connections until the runtime shuts down, each served by its own task.
async fn accept(listener: TcpListener, handle: Handle) {
    let timer = HyperTimer::new(&handle);
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                drop(handle.spawn(serve_connection(HyperIo::new(stream), timer.clone())));
            }
            Err(_) => sleep(ACCEPT_BACKOFF).await,
        }
    }
}
