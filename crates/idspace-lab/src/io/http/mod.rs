//! The HTTP measurement: each server started inside the lab, driven by `wrk` in another
//! process, at a few connection counts, pinned and unpinned, and pipelined.

mod mio_loop;
pub(crate) mod servers;
mod wrk;

use std::cell::RefCell;
use std::path::PathBuf;

use idspace::sched::{Policy, DEFAULT_POLLER};

use super::summary::{best_policy, poller_line, Goal, Goals};
use super::{
    on_cpu, other_poller, poller_column, reciprocals, wakelist_share, Subject, MIO, TOKIO,
};
use crate::cputime::CpuClock;
use crate::declare::{Measurement, Produced, Sweep, Swept};
use crate::model::Row;
use crate::sys::thread::CpuSet;
use crate::{Context, CpuTimes};
use servers::Server;
use wrk::{Load, Script};

/// Where the server and wrk run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setup {
    /// The server (one worker) on one CPU, wrk on another.
    Pinned,
    /// The server on every CPU, wrk wherever the kernel puts it.
    Unpinned,
    /// Pinned, and 16 requests in flight per connection.
    Pipelined,
}

/// Requests in flight per connection in the pipelined row (TechEmpower's depth).
const DEPTH: usize = 16;

/// One HTTP configuration.
#[derive(Clone, Copy)]
pub(crate) struct Point {
    setup: Setup,
    connections: usize,
}

/// The HTTP runs of a scale.
pub(crate) struct Plan {
    points: Vec<Point>,
    /// wrk's run length.
    seconds: u64,
    /// Repetitions of every run (wrk's runs have a fixed length).
    repetitions: usize,
}

impl Plan {
    pub(crate) fn quick() -> Plan {
        let at = |setup| Point {
            setup,
            connections: 64,
        };
        Plan {
            points: vec![at(Setup::Pinned), at(Setup::Unpinned), at(Setup::Pipelined)],
            seconds: 1,
            repetitions: 1,
        }
    }

    pub(crate) fn full() -> Plan {
        let mut points = Vec::new();
        for setup in [Setup::Pinned, Setup::Unpinned] {
            for connections in [1, 64, 512] {
                points.push(Point { setup, connections });
            }
        }
        for connections in [64, 512] {
            points.push(Point {
                setup: Setup::Pipelined,
                connections,
            });
        }
        Plan {
            points,
            seconds: 5,
            repetitions: 3,
        }
    }
}

fn label(point: &Point) -> String {
    let connections = point.connections;
    match point.setup {
        Setup::Pinned => format!("pinned, {connections} connections"),
        Setup::Unpinned => format!("unpinned, {connections} connections"),
        Setup::Pipelined => format!("pipelined ×{DEPTH}, pinned, {connections} connections"),
    }
}

/// Metrics of an HTTP run.
const RATE: usize = 0;
const P50: usize = 1;
const P99: usize = 2;
const CPU: usize = 3;
const SHARE: usize = 4;
/// The host's steal share of the machine's CPU time over the run, %: the latency floor.
const STEAL: usize = 5;
const METRICS: usize = 6;

/// What every run needs and that is found once: wrk, the pipelining script, the two CPUs of
/// the pinned rows.
struct Tools {
    wrk: PathBuf,
    script: Script,
    /// The server's CPU and wrk's, for the pinned rows; why not, if the machine cannot.
    cpus: Result<(usize, usize), String>,
}

/// The HTTP tables: throughput, latency, server CPU.
pub(super) fn measurement<'a>(
    plan: Plan,
    cx: &Context,
    wrk: Result<PathBuf, String>,
    goals: &'a RefCell<Goals>,
    notes: &mut Vec<String>,
) -> Box<dyn Measurement + 'a> {
    let tools = wrk.and_then(|wrk| {
        Ok(Tools {
            wrk,
            script: Script::write()?,
            cpus: two_cpus(),
        })
    });
    match &tools {
        Err(reason) => notes.push(format!("*HTTP:* n/a: {reason}.")),
        Ok(Tools {
            cpus: Err(reason), ..
        }) => notes.push(format!("*HTTP, pinned and pipelined rows:* n/a: {reason}.")),
        Ok(_) => {}
    }
    if tools.is_ok() && plan.points.iter().any(|p| p.setup == Setup::Pipelined) {
        notes.push(format!(
            "*HTTP, pipelined rows, p50 and p99:* n/a: {}.",
            wrk::PIPELINED
        ));
    }
    if tools.is_ok() && plan.points.iter().any(|p| p.setup != Setup::Unpinned) {
        notes.push(format!(
            "*HTTP, pinned and pipelined rows, column `{}`:* n/a: the server runs one worker there, and with one worker both poller shapes are the same runtime (one worker, one poller); the unpinned rows compare them.",
            poller_column(other_poller())
        ));
    }
    let workers = cx.cpus();
    let mut subjects: Vec<Subject> = Policy::ALL.into_iter().map(Subject::Ours).collect();
    subjects.extend([
        Subject::OursPoller(other_poller()),
        Subject::Tokio,
        Subject::Mio,
    ]);
    let seconds = plan.seconds;
    Sweep::new(subjects, plan.points, label, move |subject, point| {
        let Ok(tools) = &tools else {
            return Ok(vec![f64::NAN; METRICS]);
        };
        run(subject, *point, workers, seconds, tools)
    })
    .repetitions(plan.repetitions)
    .tables(move |swept, _| tables(swept, &mut goals.borrow_mut()))
}

/// The first two CPUs the lab may run on.
fn two_cpus() -> Result<(usize, usize), String> {
    let cpus = CpuSet::current()
        .ok_or("cannot read the lab's CPU affinity")?
        .cpus();
    match cpus[..] {
        [server, wrk, ..] => Ok((server, wrk)),
        _ => Err(format!(
            "pinning needs two CPUs, and the lab may run on {}",
            cpus.len()
        )),
    }
}

/// One run: starts the server, runs wrk, stops the server.
fn run(
    subject: &Subject,
    point: Point,
    workers: usize,
    seconds: u64,
    tools: &Tools,
) -> Result<Vec<f64>, String> {
    let server = match *subject {
        Subject::Ours(policy) => Server::Ours(policy, DEFAULT_POLLER),
        Subject::OursDefault => Server::Ours(Policy::Wakelist, DEFAULT_POLLER),
        Subject::OursPoller(poller) => Server::Ours(Policy::Wakelist, poller),
        Subject::Tokio => Server::Tokio,
        Subject::Mio => Server::Mio,
        Subject::Kernel | Subject::Hackbench(_) => return Err("serves no HTTP".into()),
    };
    if matches!(subject, Subject::OursPoller(_)) && point.setup != Setup::Unpinned {
        // One worker: the same runtime as the default column (see the note).
        return Ok(vec![f64::NAN; METRICS]);
    }
    let (server_cpu, wrk_cpu, workers) = match point.setup {
        Setup::Unpinned => (None, None, workers),
        Setup::Pinned | Setup::Pipelined => match tools.cpus {
            Ok((server, wrk)) => (Some(server), Some(wrk), 1),
            Err(_) => return Ok(vec![f64::NAN; METRICS]),
        },
    };
    let load = Load {
        connections: point.connections,
        depth: if point.setup == Setup::Pipelined {
            DEPTH
        } else {
            1
        },
        seconds,
    };
    let running = on_cpu(server_cpu, || server.start(workers))??;
    let cpu = CpuClock::start()?;
    let stolen_from = CpuTimes::read();
    let report = on_cpu(wrk_cpu, || {
        wrk::run(&tools.wrk, running.addr, load, &tools.script)
    });
    let cpu = cpu.elapsed();
    let steal = CpuTimes::steal_since(stolen_from).unwrap_or(f64::NAN);
    let stats = running.stop()?;
    let report = report??;
    let cpu_per_million = cpu?.as_secs_f64() * 1e6 / report.requests as f64;
    Ok(vec![
        report.per_second,
        report.p50.unwrap_or(f64::NAN),
        report.p99.unwrap_or(f64::NAN),
        cpu_per_million,
        wakelist_share(stats.as_ref()),
        steal,
    ])
}

/// The throughput, latency and CPU tables, and the summary lines.
fn tables(swept: &Swept<Point>, goals: &mut Goals) -> Produced {
    let mut rate = swept.numbers(RATE, 0, label);
    let mut latency = Vec::new();
    let mut cpu = swept.numbers(CPU, 2, label);
    for (point, result) in &swept.results {
        let name = label(point);
        let rates = result.metric(RATE);
        rate.push(Row::ratios(
            format!("{name}: vs {TOKIO}"),
            rates.over(TOKIO),
        ));
        rate.push(Row::ratios(format!("{name}: vs {MIO}"), rates.over(MIO)));
        for (metric, percentile) in [(P50, "p50"), (P99, "p99")] {
            latency.push(Row::numbers(
                format!("{name}: {percentile}"),
                result.metric(metric),
                0,
            ));
        }
        let p99 = reciprocals(&result.metric(P99));
        latency.push(Row::ratios(
            format!("{name}: p99 vs {TOKIO}"),
            p99.over(TOKIO),
        ));
        let cost = reciprocals(&result.metric(CPU));
        cpu.push(Row::ratios(format!("{name}: vs {TOKIO}"), cost.over(TOKIO)));
        http_goals(goals, point, &rates, &p99, &cost);
    }
    latency.extend(swept.numbers(STEAL, 1, |p| {
        format!(
            "{}: CPU time the host took as steal over the run (%)",
            label(p)
        )
    }));
    cpu.extend(swept.numbers(SHARE, 1, |p| {
        format!("{}: % of wakeups through a wakelist", label(p))
    }));
    let tables = vec![
        swept.table(
            "http_throughput",
            "HTTP under wrk: requests per second, higher is better (ratios: the column's ÷ the peer's)".into(),
            "requests/s",
            rate,
        ),
        swept.table(
            "http_latency",
            "HTTP under wrk: latency percentiles (wrk --latency), lower is better (ratio: the peer's p99 ÷ the column's)".into(),
            "µs",
            latency,
        ),
        swept.table(
            "http_cpu",
            "HTTP under wrk: the server's CPU seconds per million requests (getrusage of the lab process over the run), lower is better (ratio: the peer's ÷ the column's)".into(),
            "CPU s per 1M requests",
            cpu,
        ),
    ];
    tables.into()
}

/// The summary lines of one HTTP point, for our fastest policy there; every value is a speed
/// (requests/s, 1/p99, 1/CPU).
fn http_goals(
    goals: &mut Goals,
    point: &Point,
    rates: &crate::measure::Values,
    p99: &crate::measure::Values,
    cost: &crate::measure::Values,
) {
    use crate::stats::ratio;
    let Some((best, fastest)) = best_policy(rates) else {
        return;
    };
    let name = format!("HTTP, {}", label(point));
    if point.setup == Setup::Unpinned {
        poller_line(goals, &format!("{name}: requests/s"), "wakelist", rates);
        poller_line(goals, &format!("{name}: CPU per request"), "wakelist", cost);
    }
    let prefix = format!("{name}: {best} (our fastest)");
    goals.push(
        format!("{prefix}: CPU per request vs tokio"),
        ratio(cost.get(best), cost.get(TOKIO)),
        Goal::AtLeast(1.0),
    );
    if point.setup == Setup::Pipelined {
        goals.push(
            format!("{prefix}: requests/s vs tokio"),
            ratio(Some(fastest), rates.get(TOKIO)),
            Goal::AtLeast(1.0),
        );
    }
    if point.setup != Setup::Unpinned {
        goals.push(
            format!("{prefix}: p99 vs tokio"),
            ratio(p99.get(best), p99.get(TOKIO)),
            Goal::AtLeast(1.0),
        );
    }
    if point.setup == Setup::Pinned {
        goals.push(
            format!("{prefix}: requests/s vs the mio loop"),
            ratio(Some(fastest), rates.get(MIO)),
            Goal::AtLeast(0.75),
        );
        goals.push(
            format!("HTTP, {}: tokio's requests/s vs the mio loop", label(point)),
            ratio(rates.get(TOKIO), rates.get(MIO)),
            Goal::Report,
        );
    }
}
