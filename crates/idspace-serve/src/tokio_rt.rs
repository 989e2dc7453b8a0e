//! The service on tokio: the same accept loop and API, on tokio's multi-threaded runtime
//! with hyper-util's adapters. It is the lab's reference for our runtime.

use std::io;
use std::sync::Arc;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::watch;

use crate::api::Service;
use crate::server::{serve, Listener};

struct TokioListener(tokio::net::TcpListener);

impl Listener for TokioListener {
    type Io = TokioIo<tokio::net::TcpStream>;

    async fn accept(&self) -> io::Result<Self::Io> {
        let (stream, _) = self.0.accept().await?;
        stream.set_nodelay(true)?;
        Ok(TokioIo::new(stream))
    }
}

/// Serves on a tokio runtime of `workers` threads until `stop` turns true.
pub(crate) fn run(
    workers: usize,
    listener: std::net::TcpListener,
    service: Arc<Service>,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = TokioListener(tokio::net::TcpListener::from_std(listener)?);
        let spawn = |task| {
            tokio::spawn(task);
        };
        serve(listener, spawn, TokioTimer::new(), service, stop).await;
        Ok::<(), io::Error>(())
    })?;
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(())
}
