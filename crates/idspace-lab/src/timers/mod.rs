//! Experiment `timers`: the tests of the posix-timers hash-table rework (Linux 6.15) in its
//! table layout, every design in the same run.
//!
//! * Tests 1-3: one owner creates N entries (20k, 50k, 100k), then looks each up.
//! * Tests 4-5: T workers start together, each creates K entries then looks each up; all in one
//!   owner (threads of one process), or one owner each (forked processes). Each worker repeats
//!   its round (deleting its entries between rounds) over a time window, so that all T run at
//!   once even where a round fits in a time slice; a cell where they did not is refused.
//! * The create+delete loop, in both variants.
//! * Memory: 2048 entries with IDs 512 apart, created in restore mode.
//!
//! Columns: our three designs (the scaled hash both growing and with the kernel's fixed size),
//! `dashmap` and `scc` keyed by (owner, id), and the kernel's own timers through the syscalls.

pub(crate) mod kernel;
pub(crate) mod subjects;
mod workloads;

use std::time::Duration;

use crate::declare::{self, Declared, Measurement, Produced, Sweep};
use crate::measure::{Medians, Values};
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
    /// Repetitions of tests 1-3, whose cells last a few milliseconds: five times the scale's,
    /// so that their medians hold from one run to the next.
    single_repetitions: usize,
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
                single_repetitions: SINGLE_REPETITION_FACTOR * scale.repetitions(),
            },
            Scale::Full => Plan {
                sizes: vec![20_000, 50_000, 100_000],
                workers: vec![8, 32, 63],
                per_worker: 20_000,
                loop_iterations: 100_000,
                repetitions: scale.repetitions(),
                single_repetitions: SINGLE_REPETITION_FACTOR * scale.repetitions(),
            },
        }
    }

    /// The most kernel timers alive at once.
    fn max_live(&self) -> usize {
        let concurrent = self.workers.iter().max().copied().unwrap_or(0) * self.per_worker;
        concurrent.max(self.sizes.iter().max().copied().unwrap_or(0))
    }
}

/// How many times more often tests 1-3 repeat than the scale says (see `Plan`).
const SINGLE_REPETITION_FACTOR: usize = 5;

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
        "POSIX-timer ID tables: the hash-table rework's tests 1-5, the create/delete loop, sparse-ID memory"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let plan = Plan::new(cx.scale);
        let wanted = plan.max_live() as u64 + 4096;
        let limit = kernel::raise_sigpending(wanted);
        if limit < wanted {
            cx.notes.push(format!(
                "RLIMIT_SIGPENDING (each POSIX timer is charged one, per user) could only be \
                 raised to {limit} (wanted {wanted}): kernel runs needing more live timers than \
                 that show n/a, with the reason below."
            ));
        }
        let mut measurements = vec![single_owner(&plan, limit), concurrent(&plan, limit)];
        measurements.extend(plan.workers.iter().map(|&w| create_delete_loop(&plan, w)));
        measurements.push(sparse());
        let declared = Declared {
            name: self.name(),
            title: "timers: POSIX-timer ID tables".into(),
            intro: vec![INTRO.into(), plan.describe()],
            measurements,
            notes: NOTES.iter().map(|n| n.to_string()).collect(),
        };
        Ok(declare::run(cx, declared))
    }
}

const INTRO: &str = "Columns: `global` = 512 chains under one lock (Linux before 6.15); \
    `scaled` = our default, a lock per bucket, starting at the kernel's 512 × CPUs buckets and \
    growing by linear hashing; `scaled-fixed` = the same with the kernel's fixed boot-time size \
    (posix-timers: hash table scaled by CPUs, Linux 6.15); `radix` = a radix tree per owner (the \
    xarray); `dashmap`, `scc` = concurrent maps a user might pick instead; `kernel` = this \
    machine's kernel. Ratio rows divide by `scaled`. The `scaled` columns create and delete \
    through an owner handle each owner keeps (as a process keeps its own state), so that neither \
    takes a lock of the owner registry; the peers' cursors are likewise found by index.";

const NOTES: [&str; 3] = [
    "Tests 4-5: every worker repeats its round (create K entries, look each up, then delete \
     them, untimed) until the cell's time window closes (100 ms plus 2 ms a worker), so that all \
     T workers run at once on the 2 CPUs; a round of a fast design fits in one scheduler time \
     slice, and single rounds would run one worker after another. The figure is a round's \
     phase time, averaged over each worker's rounds, then over the workers. The kernel's \
     forked processes (an owner each) run their rounds for the same window from their own \
     start. A cell in which a worker made no round, or started after another had stopped, is \
     refused rather than reported.",
    "Kernel column: real `timer_create(CLOCK_MONOTONIC, SIGEV_NONE)`, `timer_getoverrun` and \
     `timer_delete` syscalls; lookups are `timer_getoverrun`, as in the hash-table rework's \
     tests. The kernel's memory is not visible from user space (n/a); its row shows the time \
     restore mode (`PR_TIMER_CREATE_RESTORE_IDS`) took.",
    "Peers: `dashmap` and `scc::HashMap` keyed by (owner, id) with foldhash's fast hasher (the \
     crate our designs hash with), each owner's cursor an atomic counter (like the kernel's \
     `next_posix_timer_id`), and uniqueness decided by the map's insert. They keep no per-owner \
     ID list, so they cannot list or drop an owner's IDs without a full scan: they do less work \
     per create than our designs. A lookup asks whether the entry is there: our designs' and \
     scc's `contains` (no reference to the entry is taken), dashmap's `get` (its cheapest \
     lookup: a read lock of the key's shard either way).",
];

impl Plan {
    /// The scale, as the intro states it.
    fn describe(&self) -> String {
        format!(
            "Scale: entries {:?}; workers {:?} × {} entries; loop {} iterations; {} \
             repetitions ({} for tests 1-3, whose cells are short), median reported.",
            self.sizes,
            self.workers,
            self.per_worker,
            self.loop_iterations,
            self.repetitions,
            self.single_repetitions
        )
    }
}

/// Tests 1-3: one owner creates N entries, then looks each up; a table per size, the
/// per-operation costs and their growth, and their plots.
fn single_owner(plan: &Plan, limit: u64) -> Box<dyn Measurement + '_> {
    let sizes: Vec<(usize, usize)> = plan.sizes.iter().copied().enumerate().collect();
    Sweep::new(
        candidates(),
        sizes,
        |&(test, count)| format!("Test {}: {count} entries", test + 1),
        move |c, &(_, count)| {
            workloads::kernel_fits(c, count, limit)?;
            workloads::single(c, count).map(|p| vec![ms(p.create), ms(p.lookup)])
        },
    )
    .repetitions(plan.single_repetitions)
    .tables(move |swept, _| {
        let mut tables = Vec::new();
        let mut per_op = Vec::new();
        for &((test, count), ref result) in &swept.results {
            let (create, lookup) = (result.metric(0), result.metric(1));
            let title = format!(
                "Test {}: one owner creates {count} entries, then looks each up (median of {})",
                test + 1,
                plan.single_repetitions
            );
            tables.push(swept.table(
                format!("test{}", test + 1),
                title,
                "ms",
                phase_rows(&create, &lookup),
            ));
            let per = |ms: f64| ms * 1e6 / count as f64;
            per_op.push(PerOp {
                count,
                create: create.map(per),
                lookup: lookup.map(per),
            });
        }
        tables.push(per_op_table(&per_op, &swept.columns));
        tables.push(growth_table(&per_op, &swept.columns));
        let names = &swept.columns;
        let plots = vec![
            per_op_plot("timers_create_per_op.svg", "create", &per_op, names, |p| {
                &p.create
            }),
            per_op_plot("timers_lookup_per_op.svg", "lookup", &per_op, names, |p| {
                &p.lookup
            }),
        ];
        Produced { tables, plots }
    })
}

/// Tests 4-5: T workers each create K entries then look each up, in one owner (threads) or an
/// owner each (the kernel: forked processes).
fn concurrent(plan: &Plan, limit: u64) -> Box<dyn Measurement + '_> {
    let points: Vec<(usize, bool)> = plan
        .workers
        .iter()
        .flat_map(|&w| [(w, true), (w, false)])
        .collect();
    let per_worker = plan.per_worker;
    Sweep::new(
        candidates(),
        points,
        |&(workers, shared)| {
            let (test, who) = if shared {
                (4, "threads")
            } else {
                (5, "owners")
            };
            format!("Test {test}: {workers} {who}")
        },
        move |c, &(workers, shared)| {
            workloads::kernel_fits(c, workers * per_worker, limit)?;
            workloads::concurrent(c, workers, per_worker, shared)
                .map(|p| vec![ms(p.create), ms(p.lookup)])
        },
    )
    .tables(move |swept, cx| {
        let table = |(&(workers, shared), result): (&(usize, bool), &Medians)| {
            let (test, shape) = if shared {
                (4, "threads of one owner")
            } else {
                (5, "workers with an owner each (kernel: forked processes)")
            };
            let title = format!(
                "Test {test}: {workers} {shape} each create {per_worker} entries, then look each \
                 up, in rounds repeated by all at once over a time window (per round, average \
                 per worker; {workers} workers on {} CPUs{})",
                cx.cpus(),
                cx.oversubscribed(workers)
            );
            let rows = phase_rows(&result.metric(0), &result.metric(1));
            swept.table(format!("test{test}_{workers}"), title, "ms", rows)
        };
        swept
            .results
            .iter()
            .map(|(p, m)| table((p, m)))
            .collect::<Vec<_>>()
            .into()
    })
}

/// The create+delete loop with `workers` workers, in one owner and with an owner each.
fn create_delete_loop(plan: &Plan, workers: usize) -> Box<dyn Measurement + '_> {
    let iterations = plan.loop_iterations;
    Sweep::new(
        candidates(),
        vec![true, false],
        move |&shared| {
            format!(
                "loop: {workers} {}",
                if shared { "threads" } else { "owners" }
            )
        },
        move |c, &shared| {
            workloads::create_delete_loop(c, workers, iterations, shared).map(|t| vec![ms(t)])
        },
    )
    .tables(move |swept, cx| {
        let mut rows = Vec::new();
        for (&shared, times) in swept.values(0) {
            let name = if shared { "one owner" } else { "owner each" };
            rows.push(Row::numbers(name, &times, 1));
            rows.push(Row::ratios(
                format!("{name} ÷ {REFERENCE}"),
                times.over(REFERENCE),
            ));
        }
        let title = format!(
            "Create+delete loop: {workers} workers each create and delete one entry {iterations} \
             times (per worker, at the rate the workers sustained together over a time window; \
             {workers} workers on {} CPUs{})",
            cx.cpus(),
            cx.oversubscribed(workers)
        );
        swept
            .table(format!("loop_{workers}"), title, "ms", rows)
            .into()
    })
}

/// Memory on sparse IDs, created in restore mode.
fn sparse() -> Box<dyn Measurement> {
    Sweep::new(
        candidates(),
        vec![()],
        |_| format!("{SPARSE_COUNT} IDs {SPARSE_SPACING} apart"),
        |c, _| {
            workloads::sparse(c, SPARSE_COUNT, SPARSE_SPACING).map(|(reported, allocated, time)| {
                vec![
                    reported.map_or(f64::NAN, |b| b as f64),
                    allocated.map_or(f64::NAN, |b| b as f64),
                    ms(time),
                ]
            })
        },
    )
    .tables(|swept, _| {
        let result = swept.only();
        let allocated = result.metric(1);
        let rows = vec![
            Row::numbers("self-reported bytes", result.metric(0), 0),
            Row::numbers("allocator bytes", &allocated, 0),
            Row::ratios(format!("allocator ÷ {REFERENCE}"), allocated.over(REFERENCE)),
            Row::numbers("create time (ms)", result.metric(2), 3),
        ];
        let title = format!(
            "Memory: {SPARSE_COUNT} entries with IDs {SPARSE_SPACING} apart, created in restore mode"
        );
        swept.table("memory_sparse", title, "bytes, ms", rows).into()
    })
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
    use crate::measure::names;

    #[test]
    fn quick_plan_sizes_match_the_rework_tests_and_fit_the_limit() {
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
            let time = workloads::create_delete_loop(candidate, 2, 50, false);
            if let Some(time) = crate::measure::unless_not_at_once(time) {
                assert!(time > Duration::ZERO, "{}", candidate.name);
            }
            for shared_owner in [true, false] {
                let phases = workloads::concurrent(candidate, 2, 50, shared_owner);
                if let Some(phases) = crate::measure::unless_not_at_once(phases) {
                    assert!(phases.create > Duration::ZERO, "{}", candidate.name);
                    assert!(phases.lookup > Duration::ZERO, "{}", candidate.name);
                }
            }
            let (_, allocated, _) = workloads::sparse(candidate, 16, 512).unwrap();
            assert!(allocated.unwrap() > 0, "{}", candidate.name);
        }
    }
}
