//! Experiment `cid`: concurrency IDs: switch cost, the thread
//! create/teardown pools, the CID footprint over time, and a CID-indexed sharded counter, for
//! the rework, its two predecessors and the kernel's own rseq mm_cid, in one run.

mod scan;
mod workloads;

use std::time::Duration;

use idspace::cid::{bind_current_thread, BitmapCids, CidAllocator, LazyCids, Rework, MAX_CPUS};

use crate::declare::{self, custom, Axes, Declared, Measurement, Produced, Sweep};
use crate::measure::Medians;
use crate::model::{Row, Section, Series, Table};
use crate::{Context, Experiment, Scale};
use workloads::Shards;

/// The experiment.
pub struct Cids;

/// Simulated CPUs of the spaces in the pool and footprint tests (the benchmark's shapes need more
/// CPUs than this machine has; the spaces are user-space structures, so they can).
const SIM_CPUS: usize = 8;

/// Simulated CPUs of the pool test's wide rows: the most a space has, near the many-CPU
/// machine the rework's benchmark ran on. 32 pools x 32 threads still cross the mode switch
/// there (1024 users on 64 CPUs); 8 x 8 stays in per-task mode.
const WIDE_CPUS: usize = MAX_CPUS;

/// Simulated CPUs of the spaces in the scan placement test: the most a space has, since the
/// scan walks every CPU.
const SCAN_CPUS: usize = MAX_CPUS;

/// The lab's CPU counts are small constants or this machine's count, capped to what a space
/// can have.
const CAPPED: &str = "a CPU count capped to 1..=MAX_CPUS";

/// The columns the pool table's ratio rows divide by: the two designs the rework replaced.
const POOL_REFERENCES: [&str; 2] = ["bitmap", "lazy"];

fn designs(cpus: usize) -> Vec<(&'static str, Box<dyn CidAllocator>)> {
    ["rework", "bitmap", "lazy"]
        .into_iter()
        .map(|name| (name, make(name, cpus)))
        .collect()
}

fn make(name: &str, cpus: usize) -> Box<dyn CidAllocator> {
    let cpus = cpus.clamp(1, MAX_CPUS);
    match name {
        "bitmap" => Box::new(BitmapCids::new(cpus).expect(CAPPED)),
        "lazy" => Box::new(LazyCids::new(cpus).expect(CAPPED)),
        _ => Box::new(Rework::new(cpus).expect(CAPPED)),
    }
}

/// The sizes of one run.
#[derive(Clone, Copy)]
struct Plan {
    /// Each timed cell's duration.
    duration: Duration,
    /// Switch pairs timed per switch-cost run.
    pairs: u32,
}

impl Plan {
    fn new(scale: Scale) -> Plan {
        let (duration, pairs) = match scale {
            Scale::Quick => (Duration::from_millis(250), 200_000),
            Scale::Full => (Duration::from_millis(1000), 2_000_000),
        };
        Plan { duration, pairs }
    }
}

impl Experiment for Cids {
    fn name(&self) -> &'static str {
        "cid"
    }

    fn about(&self) -> &'static str {
        "Concurrency IDs: the MM CID rewrite vs the 6.3 bitmap and the lazy design, and rseq mm_cid"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let plan = Plan::new(cx.scale);
        Ok(declare::run(
            cx,
            Declared {
                name: self.name(),
                title: "cid: concurrency IDs".into(),
                intro: vec![INTRO.into()],
                measurements: vec![
                    switch_cost(plan),
                    pools(plan),
                    lazy_scan(plan),
                    footprint(),
                    counter(plan, cx.cpus()),
                ],
                notes: NOTES.iter().map(|n| n.to_string()).collect(),
            },
        ))
    }
}

const INTRO: &str = "Columns: `rework` = the MM CID rewrite (tasks own CIDs while few, CPUs \
    own them when tasks outnumber the budget; fork and exit do the mode changes); `bitmap` = the \
    6.3 design (a lock and a bitmap at every switch); `lazy` = the design before the rewrite, \
    6.4–6.18 (per-CPU cached CIDs taken back lock-free with the lazy-put mark, migration steals, \
    and the periodic scan at a tick on the switch path every 100 ms, as in the kernel); `kernel` \
    = this machine's kernel (Linux 6.18 runs the lazy design) through real threads and its rseq \
    mm_cid.";

const NOTES: [&str; 4] = [
    "A \"CPU\" of our designs is a worker slot: a switch is a call that puts a task on a slot. \
     The pool test gives the spaces 8 slots so that 32 pools × 32 threads (1024 users) cross the \
     rework's mode switch both ways, as in the MM CID rework's benchmark, and repeats both shapes \
     on 64 slots; the kernel row runs the same shape with real pthreads on this machine's CPUs.",
    "Why the pool rows do not show the rework's +35% (8x8) and +30% (32x32) over the design \
     before it: that gain was measured on a many-CPU machine, where thread create/teardown \
     spends its time in the kernel's load balancer and in contended spin locks (the rework's \
     cover letter shows both at the top of its profile, and its author could not yet explain \
     the difference). Here only the CID designs run: per task (a fork, two switches and an \
     exit), the rework and the lazy design execute about the same number of instructions \
     (about 1,100 under callgrind on one thread), and 2 real CPUs give the 8 or 32 pool threads \
     no CPUs to contend from. So the rows compare the designs' own costs, which are close; the \
     64-slot rows show the same with the simulated width of the benchmark's machine. Through \
     the runtime (experiment `process`), a thread's create and teardown costs microseconds, of \
     which the CID design's part is a fraction of one, so no CID design can move it by 30%.",
    "The lazy scan table follows the lazy design's scan probe: the scan's duration (avg, max, \
     sum) and invocations, with no load and under churn. With the scan at a tick, its whole \
     duration is added to the one switch that runs it (the task_work runs before the task \
     returns to user space), so that switch's extra latency is the scan's max; the worker's \
     scans run beside the switches, which pay only through the CPU words the scan marks. The \
     \"added\" rows compare the loads' mean cost with the same load and no scan at all; \
     differences within a few ns are this machine's noise.",
    "Switch cost: per-task mode with 2 tasks on 4 slots, per-CPU mode with 8 tasks on 4 slots; \
     each figure is one switch (the previous task out, the next in) on one thread, after a \
     warm-up, so it is the common path. The second row's thread is bound to the CPU it switches \
     on (`cid::bind_current_thread`, as the process runtime's workers are), so that the \
     runqueue lock is biased to it: a store and two loads instead of a compare-and-swap. The \
     kernel's context switch is not measurable from user space; its column shows what reading \
     its mm_cid costs.",
];

/// The switch cost of each design, and what reading the kernel's mm_cid costs.
fn switch_cost(plan: Plan) -> Box<dyn Measurement> {
    let columns = vec![
        "rework",
        "rework (per-CPU mode)",
        "bitmap",
        "lazy",
        "kernel rseq",
    ];
    Sweep::new(
        columns,
        vec![()],
        |_| "switch cost".into(),
        move |&c, _| {
            let pairs = plan.pairs;
            // Each shape twice, on a fresh space each time: by a thread bound to no CPU, and by
            // one bound to the CPU it switches on (whose runqueue lock becomes biased to it).
            let both = |design: &str, tasks: usize| -> Result<Vec<f64>, String> {
                let free = workloads::switch_pair(make(design, 4).as_ref(), tasks, pairs)?;
                bind_current_thread(Some(0));
                let bound = workloads::switch_pair(make(design, 4).as_ref(), tasks, pairs);
                bind_current_thread(None);
                Ok(vec![free, bound?, f64::NAN])
            };
            match c {
                "kernel rseq" => workloads::rseq_read(pairs).map(|ns| vec![f64::NAN, f64::NAN, ns]),
                // 8 tasks on 4 CPUs: users > max_cids, per-CPU mode.
                "rework (per-CPU mode)" => both("rework", 8),
                // 2 tasks on 4 CPUs: per-task mode.
                name => both(name, 2),
            }
        },
    )
    .tables(|swept, cx| {
        let result = swept.only();
        let rows = vec![
            Row::numbers("per switch (one in, one out)", result.metric(0), 1),
            Row::numbers(
                "per switch, the thread bound to its CPU (biased runqueue lock)",
                result.metric(1),
                1,
            ),
            Row::numbers("read the kernel's mm_cid", result.metric(2), 2),
        ];
        let title = format!(
            "Switch cost, one thread, common path (median of {})",
            cx.repetitions()
        );
        swept.table("switch_cost", title, "ns", rows).into()
    })
}

/// One cell shape of the pool test: pools, threads per pool, simulated CPUs.
type PoolShape = (usize, usize, usize);

/// The pool test's row label: the benchmark's shape, and the CPU count when it is not the
/// default one.
fn pool_label(&(pools, threads, cpus): &PoolShape) -> String {
    if cpus == SIM_CPUS {
        format!("{pools} pools x {threads} threads")
    } else {
        format!("{pools} pools x {threads} threads, {cpus} CPUs")
    }
}

/// Thread create/teardown pools of every design and the kernel, on the default simulated CPUs
/// and on the wide ones.
fn pools(plan: Plan) -> Box<dyn Measurement> {
    let duration = plan.duration;
    let mut names: Vec<String> = designs(1).into_iter().map(|(n, _)| n.into()).collect();
    names.push("kernel".into());
    let shapes: Vec<PoolShape> = [SIM_CPUS, WIDE_CPUS]
        .into_iter()
        .flat_map(|cpus| [(8, 8, cpus), (32, 32, cpus)])
        .collect();
    Sweep::new(
        names,
        shapes,
        pool_label,
        move |name, &(pools, threads, cpus)| {
            if name == "kernel" {
                if cpus != SIM_CPUS {
                    // The kernel runs on this machine's CPUs whatever the row: its figure is the
                    // default rows' already.
                    return Err(format!(
                    "n/a: the kernel's threads run on this machine's CPUs, not {cpus} simulated \
                     ones; its figure for this shape is in the row without a CPU count"
                ));
                }
                workloads::kernel_pools(pools, threads, duration).map(|r| vec![r])
            } else {
                workloads::pools(make(name, cpus).as_ref(), pools, threads, duration)
                    .map(|r| vec![r])
            }
        },
    )
    .tables(move |swept, cx| {
        let mut rows = swept.numbers(0, 0, pool_label);
        for (shape, rates) in swept.values(0) {
            for reference in POOL_REFERENCES {
                let label = format!("{}: ÷ {reference}", pool_label(shape));
                rows.push(Row::ratios(label, rates.over(reference)));
            }
        }
        let title = format!(
            "Thread create/teardown (tglx's benchmark shape): pools each fork threads, which \
             run, are woken once on another CPU, and exit; {SIM_CPUS} simulated CPUs unless a \
             row says {WIDE_CPUS}; the kernel with real pthreads; {} s per cell, median of {}; \
             {} real CPUs, oversubscribed",
            duration.as_secs_f64(),
            cx.repetitions(),
            cx.cpus()
        );
        swept.table("pools", title, "threads/s", rows).into()
    })
}

/// Where the lazy design's scan runs, and what it adds to switches.
fn lazy_scan(plan: Plan) -> Box<dyn Measurement> {
    let duration = plan.duration;
    let loads = vec![
        (scan::Load::None, "no load", "switch"),
        (scan::Load::Churn, "churn", "task"),
    ];
    Sweep::new(
        scan::PLACEMENTS.to_vec(),
        loads,
        |&(_, label, _)| format!("scan, {label}"),
        move |&c, &(load, _, _)| {
            scan::run(scan::placement(c), load, SCAN_CPUS, duration).map(|run| {
                let scans = [run.scan_mean, run.scan_max, run.scan_sum];
                [run.per_unit]
                    .into_iter()
                    .chain(scans)
                    .chain([run.invocations])
                    .collect()
            })
        },
    )
    .tables(move |swept, cx| {
        let rows = swept
            .results
            .iter()
            .flat_map(|(load, result)| scan_rows(*load, result))
            .collect();
        let title = format!(
            "The lazy design's periodic scan: at a tick on the switch path (6.4–6.18's \
             task_work; the switching task runs it before its switch returns, so a scan's \
             whole duration lands on that one switch) or in a worker thread (a delayed_work), \
             against no scan; {SCAN_CPUS} simulated CPUs (the scan walks them all); period {} \
             ms (the kernel's 100 ms scaled down so that a cell sees hundreds of scans); no \
             load = one thread switching two tasks on one CPU, churn = {} threads each forking \
             a task, switching it on four CPUs in turn and exiting it, per thread; {} s per \
             cell, median of {}",
            scan::LAB_PERIOD.as_secs_f64() * 1e3,
            scan::CHURN_THREADS,
            duration.as_secs_f64(),
            cx.repetitions()
        );
        swept
            .table("lazy_scan", title, "ns, µs, scans", rows)
            .into()
    })
}

/// The scan table's rows for one load.
fn scan_rows((_, label, unit): (scan::Load, &str, &str), result: &Medians) -> Vec<Row> {
    let means = result.metric(0);
    let reference = means.get(scan::PLACEMENTS[0]);
    let added: Vec<Option<f64>> = means
        .cells()
        .iter()
        .map(|mean| Some((*mean)? - reference?))
        .collect();
    let mut rows = vec![
        Row::numbers(format!("{label}: ns per {unit}"), means, 1),
        Row::numbers(
            format!("{label}: ns per {unit} added (vs no scan)"),
            added,
            1,
        ),
    ];
    for (metric, what, digits) in [
        (1, "scan duration, avg µs", 2),
        (2, "scan duration, max µs", 1),
        (3, "scan duration, sum µs", 0),
        (4, "scan invocations", 0),
    ] {
        rows.push(Row::numbers(
            format!("{label}: {what}"),
            result.metric(metric),
            digits,
        ));
    }
    rows
}

/// The CID footprint of each design through grow-then-shrink: a trace, not timed.
fn footprint() -> Box<dyn Measurement> {
    custom(designs(1).len(), |cx| {
        let mut series = Vec::new();
        let (mut peaks, mut ends) = (Vec::new(), Vec::new());
        for (name, space) in designs(SIM_CPUS) {
            cx.progress.step(&format!("footprint: {name}"));
            let trace = workloads::footprint(space.as_ref());
            let line = |name: String, pick: fn(&(u32, u32, u32)) -> u32| Series {
                name,
                points: trace
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (i as f64, f64::from(pick(t))))
                    .collect(),
            };
            if name == "rework" {
                series.push(line("users".into(), |t| t.0));
                series.push(line("rework max_cids".into(), |t| t.2));
            }
            series.push(line(format!("{name}: CIDs in use"), |t| t.1));
            peaks.push(trace.iter().map(|t| t.1).max().map(f64::from));
            ends.push(trace.last().map(|t| f64::from(t.1)));
        }
        let table = Table {
            id: "footprint".into(),
            title: format!(
                "CID footprint through grow-then-shrink ({SIM_CPUS} CPUs, up to {} tasks, \
                 deferred work every 4 steps)",
                3 * SIM_CPUS
            ),
            unit: "CIDs".into(),
            columns: designs(1).into_iter().map(|(n, _)| n.to_string()).collect(),
            rows: vec![
                Row::numbers("peak CIDs in use", peaks, 0),
                Row::numbers("CIDs in use with 1 task left", ends, 0),
            ],
        };
        let axes = Axes {
            file: "cid_footprint.svg".into(),
            title: format!("cid: CIDs in use through grow-then-shrink ({SIM_CPUS} CPUs)"),
            x: ("step", false),
            y: ("CIDs / tasks".into(), false),
        };
        Produced {
            tables: vec![table],
            plots: vec![axes.plot(series)],
        }
    })
}

/// A counter sharded by CID, by thread, or not at all.
fn counter(plan: Plan, cpus: usize) -> Box<dyn Measurement> {
    let duration = plan.duration;
    let counters = vec![
        "shared atomic",
        "thread_local shards",
        "rework CID shards",
        "kernel mm_cid shards",
    ];
    Sweep::new(
        counters,
        vec![2usize, 8, 64],
        |threads| format!("counter, {threads} threads"),
        move |&c, &threads| {
            let space = Rework::new(cpus.clamp(1, MAX_CPUS)).expect(CAPPED);
            let shards = match c {
                "shared atomic" => Shards::Shared,
                "thread_local shards" => Shards::PerThread,
                "rework CID shards" => Shards::Rework(&space),
                _ => Shards::Kernel,
            };
            workloads::counter(shards, threads, duration / 2)
                .map(|(ns, bytes)| vec![ns, bytes as f64])
        },
    )
    .tables(|swept, cx| {
        let mut rows = swept.numbers(0, 2, |&t| {
            format!("ns per increment, {t} threads{}", cx.oversubscribed(t))
        });
        rows.extend(swept.numbers(1, 0, |t| format!("shard bytes, {t} threads")));
        let title = format!(
            "Sharded counter: ns per increment (per thread) and shard memory; the rework's \
             space has {} CPUs (this machine's), each thread a task that switches in every 256 \
             increments; the kernel's mm_cid is read at every increment",
            cx.cpus()
        );
        swept.table("counter", title, "ns, bytes", rows).into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_references_are_designs() {
        let designs: Vec<&str> = designs(1).into_iter().map(|(name, _)| name).collect();
        assert!(POOL_REFERENCES.iter().all(|r| designs.contains(r)));
    }

    #[test]
    fn every_workload_runs_briefly() {
        for (name, space) in designs(4) {
            assert!(
                workloads::switch_pair(space.as_ref(), 2, 100).unwrap() > 0.0,
                "{name}"
            );
        }
        for (name, space) in designs(4) {
            let rate = workloads::pools(space.as_ref(), 2, 3, Duration::from_millis(5));
            let rate = crate::measure::unless_not_at_once(rate);
            assert!(rate.is_none_or(|rate| rate > 0.0), "{name}");
        }
        for (name, space) in designs(4) {
            let trace = workloads::footprint(space.as_ref());
            assert!(
                trace.iter().all(|&(_, cids, _)| cids <= 4),
                "{name}: {trace:?}"
            );
        }
        let space = Rework::new(2).unwrap();
        for shards in [Shards::Shared, Shards::PerThread, Shards::Rework(&space)] {
            let run = workloads::counter(shards, 3, Duration::from_millis(5));
            let run = crate::measure::unless_not_at_once(run);
            assert!(run.is_none_or(|(ns, bytes)| ns > 0.0 && bytes > 0));
        }
    }
}
