//! Experiment `time`: the runtime's clock (issue 12) against `tokio::time`, each workload
//! running the very same futures on both runtimes in one run.
//!
//! * Timeout churn, the network server's pattern: timeouts armed and cancelled before they
//!   fire, from 2 workers and from more worker threads than CPUs. Throughput, and ours ÷ tokio.
//! * Lateness: sleeps of random lengths between 1 and 50 ms, all started together; how late
//!   each one woke, p50 to p99.9, beside tokio's.
//! * The `wake` experiment's latency workload (schbench's shape) with its message tasks
//!   sleeping on the runtime's own timers instead of the lab's timer thread, beside the lab's
//!   timer thread on our runtime and `tokio::time` on tokio's.
//!
//! * The seed's timer tests through the runtime ([`POSIX_TIMERS_TABLE`], `posix.rs`): one
//!   process creates and arms N POSIX timers (20k, 50k, 100k), then deletes them, beside
//!   tokio's sleeps and the kernel's own timers.

mod posix;
mod workloads;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::measure::{names, Values};
use crate::model::{Plot, Row, Section, Series, Table};
use crate::stats::ratio;
use crate::wake::primitives::Timer;
use crate::wake::workloads::{lab_timer, latency, percentile, LatencyShape, Runner};
use crate::{Context, Experiment, Scale};
use idspace::sched::Policy;
use workloads::{Ours, Tokio};

/// The id of the table "the seed's timer tests through the runtime": one process creates and
/// arms N POSIX timers (20k, 50k, 100k), then deletes them; per-operation cost at each N and
/// cost(100k) ÷ cost(20k). The POSIX-timer work (process layer) adds it to this experiment,
/// after the lateness table, with the columns [`OURS`] and [`TOKIO`] like the others, and the
/// kernel's.
pub const POSIX_TIMERS_TABLE: &str = "posix_timers";

/// The experiment.
pub struct Time;

/// Our runtime's column.
const OURS: &str = "ours";
/// tokio's column, the reference of the ratio rows.
const TOKIO: &str = "tokio";

/// The columns of the churn and lateness tables.
#[derive(Clone, Copy)]
enum Candidate {
    Ours,
    Tokio,
}

impl crate::measure::Candidate for Candidate {
    fn name(&self) -> &str {
        match self {
            Candidate::Ours => OURS,
            Candidate::Tokio => TOKIO,
        }
    }
}

/// The columns of the wakeup-latency table: who runs the tasks and whose timer wakes the
/// message tasks.
#[derive(Clone, Copy)]
enum Sleeper {
    /// Our runtime, its own timers.
    OursRuntime,
    /// Our runtime, the lab's timer thread (the `wake` experiment's setup).
    OursLabThread,
    /// tokio, `tokio::time`.
    Tokio,
}

impl crate::measure::Candidate for Sleeper {
    fn name(&self) -> &str {
        match self {
            Sleeper::OursRuntime => "ours: runtime timers",
            Sleeper::OursLabThread => "ours: lab timer thread",
            Sleeper::Tokio => "tokio: tokio::time",
        }
    }
}

/// One churn configuration.
#[derive(Clone, Copy)]
struct ChurnShape {
    workers: usize,
    tasks: usize,
}

struct Plan {
    /// Timeouts per churn configuration, over all its tasks.
    timeouts: u64,
    churn: Vec<ChurnShape>,
    /// Sleeps of the lateness workload.
    sleeps: usize,
    latency: Vec<LatencyShape>,
}

impl Plan {
    fn new(scale: Scale, cpus: usize) -> Plan {
        Plan {
            timeouts: match scale {
                Scale::Quick => 200_000,
                Scale::Full => 1_000_000,
            },
            churn: vec![
                ChurnShape {
                    workers: 2,
                    tasks: 2,
                },
                // More worker threads than CPUs, and more tasks than workers.
                ChurnShape {
                    workers: 4 * cpus,
                    tasks: 8 * cpus,
                },
            ],
            sleeps: match scale {
                Scale::Quick => 2_000,
                Scale::Full => 10_000,
            },
            latency: crate::wake::Plan::new(scale).latency,
        }
    }
}

const PERCENTILES: [(f64, &str); 4] =
    [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p99.9")];

/// The percentiles of `samples` (ns) in µs, then the maximum.
fn percentiles_us(mut samples: Vec<u64>) -> Vec<f64> {
    samples.sort_unstable();
    let mut values: Vec<f64> = PERCENTILES
        .iter()
        .map(|&(p, _)| percentile(&samples, p).map_or(f64::NAN, |ns| ns / 1e3))
        .collect();
    values.push(samples.last().map_or(f64::NAN, |&ns| ns as f64 / 1e3));
    values
}

/// A percentile plot: x is 1/(1-p), one series per column.
fn percentile_plot(
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
    Plot {
        file,
        title,
        x_label: "percentile, as 1/(1-p): 2 = p50, 10 = p90, 100 = p99, 1000 = p99.9".into(),
        y_label: y_label.into(),
        log_x: true,
        log_y: true,
        series,
    }
}

impl Experiment for Time {
    fn name(&self) -> &'static str {
        "time"
    }

    fn about(&self) -> &'static str {
        "the runtime's timer wheel vs tokio::time: timeout churn, sleep lateness, wakeup latency on runtime timers"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let cpus = cx.cpus();
        let plan = Plan::new(cx.scale, cpus);
        let pair = [Candidate::Ours, Candidate::Tokio];
        let pair_names = names(&pair);
        let sleepers = [Sleeper::OursRuntime, Sleeper::OursLabThread, Sleeper::Tokio];
        let sleeper_names = names(&sleepers);
        let steps = (plan.churn.len() + 1) * pair.len() + plan.latency.len() * sleepers.len();
        cx.progress
            .set_total((steps * cx.repetitions() + posix::steps(cx)) as u64);
        let mut tables = Vec::new();
        let mut plots = Vec::new();
        let mut summary = Vec::new();

        // Timeout churn.
        let mut rows = Vec::new();
        let mut ratio_rows = Vec::new();
        for shape in &plan.churn {
            let per_task = plan.timeouts / shape.tasks as u64;
            let total = per_task * shape.tasks as u64;
            let label = format!(
                "{} workers, {} tasks{}",
                shape.workers,
                shape.tasks,
                cx.oversubscribed(shape.workers)
            );
            let result = cx.measure(&pair, &format!("churn, {label}"), |c| {
                // With timeouts, then the same requests bare (the runtime's own cost).
                let mut rates = Vec::new();
                for timeouts in [true, false] {
                    let completed = Arc::new(AtomicU64::new(0));
                    let tasks = |clock| match clock {
                        Candidate::Ours => {
                            workloads::churn(Ours, shape.tasks, per_task, timeouts, &completed)
                        }
                        Candidate::Tokio => {
                            workloads::churn(Tokio, shape.tasks, per_task, timeouts, &completed)
                        }
                    };
                    let elapsed = match c {
                        Candidate::Ours => workloads::run_ours(shape.workers, tasks(*c))?,
                        Candidate::Tokio => workloads::run_tokio(shape.workers, tasks(*c))?,
                    };
                    let completed = completed.load(Ordering::Relaxed);
                    if completed != total {
                        return Err(format!("{completed} of {total} requests answered in time"));
                    }
                    rates.push(total as f64 / elapsed.as_secs_f64());
                }
                Ok(rates)
            });
            let (rates, bare) = (result.metric(0), result.metric(1));
            summary.push(Goal::at_least(
                format!("churn, {label}: ours ÷ tokio"),
                ratio(rates.get(OURS), rates.get(TOKIO)),
                1.0,
                "x",
            ));
            // The wall time a timeout adds to a request, over the bare request.
            let added = Values::new(
                pair_names.clone(),
                pair_names
                    .iter()
                    .map(|name| match (rates.get(name), bare.get(name)) {
                        (Some(with), Some(without)) => Some(1e9 / with - 1e9 / without),
                        _ => None,
                    })
                    .collect(),
            );
            ratio_rows.push(Row::ratios(
                format!("{label}: ÷ {TOKIO}"),
                rates.over(TOKIO),
            ));
            ratio_rows.push(Row::ratios(
                format!("{label}, no timeouts (the runtimes alone): ÷ {TOKIO}"),
                bare.over(TOKIO),
            ));
            ratio_rows.push(Row::numbers(
                format!("{label}: ns of wall time a timeout adds to a request"),
                added,
                0,
            ));
            rows.push(Row::numbers(label.clone(), rates, 0));
            rows.push(Row::numbers(
                format!("{label}, no timeouts (the runtimes alone)"),
                bare,
                0,
            ));
        }
        rows.extend(ratio_rows);
        tables.push(Table {
            id: "churn".into(),
            title: format!(
                "Timeout churn: {} timeouts of 60 s armed and cancelled before they fire, requests per second, higher is better (the same requests without timeouts show the runtimes' own share)",
                plan.timeouts
            ),
            unit: "requests/s".into(),
            columns: pair_names.clone(),
            rows,
        });

        // Lateness.
        let lengths = workloads::sleep_lengths(plan.sleeps);
        let label = format!("{} sleeps of 1–50 ms on {cpus} workers", plan.sleeps);
        let result = cx.measure(&pair, &format!("lateness, {label}"), |c| {
            let late: Arc<Vec<AtomicU64>> =
                Arc::new((0..lengths.len()).map(|_| AtomicU64::new(0)).collect());
            match c {
                Candidate::Ours => {
                    workloads::run_ours(cpus, workloads::lateness(Ours, &lengths, &late))?
                }
                Candidate::Tokio => {
                    workloads::run_tokio(cpus, workloads::lateness(Tokio, &lengths, &late))?
                }
            };
            let samples = late.iter().map(|l| l.load(Ordering::Relaxed)).collect();
            Ok(percentiles_us(samples))
        });
        let mut rows = Vec::new();
        let metrics: Vec<Values> = (0..PERCENTILES.len()).map(|m| result.metric(m)).collect();
        for (values, &(_, name)) in metrics.iter().zip(&PERCENTILES) {
            rows.push(Row::numbers(name, values, 1));
        }
        rows.push(Row::numbers("max", result.metric(PERCENTILES.len()), 1));
        let p99 = &metrics[2];
        rows.push(Row::ratios(format!("p99 ÷ {TOKIO}"), p99.over(TOKIO)));
        summary.push(Goal::at_most(
            "lateness p99, ours".into(),
            p99.get(OURS),
            1_000.0,
            "µs",
        ));
        summary.push(Goal::at_most(
            "lateness p99: ours ÷ tokio".into(),
            ratio(p99.get(OURS), p99.get(TOKIO)),
            1.0,
            "x",
        ));
        tables.push(Table {
            id: "lateness".into(),
            title: format!(
                "Lateness: {label}, all started together; how late each woke past its deadline, lower is better"
            ),
            unit: "µs".into(),
            columns: pair_names.clone(),
            rows,
        });
        plots.push(percentile_plot(
            "time-lateness.svg".into(),
            format!("Sleep lateness, {label}"),
            "lateness (µs)",
            &pair_names,
            &metrics,
        ));

        // The seed's timer tests through the runtime.
        let (table, flat) = posix::table(cx);
        tables.push(table);
        summary.push(Goal::at_most(
            "POSIX timers' cost per timer, 100k ÷ 20k, ours".into(),
            flat,
            1.3,
            "x",
        ));

        // The wake experiment's latency workload on runtime timers.
        let timer = Timer::start()?;
        let mut rows = Vec::new();
        let mut ratio_rows = Vec::new();
        for shape in &plan.latency {
            let tasks = shape.messengers * (shape.workers + 1);
            let label = format!(
                "-m {} -t {} ({tasks} tasks{})",
                shape.messengers,
                shape.workers,
                cx.oversubscribed(tasks)
            );
            let result = cx.measure(&sleepers, &format!("wake latency, {label}"), |s| {
                let samples = Arc::new(Mutex::new(Vec::new()));
                match s {
                    Sleeper::OursRuntime => {
                        let sleep = |d| idspace::sched::time::sleep(d);
                        workloads::run_ours(cpus, latency(*shape, sleep, &samples))?;
                    }
                    Sleeper::OursLabThread => {
                        let tasks = latency(*shape, lab_timer(&timer.handle()), &samples);
                        Runner::Ours(Policy::Wakelist).run(cpus, tasks)?;
                    }
                    Sleeper::Tokio => {
                        let sleep = |d| tokio::time::sleep(d);
                        workloads::run_tokio(cpus, latency(*shape, sleep, &samples))?;
                    }
                }
                let samples = std::mem::take(&mut *samples.lock().map_err(|e| e.to_string())?);
                let mut values = percentiles_us(samples);
                values.pop();
                Ok(values)
            });
            let metrics: Vec<Values> = (0..PERCENTILES.len()).map(|m| result.metric(m)).collect();
            for (values, &(_, name)) in metrics.iter().zip(&PERCENTILES) {
                if name == "p99" {
                    ratio_rows.push(Row::ratios(
                        format!("{label}, p99: ÷ tokio"),
                        values.over(Sleeper::Tokio.name_str()),
                    ));
                    ratio_rows.push(Row::ratios(
                        format!("{label}, p99: ÷ lab timer thread"),
                        values.over(Sleeper::OursLabThread.name_str()),
                    ));
                }
                rows.push(Row::numbers(format!("{label}: {name}"), values, 1));
            }
            plots.push(percentile_plot(
                format!(
                    "time-wake-latency-m{}-t{}.svg",
                    shape.messengers, shape.workers
                ),
                format!("Wakeup latency on runtime timers, schbench {label}"),
                "wake-to-run latency (µs)",
                &sleeper_names,
                &metrics,
            ));
        }
        drop(timer);
        rows.extend(ratio_rows);
        tables.push(Table {
            id: "wake_latency".into(),
            title: "The wake experiment's latency workload (schbench shape) with the message tasks sleeping on runtime timers: time from the waker's stamp until the woken task runs, lower is better"
                .into(),
            unit: "µs".into(),
            columns: sleeper_names.clone(),
            rows,
        });

        tables.push(goals_table(summary));

        Ok(Section {
            name: self.name().into(),
            title: "The runtime's clock: a timer wheel per worker (issue 12)".into(),
            intro: intro(cx, &plan),
            tables,
            plots,
            notes: std::mem::take(&mut cx.notes),
        })
    }
}

impl Sleeper {
    /// The column name (the `Candidate` trait's, without the import at each use).
    fn name_str(self) -> &'static str {
        match self {
            Sleeper::OursRuntime => "ours: runtime timers",
            Sleeper::OursLabThread => "ours: lab timer thread",
            Sleeper::Tokio => "tokio: tokio::time",
        }
    }
}

/// One of the goals and the figure measured for it.
struct Goal {
    label: String,
    value: Option<f64>,
    bound: f64,
    /// Whether the value must stay at or below the bound (else at or above).
    at_most: bool,
    unit: &'static str,
}

impl Goal {
    fn at_least(label: String, value: Option<f64>, bound: f64, unit: &'static str) -> Goal {
        Goal {
            label,
            value,
            bound,
            at_most: false,
            unit,
        }
    }

    fn at_most(label: String, value: Option<f64>, bound: f64, unit: &'static str) -> Goal {
        Goal {
            label,
            value,
            bound,
            at_most: true,
            unit,
        }
    }

    fn met(&self) -> Option<bool> {
        self.value.map(|v| {
            if self.at_most {
                v <= self.bound
            } else {
                v >= self.bound
            }
        })
    }
}

/// The goals of the issue, each with its figure and whether it was met.
fn goals_table(goals: Vec<Goal>) -> Table {
    let show = |v: f64, unit: &str| {
        if unit == "x" {
            format!("{v:.2}x")
        } else {
            format!("{v:.1} {unit}")
        }
    };
    let rows = goals
        .into_iter()
        .map(|goal| {
            let met = goal.met();
            Row {
                label: goal.label.clone(),
                values: vec![goal.value, Some(goal.bound), met.map(f64::from)],
                text: vec![
                    goal.value
                        .map_or_else(|| "n/a".into(), |v| show(v, goal.unit)),
                    format!(
                        "{} {}",
                        if goal.at_most { "≤" } else { "≥" },
                        show(goal.bound, goal.unit)
                    ),
                    match met {
                        Some(true) => "yes".into(),
                        Some(false) => "no".into(),
                        None => "n/a".into(),
                    },
                ],
            }
        })
        .collect();
    Table {
        id: "goals".into(),
        title: "Goals of the issue: measured, goal, met".into(),
        unit: "x / µs".into(),
        columns: vec!["measured".into(), "goal".into(), "met".into()],
        rows,
    }
}

fn intro(cx: &Context, plan: &Plan) -> Vec<String> {
    let reduced = match cx.scale {
        Scale::Quick => format!(
            " At the quick scale the sizes are reduced: {} timeouts per churn run instead of 1,000,000 and {} sleeps instead of 10,000.",
            plan.timeouts, plan.sleeps
        ),
        Scale::Full => String::new(),
    };
    vec![
        format!(
            "Every workload runs, in the same process and interleaved, on our runtime (`wakelist` policy) with `idspace::sched::time` and on tokio's multi-thread runtime with `tokio::time`, the very same futures written once over both. The machine has {} CPUs. Scale: {}; {} repetitions, medians shown.{reduced}",
            cx.cpus(),
            cx.scale.name(),
            cx.repetitions()
        ),
        format!(
            "**Timeout churn** is a server guarding each request with a timeout that almost never fires: every request is pending once (so its timeout's timer is armed) and answered on the next turn (so the timer is cancelled). Our timers live on a wheel per worker, arm and cancel in O(1) under that worker's lock; tokio's on its sharded wheel. **Lateness**: all sleeps start together and each records how long after its deadline it ran; our wheel's resolution is {} µs, tokio's 1 ms, and both round deadlines up. **Wakeup latency** re-runs the `wake` experiment's schbench shape, the message tasks sleeping on each runtime's own timers (our runtime also with the lab's timer thread, the `wake` experiment's setup).",
            idspace::sched::time::RESOLUTION.as_micros()
        ),
        "**POSIX timers** (the seed's timer tests through the runtime): a task of one process creates N timers of `idspace::process` (monotonic, no notification: `SIGEV_NONE`) and arms each an hour ahead on its worker's wheel, then deletes them all; per timer, each phase and both. tokio's column creates N `tokio::time::sleep` futures and polls each once (which arms it), then drops them (which cancels them), on a one-thread runtime; the kernel's makes the real `timer_create`, `timer_settime` and `timer_delete` system calls (each timer is charged one pending signal against `RLIMIT_SIGPENDING`, which may stop it short of 100k: the notes say so). The ratio row is the issue's flatness goal: the cost per timer at 100k over that at 20k.".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_say_whether_they_were_met() {
        let table = goals_table(vec![
            Goal::at_least("a".into(), Some(1.2), 1.0, "x"),
            Goal::at_most("b".into(), Some(1_500.0), 1_000.0, "µs"),
            Goal::at_most("c".into(), None, 1.0, "x"),
        ]);
        let met: Vec<&str> = table.rows.iter().map(|r| r.text[2].as_str()).collect();
        assert_eq!(met, ["yes", "no", "n/a"]);
        assert_eq!(table.rows[1].text[1], "≤ 1000.0 µs");
    }

    #[test]
    fn the_sleepers_column_names_match_their_candidate_names() {
        use crate::measure::Candidate as _;
        for s in [Sleeper::OursRuntime, Sleeper::OursLabThread, Sleeper::Tokio] {
            assert_eq!(s.name(), s.name_str());
        }
    }
}
