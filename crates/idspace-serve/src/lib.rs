//! # idspace-serve
//!
//! `idspace serve`: IDs unique across a cluster, over HTTP. One process is one node of the
//! cluster: it serves each space from a lease [`Node`](idspace_lease::Node) (ranges leased
//! from PostgreSQL, handed out per CPU, the next lease prefetched), through hyper's HTTP/1.1
//! server, on idspace's own runtime or, with `--runtime tokio`, on tokio: the same service
//! code on both (the accept loop is written once over a listener, a spawn function and
//! hyper's timer), so that the lab compares runtimes and nothing else.
//!
//! ```no_run
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     serve: idspace_serve::Args,
//! }
//!
//! let cli = Cli::parse_from(["serve", "--url", "host=/var/run/postgresql user=app"]);
//! std::process::exit(if idspace_serve::run(cli.serve) == std::process::ExitCode::SUCCESS { 0 } else { 1 });
//! ```
//!
//! # Invariants
//!
//! - **No ID twice.** Every ID comes from a lease of the node's own; the lease crate's fencing
//!   holds through store outages, pauses past a lease's expiry and crashes (see
//!   `idspace_lease`). A batch that fails half-way drops the IDs it took (counted in
//!   `/metrics`), never hands them out later.
//! - **Outages.** While PostgreSQL is down, requests are served from the leases held (the
//!   current and the prefetched one); once they are used up or expire, requests get 503
//!   `store_unreachable` with `Retry-After`, never a duplicate.
//! - **Stops.** SIGTERM or SIGINT: the node stops accepting, finishes the requests in flight
//!   (hyper's graceful shutdown, at most ten seconds), then parks the unused tail of each
//!   monotonic lease under `--node-id` for its next start (only the IDs the CPUs had carved
//!   are lost), and exits 0. A crash leaves gaps; the next start of the same `--node-id`
//!   counts them (at most the IDs its leftover leases held) and logs them.
//!
//! # Where we differ from Meituan Leaf
//!
//! The segment route answers as Leaf's does, but Leaf loses its segments on every restart and
//! fails with "both segments not ready" when a small step runs out under load: here a restart
//! resumes the parked tail, and the adaptive step (doubling while leases last under a second)
//! keeps the prefetched lease ahead of the load. Errors are HTTP statuses with JSON bodies
//! rather than Leaf's negative IDs.

#![warn(missing_docs)]

mod admin_store;
mod api;
mod args;
mod error;
mod idspace_rt;
mod metrics;
mod os;
mod server;
mod shards;
mod spaces;
mod stop;
mod tokio_rt;

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use api::Service;
pub use args::{Args, RuntimeKind, HELP};
pub use error::ApiError;

/// The most IDs one request of `GET /v1/spaces/{space}/ids` may ask for.
pub const MAX_COUNT: usize = 10_000;

/// Writes one line to the log (stderr), prefixed with the command's name.
pub(crate) fn log(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "idspace serve: {line}");
}

/// Runs `idspace serve` until SIGTERM or SIGINT: 0 after a graceful stop, 1 if it could not
/// start (the reason on stderr).
pub fn run(args: Args) -> ExitCode {
    match serve_until_signal(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log(&error);
            ExitCode::from(1)
        }
    }
}

fn serve_until_signal(args: &Args) -> Result<(), String> {
    os::block_stop_signals().map_err(|e| format!("signals: {e}"))?;
    match os::raise_fd_limit() {
        Ok((before, now)) => log(&format!(
            "open file limit (ulimit -n): {now} (soft limit was {before}): at most about {} \
             connections",
            now.saturating_sub(64)
        )),
        Err(error) => log(&format!("open file limit unknown: {error}")),
    }
    let running = start(args)?;
    let signal = os::wait_for_stop_signal().map_err(|e| format!("signals: {e}"))?;
    log(&format!("{signal}: stopping gracefully"));
    running.stop()?;
    log("stopped");
    Ok(())
}

/// The service running in this process, on threads of its own: what `idspace serve` runs
/// between its start and a stop signal, and what the lab measures in its own process.
/// Dropping it stops it as [`Running::stop`] does.
///
/// ```no_run
/// use std::net::SocketAddr;
/// use idspace_serve::{Args, RuntimeKind};
///
/// let args = Args {
///     url: "host=/var/run/postgresql user=app dbname=app".into(),
///     listen: SocketAddr::from(([127, 0, 0, 1], 0)),
///     workers: Some(2),
///     runtime: RuntimeKind::Idspace,
///     node_id: Some("web-1".into()),
///     admin_token_file: None,
///     ttl_ms: 10_000,
///     step: 1000,
/// };
/// let running = idspace_serve::start(&args)?;
/// println!("curl http://{}/api/segment/get/orders", running.address());
/// running.stop()?;
/// # Ok::<(), String>(())
/// ```
pub struct Running {
    address: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    service: Arc<Service>,
}

/// The token of `--admin-token-file`: the file's content, trimmed; refused if empty, or if it
/// holds a control character (a second line, say), which no request header can carry, so no
/// client could ever present it.
fn admin_token(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--admin-token-file {}: {e}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("--admin-token-file {}: empty", path.display()));
    }
    if token.chars().any(char::is_control) {
        return Err(format!(
            "--admin-token-file {}: the token holds a control character (a line break?), \
             which no request header can carry",
            path.display()
        ));
    }
    Ok(token.to_string())
}

/// Starts the service `args` describe: checks the store, binds, and serves on a thread of its
/// own until [`Running::stop`].
///
/// ```no_run
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     serve: idspace_serve::Args,
/// }
///
/// let cli = Cli::parse_from(["serve", "--url", "host=/tmp user=me", "--listen", "127.0.0.1:0"]);
/// let running = idspace_serve::start(&cli.serve)?;
/// println!("serving on {}", running.address());
/// running.stop()?;
/// # Ok::<(), String>(())
/// ```
pub fn start(args: &Args) -> Result<Running, String> {
    let admin_token = args
        .admin_token_file
        .as_deref()
        .map(admin_token)
        .transpose()?;
    // Fail now on a bad URL or an unreachable store, not at the first request.
    idspace_lease::Store::connect(&args.url).map_err(|e| e.to_string())?;
    let workers = args
        .workers
        .map(usize::from)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let config = spaces::NodeConfig {
        url: args.url.clone(),
        node_id: args.node_id.clone(),
        ttl: std::time::Duration::from_millis(args.ttl_ms),
        step: args.step,
        cpus: workers,
    };
    let service = Arc::new(Service::new(config, admin_token));
    let listener = server::bind(args.listen).map_err(|e| format!("{}: {e}", args.listen))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    log(&format!(
        "listening on {address} ({:?} runtime, {workers} workers, node {})",
        args.runtime,
        args.node_id.as_deref().unwrap_or("(host:pid)")
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let runtime = args.runtime;
    let serving = service.clone();
    let thread = std::thread::Builder::new()
        .name("idspace-serve".into())
        .spawn(move || match runtime {
            RuntimeKind::Tokio => tokio_rt::run(workers, listener, serving, stopped),
            RuntimeKind::Idspace => idspace_rt::run(workers, listener, serving, stopped),
        })
        .map_err(|e| format!("no thread: {e}"))?;
    Ok(Running {
        address,
        stop,
        thread: Some(thread),
        service,
    })
}

impl Running {
    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops gracefully: no more connections, the requests in flight finished (at most ten
    /// seconds), then every space's node parks its unused tail (logged).
    pub fn stop(mut self) -> Result<(), String> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), String> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        let _ = self.stop.send(true);
        let served = thread
            .join()
            .map_err(|_| "the serving thread panicked".to_string())?;
        self.service.stop_nodes();
        served.map_err(|e| format!("serving: {e}"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::admin_token;

    #[test]
    fn an_admin_token_a_header_cannot_carry_is_refused() {
        let path = std::env::temp_dir().join(format!("idspace-token-{}", std::process::id()));
        let token = |text: &str| {
            std::fs::write(&path, text).unwrap();
            admin_token(&path)
        };
        assert_eq!(token("  s3cret\n"), Ok("s3cret".to_string()));
        assert!(token(" \n").unwrap_err().ends_with(": empty"));
        for bad in ["s3cret\nsecond line", "a\u{1}b"] {
            let error = token(bad).unwrap_err();
            assert!(error.contains("control character"), "{error}");
        }
        std::fs::remove_file(&path).unwrap();
    }
}
