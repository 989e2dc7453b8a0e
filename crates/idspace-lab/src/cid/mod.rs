//! Experiment `cid`: concurrency IDs (seeds 000 and 003): switch cost, the thread
//! create/teardown pools, the CID footprint over time, and a CID-indexed sharded counter, for
//! the rework, its two predecessors and the kernel's own rseq mm_cid, in one run.

mod scan;
mod workloads;

use std::time::Duration;

use idspace::cid::{BitmapCids, CidAllocator, LazyCids, Rework, MAX_CPUS};

use crate::model::{Plot, Row, Section, Series, Table};
use crate::{Context, Experiment, Scale};
use workloads::Shards;

/// The experiment.
pub struct Cids;

/// Simulated CPUs of the spaces in the pool and footprint tests (the seed's shapes need more
/// CPUs than this machine has; the spaces are user-space structures, so they can).
const SIM_CPUS: usize = 8;

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

impl Experiment for Cids {
    fn name(&self) -> &'static str {
        "cid"
    }

    fn about(&self) -> &'static str {
        "Concurrency IDs: the MM CID rewrite vs the 6.3 bitmap and the lazy design, and rseq mm_cid"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let (duration, pairs) = match cx.scale {
            Scale::Quick => (Duration::from_millis(250), 200_000),
            Scale::Full => (Duration::from_millis(1000), 2_000_000),
        };
        let repetitions = cx.repetitions();
        let cpus = cx.cpus();
        let pool_shapes = [(8usize, 8usize), (32, 32)];
        let counter_threads = [2usize, 8, 64];
        let loads = [
            (scan::Load::None, "no load", "switch"),
            (scan::Load::Churn, "churn", "task"),
        ];
        let steps = repetitions
            * (5 + pool_shapes.len() * 4
                + counter_threads.len() * 4
                + loads.len() * scan::PLACEMENTS.len())
            + 3;
        cx.progress.set_total(steps as u64);
        let mut tables = Vec::new();

        // 1. Switch cost.
        let columns = [
            "rework",
            "rework (per-CPU mode)",
            "bitmap",
            "lazy",
            "kernel rseq",
        ];
        let result = cx.measure(&columns, "switch cost", |&c| {
            match c {
                "kernel rseq" => workloads::rseq_read(pairs).map(|ns| vec![f64::NAN, ns]),
                // 8 tasks on 4 CPUs: users > max_cids, per-CPU mode.
                "rework (per-CPU mode)" => {
                    workloads::switch_pair(make("rework", 4).as_ref(), 8, pairs)
                        .map(|ns| vec![ns, f64::NAN])
                }
                // 2 tasks on 4 CPUs: per-task mode.
                name => workloads::switch_pair(make(name, 4).as_ref(), 2, pairs)
                    .map(|ns| vec![ns, f64::NAN]),
            }
        });
        tables.push(Table {
            id: "switch_cost".into(),
            title: format!("Switch cost, one thread, common path (median of {repetitions})"),
            unit: "ns".into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: vec![
                Row::numbers("per switch (one in, one out)", result.metric(0), 1),
                Row::numbers("read the kernel's mm_cid", result.metric(1), 2),
            ],
        });

        // 2. Thread create/teardown pools.
        let mut names: Vec<String> = designs(1).into_iter().map(|(n, _)| n.to_string()).collect();
        names.push("kernel".into());
        let mut rows = Vec::new();
        let mut ratio_rows = Vec::new();
        for &(pools, threads) in &pool_shapes {
            let label = format!("{pools} pools x {threads} threads");
            let result = cx.measure(&names, &label, |name| {
                if name == "kernel" {
                    workloads::kernel_pools(pools, threads, duration).map(|r| vec![r])
                } else {
                    workloads::pools(make(name, SIM_CPUS).as_ref(), pools, threads, duration)
                        .map(|r| vec![r])
                }
            });
            let rates = result.metric(0);
            for reference in POOL_REFERENCES {
                ratio_rows.push(Row::ratios(
                    format!("{label}: ÷ {reference}"),
                    rates.over(reference),
                ));
            }
            rows.push(Row::numbers(label, rates, 0));
        }
        rows.extend(ratio_rows);
        tables.push(Table {
            id: "pools".into(),
            title: format!(
                "Thread create/teardown (tglx's benchmark shape): pools each fork threads, which \
                 run, are woken once on another CPU, and exit; {SIM_CPUS} simulated CPUs; the \
                 kernel with real pthreads; {} s per cell, median of {repetitions}; {cpus} real \
                 CPUs, oversubscribed",
                duration.as_secs_f64()
            ),
            unit: "threads/s".into(),
            columns: names.clone(),
            rows,
        });

        // 3. Where the lazy design's scan runs, and what it adds to switches (seed 003).
        let mut scan_rows = Vec::new();
        for (load, label, unit) in loads {
            let result = cx.measure(&scan::PLACEMENTS, &format!("scan, {label}"), |&c| {
                scan::run(scan::placement(c), load, SCAN_CPUS, duration).map(|run| {
                    vec![
                        run.per_unit,
                        run.scan_mean,
                        run.scan_max,
                        run.scan_sum,
                        run.invocations,
                    ]
                })
            });
            let means = result.metric(0);
            let reference = means.get(scan::PLACEMENTS[0]);
            let added: Vec<Option<f64>> = Vec::from(&means)
                .into_iter()
                .map(|mean| Some(mean? - reference?))
                .collect();
            scan_rows.push(Row::numbers(format!("{label}: ns per {unit}"), means, 1));
            scan_rows.push(Row::numbers(
                format!("{label}: ns per {unit} added (vs no scan)"),
                added,
                1,
            ));
            for (metric, what, digits) in [
                (1, "scan duration, avg µs", 2),
                (2, "scan duration, max µs", 1),
                (3, "scan duration, sum µs", 0),
                (4, "scan invocations", 0),
            ] {
                scan_rows.push(Row::numbers(
                    format!("{label}: {what}"),
                    result.metric(metric),
                    digits,
                ));
            }
        }
        tables.push(Table {
            id: "lazy_scan".into(),
            title: format!(
                "The lazy design's periodic scan (seed 003's layout): at a tick on the switch \
                 path (6.4–6.18's task_work; the switching task runs it before its switch \
                 returns, so a scan's whole duration lands on that one switch) or in a worker \
                 thread (the seed's delayed_work), against no scan; {SCAN_CPUS} simulated CPUs \
                 (the scan walks them all); period {} ms (the kernel's 100 ms scaled down so that \
                 a cell sees hundreds of scans); no load = one thread switching two tasks on one \
                 CPU, churn = {} threads each forking a task, switching it on four CPUs in turn \
                 and exiting it, per thread; {} s per cell, median of {repetitions}",
                scan::LAB_PERIOD.as_secs_f64() * 1e3,
                scan::CHURN_THREADS,
                duration.as_secs_f64()
            ),
            unit: "ns, µs, scans".into(),
            columns: scan::PLACEMENTS.iter().map(|c| c.to_string()).collect(),
            rows: scan_rows,
        });

        // 4. Footprint over time.
        let mut series = Vec::new();
        let mut footprint_rows = Vec::new();
        let mut peaks = Vec::new();
        let mut ends = Vec::new();
        for (name, space) in designs(SIM_CPUS) {
            cx.progress.step(&format!("footprint: {name}"));
            let trace = workloads::footprint(space.as_ref());
            if name == "rework" {
                series.push(Series {
                    name: "users".into(),
                    points: trace
                        .iter()
                        .enumerate()
                        .map(|(i, t)| (i as f64, f64::from(t.0)))
                        .collect(),
                });
                series.push(Series {
                    name: "rework max_cids".into(),
                    points: trace
                        .iter()
                        .enumerate()
                        .map(|(i, t)| (i as f64, f64::from(t.2)))
                        .collect(),
                });
            }
            series.push(Series {
                name: format!("{name}: CIDs in use"),
                points: trace
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (i as f64, f64::from(t.1)))
                    .collect(),
            });
            peaks.push(trace.iter().map(|t| t.1).max().map(f64::from));
            ends.push(trace.last().map(|t| f64::from(t.1)));
        }
        footprint_rows.push(Row::numbers("peak CIDs in use", peaks, 0));
        footprint_rows.push(Row::numbers("CIDs in use with 1 task left", ends, 0));
        tables.push(Table {
            id: "footprint".into(),
            title: format!(
                "CID footprint through grow-then-shrink ({SIM_CPUS} CPUs, up to {} tasks, deferred \
                 work every 4 steps)",
                3 * SIM_CPUS
            ),
            unit: "CIDs".into(),
            columns: designs(1).into_iter().map(|(n, _)| n.to_string()).collect(),
            rows: footprint_rows,
        });
        let plots = vec![Plot {
            file: "cid_footprint.svg".into(),
            title: format!("cid: CIDs in use through grow-then-shrink ({SIM_CPUS} CPUs)"),
            x_label: "step".into(),
            y_label: "CIDs / tasks".into(),
            log_x: false,
            log_y: false,
            series,
        }];

        // 5. Sharded counter.
        let counters = [
            "shared atomic",
            "thread_local shards",
            "rework CID shards",
            "kernel mm_cid shards",
        ];
        let mut latency_rows = Vec::new();
        let mut memory_rows = Vec::new();
        for &threads in &counter_threads {
            let label = format!("counter, {threads} threads");
            let result = cx.measure(&counters, &label, |&c| {
                let space = Rework::new(cpus.clamp(1, MAX_CPUS)).expect(CAPPED);
                let shards = match c {
                    "shared atomic" => Shards::Shared,
                    "thread_local shards" => Shards::PerThread,
                    "rework CID shards" => Shards::Rework(&space),
                    _ => Shards::Kernel,
                };
                workloads::counter(shards, threads, duration / 2)
                    .map(|(ns, bytes)| vec![ns, bytes as f64])
            });
            let over = cx.oversubscribed(threads);
            latency_rows.push(Row::numbers(
                format!("ns per increment, {threads} threads{over}"),
                result.metric(0),
                2,
            ));
            memory_rows.push(Row::numbers(
                format!("shard bytes, {threads} threads"),
                result.metric(1),
                0,
            ));
        }
        latency_rows.extend(memory_rows);
        tables.push(Table {
            id: "counter".into(),
            title: format!(
                "Sharded counter: ns per increment (per thread) and shard memory; the rework's \
                 space has {cpus} CPUs (this machine's), each thread a task that switches in every \
                 256 increments; the kernel's mm_cid is read at every increment"
            ),
            unit: "ns, bytes".into(),
            columns: counters.iter().map(|c| c.to_string()).collect(),
            rows: latency_rows,
        });

        cx.notes.push(
            "A \"CPU\" of our designs is a worker slot: a switch is a call that puts a task on a \
             slot. The pool test gives the spaces 8 slots so that 32 pools × 32 threads (1024 \
             users) cross the rework's mode switch both ways, as in the seed; the kernel row runs \
             the same shape with real pthreads on this machine's CPUs."
                .into(),
        );
        cx.notes.push(
            "The lazy scan table follows seed 003's probe: the scan's duration (avg, max, sum) \
             and invocations, with no load and under churn. With the scan at a tick, its whole \
             duration is added to the one switch that runs it (the task_work runs before the \
             task returns to user space), so that switch's extra latency is the scan's max; the \
             worker's scans run beside the switches, which pay only through the CPU words the \
             scan marks. The \"added\" rows compare the loads' mean cost with the same load and \
             no scan at all; differences within a few ns are this machine's noise."
                .into(),
        );
        cx.notes.push(
            "Switch cost: per-task mode with 2 tasks on 4 slots, per-CPU mode with 8 tasks on 4 \
             slots; each figure is one switch (the previous task out, the next in) on one thread, \
             after a warm-up, so it is the common path. The kernel's context switch is not \
             measurable from user space; its column shows what reading its mm_cid costs."
                .into(),
        );
        Ok(Section {
            name: self.name().into(),
            title: "cid: concurrency IDs (seeds 000 and 003)".into(),
            intro: vec![
                "Columns: `rework` = the MM CID rewrite (tasks own CIDs while few, CPUs own them \
                 when tasks outnumber the budget; fork and exit do the mode changes); `bitmap` = \
                 the 6.3 design (a lock and a bitmap at every switch); `lazy` = the design before \
                 the rewrite, 6.4–6.18 (per-CPU cached CIDs taken back lock-free with the \
                 lazy-put mark, migration steals, and the periodic scan at a tick on the switch \
                 path every 100 ms, as in the kernel); `kernel` = \
                 this machine's kernel (Linux 6.18 runs the lazy design) through real threads and \
                 its rseq mm_cid."
                    .into(),
            ],
            tables,
            plots,
            notes: std::mem::take(&mut cx.notes),
        })
    }
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
            assert!(
                workloads::pools(space.as_ref(), 2, 3, Duration::from_millis(5)).unwrap() > 0.0,
                "{name}"
            );
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
            let (ns, bytes) = workloads::counter(shards, 3, Duration::from_millis(5)).unwrap();
            assert!(ns > 0.0 && bytes > 0);
        }
    }
}
