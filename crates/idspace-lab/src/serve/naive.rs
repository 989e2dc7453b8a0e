//! The naive services, what a user writes first: hyper on tokio and a small pool of
//! PostgreSQL connections, each with its statement prepared once. Two of them:
//!
//! - [`Statement::PerId`], the baseline the goal names: `SELECT nextval(...)` once per ID,
//!   one statement (one round trip) after the other, as a loop over a client does;
//! - [`Statement::Series`], the better naive service: one statement per request,
//!   `SELECT nextval(...) FROM generate_series(1, N)`, every ID of a batch in one round trip.

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

/// The sequence both draw from.
pub(crate) const SEQUENCE: &str = "lab_serve_naive";

/// Connections in the pool per worker.
const PER_WORKER: usize = 2;

/// How a naive service asks PostgreSQL for a request's IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Statement {
    /// One `SELECT nextval(...)` per ID.
    PerId,
    /// One `SELECT nextval(...) FROM generate_series(1, N)` per request.
    Series,
}

impl Statement {
    fn sql(self) -> String {
        match self {
            Statement::PerId => format!("SELECT nextval('{SEQUENCE}')"),
            Statement::Series => {
                format!("SELECT nextval('{SEQUENCE}') FROM generate_series(1, $1::bigint)")
            }
        }
    }
}

/// A pooled connection and its prepared statement.
struct Pooled {
    client: tokio_postgres::Client,
    prepared: tokio_postgres::Statement,
}

struct Pool {
    clients: Vec<Pooled>,
    next: AtomicUsize,
    statement: Statement,
}

/// A naive service, listening on a loopback port until dropped.
pub(crate) struct Naive {
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Naive {
    /// Starts one on a tokio runtime of `workers` threads, against the server at `url`.
    pub(crate) fn start(url: &str, workers: usize, statement: Statement) -> Result<Naive, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .map_err(|e| format!("tokio: {e}"))?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("cannot listen on the loopback: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let pool = runtime.block_on(connect(url.to_string(), workers * PER_WORKER, statement))?;
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

/// `size` connections to `url`, each with `statement` prepared.
async fn connect(url: String, size: usize, statement: Statement) -> Result<Arc<Pool>, String> {
    let mut clients = Vec::with_capacity(size);
    for _ in 0..size {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .map_err(|e| format!("naive service: {e}"))?;
        tokio::spawn(connection);
        let prepared = client
            .prepare(&statement.sql())
            .await
            .map_err(|e| format!("naive service: {e}"))?;
        clients.push(Pooled { client, prepared });
    }
    Ok(Arc::new(Pool {
        clients,
        next: AtomicUsize::new(0),
        statement,
    }))
}

impl Drop for Naive {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(std::time::Duration::from_secs(2));
        }
    }
}

/// `count` IDs from the sequence through `pooled`, as `statement` asks for them.
async fn nextval(
    pooled: &Pooled,
    statement: Statement,
    count: i64,
) -> Result<Vec<i64>, tokio_postgres::Error> {
    match statement {
        Statement::PerId => {
            let mut ids = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
            for _ in 0..count {
                ids.push(pooled.client.query_one(&pooled.prepared, &[]).await?.get(0));
            }
            Ok(ids)
        }
        Statement::Series => {
            let rows = pooled.client.query(&pooled.prepared, &[&count]).await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
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
    let response = match nextval(&pool.clients[index], pool.statement, count).await {
        Ok(ids) => {
            let mut body = String::with_capacity(ids.len() * 12);
            for id in ids {
                body.push_str(&id.to_string());
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
