//! The hello-world service and the servers that run it: hyper on our runtime, hyper on tokio
//! (tokio's own `TcpListener`/`TcpStream` through hyper-util's `TokioIo`), and the bare mio
//! loop. Each listens on a fresh loopback port, accepts until stopped, and runs every
//! connection with the same hyper configuration.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use idspace::sched::{Policy, Poller, Stats};

use super::mio_loop::{bind, MioServer};
use crate::io::ours;

/// The service: `GET /` answers `hello`, anything else 404.
pub(crate) async fn hello(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut response = Response::new(Full::new(Bytes::new()));
    if request.method() == Method::GET && request.uri().path() == "/" {
        *response.body_mut() = Full::new(Bytes::from_static(b"hello"));
    } else {
        *response.status_mut() = StatusCode::NOT_FOUND;
    }
    Ok(response)
}

/// Serves one connection with HTTP/1.1 keep-alive until the client closes it; `timer` runs
/// hyper's header-read timeout. Pipelined answers are flushed together (`pipeline_flush`).
pub(crate) async fn serve_connection<I, T>(io: I, timer: T)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
    T: hyper::rt::Timer + Send + Sync + 'static,
{
    // The connection's end (a client gone, a reset) is not the server's failure.
    let _ = http1::Builder::new()
        .timer(timer)
        .pipeline_flush(true)
        .serve_connection(io, service_fn(hello))
        .await;
}

/// The pause after a failed accept (a full fd table), before the next try.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// A server of the experiment.
#[derive(Clone, Copy)]
pub(crate) enum Server {
    /// hyper on our runtime, with a wakeup policy, the kernel's placement and a poller shape.
    Ours(Policy, Poller),
    /// hyper on tokio's multi-thread runtime.
    Tokio,
    /// The single-thread mio loop.
    Mio,
}

/// A server accepting connections.
pub(crate) struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    serving: Serving,
}

enum Serving {
    Ours(ours::HttpServer),
    Tokio(tokio::runtime::Runtime),
    Mio(MioServer),
}

impl Server {
    /// Starts the server on `workers` workers (the mio loop has one thread); its threads
    /// inherit the calling thread's CPU affinity.
    pub(crate) fn start(self, workers: usize) -> Result<Running, String> {
        let (listener, addr) = bind()?;
        let serving = match self {
            Server::Ours(policy, poller) => Serving::Ours(ours::HttpServer::start(
                (policy, poller),
                workers,
                listener,
            )?),
            Server::Tokio => Serving::Tokio(tokio_server(workers, listener)?),
            Server::Mio => {
                Serving::Mio(MioServer::start(listener).map_err(|e| format!("mio loop: {e}"))?)
            }
        };
        Ok(Running { addr, serving })
    }
}

impl Running {
    /// Stops the server and closes its connections; our runtime's wakeup counters.
    pub(crate) fn stop(self) -> Result<Option<Stats>, String> {
        match self.serving {
            Serving::Ours(server) => server.stop().map(Some),
            Serving::Tokio(runtime) => {
                runtime.shutdown_timeout(Duration::from_secs(5));
                Ok(None)
            }
            Serving::Mio(server) => server.stop().map(|()| None),
        }
    }
}

/// hyper on tokio: an accept loop that spawns a task per connection.
fn tokio_server(
    workers: usize,
    listener: std::net::TcpListener,
) -> Result<tokio::runtime::Runtime, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    let listener = {
        let _inside = runtime.enter();
        tokio::net::TcpListener::from_std(listener).map_err(|e| format!("tokio: {e}"))?
    };
    runtime.spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve_connection(TokioIo::new(stream), TokioTimer::new()));
                }
                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
            }
        }
    });
    Ok(runtime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn every_server_answers_hello_and_stops() {
        let ours = Poller::ALL.map(|poller| Server::Ours(Policy::Wakelist, poller));
        for server in ours.into_iter().chain([Server::Tokio, Server::Mio]) {
            let running = server.start(2).unwrap();
            let mut client = std::net::TcpStream::connect(running.addr).unwrap();
            client
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let get = "GET / HTTP/1.1\r\nHost: lab\r\n\r\n";
            let last = "GET /nothing HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n";
            client
                .write_all(format!("{get}{get}{last}").as_bytes())
                .unwrap();
            let mut answers = String::new();
            client.read_to_string(&mut answers).unwrap();
            assert_eq!(answers.matches("\r\n\r\nhello").count(), 2, "{answers}");
            assert!(answers.contains("HTTP/1.1 404 Not Found\r\n"), "{answers}");
            let stats = running.stop().unwrap();
            assert_eq!(stats.is_some(), matches!(server, Server::Ours(..)));
        }
    }
}
