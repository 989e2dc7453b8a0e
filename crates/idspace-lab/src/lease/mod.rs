//! Experiment `lease`: IDs unique across a cluster. Node processes allocating
//! through ranges leased from PostgreSQL, against PostgreSQL's own `nextval` (CACHE 1 and
//! CACHE 1000, one session per thread), one `UPDATE … RETURNING` per ID, and a Snowflake-style
//! generator that needs no store, all against one throwaway server in one run; then IDs/s while
//! the server restarts.

mod workloads;

use std::time::Duration;

use idspace_lease::server::{Durability, Throwaway};
use idspace_lease::Store;

use crate::declare::{self, Declared, Measurement, Sweep};
use crate::model::{Row, Section};
use crate::sys::forked::run_forked;
use crate::{Context, Experiment, Scale};
use workloads::Outcome;

/// The experiment.
pub struct Lease;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// K node processes.
    Nodes,
    /// One node in the lab's process.
    Node,
    NextvalCache1,
    NextvalCache1000,
    UpdatePerId,
    Snowflake,
}

struct Candidate {
    name: String,
    kind: Kind,
}

impl crate::measure::Candidate for Candidate {
    fn name(&self) -> &str {
        &self.name
    }
}

/// The column the ratio rows divide by.
const REFERENCE: &str = "nextval CACHE 1";

struct Plan {
    /// Node processes.
    nodes: usize,
    /// Threads per node, and sessions of the baselines in all.
    threads: usize,
    run: Duration,
    /// The fault runs: the server is stopped a quarter in and started again.
    fault_run: Duration,
}

impl Plan {
    fn new(scale: Scale, cpus: usize) -> Plan {
        match scale {
            Scale::Quick => Plan {
                nodes: 2,
                threads: cpus.clamp(1, 2),
                run: Duration::from_millis(400),
                fault_run: Duration::from_millis(1500),
            },
            Scale::Full => Plan {
                nodes: 2,
                threads: cpus.max(2),
                run: Duration::from_secs(2),
                fault_run: Duration::from_secs(4),
            },
        }
    }
}

const SPACE: &str = "lab";

/// Creates the space, the sequences and the counter the candidates use.
fn prepare(url: &str) -> Result<(), String> {
    let mut store = Store::connect(url).map_err(|e| e.to_string())?;
    store
        .create_space(SPACE, 1, i64::MAX as u64, false)
        .map_err(|e| e.to_string())?;
    store
        .client()
        .batch_execute(
            "CREATE SEQUENCE lab_cache1 CACHE 1;
             CREATE SEQUENCE lab_cache1000 CACHE 1000;
             CREATE TABLE lab_counter (k integer PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO lab_counter VALUES (1, 0);",
        )
        .map_err(|e| e.to_string())
}

/// One run of `candidate`.
fn run(
    candidate: &Candidate,
    url: &str,
    plan: &Plan,
    duration: Duration,
) -> Result<Outcome, String> {
    let sessions = plan.nodes * plan.threads;
    match candidate.kind {
        Kind::Nodes => {
            let results = run_forked(plan.nodes, &mut (), &|index, _| {
                workloads::lease_node(url, SPACE, &format!("lab-{index}"), plan.threads, duration)
                    .ok()
            })?;
            let mut total = Outcome::default();
            for (index, result) in results.into_iter().enumerate() {
                let outcome = result.ok_or_else(|| format!("node process {index} failed"))?;
                total.ids += outcome.ids;
                total.elapsed = total.elapsed.max(outcome.elapsed);
                // The slowest process's p99 bounds the whole run's from above.
                total.p99_ns = total.p99_ns.max(outcome.p99_ns);
                total.round_trips += outcome.round_trips;
                total.failures += outcome.failures;
            }
            Ok(total)
        }
        Kind::Node => workloads::lease_node(url, SPACE, "lab-inproc", plan.threads, duration),
        Kind::NextvalCache1 => {
            workloads::per_statement(url, "SELECT nextval('lab_cache1')", sessions, duration)
        }
        Kind::NextvalCache1000 => {
            workloads::per_statement(url, "SELECT nextval('lab_cache1000')", sessions, duration)
        }
        Kind::UpdatePerId => workloads::per_statement(
            url,
            "UPDATE lab_counter SET v = v + 1 WHERE k = 1 RETURNING v",
            sessions,
            duration,
        ),
        Kind::Snowflake => workloads::snowflake(sessions, duration),
    }
}

impl Experiment for Lease {
    fn name(&self) -> &'static str {
        "lease"
    }

    fn about(&self) -> &'static str {
        "IDs leased from PostgreSQL per CPU vs nextval, UPDATE per ID and Snowflake"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let plan = Plan::new(cx.scale, cx.cpus());
        let server = Throwaway::start(Durability { fsync: true })?;
        let url = server.url();
        prepare(&url)?;
        let over = cx.oversubscribed(plan.nodes * plan.threads + 1);
        let declared = Declared {
            name: self.name(),
            title: "Leased ID ranges vs PostgreSQL sequences and Snowflake".into(),
            intro: vec![format!(
                "One throwaway PostgreSQL ({}) on a Unix socket, shared by every candidate. A \
                 lease node serves IDs from per-CPU sub-ranges of 64 carved from ranges leased \
                 in one round trip, prefetching the next lease at 10% use. `nextval` and \
                 `UPDATE … RETURNING` send one statement per ID, one session per thread.",
                idspace_lease::server::find_binaries()
                    .map(|dir| dir.display().to_string())
                    .unwrap_or_default()
            )],
            measurements: vec![steady(&plan, &url, over), restart(&plan, &url, &server)],
            notes: vec![NOTE.into()],
        };
        Ok(declare::run(cx, declared))
    }
}

const NOTE: &str = "Goals: ≥ 1M IDs/s per node with steps of 1000, ≥ 40x `nextval` CACHE 1, \
    p99 ≤ 10 µs with the store healthy. The lease columns start at a step of 1000, which adapts \
    (doubling while leases last under 1 s). The p99 of the node processes is the largest of \
    their own p99s. Every allocation is timed with `Instant::now`, whose cost (~20-30 ns) is in \
    the figures. The server runs with fsync and synchronous_commit on, as a production server \
    does.";

fn candidate(name: impl Into<String>, kind: Kind) -> Candidate {
    Candidate {
        name: name.into(),
        kind,
    }
}

/// IDs with the store healthy.
fn steady<'a>(plan: &'a Plan, url: &'a str, over: &'static str) -> Box<dyn Measurement + 'a> {
    let (k, t) = (plan.nodes, plan.threads);
    let candidates = vec![
        candidate(format!("lease {k}×{t}"), Kind::Nodes),
        candidate(REFERENCE, Kind::NextvalCache1),
        candidate("nextval CACHE 1000", Kind::NextvalCache1000),
        candidate("UPDATE per ID", Kind::UpdatePerId),
        candidate("snowflake", Kind::Snowflake),
    ];
    Sweep::new(
        candidates,
        vec![()],
        |_| "steady".into(),
        move |c, _| run(c, url, plan, plan.run).map(|o| o.metrics()),
    )
    .tables(move |swept, _| {
        let result = swept.only();
        let rate = result.metric(0);
        let nodes = format!("lease {k}×{t}");
        let per_node = rate.only(&[&nodes]).map(|v| v / k as f64);
        let per_node: Vec<Option<f64>> = swept
            .columns
            .iter()
            .map(|name| per_node.get(name))
            .collect();
        let sessions = k * t;
        let title = format!(
            "IDs with the store healthy: lease = {k} node processes × {t} threads; the \
             baselines and Snowflake on {sessions} threads ({sessions} sessions){over}"
        );
        let rows = vec![
            Row::numbers("IDs/s", &rate, 0),
            Row::ratios(format!("IDs/s ÷ {REFERENCE}"), rate.over(REFERENCE)),
            Row::numbers("IDs/s per node (lease)", per_node, 0),
            Row::numbers("p99 allocation latency (µs)", result.metric(1), 2),
            Row::numbers("DB round trips per million IDs", result.metric(2), 1),
        ];
        swept
            .table("steady", title, "IDs/s, µs, round trips", rows)
            .into()
    })
}

/// One run of `c` while the server is stopped a quarter into it and started again.
fn run_through_restart(
    c: &Candidate,
    url: &str,
    plan: &Plan,
    server: &Throwaway,
) -> Result<Vec<f64>, String> {
    std::thread::scope(|scope| {
        let restarter = scope.spawn(|| {
            std::thread::sleep(plan.fault_run / 4);
            let started = std::time::Instant::now();
            server.stop()?;
            server.start_again()?;
            Ok::<Duration, String>(started.elapsed())
        });
        let outcome = run(c, url, plan, plan.fault_run);
        let downtime = restarter
            .join()
            .map_err(|_| "the restart panicked".to_string())??;
        let outcome = outcome?;
        let mut metrics = outcome.metrics();
        metrics.push(downtime.as_secs_f64() * 1000.0);
        metrics.push(outcome.failures as f64);
        Ok(metrics)
    })
}

/// IDs while the server restarts.
fn restart<'a>(plan: &'a Plan, url: &'a str, server: &'a Throwaway) -> Box<dyn Measurement + 'a> {
    let t = plan.threads;
    let faulty = vec![
        candidate(format!("lease 1×{t}"), Kind::Node),
        candidate(REFERENCE, Kind::NextvalCache1),
        candidate("UPDATE per ID", Kind::UpdatePerId),
    ];
    Sweep::new(
        faulty,
        vec![()],
        |_| "restart".into(),
        move |c, _| run_through_restart(c, url, plan, server),
    )
    .tables(move |swept, _| {
        let faults = swept.only();
        let title = format!(
            "IDs while PostgreSQL restarts: stopped (fast shutdown) {} ms into a {} ms run, \
             then started again; lease = 1 node × {t} threads, the baselines {} sessions that \
             reconnect",
            plan.fault_run.as_millis() / 4,
            plan.fault_run.as_millis(),
            plan.nodes * t
        );
        let rows = vec![
            Row::numbers("IDs/s during the restart run", faults.metric(0), 0),
            Row::ratios(format!("÷ {REFERENCE}"), faults.metric(0).over(REFERENCE)),
            Row::numbers("server down and up again (ms)", faults.metric(3), 0),
            Row::numbers("failed allocations", faults.metric(4), 0),
        ];
        swept
            .table("restart", title, "IDs/s, ms, failed calls", rows)
            .into()
    })
}
