//! Experiment `pid`: PID allocation throughput, lookups and memory, every design and
//! the kernel's thread create/teardown in one run.

mod workloads;

use std::time::Duration;

use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, PerCpu, PidAllocator};

use crate::declare::{self, Axes, Declared, Measurement, Produced, Sweep};
use crate::model::{Row, Section};
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
        let mut measurements: Vec<_> = (0..CONFIGS.len())
            .map(|config| throughput(&plan, config))
            .collect();
        measurements.push(lookups(&plan));
        measurements.push(memory(&plan));
        Ok(declare::run(
            cx,
            Declared {
                name: self.name(),
                title: "pid: namespaced PID allocation".into(),
                intro: vec![INTRO.into()],
                measurements,
                notes: notes(),
            },
        ))
    }
}

const INTRO: &str = "Columns: `idr-relock` = one global lock per namespace level plus one to \
    publish (Linux before 7.0); `idr-once` = one hold for all levels (7.0); `bitmap-hash` = flat \
    bitmaps under one lock, lookups through a striped hash (FreeBSD); `percpu` = per-CPU ranges \
    of 256 IDs; `kernel` = this machine's thread create+join. Ratio rows divide by \
    `idr-relock`. Depth counts the namespace levels an object has an ID in (1 = the root only).";

fn notes() -> Vec<String> {
    vec![
        format!(
            "`percpu` has {SLOTS} worker slots; thread `w` uses slot `w`, as if every thread ran \
             on its own CPU. With more threads than cores the slots are oversubscribed like the \
             threads; the kernel's per-CPU structures would instead be shared by the threads \
             of a CPU."
        ),
        "Kernel column: each thread loops `pthread_create` of an empty thread + `pthread_join` \
         (will-it-scale's thread create/teardown benchmark), the whole clone path including PID \
         allocation, in this process's namespaces; measured once, in the first table."
            .into(),
    ]
}

/// The allocate+free loop of configuration `config` against the thread counts, as a table and
/// a plot.
fn throughput(plan: &Plan, config: usize) -> Box<dyn Measurement + '_> {
    let (label, depth, own) = CONFIGS[config];
    let duration = plan.duration;
    Sweep::new(
        candidates(),
        plan.workers.clone(),
        move |workers| format!("{label}, {workers} threads"),
        move |c: &Candidate, &workers| match c.make {
            Some(make) => {
                let d = make();
                let targets = workloads::spaces(d.as_ref(), depth, own, workers)?;
                workloads::alloc_free(d.as_ref(), &targets, duration).map(|r| vec![r])
            }
            // The kernel's clone path is the same whatever our configuration: it is measured
            // once, with the first.
            None if config == 0 => workloads::kernel_threads(workers, duration).map(|r| vec![r]),
            None => Ok(vec![f64::NAN]),
        },
    )
    .tables(move |swept, cx| {
        let mut rows = swept.numbers(0, 0, |&w| format!("T = {w}{}", cx.oversubscribed(w)));
        rows.extend(swept.ratios(0, REFERENCE, |w| format!("T = {w} ÷ {REFERENCE}")));
        let title = format!(
            "Allocate+free loop, {label}: T threads each allocate and free as fast as they can \
             ({} s per cell, median of {}; {} CPUs)",
            duration.as_secs_f64(),
            plan.repetitions,
            cx.cpus()
        );
        let axes = Axes {
            file: format!("pid_throughput_{config}.svg"),
            title: format!("pid: alloc+free ops/s against threads ({label})"),
            x: ("threads", true),
            y: ("ops/s".into(), true),
        };
        Produced {
            tables: vec![swept.table(
                format!("throughput_{config}"),
                title,
                "ops/s, all threads",
                rows,
            )],
            plots: vec![axes.plot(swept.series(0, |&w| w as f64))],
        }
    })
}

/// Our designs, without the kernel.
fn designs() -> Vec<Candidate> {
    candidates()
        .into_iter()
        .filter(|c| c.make.is_some())
        .collect()
}

/// Lookups while allocations run.
fn lookups(plan: &Plan) -> Box<dyn Measurement + '_> {
    let duration = plan.duration;
    Sweep::new(
        designs(),
        vec![()],
        |_| "lookups".into(),
        move |c: &Candidate, _| {
            let d = c.make.ok_or("not one of our designs")?();
            workloads::lookups_during_allocs(d.as_ref(), 4, 4, duration).map(|(l, a)| vec![l, a])
        },
    )
    .tables(move |swept, cx| {
        let (lookups, allocs) = (swept.only().metric(0), swept.only().metric(1));
        let title = format!(
            "Lookups while allocations run: 4 threads look up 1000 live objects while 4 threads \
             allocate and free ({} s per cell; 8 threads on {} CPUs, oversubscribed)",
            duration.as_secs_f64(),
            cx.cpus()
        );
        let rows = vec![
            Row::numbers("lookups/s", &lookups, 0),
            Row::numbers("alloc+free/s", &allocs, 0),
            Row::ratios(format!("lookups ÷ {REFERENCE}"), lookups.over(REFERENCE)),
            Row::ratios(format!("alloc+free ÷ {REFERENCE}"), allocs.over(REFERENCE)),
        ];
        swept.table("lookups", title, "ops/s", rows).into()
    })
}

/// Memory with live IDs, and after freeing them.
fn memory(plan: &Plan) -> Box<dyn Measurement + '_> {
    Sweep::new(
        designs(),
        plan.memory_sizes.clone(),
        |live| format!("memory {live}"),
        |c: &Candidate, &live| {
            let d = c.make.ok_or("not one of our designs")?();
            workloads::memory(d.as_ref(), live).map(|(full, after)| vec![full as f64, after as f64])
        },
    )
    .tables(|swept, _| {
        let mut rows = Vec::new();
        for ((live, result), full) in swept.results.iter().zip(swept.values(0).map(|(_, v)| v)) {
            rows.push(Row::numbers(format!("{live} live"), &full, 0));
            rows.push(Row::ratios(
                format!("{live} live ÷ {REFERENCE}"),
                full.over(REFERENCE),
            ));
            rows.push(Row::numbers(
                format!("after freeing {live}"),
                result.metric(1),
                0,
            ));
        }
        let title = "Memory with live IDs in the root space, and after freeing them all".into();
        swept.table("memory", title, "bytes", rows).into()
    })
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
                let rate = workloads::alloc_free(d.as_ref(), &targets, Duration::from_millis(5));
                let rate = crate::measure::unless_not_at_once(rate);
                assert!(rate.is_none_or(|rate| rate > 0.0), "{}", candidate.name);
            }
            let d = make();
            let rates =
                workloads::lookups_during_allocs(d.as_ref(), 1, 1, Duration::from_millis(5));
            let rates = crate::measure::unless_not_at_once(rates);
            assert!(
                rates.is_none_or(|(lookups, _)| lookups > 0.0),
                "{}",
                candidate.name
            );
            let (full, after) = workloads::memory(make().as_ref(), 2000).unwrap();
            assert!(full > after, "{}", candidate.name);
        }
    }
}
