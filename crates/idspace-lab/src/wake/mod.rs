//! Experiment `wake`: remote wakeups, after the wakelist patch ("sched: Remove the limitation of
//! WF_ON_CPU on wakelist if wakee cpu is idle", Linux 6.0). Ping-pong, hackbench-style messaging
//! and schbench-style wakeup latency, run on our runtime under each wakeup policy, on tokio's
//! multi-thread runtime with the same futures, and on the kernel (OS threads and pipes), all in one
//! run.

pub mod driver;
pub(crate) mod kernel;
pub mod primitives;
pub mod workloads;

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idspace::sched::{Policy, Stats};

use crate::declare::{self, custom, Axes, Declared, Measurement, Produced, Sweep, Swept};
use crate::measure::{Medians, Values};
use crate::model::{Plot, Row, Section, Series, Table};
use crate::stats::ratio;
use crate::{cputime, Context, Experiment, Scale};
use primitives::Timer;
use workloads::{LatencyShape, Ran, Runner};

/// The experiment.
pub struct Wake;

#[derive(Clone, Copy)]
enum Candidate {
    Runtime(Runner),
    Kernel,
}

impl crate::measure::Candidate for Candidate {
    fn name(&self) -> &str {
        match self {
            Candidate::Runtime(Runner::Ours(policy)) => policy.name(),
            Candidate::Runtime(Runner::Remote(policy)) => remote_name(*policy),
            Candidate::Runtime(Runner::Tokio) => TOKIO,
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

/// The reference columns of the ratio rows: our runtime without wakelists, and tokio.
const LOCKED: &str = "locked";
const TOKIO: &str = "tokio";

/// The columns of our runtime: one per wakeup policy.
fn policies() -> Vec<&'static str> {
    Policy::ALL.iter().map(|p| p.name()).collect()
}

/// The column of a policy under forced-remote placement.
fn remote_name(policy: Policy) -> &'static str {
    match policy {
        Policy::Locked => "locked, remote",
        Policy::Wakelist => "wakelist, remote",
        Policy::WakelistAlways => "wakelist-always, remote",
        _ => "remote",
    }
}

/// The forced-remote candidates: every wakeup crosses workers (`Placement::Remote`), the path
/// on which the policies differ and which the wakelist patch changed.
fn remote_candidates() -> Vec<Candidate> {
    Policy::ALL
        .into_iter()
        .map(|p| Candidate::Runtime(Runner::Remote(p)))
        .collect()
}

/// The columns of every configuration of our runtime: each policy under the kernel's
/// placement, then under forced-remote placement.
fn ours() -> Vec<&'static str> {
    policies()
        .into_iter()
        .chain(Policy::ALL.into_iter().map(remote_name))
        .collect()
}

pub(crate) struct Plan {
    /// (pairs, round trips per pair)
    ping_pong: Vec<(usize, u64)>,
    /// (groups, loops)
    messaging: Vec<(usize, usize)>,
    /// The latency workload's shapes (the `time` experiment re-runs them on runtime timers).
    pub(crate) latency: Vec<LatencyShape>,
}

impl Plan {
    pub(crate) fn new(scale: Scale) -> Plan {
        let factor = match scale {
            Scale::Quick => 1,
            Scale::Full => 5,
        };
        Plan {
            ping_pong: vec![(1, 20_000 * factor), (8, 5_000 * factor)],
            // Cells of about 100 ms for the runtimes: the machine loses its CPUs for
            // milliseconds at a time, and cells of 15-30 ms moved their ratios by a third.
            messaging: vec![(1, 4_000 * factor as usize), (4, 1_000 * factor as usize)],
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

/// `1 / v` for each value: a time or a latency turned into a speed (higher is better).
fn reciprocals(values: &Values) -> Values {
    values.map(|v| 1.0 / v)
}

/// Runs one candidate on a workload measured by its wall time: our runtime or tokio on
/// `workers` workers with the futures `tasks` makes, the kernel with `kernel`; `metric` turns
/// the time into the figure, and the run's CPU time is spread over its `units` of work.
fn timed_run(
    candidate: &Candidate,
    workers: usize,
    tasks: impl Fn() -> Vec<workloads::BoxedTask>,
    kernel: impl Fn() -> Result<Ran, String>,
    metric: impl Fn(Duration) -> f64,
    units: u64,
) -> Result<Vec<f64>, String> {
    let ran = match candidate {
        Candidate::Runtime(runner) => runner.run(workers, tasks())?,
        Candidate::Kernel => kernel()?,
    };
    Ok(with_extras(vec![metric(ran.elapsed)], &ran, units))
}

/// The rows dividing `values` by the `locked` and the `tokio` columns.
fn reference_ratios(label: &str, values: &Values) -> [Row; 2] {
    [LOCKED, TOKIO]
        .map(|reference| Row::ratios(format!("{label}: ÷ {reference}"), values.over(reference)))
}

/// A workload's travel columns, which [`with_extras`] appended after its `first` metrics.
fn travel(label: String, result: &Medians, first: usize) -> Travel {
    Travel {
        label,
        wakelist_share: result.metric(first),
        futex_per_1000: result.metric(first + 1),
        affine_share: result.metric(first + 2),
        stolen_per_1000: result.metric(first + 3),
    }
}

/// A workload's CPU columns, which [`with_extras`] appended after its `first` metrics (and
/// the four travel columns).
fn cpu(label: String, unit: &'static str, result: &Medians, first: usize) -> Cpu {
    Cpu {
        label,
        unit,
        micros_per_unit: result.metric(first + 4),
        cpus_busy: result.metric(first + 5),
    }
}

/// Per wakeup made: the share that went through a wakelist, the futex wakes, the share that
/// went into the waker's next slot, and the tasks stolen by idle workers.
fn travel_shares(stats: &Stats) -> [f64; 4] {
    let wakeups = (stats.affine + stats.local + stats.locked + stats.wakelist).max(1) as f64;
    [
        100.0 * stats.wakelist as f64 / wakeups,
        1000.0 * stats.notify_futex as f64 / wakeups,
        100.0 * stats.affine as f64 / wakeups,
        1000.0 * stats.stolen as f64 / wakeups,
    ]
}

/// Metrics of one run: the workload's own, then (ours only) the travel shares, then the CPU
/// time per unit of work (µs, `units` units in the run) and the CPUs it kept busy on average
/// (CPU time ÷ wall time).
fn with_extras(mut metrics: Vec<f64>, ran: &Ran, units: u64) -> Vec<f64> {
    metrics.extend(ran.stats.as_ref().map_or([f64::NAN; 4], travel_shares));
    metrics.push(cputime::micros_per_unit(ran.cpu, units));
    metrics.push(ran.cpu.as_secs_f64() / ran.elapsed.as_secs_f64());
    metrics
}

impl Experiment for Wake {
    fn name(&self) -> &'static str {
        "wake"
    }

    fn about(&self) -> &'static str {
        "remote wakeups: locked vs wakelist policies vs tokio vs the kernel (ping-pong, messaging, latency)"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let plan = Plan::new(cx.scale);
        // Workers of our runtime and of tokio's: one per CPU of the machine.
        let workers = cx.cpus();
        let collected = RefCell::new(Collected::default());
        // The lab's timer thread for the latency runs, started up front: until a run arms a
        // deadline it waits on a condition variable, so the other workloads do not pay for it.
        let timer = Timer::start()?;
        let pairs = ping_pong_points(&plan, cx);
        let measurements = vec![
            ping_pong(pairs.clone(), workers, &collected),
            ping_pong_remote(pairs, workers, &collected),
            messaging(messaging_points(&plan, cx), workers, &collected),
            latency(
                latency_points(&plan.latency, cx),
                workers,
                &timer,
                &collected,
            ),
            custom(0, |_| {
                let collected = collected.take();
                vec![
                    summary(&collected.speeds, &collected.remote_speeds, &collected.cpu),
                    cpu_table(&collected.cpu),
                    travel_table(collected.travel),
                ]
                .into()
            }),
        ];
        let declared = Declared {
            name: self.name(),
            title: "Remote wakeups: the wakelist".into(),
            intro: intro(cx, workers),
            measurements,
            notes: Vec::new(),
        };
        Ok(declare::run(cx, declared))
    }
}

/// What the summary, CPU and travel tables gather from every workload's table.
#[derive(Default)]
struct Collected {
    /// Per workload configuration: its label and each candidate's speed (higher is better).
    speeds: Vec<(String, Values)>,
    /// The same for the forced-remote configurations.
    remote_speeds: Vec<(String, Values)>,
    travel: Vec<Travel>,
    cpu: Vec<Cpu>,
}

impl Collected {
    /// Keeps a workload's speeds, travel and CPU figures (which follow metric `first`).
    fn add(
        &mut self,
        label: String,
        speed: Values,
        result: &Medians,
        first: usize,
        unit: &'static str,
    ) {
        self.travel.push(travel(label.clone(), result, first));
        self.cpu.push(cpu(label.clone(), unit, result, first));
        self.speeds.push((label, speed));
    }
}

/// A ping-pong configuration: (pairs, round trips per pair, row label).
type PingPong = (usize, u64, String);

fn ping_pong_points(plan: &Plan, cx: &Context) -> Vec<PingPong> {
    let label = |pairs: usize| {
        let plural = if pairs == 1 { "" } else { "s" };
        let over = cx.oversubscribed(2 * pairs);
        format!("{pairs} pair{plural} ({} tasks{over})", 2 * pairs)
    };
    plan.ping_pong
        .iter()
        .map(|&(pairs, rounds)| (pairs, rounds, label(pairs)))
        .collect()
}

/// The rows of a workload's table: its figures, then their ratios over `locked` and `tokio`.
fn with_reference_ratios<P>(
    swept: &Swept<P>,
    digits: usize,
    label: impl Fn(&P) -> String,
) -> Vec<Row> {
    let mut rows = swept.numbers(0, digits, &label);
    for (point, values) in swept.values(0) {
        rows.extend(reference_ratios(&label(point), &values));
    }
    rows
}

fn ping_pong<'a>(
    points: Vec<PingPong>,
    workers: usize,
    collected: &'a RefCell<Collected>,
) -> Box<dyn Measurement + 'a> {
    Sweep::new(
        candidates(),
        points,
        |p| format!("ping-pong, {}", p.2),
        move |c, &(pairs, rounds, _)| {
            let trips = pairs as u64 * rounds;
            timed_run(
                c,
                workers,
                || workloads::ping_pong(pairs, rounds),
                || kernel::ping_pong(pairs, rounds),
                |elapsed| trips as f64 / elapsed.as_secs_f64(),
                trips,
            )
        },
    )
    .tables(move |swept, _| {
        let mut collected = collected.borrow_mut();
        for ((_, _, label), result) in &swept.results {
            collected.add(
                format!("ping-pong, {label}"),
                result.metric(0),
                result,
                1,
                "round trip",
            );
        }
        let rows = with_reference_ratios(swept, 0, |p| p.2.clone());
        let title =
            "Ping-pong (perf bench sched pipe shape): round trips per second, higher is better";
        swept
            .table("ping_pong", title.into(), "round trips/s", rows)
            .into()
    })
}

/// Forced-remote ping-pong: every wakeup crosses workers, as before the next slot.
fn ping_pong_remote<'a>(
    points: Vec<PingPong>,
    workers: usize,
    collected: &'a RefCell<Collected>,
) -> Box<dyn Measurement + 'a> {
    let label = |p: &PingPong| format!("forced-remote ping-pong, {}", p.2);
    Sweep::new(
        remote_candidates(),
        points,
        label,
        move |c, &(pairs, rounds, _)| {
            let trips = pairs as u64 * rounds;
            timed_run(
                c,
                workers,
                || workloads::ping_pong(pairs, rounds),
                || Err("the kernel runs no forced-remote variant".into()),
                |elapsed| trips as f64 / elapsed.as_secs_f64(),
                trips,
            )
        },
    )
    .tables(move |swept, _| {
        let mut collected = collected.borrow_mut();
        for (point, result) in &swept.results {
            collected.travel.push(travel(label(point), result, 1));
            collected
                .remote_speeds
                .push((label(point), result.metric(0)));
        }
        let remote_locked = remote_name(Policy::Locked);
        let mut rows = swept.numbers(0, 0, |p| p.2.clone());
        rows.extend(swept.ratios(0, remote_locked, |p| format!("{}: ÷ {remote_locked}", p.2)));
        let title = "Forced-remote ping-pong (`Placement::Remote`: every wakeup crosses workers, \
                     so each travels by the policy): round trips per second, higher is better";
        swept
            .table("ping_pong_remote", title.into(), "round trips/s", rows)
            .into()
    })
}

/// How many times one messaging cell runs its hackbench, back to back, each on a fresh runtime
/// (or fresh threads): a single run at the quick scale lasts about 20 ms, short enough for one
/// preemption by another process to move it by a third; five make a cell of about 100 ms whose
/// mean moves far less. The row still reports the time of one run.
const MESSAGING_RUNS: usize = 5;

/// Runs `run` `times` times and adds up what the runs took (wall time, CPU time, and our
/// runtime's counters).
fn repeated(times: usize, mut run: impl FnMut() -> Result<Ran, String>) -> Result<Ran, String> {
    let mut total = run()?;
    for _ in 1..times {
        let ran = run()?;
        total.elapsed += ran.elapsed;
        total.cpu += ran.cpu;
        total.stats = match (total.stats, ran.stats) {
            (Some(sum), Some(more)) => Some(sum + more),
            _ => None,
        };
    }
    Ok(total)
}

/// A messaging configuration: (groups, loops, row label).
type Messaging = (usize, usize, String);

fn messaging_points(plan: &Plan, cx: &Context) -> Vec<Messaging> {
    let label = |groups: usize, loops: usize| {
        let tasks = groups * 40;
        format!(
            "-g {groups} -l {loops} ({tasks} tasks{})",
            cx.oversubscribed(tasks)
        )
    };
    plan.messaging
        .iter()
        .map(|&(g, l)| (g, l, label(g, l)))
        .collect()
}

fn messaging<'a>(
    points: Vec<Messaging>,
    workers: usize,
    collected: &'a RefCell<Collected>,
) -> Box<dyn Measurement + 'a> {
    Sweep::new(
        candidates(),
        points,
        |p| format!("messaging, {}", p.2),
        move |c, &(groups, loops, _)| {
            // Every sender writes `loops` messages to each of its group's 20 receivers.
            let messages = (groups * 20 * 20 * loops) as u64;
            let ran = repeated(MESSAGING_RUNS, || match c {
                Candidate::Runtime(runner) => {
                    runner.run(workers, workloads::messaging(groups, loops))
                }
                Candidate::Kernel => kernel::messaging(groups, loops),
            })?;
            // The time of one run: the mean of the cell's back-to-back runs.
            let one_run = ran.elapsed.as_secs_f64() * 1e3 / MESSAGING_RUNS as f64;
            Ok(with_extras(
                vec![one_run],
                &ran,
                messages * MESSAGING_RUNS as u64,
            ))
        },
    )
    .tables(move |swept, _| {
        let mut collected = collected.borrow_mut();
        for ((_, _, label), result) in &swept.results {
            let speed = reciprocals(&result.metric(0));
            collected.add(format!("messaging, {label}"), speed, result, 1, "message");
        }
        let rows = with_reference_ratios(swept, 1, |p| p.2.clone());
        let title = "Messaging (hackbench shape, 100-byte messages through pipes): total time, \
                     lower is better";
        swept.table("messaging", title.into(), "ms", rows).into()
    })
}

/// The latency percentiles reported, with their row names.
pub(crate) const PERCENTILES: [(f64, &str); 4] =
    [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p99.9")];

/// A percentile plot: x is 1/(1-p), one series per column that has values; `metrics` holds
/// the [`PERCENTILES`] in order.
pub(crate) fn percentile_plot(
    file: String,
    title: String,
    y_label: &str,
    names: &[String],
    metrics: &[Values],
) -> Plot {
    let series = names
        .iter()
        .map(|name| Series {
            name: name.clone(),
            points: PERCENTILES
                .iter()
                .zip(metrics)
                .filter_map(|(&(p, _), values)| values.get(name).map(|v| (100.0 / (100.0 - p), v)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    Axes {
        file,
        title,
        x: (
            "percentile, as 1/(1-p): 2 = p50, 10 = p90, 100 = p99, 1000 = p99.9",
            true,
        ),
        y: (y_label.into(), true),
    }
    .plot(series)
}

/// The latency shapes, each with its row label.
pub(crate) fn latency_points(shapes: &[LatencyShape], cx: &Context) -> Vec<(LatencyShape, String)> {
    let label = |shape: &LatencyShape| {
        let tasks = shape.messengers * (shape.workers + 1);
        let over = cx.oversubscribed(tasks);
        format!(
            "-m {} -t {} ({tasks} tasks{over})",
            shape.messengers, shape.workers
        )
    };
    shapes.iter().map(|shape| (*shape, label(shape))).collect()
}

/// One latency run: the percentiles (µs), then the extras.
fn latency_run(
    c: &Candidate,
    shape: LatencyShape,
    workers: usize,
    timer: &Timer,
) -> Result<Vec<f64>, String> {
    let (mut samples, ran) = match c {
        Candidate::Runtime(runner) => {
            let samples = Arc::new(Mutex::new(Vec::new()));
            let tasks = workloads::latency(shape, workloads::lab_timer(&timer.handle()), &samples);
            let ran = runner.run(workers, tasks)?;
            let samples = std::mem::take(&mut *samples.lock().map_err(|e| e.to_string())?);
            (samples, ran)
        }
        Candidate::Kernel => kernel::latency(shape)?,
    };
    samples.sort_unstable();
    let values = PERCENTILES
        .iter()
        .map(|&(p, _)| workloads::percentile(&samples, p).map_or(f64::NAN, |ns| ns / 1e3))
        .collect();
    // One unit: a worker task woken by its message task (which it then answers).
    let wakeups = (shape.messengers * shape.workers) as u64 * shape.rounds;
    Ok(with_extras(values, &ran, wakeups))
}

fn latency<'a>(
    points: Vec<(LatencyShape, String)>,
    workers: usize,
    timer: &'a Timer,
    collected: &'a RefCell<Collected>,
) -> Box<dyn Measurement + 'a> {
    Sweep::new(
        candidates(),
        points,
        |p| format!("latency, {}", p.1),
        move |c, (shape, _)| latency_run(c, *shape, workers, timer),
    )
    .tables(move |swept, _| {
        let mut collected = collected.borrow_mut();
        let (mut rows, mut ratio_rows, mut plots) = (Vec::new(), Vec::new(), Vec::new());
        for ((shape, label), result) in &swept.results {
            let first = PERCENTILES.len();
            collected
                .travel
                .push(travel(format!("latency, {label}"), result, first));
            collected
                .cpu
                .push(cpu(format!("latency, {label}"), "wakeup", result, first));
            for (metric, &(_, name)) in PERCENTILES.iter().enumerate() {
                let values = result.metric(metric);
                if name == "p99" {
                    ratio_rows.extend(reference_ratios(&format!("{label}, p99"), &values));
                    collected
                        .speeds
                        .push((format!("latency p99, {label}"), reciprocals(&values)));
                }
                rows.push(Row::numbers(format!("{label}: {name}"), values, 1));
            }
            let metrics: Vec<Values> = (0..PERCENTILES.len()).map(|m| result.metric(m)).collect();
            plots.push(percentile_plot(
                format!("wake-latency-m{}-t{}.svg", shape.messengers, shape.workers),
                format!("Wakeup latency percentiles, schbench {label}"),
                "wake-to-run latency (µs)",
                &swept.columns,
                &metrics,
            ));
        }
        rows.extend(ratio_rows);
        let title = "Wakeup latency (schbench shape): time from the waker's stamp until the woken \
                     task runs, lower is better";
        Produced {
            tables: vec![swept.table("latency", title.into(), "µs", rows)],
            plots,
        }
    })
}

/// Per workload: wakelist ÷ locked, the best of our policies, and it against tokio, all as
/// speed ratios (above 1 is faster); then the CPU time per unit of work of that best policy
/// over tokio's (below 1 uses less). `cpu` has one entry per workload of `speeds`, in order;
/// the forced-remote rows (`remote`) have only their wakelist ÷ locked ratio.
fn summary(speeds: &[(String, Values)], remote: &[(String, Values)], cpu: &[Cpu]) -> Table {
    let show = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}x"));
    let mut rows = Vec::new();
    for (index, (label, speed)) in speeds.iter().enumerate() {
        let wakelist = ratio(speed.get(Policy::Wakelist.name()), speed.get(LOCKED));
        let best = policies()
            .into_iter()
            .filter_map(|name| speed.get(name).map(|s| (name, s)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let (best_name, best_vs_tokio, best_cpu_vs_tokio) = match best {
            Some((name, s)) => {
                let per_unit = cpu.get(index).map(|c| &c.micros_per_unit);
                (
                    name.to_string(),
                    ratio(Some(s), speed.get(TOKIO)),
                    per_unit.and_then(|c| ratio(c.get(name), c.get(TOKIO))),
                )
            }
            None => ("n/a".to_string(), None, None),
        };
        rows.push(Row {
            label: label.clone(),
            values: vec![wakelist, None, best_vs_tokio, best_cpu_vs_tokio],
            text: vec![
                show(wakelist),
                best_name,
                show(best_vs_tokio),
                show(best_cpu_vs_tokio),
            ],
        });
    }
    for (label, speed) in remote {
        let wakelist = ratio(
            speed.get(remote_name(Policy::Wakelist)),
            speed.get(remote_name(Policy::Locked)),
        );
        rows.push(Row {
            label: label.clone(),
            values: vec![wakelist, None, None, None],
            text: vec![show(wakelist), "n/a".into(), "n/a".into(), "n/a".into()],
        });
    }
    Table {
        id: "summary".into(),
        title: "Summary: speed ratios (above 1 is faster; latency uses p99), and the CPU time per unit of work of our fastest policy over tokio's (below 1 uses less)".into(),
        unit: "x".into(),
        columns: vec![
            "wakelist vs locked".into(),
            "best policy".into(),
            "best policy vs tokio".into(),
            "best policy's CPU per unit vs tokio".into(),
        ],
        rows,
    }
}

/// One workload's CPU cost under each candidate: CPU time per unit of work, and the CPUs the
/// run kept busy on average.
struct Cpu {
    label: String,
    /// What one unit of work is ("round trip", "message", "wakeup").
    unit: &'static str,
    micros_per_unit: Values,
    cpus_busy: Values,
}

/// What every candidate's run cost in CPU time: per unit of work and its ratio to tokio's, and
/// how many CPUs the run kept busy.
fn cpu_table(rows: &[Cpu]) -> Table {
    let mut per_unit = Vec::new();
    let mut ratios = Vec::new();
    let mut busy = Vec::new();
    for cpu in rows {
        per_unit.push(Row::numbers(
            format!("{}: CPU µs per {}", cpu.label, cpu.unit),
            &cpu.micros_per_unit,
            2,
        ));
        ratios.push(Row::ratios(
            format!("{}: CPU per {} ÷ {TOKIO}", cpu.label, cpu.unit),
            cpu.micros_per_unit.over(TOKIO),
        ));
        busy.push(Row::numbers(
            format!("{}: CPUs busy", cpu.label),
            &cpu.cpus_busy,
            2,
        ));
    }
    let columns = rows
        .first()
        .map(|cpu| cpu.micros_per_unit.names().to_vec())
        .unwrap_or_default();
    per_unit.extend(ratios);
    per_unit.extend(busy);
    Table {
        id: "cpu".into(),
        title: "CPU time per unit of work (getrusage RUSAGE_SELF, user + system of every thread of the lab process over the run; lower is better), and the CPUs busy on average (CPU time ÷ wall time)".into(),
        unit: "CPU µs per unit / x / CPUs".into(),
        columns,
        rows: per_unit,
    }
}

/// One workload's wakeup travel under each candidate: the share of wakeups that went through a
/// wakelist, and the futex wakes per 1000 wakeups (ours only; the others have no values).
struct Travel {
    label: String,
    wakelist_share: Values,
    futex_per_1000: Values,
    affine_share: Values,
    stolen_per_1000: Values,
}

/// How our runtime's wakeups travelled under each policy and placement.
fn travel_table(rows: Vec<Travel>) -> Table {
    let policies = ours();
    let mut out = Vec::new();
    for travel in rows {
        out.push(Row::numbers(
            format!("{}: % into the next slot", travel.label),
            travel.affine_share.only(&policies),
            1,
        ));
        out.push(Row::numbers(
            format!("{}: % through a wakelist", travel.label),
            travel.wakelist_share.only(&policies),
            1,
        ));
        out.push(Row::numbers(
            format!("{}: futex wakes per 1000 wakeups", travel.label),
            travel.futex_per_1000.only(&policies),
            1,
        ));
        out.push(Row::numbers(
            format!("{}: tasks stolen per 1000 wakeups", travel.label),
            travel.stolen_per_1000.only(&policies),
            1,
        ));
    }
    Table {
        id: "travel".into(),
        title: "How our wakeups travelled and where they were placed (medians; the wakeups not into the next slot or a wakelist were local or locked enqueues, and the rest of the notifications hit a polling worker or none was needed)".into(),
        unit: "% / per 1000".into(),
        columns: policies.iter().map(|p| p.to_string()).collect(),
        rows: out,
    }
}

fn intro(cx: &Context, workers: usize) -> Vec<String> {
    vec![
        format!(
            "Every workload runs, in the same process and interleaved, on our runtime with {workers} workers under each wakeup policy (`locked`, `wakelist`, `wakelist-always`), on tokio's multi-thread runtime with {workers} workers running the very same futures, and on the kernel: one OS thread per task, blocking on pipes. The machine has {} CPUs; runs with more tasks than CPUs are marked oversubscribed. Scale: {}; {} repetitions, medians shown.",
            cx.cpus(),
            cx.scale.name(),
            cx.repetitions()
        ),
        format!("**Ping-pong** is `perf bench sched pipe` / UnixBench context1: two tasks pass a token back and forth; 8 pairs at once oversubscribe the CPUs. **Messaging** is hackbench: each group has 20 senders and 20 receivers, and every sender writes `-l` 100-byte messages to every receiver of its group through the receiver's 64 KiB pipe; a cell runs it {MESSAGING_RUNS} times back to back, each on a fresh runtime, and reports the mean time of one run. **Latency** is schbench (old version): each message task sleeps on a timer, stamps the time and wakes its `-t` workers; each worker records the time from the stamp to when it runs, burns 20–30 µs of CPU and reports back. The wakelist patch ran `-m 2 -t 8` on 104 CPUs; here 18 tasks share 2 CPUs."),
        "Our runtime places wakees as the kernel does (`Placement::Kernel`, the default): a task woken by a running task runs next on the waker's worker (the next slot, `WF_SYNC` / tokio's LIFO slot), at most 3 in a row, and not for wakers that fan out (`wake_wide`); idle workers steal half the busiest queue (newidle balance). So in ping-pong most wakeups never leave their worker, and the policies differ only where wakeups still cross. The **forced-remote ping-pong** (`Placement::Remote`) sends every wakeup to another worker, as all wakeups went before the next slot: that is where wakelist and locked are compared (the path the wakelist patch changed).".into(),
        "**CPU time** is measured around every run with `getrusage(RUSAGE_SELF)`, user plus system time of every thread of the lab process (the runtimes' workers and the kernel workloads' threads are all in it), over the same interval as the run's wall time, and divided by the run's units of work: a round trip of ping-pong, a message of messaging, a worker's wakeup in the latency shapes (which includes the 20–30 µs it burns). It shows what idle polling costs: a worker that spins waiting for work is busy for the machine even when it runs nothing.".into(),
        "The wakelist patch (\"sched: Remove the limitation of WF_ON_CPU on wakelist if wakee cpu is idle\", Linux 6.0) measured +11% on pipe context switching and hackbench 3.25 s → 2.25 s from queueing wakeups on an idle CPU's wakelist. In a user-space runtime the waker's saving is a run-queue lock and its cache line; the notification (a flag for a polling worker, a futex wake for a sleeping one) is the same under every policy.".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::names;

    #[test]
    fn the_reference_columns_and_policies_are_candidates() {
        let names = names(&candidates());
        for column in [LOCKED, TOKIO].into_iter().chain(policies()) {
            assert!(names.iter().any(|n| n == column), "{column} in {names:?}");
        }
        let remote = crate::measure::names(&remote_candidates());
        let expected: Vec<String> = ours()[policies().len()..]
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(remote, expected);
        assert!(remote.iter().all(|n| !names.contains(n)));
    }

    fn values(cells: [f64; 3]) -> Values {
        Values::new(
            vec![LOCKED.into(), "wakelist".into(), TOKIO.into()],
            cells.map(Some).to_vec(),
        )
    }

    #[test]
    fn cpu_rows_divide_by_tokio_and_the_summary_quotes_the_fastest_policy() {
        let cpu = || Cpu {
            label: "ping-pong".into(),
            unit: "round trip",
            micros_per_unit: values([4.0, 3.0, 2.0]),
            cpus_busy: values([2.0, 1.5, 1.0]),
        };
        let table = cpu_table(&[cpu()]);
        assert_eq!(table.id, "cpu");
        assert_eq!(table.columns, [LOCKED, "wakelist", TOKIO]);
        let labels: Vec<&str> = table.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "ping-pong: CPU µs per round trip",
                "ping-pong: CPU per round trip ÷ tokio",
                "ping-pong: CPUs busy"
            ]
        );
        assert_eq!(table.rows[1].values, [Some(2.0), Some(1.5), Some(1.0)]);
        // Wakelist is the fastest of ours (2 against locked's 1): its CPU, 3 µs, over tokio's 2.
        let speeds = [("ping-pong".to_string(), values([1.0, 2.0, 1.0]))];
        let summary = summary(&speeds, &[], &[cpu()]);
        assert_eq!(
            summary.rows[0].values,
            [Some(2.0), None, Some(2.0), Some(1.5)]
        );
        assert_eq!(summary.rows[0].text[1], "wakelist");
    }
}
