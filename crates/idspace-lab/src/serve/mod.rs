//! Experiment `serve`: the ID service over HTTP under `wrk`. `idspace serve` on our runtime,
//! the same service code on tokio, the naive service calling `nextval` once per ID (and a
//! better naive one calling it for a whole batch in one statement), and a hyper hello-world on
//! tokio and on our runtime (the ceiling of any HTTP service on each), at 64 and 256 keep-alive
//! connections, for one ID per request and for batches of 100; then errors and p99 while
//! PostgreSQL restarts. The service's CPU per request is set against the hello-world on the
//! same runtime (what the service adds to hyper), as well as against tokio's.
//!
//! Every server runs inside the lab's process, so `getrusage` around a wrk run is the server's
//! CPU (wrk is a child process, PostgreSQL a server of its own: neither is counted; the naive
//! service's figure therefore leaves out the CPU PostgreSQL spends on its statements).

mod fixed;
mod naive;
mod wrk;

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use idspace_lease::server::{Durability, Throwaway};
use idspace_lease::Store;

use crate::cputime::CpuClock;
use crate::declare::{self, Declared, Measurement, Sweep};
use crate::measure::{Medians, Values};
use crate::model::{Row, Section};

use crate::goals::{self, Goal};
use crate::{Context, CpuTimes, Experiment, Scale};

/// The experiment.
pub struct Serve;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ours,
    Tokio,
    Naive,
    NaiveSeries,
    Hello,
    HelloOurs,
    /// The single-thread mio loop of the `io` experiment: HTTP with no runtime and no IDs, the
    /// floor of the fixed-rate row.
    Mio,
}

impl Kind {
    /// A hello-world: no IDs, no batches.
    fn is_hello(self) -> bool {
        matches!(self, Kind::Hello | Kind::HelloOurs | Kind::Mio)
    }
}

struct Subject {
    name: &'static str,
    kind: Kind,
}

impl crate::measure::Candidate for Subject {
    fn name(&self) -> &str {
        self.name
    }
}

const OURS: &str = "idspace serve";
const TOKIO: &str = "idspace serve on tokio";
const NAIVE: &str = "nextval per ID";
const NAIVE_SERIES: &str = "nextval, 1 statement";
const HELLO: &str = "hyper hello (tokio)";
const HELLO_OURS: &str = "hyper hello (ours)";
const MIO: &str = "mio loop (no runtime)";

/// The space every ID service serves.
const SPACE: &str = "lab";

struct Plan {
    seconds: u64,
    /// (connections, IDs per request).
    points: Vec<(usize, usize)>,
    fault_seconds: u64,
    /// The length of the fixed-rate runs (p99 wants more requests than a steady run's).
    paced_seconds: u64,
    workers: usize,
    wrk_threads: usize,
}

impl Plan {
    fn new(scale: Scale, cpus: usize) -> Plan {
        let (seconds, points, fault_seconds, paced_seconds) = match scale {
            Scale::Quick => (1, vec![(64, 1), (256, 1), (64, 100)], 2, 2),
            Scale::Full => (5, vec![(64, 1), (256, 1), (64, 100), (256, 100)], 8, 10),
        };
        Plan {
            seconds,
            points,
            fault_seconds,
            paced_seconds,
            workers: cpus.max(1),
            wrk_threads: cpus.clamp(1, 2),
        }
    }
}

/// The five servers, listening on loopback ports.
struct Servers {
    ours: idspace_serve::Running,
    tokio: idspace_serve::Running,
    naive: naive::Naive,
    series: naive::Naive,
    hello: crate::io::http::servers::Running,
    /// The hello-world on our runtime as the service builds it (wakelist, the kernel's
    /// placement, the default poller), without the service's process hooks.
    hello_ours: crate::io::http::servers::Running,
    /// The mio loop (one thread).
    mio: crate::io::http::servers::Running,
}

impl Servers {
    fn start(url: &str, workers: usize) -> Result<Servers, String> {
        let service = |runtime, node: &str| idspace_serve::Args {
            url: url.to_string(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            workers: u16::try_from(workers).ok(),
            runtime,
            node_id: Some(node.to_string()),
            admin_token_file: None,
            ttl_ms: 10_000,
            step: 1000,
        };
        let servers = Servers {
            ours: idspace_serve::start(&service(idspace_serve::RuntimeKind::Idspace, "ours"))?,
            tokio: idspace_serve::start(&service(idspace_serve::RuntimeKind::Tokio, "tokio"))?,
            naive: naive::Naive::start(url, workers, naive::Statement::PerId)?,
            series: naive::Naive::start(url, workers, naive::Statement::Series)?,
            hello: crate::io::http::servers::Server::Tokio.start(workers)?,
            hello_ours: crate::io::http::servers::Server::Ours(
                idspace::sched::Policy::Wakelist,
                idspace::sched::DEFAULT_POLLER,
            )
            .start(workers)?,
            mio: crate::io::http::servers::Server::Mio.start(1)?,
        };
        // The first request of a space starts its lease node: not part of any measurement.
        for addr in [
            servers.ours.address(),
            servers.tokio.address(),
            servers.naive.addr,
            servers.series.addr,
        ] {
            warm(addr)?;
        }
        Ok(servers)
    }

    fn address(&self, kind: Kind) -> SocketAddr {
        match kind {
            Kind::Ours => self.ours.address(),
            Kind::Tokio => self.tokio.address(),
            Kind::Naive => self.naive.addr,
            Kind::NaiveSeries => self.series.addr,
            Kind::Hello => self.hello.addr,
            Kind::HelloOurs => self.hello_ours.addr,
            Kind::Mio => self.mio.addr,
        }
    }

    fn stop(self) -> Result<(), String> {
        self.ours.stop()?;
        self.tokio.stop()?;
        drop(self.naive);
        drop(self.series);
        self.hello_ours.stop()?;
        self.mio.stop()?;
        self.hello.stop().map(|_| ())
    }
}

/// One request for an ID, so that the service's node is started.
fn warm(addr: SocketAddr) -> Result<(), String> {
    let mut stream = std::net::TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let request =
        format!("GET /v1/spaces/{SPACE}/ids HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    if answer.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        Err(format!(
            "{addr} answered the first request with: {}",
            answer.trim()
        ))
    }
}

/// The path a subject is driven on, for `batch` IDs a request.
fn path(kind: Kind, batch: usize) -> String {
    match kind {
        Kind::Hello | Kind::HelloOurs | Kind::Mio => "/".to_string(),
        _ => format!("/v1/spaces/{SPACE}/ids?count={batch}"),
    }
}

/// Everything one wrk run against one server needs.
struct Rig<'a> {
    wrk: PathBuf,
    script: wrk::Script,
    servers: &'a Servers,
    plan: &'a Plan,
    /// Ours' median requests/s at 64 connections, one ID a request: what the fixed rate is
    /// half of.
    peak: Cell<Option<f64>>,
    /// The summary.
    goals: goals::Goals,
}

impl Rig<'_> {
    /// A load of `connections` for `seconds`, at `rate` requests/s or as fast as answered.
    fn load(&self, connections: usize, seconds: u64, rate: Option<f64>) -> wrk::Load {
        wrk::Load {
            connections,
            threads: self.plan.wrk_threads,
            seconds,
            rate,
        }
    }

    /// One run: requests/s, IDs/s, p50, p99, p99.9 (µs), server CPU µs per request, server
    /// CPU s per million IDs, errors, and the machine's steal share over the run (%, NaN where
    /// `/proc/stat` has none).
    fn measure(
        &self,
        subject: &Subject,
        load: wrk::Load,
        batch: usize,
    ) -> Result<Vec<f64>, String> {
        if subject.kind.is_hello() && batch > 1 {
            return Ok(vec![f64::NAN; 9]);
        }
        let addr = self.servers.address(subject.kind);
        let cpu = CpuClock::start()?;
        let stolen_from = CpuTimes::read();
        let run = wrk::run(
            &self.wrk,
            &self.script,
            addr,
            &path(subject.kind, batch),
            load,
        )?;
        let cpu = cpu.elapsed()?;
        let steal = CpuTimes::steal_since(stolen_from).unwrap_or(f64::NAN);
        let per_second = run.requests as f64 / run.duration.as_secs_f64();
        let ids = |value: f64| {
            if subject.kind.is_hello() {
                f64::NAN
            } else {
                value
            }
        };
        let answered = run.requests.saturating_sub(run.errors).max(1) as f64;
        Ok(vec![
            per_second,
            ids(per_second * batch as f64),
            run.p50,
            run.p99,
            run.p999,
            cpu.as_secs_f64() * 1e6 / run.requests.max(1) as f64,
            // CPU µs per ID is CPU seconds per million IDs.
            ids(cpu.as_secs_f64() * 1e6 / (answered * batch as f64)),
            run.errors as f64,
            steal,
        ])
    }
}

/// The row of the host's steal share over each run: where it is more than a few percent, the
/// latency percentiles measure the host's stalls more than the server.
const STEAL_ROW: &str = "CPU time the host took as steal over the run (%)";

/// Each cell's reference divided by the cell: ≥ 1 where the cell is smaller (better, for
/// times and CPU).
fn inverse(values: &Values, reference: &str) -> Vec<Option<f64>> {
    let reference = values.get(reference);
    values
        .cells()
        .iter()
        .map(|cell| match (cell, reference) {
            (Some(v), Some(r)) if *v > 0.0 => Some(r / v),
            _ => None,
        })
        .collect()
}

impl Experiment for Serve {
    fn name(&self) -> &'static str {
        "serve"
    }

    fn about(&self) -> &'static str {
        "idspace serve under wrk: ours vs the same on tokio, nextval per ID, hyper hello"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let wrk = crate::io::tools::locate("wrk", "wrk")?;
        let plan = Plan::new(cx.scale, cx.cpus());
        let server = Throwaway::start(Durability { fsync: true })?;
        let url = server.url();
        let mut store = Store::connect(&url).map_err(|e| e.to_string())?;
        store
            .create_space(SPACE, 1, i64::MAX as u64, false)
            .map_err(|e| e.to_string())?;
        store
            .client()
            .batch_execute(&format!("CREATE SEQUENCE {}", naive::SEQUENCE))
            .map_err(|e| e.to_string())?;
        let servers = Servers::start(&url, plan.workers)?;
        let rig = Rig {
            wrk,
            script: wrk::Script::write()?,
            servers: &servers,
            plan: &plan,
            peak: Cell::new(None),
            goals: goals::Goals::default(),
        };
        let declared = Declared {
            name: self.name(),
            title: "The ID service over HTTP: idspace serve vs the same on tokio, nextval per ID \
                    and a hyper hello-world"
                .into(),
            intro: vec![format!(
                "wrk ({} threads, keep-alive, a Lua script for the path and the percentiles) \
                 against servers in the lab's process, on {} workers each: `idspace serve` \
                 on our runtime, the same service code on tokio, the naive service that runs \
                 `SELECT nextval(..)` once per ID (one statement after the other), a better \
                 naive one that runs `SELECT nextval(..) FROM generate_series(1, N)` once per \
                 request (both on a pool of PostgreSQL connections, statements prepared once), \
                 and hyper's hello-world on tokio and on our runtime; in the fixed-rate row \
                 also the `io` experiment's single-thread mio loop (no runtime: this machine's \
                 floor). One throwaway PostgreSQL (fsync on) on a Unix socket. Runs of {} s; at \
                 a fixed rate, {} s. Every table gives the host's steal share over each run.",
                plan.wrk_threads, plan.workers, plan.seconds, plan.paced_seconds
            )],
            measurements: vec![
                steady(&rig),
                fixed::fixed(&rig),
                restart(&rig, &server),
                declare::custom(0, |_| rig.goals.table("x / µs / errors", 0).into()),
            ],
            notes: vec![NOTE.into()],
        };
        let section = declare::run(cx, declared);
        drop(rig);
        servers.stop()?;
        Ok(section)
    }
}

const NOTE: &str = "Ratios read ≥ 1 when ours is better: requests/s and IDs/s as ours ÷ \
    theirs, latencies and CPU as theirs ÷ ours. Server CPU is getrusage of the lab's process \
    around each wrk run (wrk and PostgreSQL excluded). On 2 cores wrk shares the machine with \
    the server, so requests/s is bounded by wrk as much as by the server: CPU per request is the \
    figure that ranks. Goals: ≥ 1.0x tokio in requests/s and p99; ≥ 0.8x the hello-world in \
    CPU per request (against tokio's, and against ours' on the same runtime) and in requests/s; ≥ 50x nextval per ID in IDs/s at batches of 100; p99 ≤ 1 ms at a fixed \
    rate of half the peak; 0 errors while PostgreSQL restarts (the summary table shows each).";

fn subjects() -> Vec<Subject> {
    vec![
        Subject {
            name: OURS,
            kind: Kind::Ours,
        },
        Subject {
            name: TOKIO,
            kind: Kind::Tokio,
        },
        Subject {
            name: NAIVE,
            kind: Kind::Naive,
        },
        Subject {
            name: NAIVE_SERIES,
            kind: Kind::NaiveSeries,
        },
        Subject {
            name: HELLO,
            kind: Kind::Hello,
        },
        Subject {
            name: HELLO_OURS,
            kind: Kind::HelloOurs,
        },
    ]
}

/// Steady load at every point.
fn steady<'a>(rig: &'a Rig<'a>) -> Box<dyn Measurement + 'a> {
    Sweep::new(
        subjects(),
        rig.plan.points.clone(),
        |&(c, b)| format!("{c} conns, batch {b}"),
        move |subject, &(c, b)| rig.measure(subject, rig.load(c, rig.plan.seconds, None), b),
    )
    .tables(move |swept, _| {
        let mut tables = Vec::new();
        for (index, ((c, b), result)) in swept.results.iter().enumerate() {
            steady_goals(rig, (*c, *b), result);
            let mut rows = vec![
                Row::numbers("requests/s", result.metric(0), 0),
                Row::ratios("requests/s vs tokio", result.metric(0).over(TOKIO)),
                Row::ratios("requests/s vs hello", result.metric(0).over(HELLO)),
                Row::numbers("IDs/s", result.metric(1), 0),
                Row::ratios("IDs/s vs nextval per ID", result.metric(1).over(NAIVE)),
                Row::ratios(
                    "IDs/s vs nextval, 1 statement",
                    result.metric(1).over(NAIVE_SERIES),
                ),
                Row::numbers("p50 (µs)", result.metric(2), 0),
                Row::numbers("p99 (µs)", result.metric(3), 0),
                Row::ratios("p99 vs tokio", inverse(&result.metric(3), TOKIO)),
                Row::numbers("p99.9 (µs)", result.metric(4), 0),
                Row::numbers("server CPU per request (µs)", result.metric(5), 2),
                Row::ratios(
                    "CPU per request vs tokio",
                    inverse(&result.metric(5), TOKIO),
                ),
                Row::ratios(
                    "CPU per request vs hello",
                    inverse(&result.metric(5), HELLO),
                ),
                Row::ratios(
                    "CPU per request vs hello on the same runtime",
                    same_runtime_hello(&result.metric(5)),
                ),
                Row::numbers("server CPU per million IDs (s)", result.metric(6), 2),
                Row::numbers("errors", result.metric(7), 0),
                Row::numbers(STEAL_ROW, result.metric(8), 1),
            ];
            if *b > 1 {
                // The hello-world has no IDs to batch: only the ID services' rows apply.
                rows.retain(|row| !row.label.contains("hello"));
            }
            tables.push(swept.table(
                format!("load{index}"),
                format!("{c} keep-alive connections, {b} ID(s) per request"),
                "requests/s, IDs/s, µs",
                rows,
            ));
        }
        tables.into()
    })
}

/// Each service's CPU per request against the hello-world on its own runtime (the hello's ÷
/// the service's: ≥ 1 where the service costs less): ours and the hello-worlds against ours'
/// hello, the service on tokio against tokio's; the naive services (on tokio) against tokio's.
fn same_runtime_hello(values: &Values) -> Vec<Option<f64>> {
    let (tokio, ours) = (values.get(HELLO), values.get(HELLO_OURS));
    values
        .names()
        .iter()
        .zip(values.cells())
        .map(|(name, cell)| {
            let hello = if name == OURS || name == HELLO_OURS {
                ours
            } else {
                tokio
            };
            match (cell, hello) {
                (Some(v), Some(h)) if *v > 0.0 => Some(h / v),
                _ => None,
            }
        })
        .collect()
}

/// `a ÷ b`, where both were measured.
fn ratio((a, b): (Option<f64>, Option<f64>)) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// Records the goals of one steady point (and, at 64 connections and one ID a request, the
/// peak the fixed rate is half of).
fn steady_goals(rig: &Rig, (c, b): (usize, usize), result: &Medians) {
    let ours = |metric: usize, peer: &str| {
        let values = result.metric(metric);
        (values.get(OURS), values.get(peer))
    };
    let at = format!("{c} conns, batch {b}");
    if b > 1 {
        let label = format!("IDs/s vs nextval per ID, {at}");
        rig.goals
            .push(Goal::at_least(label, ratio(ours(1, NAIVE)), 50.0, "x"));
        return;
    }
    if c == 64 {
        rig.peak.set(result.metric(0).get(OURS));
    }
    let goals = [
        ("requests/s vs tokio", ratio(ours(0, TOKIO)), 1.0),
        ("p99 vs tokio", ratio(ours(3, TOKIO)).map(f64::recip), 1.0),
        ("requests/s vs hello", ratio(ours(0, HELLO)), 0.8),
        (
            "CPU per request vs hello",
            ratio(ours(5, HELLO)).map(f64::recip),
            0.8,
        ),
        (
            "CPU per request vs hello on the same runtime",
            ratio(ours(5, HELLO_OURS)).map(f64::recip),
            0.8,
        ),
    ];
    for (label, value, bound) in goals {
        rig.goals
            .push(Goal::at_least(format!("{label}, {at}"), value, bound, "x"));
    }
}

/// One run at 64 connections, one ID a request, while PostgreSQL is stopped a quarter in and
/// started again.
fn run_through_restart(
    rig: &Rig,
    subject: &Subject,
    server: &Throwaway,
) -> Result<Vec<f64>, String> {
    let seconds = rig.plan.fault_seconds;
    std::thread::scope(|scope| {
        let restarter = scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(seconds) / 4);
            let started = std::time::Instant::now();
            server.stop()?;
            server.start_again()?;
            Ok::<Duration, String>(started.elapsed())
        });
        let measured = rig.measure(subject, rig.load(64, seconds, None), 1);
        let down = restarter
            .join()
            .map_err(|_| "the restart panicked".to_string())??;
        let mut metrics = measured?;
        metrics.push(down.as_secs_f64() * 1000.0);
        Ok(metrics)
    })
}

/// The fault row.
fn restart<'a>(rig: &'a Rig<'a>, server: &'a Throwaway) -> Box<dyn Measurement + 'a> {
    // The service on tokio fails or holds as ours does (the same code, the same leases): the
    // quick scale leaves it out to stay short.
    let full = rig.plan.points.len() > 3;
    let faulty: Vec<Subject> = subjects()
        .into_iter()
        .filter(|s| {
            !s.kind.is_hello() && s.kind != Kind::NaiveSeries && (full || s.kind != Kind::Tokio)
        })
        .collect();
    Sweep::new(
        faulty,
        vec![()],
        |_| "restart".into(),
        move |subject, _| run_through_restart(rig, subject, server),
    )
    .tables(move |swept, _| {
        let result = swept.only();
        let seconds = rig.plan.fault_seconds;
        let errors = result.metric(7).get(OURS);
        let label = "errors while PostgreSQL restarts, ours";
        rig.goals.push(Goal::at_most(label, errors, 0.0, "errors"));
        let rows = vec![
            Row::numbers("errors (non-2xx and socket errors)", result.metric(7), 0),
            Row::numbers("p99 (µs)", result.metric(3), 0),
            Row::ratios("p99 vs nextval", inverse(&result.metric(3), NAIVE)),
            Row::numbers("requests/s", result.metric(0), 0),
            Row::numbers("PostgreSQL down and up again (ms)", result.metric(8), 0),
        ];
        swept
            .table(
                "restart",
                format!(
                    "While PostgreSQL restarts: stopped (fast shutdown) {} ms into a {seconds} s \
                     run at 64 connections, one ID a request, then started again",
                    seconds * 1000 / 4
                ),
                "errors, µs, requests/s, ms",
                rows,
            )
            .into()
    })
}
