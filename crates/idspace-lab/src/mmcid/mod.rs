//! Experiment `mmcid`: a ready-to-use benchmark of the kernel's MM CID. It
//! measures only the kernel it runs on, so that kernels can be compared run against run
//! (`idspace bench --compare A.json B.json`): tglx's thread pool program, the CID footprint
//! under thread churn, the compaction of a survivor's CID, and the cost of mm_cid-indexed
//! counters and caches; with the kernel, glibc, `AT_RSEQ_FEATURE_SIZE` and CPUs recorded.

mod workloads;

use std::cell::RefCell;
use std::time::Duration;

use idspace::cid::rseq;

use crate::declare::{self, custom, Declared, Measurement, Produced, Sweep};
use crate::model::{Row, Section, Table};
use crate::percid::workloads as percid;
use crate::{Context, Experiment, Scale};

/// The experiment.
pub struct MmCid;

/// The sizes of one run.
#[derive(Clone, Copy)]
struct Plan {
    /// Each pool cell's duration.
    duration: Duration,
    /// Waves of the churn.
    waves: usize,
    /// Threads per wave.
    width: usize,
    /// How long the survivor may wait for its CID to compact.
    limit: Duration,
}

/// The one column: the kernel the lab runs on.
const COLUMN: &str = "this kernel";

impl Experiment for MmCid {
    fn name(&self) -> &'static str {
        "mmcid"
    }

    fn about(&self) -> &'static str {
        "The kernel's MM CID: thread create/teardown pools, CID footprint, compaction, per-CID data"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let (duration, waves, limit) = match cx.scale {
            // The sleeping survivor's compaction took 0.4 to over 3 s on Linux 6.18 (its scan
            // runs at a tick that finds the survivor on the CPU, which a sleeper rarely is).
            Scale::Quick => (Duration::from_millis(300), 20, Duration::from_secs(5)),
            Scale::Full => (Duration::from_secs(3), 200, Duration::from_secs(10)),
        };
        let width = 4 * cx.cpus().max(1);
        let plan = Plan {
            duration,
            waves,
            width,
            limit,
        };
        let allowed = workloads::allowed_cpus();
        let rows = RefCell::new(Vec::new());
        let title = format!(
            "MM CID on this kernel ({}, glibc {}): pools {} s per cell, median of {}; churn in \
             {waves} waves of {width} threads",
            cx.machine.kernel,
            workloads::glibc_version(),
            duration.as_secs_f64(),
            cx.repetitions()
        );
        let measurements = vec![
            pools(plan, &rows),
            custom(1, |cx| churn(cx, plan, &mut rows.borrow_mut())),
            custom(2, |cx| {
                compaction(cx, plan, &allowed, &mut rows.borrow_mut())
            }),
            per_cid_data(cx.cpus(), &rows),
            custom(0, |_| {
                let mut rows = rows.take();
                rows.extend(machine_rows(allowed.len()));
                Table {
                    id: "mmcid".into(),
                    title,
                    unit: "threads/s, CIDs, ms, ns".into(),
                    columns: vec![COLUMN.into()],
                    rows,
                }
                .into()
            }),
        ];
        let declared = Declared {
            name: self.name(),
            title: "MM CID: a benchmark of the kernel's concurrency IDs".into(),
            intro: vec![
                "Measures the kernel this runs on only, to compare kernels: 6.18 (the design \
                 before the rewrite), 6.19 and later (the rewrite), and patches."
                    .into(),
            ],
            measurements,
            notes: vec![note(cx, allowed.len())],
        };
        Ok(declare::run(cx, declared))
    }
}

fn note(cx: &Context, allowed: usize) -> String {
    format!(
        "Kernel {}; glibc {}; AT_RSEQ_FEATURE_SIZE {} (28 or more: the kernel fills mm_cid); {} \
         possible CPUs, {allowed} allowed. The pools are tglx's program from the MM CID rework \
         (Linux 6.19; each pool creates detached pthreads that count themselves in, waits for \
         all, tells them to die and waits until they are gone); the 32 × 32 shape crosses the \
         rewrite's ownership-mode change both ways. Compaction follows the kernel's \
         `mm_cid_compaction_test`: one pinned thread per allowed CPU runs, all but one exit, and \
         the survivor polls until its mm_cid reads 0. It runs in a child process whose only \
         thread is the survivor (so that no other thread keeps a CID), made to hold CID 1 while \
         CID 0 is free: a holder thread takes CID 0 on the survivor's CPU while the survivor \
         sleeps, moves the survivor to another CPU, where it wakes and takes CID 1, and exits. \
         The child checks this before timing (a fresh child is tried if not; the row is refused, \
         with what the survivor read, if none gets there), so that every run measures a \
         compaction. Compare kernels with `idspace bench --compare A/results.json \
         B/results.json`.",
        cx.machine.kernel,
        workloads::glibc_version(),
        rseq::feature_size(),
        rseq::possible_cpus().map_or_else(|| "unknown".to_string(), |p| p.to_string()),
    )
}

/// Tglx's pool program, in two shapes.
fn pools(plan: Plan, rows: &RefCell<Vec<Row>>) -> Box<dyn Measurement + '_> {
    Sweep::new(
        vec![COLUMN],
        vec![(8usize, 8usize), (32, 32)],
        |(pools, threads)| format!("{pools} pools x {threads} threads"),
        move |_, &(pools, threads)| {
            workloads::tglx_pools(pools, threads, plan.duration).map(|rate| vec![rate])
        },
    )
    .tables(move |swept, cx| {
        rows.borrow_mut()
            .extend(swept.numbers(0, 0, |&(pools, threads)| {
                let over = cx.oversubscribed(pools * threads);
                format!("{pools} pools × {threads} threads, threads/s{over}")
            }));
        Produced::default()
    })
}

/// The CID footprint under thread churn.
fn churn(cx: &mut Context, plan: Plan, rows: &mut Vec<Row>) -> Produced {
    cx.progress.step("churn");
    match workloads::churn(plan.width, plan.waves) {
        Ok(footprint) => {
            let one = |label: &str, value: f64| Row::numbers(label, vec![Some(value)], 0);
            rows.push(one(
                "churn: largest mm_cid + 1",
                f64::from(footprint.max_cid) + 1.0,
            ));
            rows.push(one("churn: distinct mm_cids", footprint.distinct as f64));
            rows.push(one("churn: threads alive at most", footprint.live as f64));
        }
        Err(error) => cx.notes.push(format!("*churn:* {error}")),
    }
    Produced::default()
}

/// Compaction, with the survivor sleeping between polls (the selftest) and running.
fn compaction(cx: &mut Context, plan: Plan, allowed: &[usize], rows: &mut Vec<Row>) -> Produced {
    let survivors = &allowed[..allowed.len().min(64)];
    for (running, how) in [(false, "sleeping"), (true, "running")] {
        cx.progress.step(&format!("compaction, survivor {how}"));
        match workloads::compaction(survivors, plan.limit, running) {
            Ok((first, took)) => {
                rows.push(Row::numbers(
                    format!("compaction, survivor {how}: its mm_cid when the others exited"),
                    vec![Some(f64::from(first))],
                    0,
                ));
                if took.is_none() {
                    cx.notes.push(format!(
                        "*compaction, survivor {how}:* its mm_cid did not read 0 within {} s.",
                        plan.limit.as_secs()
                    ));
                }
                let label = format!("compaction, survivor {how}: ms until its mm_cid reads 0");
                rows.push(Row::numbers(
                    label,
                    vec![took.map(|t| t.as_secs_f64() * 1e3)],
                    1,
                ));
            }
            Err(error) => cx
                .notes
                .push(format!("*compaction, survivor {how}:* {error}")),
        }
    }
    Produced::default()
}

/// How long each per-CID data cell runs its threads at once.
const CELL: std::time::Duration = std::time::Duration::from_millis(60);

/// Per-CID data at this machine's CPU count: a counter and a pool indexed by mm_cid.
fn per_cid_data(cpus: usize, rows: &RefCell<Vec<Row>>) -> Box<dyn Measurement + '_> {
    Sweep::new(
        vec![COLUMN],
        vec!["mm_cid counter", "mm_cid pool"],
        |&what| what.to_string(),
        move |_, &what| match what {
            "mm_cid counter" => {
                percid::counter("rseq by mm_cid", cpus, CELL).map(|run| vec![run.ns])
            }
            _ => percid::pool("PerCidPool", cpus, CELL).map(|run| vec![run.ns]),
        },
    )
    .tables(move |swept, _| {
        rows.borrow_mut()
            .extend(swept.numbers(0, 2, |&what| match what {
                "mm_cid counter" => {
                    format!("rseq mm_cid counter, ns per increment, {cpus} threads")
                }
                _ => format!("PerCidPool, ns per take+give, {cpus} threads"),
            }));
        Produced::default()
    })
}

/// The machine's rseq facts.
fn machine_rows(allowed: usize) -> Vec<Row> {
    let feature = rseq::feature_size();
    vec![
        Row::numbers("AT_RSEQ_FEATURE_SIZE", vec![Some(feature as f64)], 0),
        Row::numbers(
            "possible CPUs",
            vec![rseq::possible_cpus().map(|p| p as f64)],
            0,
        ),
        Row::numbers("allowed CPUs", vec![Some(allowed as f64)], 0),
    ]
}
