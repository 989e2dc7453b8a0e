//! The service on idspace's own runtime (`idspace::sched`): its sockets
//! (`idspace::net`, a poller per worker) and hyper's traits over them (`idspace::hyper_rt`).
//! Each connection is a task of the runtime; the accept loop and the API are the same code
//! as on tokio.

use std::io;
use std::sync::Arc;

use idspace::hyper_rt::{HyperIo, HyperTimer};
use idspace::net::{TcpListener, TcpStream};
use idspace::sched::Builder;
use tokio::sync::watch;

use crate::api::Service;
use crate::server::{serve, Listener};

struct IdspaceListener(TcpListener);

impl Listener for IdspaceListener {
    type Io = HyperIo<TcpStream>;

    async fn accept(&self) -> io::Result<Self::Io> {
        let (stream, _) = self.0.accept().await?;
        stream.set_nodelay(true)?;
        Ok(HyperIo::new(stream))
    }
}

/// Serves on an idspace runtime of `workers` workers until `stop` turns true.
pub(crate) fn run(
    workers: usize,
    listener: std::net::TcpListener,
    service: Arc<Service>,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let mut runtime = Builder::new()
        .workers(workers)
        .build()
        .map_err(io::Error::other)?;
    let handle = runtime.handle().clone();
    let served = runtime.block_on(async move {
        let listener = IdspaceListener(TcpListener::from_std(listener)?);
        let timer = HyperTimer::new(&handle);
        let spawn = |task| {
            // The handle is dropped: the task is detached and runs to its end.
            drop(handle.spawn(task));
        };
        serve(listener, spawn, timer, service, stop).await;
        Ok::<(), io::Error>(())
    });
    runtime.shutdown();
    served.map_err(io::Error::other)?
}
