//! Experiment `timers`: seed 001's tests in its table layout, every design in the same run.
//!
//! * Tests 1-3: one owner creates N entries (20k, 50k, 100k), then looks each up.
//! * Tests 4-5: T workers start together, each creates K entries then looks each up; all in one
//!   owner (threads of one process), or one owner each (forked processes).
//! * The create+delete loop, in both variants.
//! * Memory: 2048 entries with IDs 512 apart, created in restore mode.
//!
//! Columns: our three designs (the scaled hash both growing and with the kernel's fixed size),
//! `dashmap` and `scc` keyed by (owner, id), and the kernel's own timers through the syscalls.

pub(crate) mod kernel;
pub(crate) mod subjects;
mod workloads;

use std::time::Duration;

use crate::measure::{names, Values};
use crate::model::{Plot, Row, Section, Series, Table};
use crate::stats::ratio;
use crate::{Context, Experiment, Scale};
use subjects::candidates;

/// The experiment.
pub struct Timers;

/// Sizes for one scale.
struct Plan {
    sizes: Vec<usize>,
    workers: Vec<usize>,
    per_worker: usize,
    loop_iterations: usize,
    repetitions: usize,
}

impl Plan {
    fn new(scale: Scale) -> Plan {
        match scale {
            Scale::Quick => Plan {
                sizes: vec![20_000, 50_000, 100_000],
                workers: vec![8, 32],
                // 32 × 2,500 = 80,000 live timers: within the usual RLIMIT_SIGPENDING (~96k on
                // a 24 GiB machine), so the kernel column is filled at the quick scale.
                per_worker: 2_500,
                loop_iterations: 20_000,
                repetitions: scale.repetitions(),
            },
            Scale::Full => Plan {
                sizes: vec![20_000, 50_000, 100_000],
                workers: vec![8, 32, 63],
                per_worker: 20_000,
                loop_iterations: 100_000,
                repetitions: scale.repetitions(),
            },
        }
    }

    /// The most kernel timers alive at once.
    fn max_live(&self) -> usize {
        let concurrent = self.workers.iter().max().copied().unwrap_or(0) * self.per_worker;
        concurrent.max(self.sizes.iter().max().copied().unwrap_or(0))
    }

    fn steps(&self, candidates: usize) -> u64 {
        let per_rep = self.sizes.len() + self.workers.len() * 4 + 1;
        (per_rep * candidates * self.repetitions) as u64
    }
}

const SPARSE_COUNT: u32 = 2048;
const SPARSE_SPACING: u32 = 512;
const REFERENCE: &str = "scaled";

/// The rows of a create-then-lookup table: both phases, and both over the reference column.
fn phase_rows(create: &Values, lookup: &Values) -> Vec<Row> {
    vec![
        Row::numbers("create", create, 2),
        Row::numbers("lookup", lookup, 2),
        Row::ratios(format!("create ÷ {REFERENCE}"), create.over(REFERENCE)),
        Row::ratios(format!("lookup ÷ {REFERENCE}"), lookup.over(REFERENCE)),
    ]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

impl Experiment for Timers {
    fn name(&self) -> &'static str {
        "timers"
    }

    fn about(&self) -> &'static str {
        "POSIX-timer ID tables: seed 001's tests 1-5, the create/delete loop, sparse-ID memory"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let plan = Plan::new(cx.scale);
        let candidates = candidates();
        let names = names(&candidates);
        let cpus = cx.cpus();
        let wanted = plan.max_live() as u64 + 4096;
        let limit = kernel::raise_sigpending(wanted);
        let mut tables = Vec::new();
        cx.progress.set_total(plan.steps(candidates.len()));
        if limit < wanted {
            cx.notes.push(format!(
                "RLIMIT_SIGPENDING (each POSIX timer is charged one, per user) could only be \
                 raised to {limit} (wanted {wanted}): kernel runs needing more live timers than \
                 that show n/a, with the reason below."
            ));
        }

        // Tests 1-3.
        let mut per_op: Vec<PerOp> = Vec::new();
        for (test, &count) in plan.sizes.iter().enumerate() {
            let label = format!("Test {}: {count} entries", test + 1);
            let result = cx.measure(&candidates, &label, |c| {
                workloads::kernel_fits(c, count, limit)?;
                workloads::single(c, count).map(|p| vec![ms(p.create), ms(p.lookup)])
            });
            let (create, lookup) = (result.metric(0), result.metric(1));
            tables.push(Table {
                id: format!("test{}", test + 1),
                title: format!(
                    "Test {}: one owner creates {count} entries, then looks each up (median of {})",
                    test + 1,
                    plan.repetitions
                ),
                unit: "ms".into(),
                columns: names.clone(),
                rows: phase_rows(&create, &lookup),
            });
            let per = |ms: f64| ms * 1e6 / count as f64;
            per_op.push(PerOp {
                count,
                create: create.map(per),
                lookup: lookup.map(per),
            });
        }
        tables.push(per_op_table(&per_op, &names));
        tables.push(growth_table(&per_op, &names));

        // Tests 4-5.
        for &workers in &plan.workers {
            for shared in [true, false] {
                let (test, shape) = if shared {
                    (4, "threads of one owner")
                } else {
                    (5, "workers with an owner each (kernel: forked processes)")
                };
                let label = format!(
                    "Test {test}: {workers} {}",
                    if shared { "threads" } else { "owners" }
                );
                let result = cx.measure(&candidates, &label, |c| {
                    workloads::kernel_fits(c, workers * plan.per_worker, limit)?;
                    workloads::concurrent(c, workers, plan.per_worker, shared)
                        .map(|p| vec![ms(p.create), ms(p.lookup)])
                });
                let (create, lookup) = (result.metric(0), result.metric(1));
                tables.push(Table {
                    id: format!("test{test}_{workers}"),
                    title: format!(
                        "Test {test}: {workers} {shape} each create {} entries, then look each up \
                         (average per worker; {workers} workers on {cpus} CPUs{})",
                        plan.per_worker,
                        cx.oversubscribed(workers)
                    ),
                    unit: "ms".into(),
                    columns: names.clone(),
                    rows: phase_rows(&create, &lookup),
                });
            }
        }

        // The create+delete loop.
        for &workers in &plan.workers {
            let mut rows = Vec::new();
            for shared in [true, false] {
                let label = format!(
                    "loop: {workers} {}",
                    if shared { "threads" } else { "owners" }
                );
                let result = cx.measure(&candidates, &label, |c| {
                    workloads::create_delete_loop(c, workers, plan.loop_iterations, shared)
                        .map(|t| vec![ms(t)])
                });
                let times = result.metric(0);
                let name = if shared { "one owner" } else { "owner each" };
                rows.push(Row::numbers(name, &times, 1));
                rows.push(Row::ratios(
                    format!("{name} ÷ {REFERENCE}"),
                    times.over(REFERENCE),
                ));
            }
            tables.push(Table {
                id: format!("loop_{workers}"),
                title: format!(
                    "Create+delete loop: {workers} workers each create and delete one entry {} \
                     times (average per worker; {workers} workers on {cpus} CPUs{})",
                    plan.loop_iterations,
                    cx.oversubscribed(workers)
                ),
                unit: "ms".into(),
                columns: names.clone(),
                rows,
            });
        }

        // Memory on sparse IDs.
        let label = format!("{SPARSE_COUNT} IDs {SPARSE_SPACING} apart");
        let result = cx.measure(&candidates, &label, |c| {
            workloads::sparse(c, SPARSE_COUNT, SPARSE_SPACING).map(|(reported, allocated, time)| {
                vec![
                    reported.map_or(f64::NAN, |b| b as f64),
                    allocated.map_or(f64::NAN, |b| b as f64),
                    ms(time),
                ]
            })
        });
        let reported = result.metric(0);
        let allocated = result.metric(1);
        tables.push(Table {
            id: "memory_sparse".into(),
            title: format!(
                "Memory: {SPARSE_COUNT} entries with IDs {SPARSE_SPACING} apart, created in restore mode"
            ),
            unit: "bytes, ms".into(),
            columns: names.clone(),
            rows: vec![
                Row::numbers("self-reported bytes", reported, 0),
                Row::numbers("allocator bytes", &allocated, 0),
                Row::ratios(format!("allocator ÷ {REFERENCE}"), allocated.over(REFERENCE)),
                Row::numbers("create time (ms)", result.metric(2), 3),
            ],
        });

        let plots = vec![
            per_op_plot("timers_create_per_op.svg", "create", &per_op, &names, |p| {
                &p.create
            }),
            per_op_plot("timers_lookup_per_op.svg", "lookup", &per_op, &names, |p| {
                &p.lookup
            }),
        ];
        cx.notes.push(
            "Kernel column: real `timer_create(CLOCK_MONOTONIC, SIGEV_NONE)`, \
             `timer_getoverrun` and `timer_delete` syscalls; lookups are `timer_getoverrun`, as \
             in the seed. The kernel's memory is not visible from user space (n/a); its row \
             shows the time restore mode (`PR_TIMER_CREATE_RESTORE_IDS`) took."
                .into(),
        );
        cx.notes.push(
            "Peers: `dashmap` and `scc::HashMap` keyed by (owner, id) with foldhash's fast \
             hasher (the crate our designs hash with), each owner's cursor an atomic counter (like the kernel's \
             `next_posix_timer_id`), and uniqueness decided by the map's insert. They keep no \
             per-owner ID list, so they cannot list or drop an owner's IDs without a full scan: \
             they do less work per create than our designs."
                .into(),
        );
        Ok(Section {
            name: self.name().into(),
            title: "timers: POSIX-timer ID tables (seed 001)".into(),
            intro: vec![
                "Columns: `global` = 512 chains under one lock (Linux before 6.15); `scaled` = \
                 our default, a lock per bucket, starting at the kernel's 512 × CPUs buckets \
                 and growing by linear hashing; `scaled-fixed` = the same with the kernel's \
                 fixed boot-time size (Linux 6.15); `radix` = a radix tree per owner (the \
                 xarray); `dashmap`, `scc` = concurrent maps a user might pick instead; \
                 `kernel` = this machine's kernel. Ratio rows divide by `scaled`."
                    .into(),
                format!(
                    "Scale: entries {:?}; workers {:?} × {} entries; loop {} iterations; {} \
                     repetitions, median reported.",
                    plan.sizes,
                    plan.workers,
                    plan.per_worker,
                    plan.loop_iterations,
                    plan.repetitions
                ),
            ],
            tables,
            plots,
            notes: std::mem::take(&mut cx.notes),
        })
    }
}

/// Per-operation costs (ns) at one table size, one entry per candidate.
struct PerOp {
    count: usize,
    create: Values,
    lookup: Values,
}

fn per_op_table(per_op: &[PerOp], names: &[String]) -> Table {
    let mut rows = Vec::new();
    for size in per_op {
        rows.push(Row::numbers(
            format!("create @ {}", size.count),
            &size.create,
            0,
        ));
    }
    for size in per_op {
        rows.push(Row::numbers(
            format!("lookup @ {}", size.count),
            &size.lookup,
            0,
        ));
    }
    Table {
        id: "per_op".into(),
        title: "Per-operation cost in tests 1-3".into(),
        unit: "ns per operation".into(),
        columns: names.to_vec(),
        rows,
    }
}

fn growth_table(per_op: &[PerOp], names: &[String]) -> Table {
    let mut rows = Vec::new();
    if let Some((first, rest)) = per_op.split_first() {
        let grow = |a: &Values, b: &Values| -> Vec<Option<f64>> {
            a.cells()
                .iter()
                .zip(b.cells())
                .map(|(&a, &b)| ratio(b, a))
                .collect()
        };
        for later in rest {
            rows.push(Row::ratios(
                format!("create @ {} ÷ @ {}", later.count, first.count),
                grow(&first.create, &later.create),
            ));
        }
        for later in rest {
            rows.push(Row::ratios(
                format!("lookup @ {} ÷ @ {}", later.count, first.count),
                grow(&first.lookup, &later.lookup),
            ));
        }
    }
    Table {
        id: "growth".into(),
        title: "Per-operation cost as the table grows, over its cost at the smallest size \
                (1.00x = flat)"
            .into(),
        unit: "x".into(),
        columns: names.to_vec(),
        rows,
    }
}

fn per_op_plot(
    file: &str,
    what: &str,
    per_op: &[PerOp],
    names: &[String],
    pick: impl Fn(&PerOp) -> &Values,
) -> Plot {
    let series = names
        .iter()
        .map(|name| Series {
            name: name.clone(),
            points: per_op
                .iter()
                .filter_map(|p| pick(p).get(name).map(|y| (p.count as f64, y)))
                .collect(),
        })
        .collect();
    Plot {
        file: file.into(),
        title: format!("timers: ns per {what} against entries (one owner)"),
        x_label: "entries".into(),
        y_label: format!("ns per {what}"),
        log_x: false,
        log_y: true,
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::subjects::Kind;
    use super::*;

    #[test]
    fn quick_plan_sizes_match_the_seed_and_fit_the_limit() {
        let plan = Plan::new(Scale::Quick);
        assert_eq!(plan.sizes, vec![20_000, 50_000, 100_000]);
        assert!(
            plan.workers.iter().all(|&w| w > 2),
            "oversubscribes 2 cores"
        );
        assert_eq!(plan.max_live(), 100_000);
    }

    #[test]
    fn the_reference_column_is_a_candidate() {
        assert!(names(&candidates()).iter().any(|n| n == REFERENCE));
    }

    #[test]
    fn kernel_owners_run_in_forked_processes() {
        let kernel = candidates()
            .into_iter()
            .find(|c| c.kind == Kind::Kernel)
            .unwrap();
        let phases = workloads::concurrent(&kernel, 2, 10, false).unwrap();
        assert!(phases.create > Duration::ZERO);
        let time = workloads::create_delete_loop(&kernel, 2, 10, false).unwrap();
        assert!(time > Duration::ZERO);
    }

    #[test]
    fn every_candidate_round_trips_an_entry() {
        for candidate in candidates().iter().filter(|c| c.kind == Kind::InProcess) {
            let phases = workloads::single(candidate, 100).unwrap();
            assert!(phases.create > Duration::ZERO, "{}", candidate.name);
            let time = workloads::create_delete_loop(candidate, 2, 50, false).unwrap();
            assert!(time > Duration::ZERO, "{}", candidate.name);
            let (_, allocated, _) = workloads::sparse(candidate, 16, 512).unwrap();
            assert!(allocated.unwrap() > 0, "{}", candidate.name);
        }
    }
}
