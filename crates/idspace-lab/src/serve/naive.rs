//! The naive service, what a user writes first: hyper on tokio, and for every request one
//! statement `SELECT nextval(...) FROM generate_series(1, N)` (nextval once per ID, in one
//! round trip) on a small pool of PostgreSQL connections.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

/// The sequence it draws from.
pub(crate) const SEQUENCE: &str = "lab_serve_naive";

/// Connections in the pool per worker.
const PER_WORKER: usize = 2;

struct Pool {
    clients: Vec<tokio_postgres::Client>,
    next: AtomicUsize,
}

/// The naive service, listening on a loopback port until dropped.
pub(crate) struct Naive {
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Naive {
    /// Starts it on a tokio runtime of `workers` threads, against the server at `url`.
    pub(crate) fn start(url: &str, workers: usize) -> Result<Naive, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .map_err(|e| format!("tokio: {e}"))?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("cannot listen on the loopback: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let url = url.to_string();
        let pool = runtime.block_on(async move {
            let mut clients = Vec::new();
            for _ in 0..workers * PER_WORKER {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| format!("naive service: {e}"))?;
                tokio::spawn(connection);
                clients.push(client);
            }
            Ok::<_, String>(Arc::new(Pool {
                clients,
                next: AtomicUsize::new(0),
            }))
        })?;
        let listener = {
            let _inside = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(|e| format!("tokio: {e}"))?
        };
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let pool = pool.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| answer(pool.clone(), request));
                    let _ = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Naive {
            addr,
            runtime: Some(runtime),
        })
    }
}

impl Drop for Naive {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(std::time::Duration::from_secs(2));
        }
    }
}

/// One request: `count` (the query's, default 1) IDs from the sequence, one per line.
async fn answer(
    pool: Arc<Pool>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let count: i64 = request
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("count=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    // Relaxed: round-robin over the pool; any spread will do.
    let index = pool.next.fetch_add(1, Ordering::Relaxed) % pool.clients.len();
    let statement = format!("SELECT nextval('{SEQUENCE}') FROM generate_series(1, $1::bigint)");
    let rows = pool.clients[index].query(&statement, &[&count]).await;
    let response = match rows {
        Ok(rows) => {
            let mut body = String::with_capacity(rows.len() * 12);
            for row in rows {
                body.push_str(&row.get::<_, i64>(0).to_string());
                body.push('\n');
            }
            Response::new(Full::new(Bytes::from(body)))
        }
        Err(error) => {
            let mut failed = Response::new(Full::new(Bytes::from(error.to_string())));
            *failed.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            failed
        }
    };
    Ok(response)
}
