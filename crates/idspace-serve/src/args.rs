//! [`Args`]: the flags of `idspace serve`, shared by the `idspace` command and this crate's
//! own binary.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args as ClapArgs, ValueEnum};

/// The HTTP API and its limits, shown after the flags in `idspace serve --help`.
pub const HELP: &str = "\
HTTP API (errors are JSON bodies {\"error\": CODE, \"message\": TEXT}):
  GET  /api/segment/get/{space}      one ID as plain text (Meituan Leaf's segment contract)
  GET  /v1/spaces/{space}/ids?count=N
                                     N IDs, 1 to 10000 (default 1): one per line, or a JSON
                                     array with `Accept: application/json`
  POST /v1/spaces                    create a space: body {\"name\", \"min\", \"max\", \"cyclic\"},
                                     header `Authorization: Bearer TOKEN` (the token of
                                     --admin-token-file; without it the route answers 404)
  GET  /healthz                      200 `ok` while the store answers or a held lease has IDs
                                     left; 503 with the reason otherwise; then, per space,
                                     when its lease expires unless renewed
  GET  /metrics                      Prometheus text: IDs issued, leases and their round-trip
                                     time, step, IDs left, gaps, requests, errors, latency

Error codes: unknown_space (404), exhausted (409), bad_count (400), bad_request (400),
store_unreachable (503, with Retry-After), unauthorized (401), admin_disabled (404),
not_found (404), method_not_allowed (405), space_exists (409), invalid_space (400),
shutting_down (503).

While PostgreSQL is down the node serves from the leases it holds. A server that accepts and
never answers counts as down: /healthz waits 2 s for it, a new space and a lease 5 s each,
then store_unreachable. SIGTERM or SIGINT stops the node gracefully: it stops accepting,
finishes the requests in flight, parks the unused tail of each lease for the next start of the
same --node-id, and exits 0. A crash leaves gaps, which the
next start of the same --node-id counts and logs.

Example:
  idspace serve --url 'host=/var/run/postgresql user=app dbname=app' --node-id web-1 &
  curl -s localhost:8080/api/segment/get/orders";

/// Which runtime serves the connections.
///
/// ```
/// use clap::ValueEnum;
/// use idspace_serve::RuntimeKind;
///
/// assert_eq!(RuntimeKind::from_str("tokio", false), Ok(RuntimeKind::Tokio));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RuntimeKind {
    /// idspace's own runtime (`idspace::sched`) with its reactor.
    Idspace,
    /// tokio's multi-threaded runtime (the reference the lab compares with).
    Tokio,
}

/// The flags of `idspace serve`.
///
/// ```
/// use clap::Parser;
/// use idspace_serve::{Args, RuntimeKind};
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     serve: Args,
/// }
///
/// let cli = Cli::parse_from(["serve", "--url", "host=/tmp user=me", "--runtime", "tokio"]);
/// assert_eq!(cli.serve.runtime, RuntimeKind::Tokio);
/// assert_eq!(cli.serve.listen.port(), 8080);
/// ```
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// The PostgreSQL server: `postgresql://user@host:port/db` or `host=/run/postgresql
    /// user=u ...`.
    #[arg(long)]
    pub url: String,
    /// The address to listen on (port 0: any free port, named in the log).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Worker threads (default: this machine's CPUs).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub workers: Option<u16>,
    /// The runtime that serves the connections.
    #[arg(long, value_enum, default_value_t = RuntimeKind::Idspace)]
    pub runtime: RuntimeKind,
    /// This node's stable identity: a graceful stop parks the unused tails of its leases for
    /// the next start of the same identity, which also counts what a crash left. Unique among
    /// running nodes (default: host name and process ID, so nothing is resumed).
    #[arg(long, value_parser = node_id)]
    pub node_id: Option<String>,
    /// A file whose content (trimmed) is the bearer token of the admin routes; without it,
    /// they are off.
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,
    /// How long a lease lasts without renewal, in milliseconds (100 to 86400000).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    pub ttl_ms: u64,
    /// The smallest lease, in IDs (it adapts up to 2^20 as the rate grows).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    pub step: u64,
}

/// A `--node-id`: any text but an empty or blank one, which names no node (every node started
/// with it would share one identity).
fn node_id(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err("a node's identity must not be empty".into());
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Args;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: Args,
    }

    #[test]
    fn a_blank_node_id_is_refused() {
        let parse = |id: &str| Cli::try_parse_from(["serve", "--url", "u", "--node-id", id]);
        assert_eq!(
            parse("web-1").unwrap().serve.node_id.as_deref(),
            Some("web-1")
        );
        for blank in ["", "  "] {
            let error = parse(blank).err().expect("refused");
            assert!(error.to_string().contains("must not be empty"), "{error}");
        }
    }
}
