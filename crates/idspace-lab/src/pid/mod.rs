//! Experiment `pid`: PID allocation throughput, lookups and memory (seed 004), every design and
//! the kernel's thread create/teardown in one run.

mod workloads;

use std::time::Duration;

use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, PerCpu, PidAllocator};

use crate::measure::names;
use crate::model::{Plot, Row, Section, Series, Table};
use crate::{Context, Experiment, Scale};

/// The experiment.
pub struct Pids;

/// Worker slots of `PerCpu` in the lab: one per thread of the largest run.
const SLOTS: usize = 64;

struct Candidate {
    name: &'static str,
    /// `None` for the kernel.
    make: Option<fn() -> Box<dyn PidAllocator>>,
}

impl crate::measure::Candidate for Candidate {
    fn name(&self) -> &str {
        self.name
    }
}

/// The column the ratio rows divide by: the kernel's design before Linux 7.0.
const REFERENCE: &str = "idr-relock";

fn candidates() -> Vec<Candidate> {
    vec![
        Candidate {
            name: "idr-relock",
            make: Some(|| Box::new(IdrRelock::new())),
        },
        Candidate {
            name: "idr-once",
            make: Some(|| Box::new(IdrOnce::new())),
        },
        Candidate {
            name: "bitmap-hash",
            make: Some(|| Box::new(BitmapHash::new())),
        },
        Candidate {
            name: "percpu",
            make: Some(|| Box::new(PerCpu::new(SLOTS).expect("SLOTS is within PerCpu::MAX_CPUS"))),
        },
        Candidate {
            name: "kernel",
            make: None,
        },
    ]
}

struct Plan {
    workers: Vec<usize>,
    duration: Duration,
    repetitions: usize,
    memory_sizes: Vec<usize>,
}

impl Plan {
    fn new(scale: Scale) -> Plan {
        Plan {
            workers: vec![1, 2, 8, 64],
            duration: match scale {
                Scale::Quick => Duration::from_millis(150),
                Scale::Full => Duration::from_millis(1000),
            },
            repetitions: scale.repetitions(),
            memory_sizes: vec![10_000, 100_000],
        }
    }
}

/// (label, depth, own space per worker)
const CONFIGS: [(&str, usize, bool); 3] = [
    ("depth 1, one space", 1, false),
    ("depth 4, one space", 4, false),
    ("depth 4, a child space per worker", 4, true),
];

impl Experiment for Pids {
    fn name(&self) -> &'static str {
        "pid"
    }

    fn about(&self) -> &'static str {
        "PID allocation: IDR relock/once, bitmap+hash, per-CPU ranges, and the kernel's clone path"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let plan = Plan::new(cx.scale);
        let all = candidates();
        let names = names(&all);
        let designs: Vec<&Candidate> = all.iter().filter(|c| c.make.is_some()).collect();
        let design_names = crate::measure::names(&designs);
        let cpus = cx.cpus();
        let steps = plan.repetitions
            * (CONFIGS.len() * plan.workers.len() * all.len()
                + designs.len() * (1 + plan.memory_sizes.len()));
        cx.progress.set_total(steps as u64);
        let mut tables = Vec::new();
        let mut plots = Vec::new();
        let secs = |d: Duration| d.as_secs_f64();

        for (config, &(label, depth, own)) in CONFIGS.iter().enumerate() {
            let mut rows = Vec::new();
            let mut ratio_rows = Vec::new();
            let mut series: Vec<Series> = names
                .iter()
                .map(|n| Series {
                    name: n.clone(),
                    points: Vec::new(),
                })
                .collect();
            for &workers in &plan.workers {
                let step = format!("{label}, {workers} threads");
                let result = cx.measure(&all, &step, |c| {
                    match c.make {
                        Some(make) => {
                            let d = make();
                            let targets = workloads::spaces(d.as_ref(), depth, own, workers)?;
                            workloads::alloc_free(d.as_ref(), &targets, plan.duration)
                                .map(|r| vec![r])
                        }
                        // The kernel's clone path is the same whatever our configuration: it
                        // is measured once, with the first.
                        None if config == 0 => {
                            workloads::kernel_threads(workers, plan.duration).map(|r| vec![r])
                        }
                        None => Ok(vec![f64::NAN]),
                    }
                });
                let rates = result.metric(0);
                for s in series.iter_mut() {
                    if let Some(rate) = rates.get(&s.name) {
                        s.points.push((workers as f64, rate));
                    }
                }
                let over = cx.oversubscribed(workers);
                ratio_rows.push(Row::ratios(
                    format!("T = {workers} ÷ {REFERENCE}"),
                    rates.over(REFERENCE),
                ));
                rows.push(Row::numbers(format!("T = {workers}{over}"), rates, 0));
            }
            rows.extend(ratio_rows);
            tables.push(Table {
                id: format!("throughput_{config}"),
                title: format!(
                    "Allocate+free loop, {label}: T threads each allocate and free as fast as they \
                     can ({} s per cell, median of {}; {cpus} CPUs)",
                    secs(plan.duration),
                    plan.repetitions
                ),
                unit: "ops/s, all threads".into(),
                columns: names.clone(),
                rows,
            });
            plots.push(Plot {
                file: format!("pid_throughput_{config}.svg"),
                title: format!("pid: alloc+free ops/s against threads ({label})"),
                x_label: "threads".into(),
                y_label: "ops/s".into(),
                log_x: true,
                log_y: true,
                series,
            });
        }

        let result = cx.measure(&designs, "lookups", |c| {
            let d = c.make.ok_or("not one of our designs")?();
            workloads::lookups_during_allocs(d.as_ref(), 4, 4, plan.duration)
                .map(|(l, a)| vec![l, a])
        });
        let lookups = result.metric(0);
        let allocs = result.metric(1);
        tables.push(Table {
            id: "lookups".into(),
            title: format!(
                "Lookups while allocations run: 4 threads look up 1000 live objects while 4 threads \
                 allocate and free ({} s per cell; 8 threads on {cpus} CPUs, oversubscribed)",
                secs(plan.duration)
            ),
            unit: "ops/s".into(),
            columns: design_names.clone(),
            rows: vec![
                Row::numbers("lookups/s", &lookups, 0),
                Row::numbers("alloc+free/s", &allocs, 0),
                Row::ratios(format!("lookups ÷ {REFERENCE}"), lookups.over(REFERENCE)),
                Row::ratios(format!("alloc+free ÷ {REFERENCE}"), allocs.over(REFERENCE)),
            ],
        });

        let mut memory_rows = Vec::new();
        for &live in &plan.memory_sizes {
            let result = cx.measure(&designs, &format!("memory {live}"), |c| {
                let d = c.make.ok_or("not one of our designs")?();
                workloads::memory(d.as_ref(), live)
                    .map(|(full, after)| vec![full as f64, after as f64])
            });
            let full = result.metric(0);
            memory_rows.push(Row::numbers(format!("{live} live"), &full, 0));
            memory_rows.push(Row::ratios(
                format!("{live} live ÷ {REFERENCE}"),
                full.over(REFERENCE),
            ));
            memory_rows.push(Row::numbers(
                format!("after freeing {live}"),
                result.metric(1),
                0,
            ));
        }
        tables.push(Table {
            id: "memory".into(),
            title: "Memory with live IDs in the root space, and after freeing them all".into(),
            unit: "bytes".into(),
            columns: design_names,
            rows: memory_rows,
        });

        cx.notes.push(format!(
            "`percpu` has {SLOTS} worker slots; thread `w` uses slot `w`, as if every thread ran on \
             its own CPU. With more threads than cores the slots are oversubscribed like the \
             threads; the kernel's per-CPU structures would instead be shared by the threads \
             of a CPU."
        ));
        cx.notes.push(
            "Kernel column: each thread loops `pthread_create` of an empty thread + \
             `pthread_join` (will-it-scale's thread create/teardown, the seed's benchmark), the \
             whole clone path including PID allocation, in this process's namespaces; measured \
             once, in the first table."
                .into(),
        );
        Ok(Section {
            name: self.name().into(),
            title: "pid: namespaced PID allocation (seed 004)".into(),
            intro: vec![
                "Columns: `idr-relock` = one global lock per namespace level plus one to publish \
                 (Linux before 7.0); `idr-once` = one hold for all levels (7.0); `bitmap-hash` = \
                 flat bitmaps under one lock, lookups through a striped hash (FreeBSD); `percpu` = \
                 per-CPU ranges of 256 IDs (the seed's sketch); `kernel` = this machine's thread \
                 create+join. Ratio rows divide by `idr-relock`. Depth counts the namespace \
                 levels an object has an ID in (1 = the root only)."
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
    fn the_reference_column_is_one_of_our_designs() {
        assert!(candidates()
            .iter()
            .any(|c| c.name == REFERENCE && c.make.is_some()));
    }

    #[test]
    fn every_design_runs_every_workload_briefly() {
        for candidate in candidates() {
            let Some(make) = candidate.make else { continue };
            for &(_, depth, own) in &CONFIGS {
                let d = make();
                let targets = workloads::spaces(d.as_ref(), depth, own, 3).unwrap();
                assert_eq!(targets.len(), 3);
                let rate =
                    workloads::alloc_free(d.as_ref(), &targets, Duration::from_millis(5)).unwrap();
                assert!(rate > 0.0, "{}", candidate.name);
            }
            let d = make();
            let (lookups, _) =
                workloads::lookups_during_allocs(d.as_ref(), 1, 1, Duration::from_millis(5))
                    .unwrap();
            assert!(lookups > 0.0, "{}", candidate.name);
            let (full, after) = workloads::memory(make().as_ref(), 2000).unwrap();
            assert!(full > after, "{}", candidate.name);
        }
    }
}
