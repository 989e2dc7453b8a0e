//! Experiment `time`: the runtime's clock against `tokio::time`, each workload
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
//! * The posix-timers rework's timer tests through the runtime ([`POSIX_TIMERS_TABLE`],
//!   `posix.rs`): one process creates and arms N POSIX timers (20k, 50k, 100k), then deletes them,
//!   beside tokio's sleeps and the kernel's own timers.

mod posix;
mod workloads;

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::declare::{self, custom, Declared, Measurement, Produced, Sweep};
use crate::goals::Goal;
use crate::measure::Values;
use crate::model::{Row, Section, Table};
use crate::stats::ratio;
use crate::wake::primitives::Timer;
use crate::wake::workloads::{lab_timer, latency, percentile, LatencyShape, Runner};
use crate::wake::{percentile_plot, PERCENTILES};
use crate::{Context, Experiment, Scale};
use idspace::sched::Policy;
use workloads::{Ours, Tokio};

/// The id of the table "the POSIX timer tests through the runtime": one process creates and
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

impl Experiment for Time {
    fn name(&self) -> &'static str {
        "time"
    }

    fn about(&self) -> &'static str {
        "the runtime's timer wheel vs tokio::time: timeout churn, sleep lateness, wakeup latency on runtime timers"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let plan = Plan::new(cx.scale, cx.cpus());
        let goals = RefCell::new(Vec::new());
        // The lab's timer thread for the latency runs, started up front: until a run arms a
        // deadline it waits on a condition variable, so the other workloads do not pay for it.
        let timer = Timer::start()?;
        let latency_points = crate::wake::latency_points(&plan.latency, cx);
        let churn_points = plan
            .churn
            .iter()
            .map(|s| (*s, churn_label(s, cx)))
            .collect();
        let measurements = vec![
            churn(&plan, churn_points, &goals),
            lateness(&plan, cx.cpus(), &goals),
            posix::measurement(|flat| {
                let label = "POSIX timers' cost per timer, 100k ÷ 20k, ours";
                goals
                    .borrow_mut()
                    .push(Goal::at_most(label, flat, 1.3, "x"));
            }),
            wake_latency(latency_points, cx.cpus(), &timer),
            custom(0, |_| goals_table(goals.take()).into()),
        ];
        let declared = Declared {
            name: self.name(),
            title: "The runtime's clock: a timer wheel per worker".into(),
            intro: intro(cx, &plan),
            measurements,
            notes: Vec::new(),
        };
        Ok(declare::run(cx, declared))
    }
}

fn churn_label(shape: &ChurnShape, cx: &Context) -> String {
    let over = cx.oversubscribed(shape.workers);
    format!("{} workers, {} tasks{over}", shape.workers, shape.tasks)
}

/// One churn run: requests per second with timeouts, then the same requests bare (the
/// runtime's own cost).
fn churn_run(c: Candidate, shape: ChurnShape, per_task: u64) -> Result<Vec<f64>, String> {
    let total = per_task * shape.tasks as u64;
    let mut rates = Vec::new();
    for timeouts in [true, false] {
        let completed = Arc::new(AtomicU64::new(0));
        let elapsed = match c {
            Candidate::Ours => {
                let tasks = workloads::churn(Ours, shape.tasks, per_task, timeouts, &completed);
                workloads::run_ours(shape.workers, tasks)?
            }
            Candidate::Tokio => {
                let tasks = workloads::churn(Tokio, shape.tasks, per_task, timeouts, &completed);
                workloads::run_tokio(shape.workers, tasks)?
            }
        };
        let completed = completed.load(Ordering::Relaxed);
        if completed != total {
            return Err(format!("{completed} of {total} requests answered in time"));
        }
        rates.push(total as f64 / elapsed.as_secs_f64());
    }
    Ok(rates)
}

/// Timeout churn, in every churn shape.
fn churn<'a>(
    plan: &'a Plan,
    points: Vec<(ChurnShape, String)>,
    goals: &'a RefCell<Vec<Goal>>,
) -> Box<dyn Measurement + 'a> {
    let timeouts = plan.timeouts;
    Sweep::new(
        vec![Candidate::Ours, Candidate::Tokio],
        points,
        |(_, label)| format!("churn, {label}"),
        move |&c, &(shape, _)| churn_run(c, shape, timeouts / shape.tasks as u64),
    )
    .tables(move |swept, _| {
        let (mut rows, mut ratio_rows) = (Vec::new(), Vec::new());
        for ((_, label), result) in &swept.results {
            let (rates, bare) = (result.metric(0), result.metric(1));
            let speedup = ratio(rates.get(OURS), rates.get(TOKIO));
            goals.borrow_mut().push(Goal::at_least(
                format!("churn, {label}: ours ÷ tokio"),
                speedup,
                1.0,
                "x",
            ));
            // The wall time a timeout adds to a request, over the bare request.
            let added: Vec<Option<f64>> = rates
                .cells()
                .iter()
                .zip(bare.cells())
                .map(|(with, without)| Some(1e9 / (*with)? - 1e9 / (*without)?))
                .collect();
            let bare_label = format!("{label}, no timeouts (the runtimes alone)");
            ratio_rows.push(Row::ratios(
                format!("{label}: ÷ {TOKIO}"),
                rates.over(TOKIO),
            ));
            ratio_rows.push(Row::ratios(
                format!("{bare_label}: ÷ {TOKIO}"),
                bare.over(TOKIO),
            ));
            let added_label = format!("{label}: ns of wall time a timeout adds to a request");
            ratio_rows.push(Row::numbers(added_label, added, 0));
            rows.push(Row::numbers(label.clone(), rates, 0));
            rows.push(Row::numbers(bare_label, bare, 0));
        }
        rows.extend(ratio_rows);
        let title = format!(
            "Timeout churn: {timeouts} timeouts of 60 s armed and cancelled before they fire, \
             requests per second, higher is better (the same requests without timeouts show the \
             runtimes' own share)"
        );
        swept.table("churn", title, "requests/s", rows).into()
    })
}

/// Sleeps of random lengths, all started together: how late each woke.
fn lateness<'a>(
    plan: &Plan,
    cpus: usize,
    goals: &'a RefCell<Vec<Goal>>,
) -> Box<dyn Measurement + 'a> {
    let lengths = workloads::sleep_lengths(plan.sleeps);
    let label = format!("{} sleeps of 1–50 ms on {cpus} workers", plan.sleeps);
    let step = format!("lateness, {label}");
    Sweep::new(
        vec![Candidate::Ours, Candidate::Tokio],
        vec![()],
        move |_| step.clone(),
        move |c, _| {
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
            Ok(percentiles_us(
                late.iter().map(|l| l.load(Ordering::Relaxed)).collect(),
            ))
        },
    )
    .tables(move |swept, _| {
        let result = swept.only();
        let metrics: Vec<Values> = (0..PERCENTILES.len()).map(|m| result.metric(m)).collect();
        let mut rows: Vec<Row> = metrics
            .iter()
            .zip(&PERCENTILES)
            .map(|(values, &(_, name))| Row::numbers(name, values, 1))
            .collect();
        rows.push(Row::numbers("max", result.metric(PERCENTILES.len()), 1));
        let p99 = &metrics[2];
        rows.push(Row::ratios(format!("p99 ÷ {TOKIO}"), p99.over(TOKIO)));
        let mut goals = goals.borrow_mut();
        goals.push(Goal::at_most(
            "lateness p99, ours",
            p99.get(OURS),
            1_000.0,
            "µs",
        ));
        let speedup = ratio(p99.get(OURS), p99.get(TOKIO));
        goals.push(Goal::at_most(
            "lateness p99: ours ÷ tokio",
            speedup,
            1.0,
            "x",
        ));
        let title = format!(
            "Lateness: {label}, all started together; how late each woke past its deadline, lower \
             is better"
        );
        let plot = percentile_plot(
            "time-lateness.svg".into(),
            format!("Sleep lateness, {label}"),
            "lateness (µs)",
            &swept.columns,
            &metrics,
        );
        Produced {
            tables: vec![swept.table("lateness", title, "µs", rows)],
            plots: vec![plot],
        }
    })
}

/// One wake-latency run: the percentiles (µs) of the wakeups with `s`'s timers.
fn wake_latency_run(
    s: Sleeper,
    shape: LatencyShape,
    cpus: usize,
    timer: &Timer,
) -> Result<Vec<f64>, String> {
    let samples = Arc::new(Mutex::new(Vec::new()));
    match s {
        Sleeper::OursRuntime => {
            let sleep = |d| idspace::sched::time::sleep(d);
            workloads::run_ours(cpus, latency(shape, sleep, &samples))?;
        }
        Sleeper::OursLabThread => {
            let tasks = latency(shape, lab_timer(&timer.handle()), &samples);
            Runner::Ours(Policy::Wakelist).run(cpus, tasks)?;
        }
        Sleeper::Tokio => {
            let sleep = |d| tokio::time::sleep(d);
            workloads::run_tokio(cpus, latency(shape, sleep, &samples))?;
        }
    }
    let samples = std::mem::take(&mut *samples.lock().map_err(|e| e.to_string())?);
    let mut values = percentiles_us(samples);
    values.pop();
    Ok(values)
}

/// The wake experiment's latency workload on runtime timers.
fn wake_latency(
    points: Vec<(LatencyShape, String)>,
    cpus: usize,
    timer: &Timer,
) -> Box<dyn Measurement + '_> {
    let sleepers = vec![Sleeper::OursRuntime, Sleeper::OursLabThread, Sleeper::Tokio];
    Sweep::new(
        sleepers,
        points,
        |(_, label)| format!("wake latency, {label}"),
        move |&s, (shape, _)| wake_latency_run(s, *shape, cpus, timer),
    )
    .tables(|swept, _| {
        let (mut rows, mut ratio_rows, mut plots) = (Vec::new(), Vec::new(), Vec::new());
        for ((shape, label), result) in &swept.results {
            let metrics: Vec<Values> = (0..PERCENTILES.len()).map(|m| result.metric(m)).collect();
            for (values, &(_, name)) in metrics.iter().zip(&PERCENTILES) {
                if name == "p99" {
                    for (reference, what) in [
                        (Sleeper::Tokio, "tokio"),
                        (Sleeper::OursLabThread, "lab timer thread"),
                    ] {
                        let label = format!("{label}, p99: ÷ {what}");
                        ratio_rows.push(Row::ratios(label, values.over(reference.name_str())));
                    }
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
                &swept.columns,
                &metrics,
            ));
        }
        rows.extend(ratio_rows);
        let title = "The wake experiment's latency workload (schbench shape) with the message \
                     tasks sleeping on runtime timers: time from the waker's stamp until the \
                     woken task runs, lower is better";
        Produced {
            tables: vec![swept.table("wake_latency", title.into(), "µs", rows)],
            plots,
        }
    })
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

/// The clock's goals, each with its figure and whether it was met.
fn goals_table(goals: Vec<Goal>) -> Table {
    crate::goals::table(goals, "x / µs", 1)
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
        "**POSIX timers** (the posix-timers hash-table rework's tests, Linux 6.15, through the runtime): a task of one process creates N timers of `idspace::process` (monotonic, no notification: `SIGEV_NONE`) and arms each an hour ahead on its worker's wheel, then deletes them all; per timer, each phase and both. tokio's column creates N `tokio::time::sleep` futures and polls each once (which arms it), then drops them (which cancels them), on a one-thread runtime; the kernel's makes the real `timer_create`, `timer_settime` and `timer_delete` system calls (each timer is charged one pending signal against `RLIMIT_SIGPENDING`, which may stop it short of 100k: the notes say so). The ratio row is the flatness goal: the cost per timer at 100k over that at 20k.".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_say_whether_they_were_met() {
        let table = goals_table(vec![
            Goal::at_least("a", Some(1.2), 1.0, "x"),
            Goal::at_most("b", Some(1_500.0), 1_000.0, "µs"),
            Goal::at_most("c", None, 1.0, "x"),
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
