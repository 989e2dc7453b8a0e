//! Experiment `wake`: remote wakeups (seed 002). Ping-pong, hackbench-style messaging and
//! schbench-style wakeup latency, run on our runtime under each wakeup policy, on tokio's
//! multi-thread runtime with the same futures, and on the kernel (OS threads and pipes), all in
//! one run.

mod kernel;
mod primitives;
mod workloads;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use idspace::sched::{Policy, Stats};

use super::measure::{column, medians, ratios_to};
use super::model::{Plot, Row, Section, Series, Table};
use super::{oversubscribed, Experiment, Progress, Scale};
use primitives::Timer;
use workloads::{LatencyShape, Runner};

/// The experiment.
pub struct Wake;

/// Workers of our runtime and of tokio's: one per CPU of the test machine.
const WORKERS: usize = 2;

#[derive(Clone, Copy)]
enum Candidate {
    Runtime(Runner),
    Kernel,
}

impl Candidate {
    fn name(&self) -> &'static str {
        match self {
            Candidate::Runtime(Runner::Ours(policy)) => policy.name(),
            Candidate::Runtime(Runner::Tokio) => "tokio",
            Candidate::Kernel => "kernel",
        }
    }
}

fn candidates() -> Vec<Candidate> {
    let mut all: Vec<Candidate> = Policy::ALL
        .into_iter()
        .map(|p| Candidate::Runtime(Runner::Ours(p)))
        .collect();
    all.push(Candidate::Runtime(Runner::Tokio));
    all.push(Candidate::Kernel);
    all
}

/// Column indices of the reference candidates.
const LOCKED: usize = 0;
const TOKIO: usize = 3;
const POLICIES: usize = 3;

struct Plan {
    repetitions: usize,
    /// (pairs, round trips per pair)
    ping_pong: Vec<(usize, u64)>,
    /// (groups, loops)
    messaging: Vec<(usize, usize)>,
    latency: Vec<LatencyShape>,
}

impl Plan {
    fn new(scale: Scale) -> Plan {
        let factor = match scale {
            Scale::Quick => 1,
            Scale::Full => 5,
        };
        Plan {
            repetitions: scale.repetitions(),
            ping_pong: vec![(1, 20_000 * factor), (8, 5_000 * factor)],
            messaging: vec![(1, 1_000 * factor as usize), (4, 250 * factor as usize)],
            latency: vec![
                LatencyShape {
                    messengers: 1,
                    workers: 1,
                    rounds: 2_000 * factor,
                    interval: Duration::from_micros(500),
                    cputime: Duration::from_micros(20),
                },
                LatencyShape {
                    messengers: 2,
                    workers: 8,
                    rounds: 300 * factor,
                    interval: Duration::from_millis(1),
                    cputime: Duration::from_micros(30),
                },
            ],
        }
    }
}

/// What every measurement of the experiment shares: the candidates, the repetitions, the
/// progress bar and the notes of candidates that failed.
struct Runs {
    candidates: Vec<Candidate>,
    repetitions: usize,
    progress: Progress,
    notes: Vec<String>,
}

/// Each candidate's medians of `run`, measured `repetitions` times (see [`medians`]).
fn measure(
    runs: &mut Runs,
    label: &str,
    run: impl Fn(&Candidate) -> Result<Vec<f64>, String>,
) -> Vec<Vec<Option<f64>>> {
    medians(
        &runs.candidates,
        |c: &Candidate| c.name(),
        runs.repetitions,
        &mut runs.progress,
        label,
        &mut runs.notes,
        run,
    )
}

/// `1 / v` for each value: a time or a latency turned into a speed (higher is better).
fn reciprocals(values: &[Option<f64>]) -> Vec<Option<f64>> {
    values.iter().map(|v| v.map(|v| 1.0 / v)).collect()
}

/// Runs one candidate on a workload measured by its wall time: our runtime or tokio on the
/// futures `tasks` makes, the kernel with `kernel`; `metric` turns the time into the figure.
fn timed_run(
    candidate: &Candidate,
    tasks: impl Fn() -> Vec<workloads::Task>,
    kernel: impl Fn() -> Result<Duration, String>,
    metric: impl Fn(Duration) -> f64,
) -> Result<Vec<f64>, String> {
    match candidate {
        Candidate::Runtime(runner) => {
            let ran = runner.run(WORKERS, tasks())?;
            Ok(with_travel(vec![metric(ran.elapsed)], ran.stats))
        }
        Candidate::Kernel => Ok(with_travel(vec![metric(kernel()?)], None)),
    }
}

/// The rows dividing `values` by the `locked` and the `tokio` columns.
fn reference_ratios(label: &str, values: &[Option<f64>]) -> [Row; 2] {
    [
        Row::ratios(
            format!("{label}: ÷ locked"),
            ratios_to(values, values[LOCKED]),
        ),
        Row::ratios(
            format!("{label}: ÷ tokio"),
            ratios_to(values, values[TOKIO]),
        ),
    ]
}

/// A workload's travel columns, which [`with_travel`] appended after its `first` metrics.
fn travel(label: String, result: &[Vec<Option<f64>>], first: usize) -> Travel {
    (label, column(result, first), column(result, first + 1))
}

/// Wakeups made, and the share of them that went through a wakelist / needed a futex wake.
fn travel_shares(stats: &Stats) -> (f64, f64) {
    let wakeups = (stats.local + stats.locked + stats.wakelist).max(1) as f64;
    (
        100.0 * stats.wakelist as f64 / wakeups,
        1000.0 * stats.notify_futex as f64 / wakeups,
    )
}

/// Metrics of one run: the workload's own, then (ours only) wakelist share and futex wakes.
fn with_travel(mut metrics: Vec<f64>, stats: Option<Stats>) -> Vec<f64> {
    let (share, futex) = stats.as_ref().map_or((f64::NAN, f64::NAN), travel_shares);
    metrics.push(share);
    metrics.push(futex);
    metrics
}

impl Experiment for Wake {
    fn name(&self) -> &'static str {
        "wake"
    }

    fn about(&self) -> &'static str {
        "remote wakeups: locked vs wakelist policies vs tokio vs the kernel (ping-pong, messaging, latency)"
    }

    fn run(&self, scale: Scale) -> Result<Section, String> {
        let plan = Plan::new(scale);
        let all = candidates();
        let names: Vec<String> = all.iter().map(|c| c.name().to_string()).collect();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let configs = plan.ping_pong.len() + plan.messaging.len() + plan.latency.len();
        let mut runs = Runs {
            candidates: all,
            repetitions: plan.repetitions,
            progress: Progress::new("wake", (plan.repetitions * configs * names.len()) as u64),
            notes: Vec::new(),
        };
        let mut tables = Vec::new();
        let mut plots = Vec::new();
        // Per workload config: (label, speed of each candidate, higher is better).
        let mut speeds: Vec<(String, Vec<Option<f64>>)> = Vec::new();
        let mut travel_rows: Vec<Travel> = Vec::new();

        // Ping-pong.
        let mut rows = Vec::new();
        let mut ratio_rows = Vec::new();
        for &(pairs, rounds) in &plan.ping_pong {
            let label = format!(
                "{pairs} pair{} ({} tasks{})",
                if pairs == 1 { "" } else { "s" },
                2 * pairs,
                oversubscribed(2 * pairs, cpus)
            );
            let result = measure(&mut runs, &format!("ping-pong, {label}"), |c| {
                let trips = (pairs as u64 * rounds) as f64;
                timed_run(
                    c,
                    || workloads::ping_pong(pairs, rounds),
                    || kernel::ping_pong(pairs, rounds),
                    |elapsed| trips / elapsed.as_secs_f64(),
                )
            });
            let rates = column(&result, 0);
            travel_rows.push(travel(format!("ping-pong, {label}"), &result, 1));
            ratio_rows.extend(reference_ratios(&label, &rates));
            speeds.push((format!("ping-pong, {label}"), rates.clone()));
            rows.push(Row::numbers(label, rates, 0));
        }
        rows.extend(ratio_rows);
        tables.push(Table {
            id: "ping_pong".into(),
            title:
                "Ping-pong (perf bench sched pipe shape): round trips per second, higher is better"
                    .into(),
            unit: "round trips/s".into(),
            columns: names.clone(),
            rows,
        });

        // Messaging.
        let mut rows = Vec::new();
        let mut ratio_rows = Vec::new();
        for &(groups, loops) in &plan.messaging {
            let tasks = groups * 40;
            let label = format!(
                "-g {groups} -l {loops} ({tasks} tasks{})",
                oversubscribed(tasks, cpus)
            );
            let result = measure(&mut runs, &format!("messaging, {label}"), |c| {
                timed_run(
                    c,
                    || workloads::messaging(groups, loops),
                    || kernel::messaging(groups, loops),
                    |elapsed| elapsed.as_secs_f64() * 1e3,
                )
            });
            let times = column(&result, 0);
            travel_rows.push(travel(format!("messaging, {label}"), &result, 1));
            ratio_rows.extend(reference_ratios(&label, &times));
            speeds.push((format!("messaging, {label}"), reciprocals(&times)));
            rows.push(Row::numbers(label, times, 1));
        }
        rows.extend(ratio_rows);
        tables.push(Table {
            id: "messaging".into(),
            title: "Messaging (hackbench shape, 100-byte messages through pipes): total time, lower is better"
                .into(),
            unit: "ms".into(),
            columns: names.clone(),
            rows,
        });

        // Wakeup latency.
        let timer = Timer::start()?;
        const PERCENTILES: [(f64, &str); 4] =
            [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p99.9")];
        let mut rows = Vec::new();
        let mut ratio_rows = Vec::new();
        for shape in &plan.latency {
            let tasks = shape.messengers * (shape.workers + 1);
            let label = format!(
                "-m {} -t {} ({tasks} tasks{})",
                shape.messengers,
                shape.workers,
                oversubscribed(tasks, cpus)
            );
            let result = measure(&mut runs, &format!("latency, {label}"), |c| {
                let (mut samples, stats) = match c {
                    Candidate::Runtime(runner) => {
                        let samples = Arc::new(Mutex::new(Vec::new()));
                        let ran = runner.run(
                            WORKERS,
                            workloads::latency(*shape, &timer.handle(), &samples),
                        )?;
                        let samples =
                            std::mem::take(&mut *samples.lock().map_err(|e| e.to_string())?);
                        (samples, ran.stats)
                    }
                    Candidate::Kernel => (kernel::latency(*shape)?, None),
                };
                samples.sort_unstable();
                let values = PERCENTILES
                    .iter()
                    .map(|&(p, _)| {
                        workloads::percentile(&samples, p).map_or(f64::NAN, |ns| ns / 1e3)
                    })
                    .collect();
                Ok(with_travel(values, stats))
            });
            travel_rows.push(travel(
                format!("latency, {label}"),
                &result,
                PERCENTILES.len(),
            ));
            let mut series: Vec<Series> = names
                .iter()
                .map(|n| Series {
                    name: n.clone(),
                    points: Vec::new(),
                })
                .collect();
            for (metric, &(p, name)) in PERCENTILES.iter().enumerate() {
                let values = column(&result, metric);
                for (candidate, value) in values.iter().enumerate() {
                    if let Some(v) = value {
                        series[candidate].points.push((100.0 / (100.0 - p), *v));
                    }
                }
                if name == "p99" {
                    ratio_rows.extend(reference_ratios(&format!("{label}, p99"), &values));
                    speeds.push((format!("latency p99, {label}"), reciprocals(&values)));
                }
                rows.push(Row::numbers(format!("{label}: {name}"), values, 1));
            }
            plots.push(Plot {
                file: format!("wake-latency-m{}-t{}.svg", shape.messengers, shape.workers),
                title: format!("Wakeup latency percentiles, schbench {label}"),
                x_label: "percentile, as 1/(1-p): 2 = p50, 10 = p90, 100 = p99, 1000 = p99.9"
                    .into(),
                y_label: "wake-to-run latency (µs)".into(),
                log_x: true,
                log_y: true,
                series: series
                    .into_iter()
                    .filter(|s| !s.points.is_empty())
                    .collect(),
            });
        }
        drop(timer);
        rows.extend(ratio_rows);
        tables.push(Table {
            id: "latency".into(),
            title: "Wakeup latency (schbench shape): time from the waker's stamp until the woken task runs, lower is better"
                .into(),
            unit: "µs".into(),
            columns: names.clone(),
            rows,
        });

        tables.push(summary(&speeds));
        tables.push(travel_table(&names, travel_rows));
        runs.progress.finish();

        Ok(Section {
            name: self.name().into(),
            title: "Remote wakeups: the wakelist (seed 002)".into(),
            intro: intro(scale, cpus),
            tables,
            plots,
            notes: runs.notes,
        })
    }
}

/// Per workload: wakelist ÷ locked, the best of our policies, and it against tokio, all as
/// speed ratios (above 1 is faster).
fn summary(speeds: &[(String, Vec<Option<f64>>)]) -> Table {
    let mut rows = Vec::new();
    for (label, speed) in speeds {
        let wakelist = stats_ratio(speed[1], speed[LOCKED]);
        let best = (0..POLICIES)
            .filter_map(|i| speed[i].map(|s| (i, s)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let (best_name, best_vs_tokio) = match best {
            Some((i, s)) => (
                Policy::ALL[i].name().to_string(),
                stats_ratio(Some(s), speed[TOKIO]),
            ),
            None => ("n/a".to_string(), None),
        };
        let show = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}x"));
        rows.push(Row {
            label: label.clone(),
            values: vec![wakelist, None, best_vs_tokio],
            text: vec![show(wakelist), best_name, show(best_vs_tokio)],
        });
    }
    Table {
        id: "summary".into(),
        title: "Summary: speed ratios (above 1 is faster; latency uses p99)".into(),
        unit: "x".into(),
        columns: vec![
            "wakelist vs locked".into(),
            "best policy".into(),
            "best policy vs tokio".into(),
        ],
        rows,
    }
}

fn stats_ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    super::stats::ratio(a, b)
}

/// One workload's wakeup travel: its label, the wakelist share and the futex wakes per 1000
/// wakeups of each candidate.
type Travel = (String, Vec<Option<f64>>, Vec<Option<f64>>);

/// How our runtime's wakeups travelled under each policy.
fn travel_table(names: &[String], rows: Vec<Travel>) -> Table {
    let mut out = Vec::new();
    for (label, share, futex) in rows {
        out.push(Row::numbers(
            format!("{label}: % through a wakelist"),
            share[..POLICIES].to_vec(),
            1,
        ));
        out.push(Row::numbers(
            format!("{label}: futex wakes per 1000 wakeups"),
            futex[..POLICIES].to_vec(),
            1,
        ));
    }
    Table {
        id: "travel".into(),
        title: "How our wakeups travelled (medians; the rest were local or locked enqueues, and the rest of the notifications hit a polling worker or none was needed)".into(),
        unit: "% / per 1000".into(),
        columns: names[..POLICIES].to_vec(),
        rows: out,
    }
}

fn intro(scale: Scale, cpus: usize) -> Vec<String> {
    vec![
        format!(
            "Every workload runs, in the same process and interleaved, on our runtime with {WORKERS} workers under each wakeup policy (`locked`, `wakelist`, `wakelist-always`), on tokio's multi-thread runtime with {WORKERS} workers running the very same futures, and on the kernel: one OS thread per task, blocking on pipes. The machine has {cpus} CPUs; runs with more tasks than CPUs are marked oversubscribed. Scale: {}; {} repetitions, medians shown.",
            scale.name(),
            scale.repetitions()
        ),
        "**Ping-pong** is `perf bench sched pipe` / UnixBench context1: two tasks pass a token back and forth; 8 pairs at once oversubscribe the CPUs. **Messaging** is hackbench: each group has 20 senders and 20 receivers, and every sender writes `-l` 100-byte messages to every receiver of its group through the receiver's 64 KiB pipe. **Latency** is schbench (old version): each message task sleeps on a timer, stamps the time and wakes its `-t` workers; each worker records the time from the stamp to when it runs, burns 20–30 µs of CPU and reports back. The seed ran `-m 2 -t 8` on 104 CPUs; here 18 tasks share 2 CPUs.".into(),
        "The seed measured +11% on pipe context switching and hackbench 3.25 s → 2.25 s from queueing wakeups on an idle CPU's wakelist. In a user-space runtime the waker's saving is a run-queue lock and its cache line; the notification (a flag for a polling worker, a futex wake for a sleeping one) is the same under every policy.".into(),
    ]
}
