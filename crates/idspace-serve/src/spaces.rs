//! [`Spaces`]: one lease [`Node`] per space asked for, started on the first request for it.
//!
//! A node is started under one lock, so that a process never runs two nodes of one identity
//! in one space (their graceful stops would park each other's tails). Before a node with an
//! explicit identity starts, the lease rows a crashed process of that identity left are
//! reclaimed and their IDs counted as gaps.
//!
//! Everything that talks to the store from a request (starting a node, creating a space, the
//! health check) runs on a thread of its own, awaited by the request: PostgreSQL's client
//! blocks (and runs a tokio runtime of its own, which may not start on a tokio worker), and
//! no worker of either runtime should wait for a network round trip. Creating a space and the
//! health check wait a bounded time for the store's answer, through the service's own
//! connection ([`AdminStore`]), and then fail with `store_unreachable`.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idspace::percid::PerCidCounter;
use idspace_lease::Node;

use crate::admin_store::{lock, off_thread, off_thread_within, AdminStore};
use crate::error::ApiError;
use crate::metrics::{label, metric};
use crate::shards::Shards;

/// A space's node and its counters.
pub(crate) struct SpaceNode {
    node: Node,
    /// IDs answered (per CID: every request adds to it).
    issued: PerCidCounter,
    /// IDs taken from the node but not answered (a batch that failed half-way).
    dropped: PerCidCounter,
    /// IDs that leases of a crashed process of this identity held (at most that many gaps).
    crash_gap: u64,
}

impl SpaceNode {
    /// `count` IDs, each handed to `each`, or the first error (the IDs taken before it are
    /// counted as dropped: the caller discards what `each` made of them).
    ///
    /// On our runtime the calling task holds a CID (see `idspace_rt`): its IDs come from that
    /// CID's sub-range, which no other running task uses meanwhile. Elsewhere (tokio), from
    /// the sub-range of the CPU the thread runs on.
    pub fn take(&self, count: usize, mut each: impl FnMut(u64)) -> Result<(), ApiError> {
        let cid = idspace::process::current().and_then(|me| me.cid);
        for taken in 0..count {
            let next = match cid {
                Some(cid) => self.node.next_id_on(cid as usize),
                None => self.node.next_id(),
            };
            match next {
                Ok(id) => each(id),
                Err(error) => {
                    self.dropped.add(taken as u64);
                    return Err(error.into());
                }
            }
        }
        self.issued.add(count as u64);
        Ok(())
    }
}

/// How nodes are started.
#[derive(Debug, Clone)]
pub(crate) struct NodeConfig {
    pub url: String,
    /// The node's stable identity; `None`: the lease crate's default (host and process).
    pub node_id: Option<String>,
    pub ttl: Duration,
    pub step: u64,
    pub cpus: usize,
}

/// The spaces this node serves.
pub(crate) struct Spaces {
    config: NodeConfig,
    nodes: Shards<Arc<SpaceNode>>,
    starting: Mutex<()>,
    /// The connection for admin requests, health checks and reclaims.
    store: AdminStore,
    closed: AtomicBool,
}

impl Spaces {
    pub fn new(config: NodeConfig) -> Spaces {
        Spaces {
            store: AdminStore::new(&config.url),
            config,
            nodes: Shards::new(),
            starting: Mutex::new(()),
            closed: AtomicBool::new(false),
        }
    }

    /// `count` IDs of `space` for `each` (see [`SpaceNode::take`]); `None` if its node has not
    /// started (see [`Spaces::start`]).
    pub fn take(
        &self,
        space: &str,
        count: usize,
        each: impl FnMut(u64),
    ) -> Option<Result<(), ApiError>> {
        self.nodes.with(space, |node| node.take(count, each))
    }

    /// Starts the node of `space` (off the caller's thread) unless it runs.
    pub async fn start(self: &Arc<Self>, space: &str) -> Result<(), ApiError> {
        if self.nodes.with(space, |_| ()).is_some() {
            return Ok(());
        }
        let (spaces, name) = (self.clone(), space.to_string());
        off_thread(move || spaces.start_once(&name)).await??;
        Ok(())
    }

    fn start_once(&self, space: &str) -> Result<Arc<SpaceNode>, ApiError> {
        let _starting = lock(&self.starting);
        if let Some(node) = self.nodes.with(space, Arc::clone) {
            return Ok(node);
        }
        // Relaxed: checked under `starting`, which `shutdown` takes after setting it.
        if self.closed.load(Ordering::Relaxed) {
            return Err(ApiError::shutting_down());
        }
        let node = Arc::new(self.start_node(space)?);
        self.nodes.insert(space, node.clone());
        Ok(node)
    }

    fn start_node(&self, space: &str) -> Result<SpaceNode, ApiError> {
        let config = &self.config;
        let mut builder = Node::builder(&config.url, space)
            .ttl(config.ttl)
            .step(config.step, config.step.max(1 << 20))
            .cpus(config.cpus);
        let mut crash_gap = 0;
        if let Some(id) = &config.node_id {
            crash_gap = self
                .store
                .with(STORE_WAIT, |store| store.reclaim(space, id))?;
            builder = builder.node_id(id.clone());
        }
        let node = builder.start()?;
        if crash_gap > 0 {
            crate::log(&format!(
                "space \"{}\": a crashed process of node \"{}\" left leases of {crash_gap} \
                 IDs; at most that many were never issued (gaps)",
                space.escape_debug(),
                config.node_id.as_deref().unwrap_or_default()
            ));
        }
        Ok(SpaceNode {
            node,
            issued: PerCidCounter::new(),
            dropped: PerCidCounter::new(),
            crash_gap,
        })
    }

    /// Creates a space.
    pub async fn create(
        self: &Arc<Self>,
        name: String,
        min: u64,
        max: u64,
        cyclic: bool,
    ) -> Result<(), ApiError> {
        let spaces = self.clone();
        off_thread_within(STORE_WAIT, move || {
            spaces.store.with(STORE_WAIT, |store| {
                store.create_space(&name, min, max, cyclic)
            })
        })
        .await?
    }

    /// `Ok(reason)` while the node can serve (the store answers, or a lease held and not
    /// expired has IDs left), else the store's error; either way followed by when each
    /// space's lease expires unless renewed (see [`Spaces::deadlines`]).
    pub async fn health(self: &Arc<Self>) -> Result<String, ApiError> {
        // Relaxed: a stop flag, read for display.
        if self.closed.load(Ordering::Relaxed) {
            return Err(ApiError::shutting_down());
        }
        let spaces = self.clone();
        // Bounded: a store that accepts but never answers (a frozen server, a partition under
        // an open connection) must not hold the health check, which has to answer.
        let reached = off_thread_within(PROBE_WAIT, move || {
            spaces
                .store
                .with(PROBE_WAIT, |store| store.schema_version().map(|_| ()))
        })
        .await
        .and_then(|reached| reached);
        let held = {
            let nodes = self.nodes.all();
            nodes.values().any(|space| {
                let stats = space.node.stats();
                // The IDs of an expired lease are refused (another node may hold them by
                // now): only a lease still live keeps the node serving.
                let live = stats.lease_expires_in.is_some_and(|left| !left.is_zero());
                live && stats.left_current + stats.left_next > 0
            })
        };
        let deadlines = self.deadlines();
        match reached {
            Ok(()) => Ok(format!("ok\n{deadlines}")),
            Err(error) if held => Ok(format!(
                "ok: serving from held leases; {}\n{deadlines}",
                error.message
            )),
            Err(mut error) => {
                let _ = write!(
                    error.message,
                    "; {}",
                    deadlines.trim_end().replace('\n', "; ")
                );
                Err(error)
            }
        }
    }

    /// One line per space: when the lease it serves from expires unless renewed (a node renews
    /// it well before, while the store answers), or that it holds none.
    fn deadlines(&self) -> String {
        let nodes = self.nodes.all();
        let mut names: Vec<&String> = nodes.keys().collect();
        names.sort();
        let mut out = String::new();
        for name in names {
            let stats = nodes[name].node.stats();
            // Escaped: a name holding a quote or a line break keeps to its one line.
            let name = name.escape_debug();
            let _ = match stats.lease_expires_in {
                None => writeln!(out, "space \"{name}\": no lease held"),
                Some(left) if left.is_zero() => {
                    writeln!(out, "space \"{name}\": its lease has expired")
                }
                Some(left) => writeln!(
                    out,
                    "space \"{name}\": lease expires in {:.1} s",
                    left.as_secs_f64()
                ),
            };
        }
        out
    }

    /// Appends every space's series to `out`.
    pub fn render(&self, out: &mut String) {
        let nodes: Vec<(String, Arc<SpaceNode>)> = {
            let nodes = self.nodes.all();
            nodes.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        let stats: Vec<_> = nodes
            .iter()
            .map(|(name, space)| (label(name), space, space.node.stats()))
            .collect();
        type Read = fn(&SpaceNode, &idspace_lease::NodeStats) -> f64;
        let series: [(&str, &str, &str, Read); 8] = [
            (
                "idspace_serve_ids_issued_total",
                "counter",
                "IDs answered.",
                |s, _| s.issued.sum() as f64,
            ),
            (
                "idspace_serve_leases_total",
                "counter",
                "Leases granted by the store.",
                |_, n| n.leases as f64,
            ),
            (
                "idspace_serve_lease_wait_seconds_total",
                "counter",
                "Round-trip time of lease requests, summed.",
                |_, n| n.lease_wait.as_secs_f64(),
            ),
            (
                "idspace_serve_step",
                "gauge",
                "IDs per lease now.",
                |_, n| n.step as f64,
            ),
            (
                "idspace_serve_ids_left_current",
                "gauge",
                "IDs of the current lease not yet carved.",
                |_, n| n.left_current as f64,
            ),
            (
                "idspace_serve_ids_left_next",
                "gauge",
                "IDs of the prefetched lease.",
                |_, n| n.left_next as f64,
            ),
            (
                "idspace_serve_crash_gap_ids",
                "gauge",
                "IDs held by leases a crashed process of this node left (at most that many gaps).",
                |s, _| s.crash_gap as f64,
            ),
            (
                "idspace_serve_dropped_ids_total",
                "counter",
                "IDs taken and never answered (a batch failed half-way).",
                |s, _| s.dropped.sum() as f64,
            ),
        ];
        for (name, kind, help, read) in series {
            metric(out, name, kind, help);
            for (space, node, node_stats) in &stats {
                let _ = writeln!(
                    out,
                    "{name}{{space=\"{space}\"}} {}",
                    read(node, node_stats)
                );
            }
        }
    }

    /// Stops every node: each parks the unused tail of its leases (see
    /// [`Node::shutdown`]); the outcome is logged.
    pub fn shutdown(&self) {
        // Relaxed: read under `starting`, taken below.
        self.closed.store(true, Ordering::Relaxed);
        let _starting = lock(&self.starting);
        let nodes = self.nodes.take_all();
        for (name, space) in nodes {
            // Escaped: a name holding a line break keeps to its one line of the log.
            let name = name.escape_debug();
            let Ok(space) = Arc::try_unwrap(space) else {
                crate::log(&format!(
                    "space \"{name}\": still in use at the stop; its leases are left to expire"
                ));
                continue;
            };
            let issued = space.issued.sum();
            match space.node.shutdown() {
                Ok(done) => crate::log(&format!(
                    "space \"{name}\": {issued} IDs issued; {} IDs parked for the next start, \
                     {} carved and dropped (gaps)",
                    done.parked, done.discarded
                )),
                Err(error) => crate::log(&format!(
                    "space \"{name}\": {issued} IDs issued; the unused tail could not be \
                     parked ({error}): it is a gap"
                )),
            }
        }
    }
}

/// How long `/healthz` waits for the store's answer.
const PROBE_WAIT: Duration = Duration::from_secs(2);

/// How long creating a space waits for the store's answer, and a node's start for the
/// connection an earlier call has.
const STORE_WAIT: Duration = Duration::from_secs(5);
