//! Experiment `mmcid`: the ready-to-use MM CID benchmark the seed asks for (issue 11). It
//! measures only the kernel it runs on, so that kernels can be compared run against run
//! (`idspace bench --compare A.json B.json`): tglx's thread pool program, the CID footprint
//! under thread churn, the compaction of a survivor's CID, and the cost of mm_cid-indexed
//! counters and caches; with the kernel, glibc, `AT_RSEQ_FEATURE_SIZE` and CPUs recorded.

mod workloads;

use std::time::Duration;

use idspace::cid::rseq;

use crate::model::{Row, Section, Table};
use crate::percid::workloads as percid;
use crate::{Context, Experiment, Scale};

/// The experiment.
pub struct MmCid;

impl Experiment for MmCid {
    fn name(&self) -> &'static str {
        "mmcid"
    }

    fn about(&self) -> &'static str {
        "The kernel's MM CID: thread create/teardown pools, CID footprint, compaction, per-CID data"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let (duration, waves, limit) = match cx.scale {
            Scale::Quick => (Duration::from_millis(300), 20, Duration::from_secs(2)),
            Scale::Full => (Duration::from_secs(3), 200, Duration::from_secs(10)),
        };
        let repetitions = cx.repetitions();
        let shapes = [(8usize, 8usize), (32, 32)];
        cx.progress
            .set_total((repetitions * (shapes.len() + 2) + 2) as u64);
        let cpus = cx.cpus();
        let allowed = workloads::allowed_cpus();
        let possible = rseq::possible_cpus();
        let mut tables = Vec::new();

        // 1. Tglx's pool program.
        let column = ["this kernel"];
        let mut rows = Vec::new();
        for (pools, threads) in shapes {
            let result = cx.measure(
                &column,
                &format!("{pools} pools x {threads} threads"),
                |_| workloads::tglx_pools(pools, threads, duration).map(|rate| vec![rate]),
            );
            rows.push(Row::numbers(
                format!(
                    "{pools} pools × {threads} threads, threads/s{}",
                    cx.oversubscribed(pools * threads)
                ),
                result.metric(0),
                0,
            ));
        }

        // 2. Footprint under churn.
        let width = 4 * cpus.max(1);
        cx.progress.step("churn");
        match workloads::churn(width, waves) {
            Ok(footprint) => {
                rows.push(Row::numbers(
                    "churn: largest mm_cid + 1",
                    vec![Some(f64::from(footprint.max_cid) + 1.0)],
                    0,
                ));
                rows.push(Row::numbers(
                    "churn: distinct mm_cids",
                    vec![Some(footprint.distinct as f64)],
                    0,
                ));
                rows.push(Row::numbers(
                    "churn: threads alive at most",
                    vec![Some(footprint.live as f64)],
                    0,
                ));
            }
            Err(error) => cx.notes.push(format!("*churn:* {error}")),
        }

        // 3. Compaction, with the survivor sleeping between polls (the selftest) and running.
        let survivors = &allowed[..allowed.len().min(64)];
        for (running, how) in [(false, "sleeping"), (true, "running")] {
            cx.progress.step(&format!("compaction, survivor {how}"));
            let label = format!("compaction, survivor {how}: ms until its mm_cid reads 0");
            match workloads::compaction(survivors, limit, running) {
                Ok((first, took)) => {
                    rows.push(Row::numbers(
                        format!("compaction, survivor {how}: its mm_cid when the others exited"),
                        vec![Some(f64::from(first))],
                        0,
                    ));
                    if took.is_none() {
                        cx.notes.push(format!(
                            "*compaction, survivor {how}:* its mm_cid did not read 0 within {} s.",
                            limit.as_secs()
                        ));
                    }
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

        // 4. Per-CID data at this machine's CPU count.
        let result = cx.measure(&column, "mm_cid counter", |_| {
            percid::counter("rseq by mm_cid", cpus, 20_000_000).map(|run| vec![run.ns])
        });
        rows.push(Row::numbers(
            format!("rseq mm_cid counter, ns per increment, {cpus} threads"),
            result.metric(0),
            2,
        ));
        let result = cx.measure(&column, "mm_cid pool", |_| {
            percid::pool("PerCidPool", cpus, 2_000_000).map(|run| vec![run.ns])
        });
        rows.push(Row::numbers(
            format!("PerCidPool, ns per take+give, {cpus} threads"),
            result.metric(0),
            2,
        ));

        // 5. The machine.
        let feature = rseq::feature_size();
        rows.push(Row::numbers(
            "AT_RSEQ_FEATURE_SIZE",
            vec![Some(feature as f64)],
            0,
        ));
        rows.push(Row::numbers(
            "possible CPUs",
            vec![possible.map(|p| p as f64)],
            0,
        ));
        rows.push(Row::numbers(
            "allowed CPUs",
            vec![Some(allowed.len() as f64)],
            0,
        ));
        tables.push(Table {
            id: "mmcid".into(),
            title: format!(
                "MM CID on this kernel ({}, glibc {}): pools {} s per cell, median of \
                 {repetitions}; churn in {waves} waves of {width} threads",
                cx.machine.kernel,
                workloads::glibc_version(),
                duration.as_secs_f64()
            ),
            unit: "threads/s, CIDs, ms, ns".into(),
            columns: column.iter().map(|c| c.to_string()).collect(),
            rows,
        });

        cx.notes.push(format!(
            "Kernel {}; glibc {}; AT_RSEQ_FEATURE_SIZE {feature} (28 or more: the kernel fills \
             mm_cid); {} possible CPUs, {} allowed. The pools are tglx's program from seed 000 \
             (each pool creates detached pthreads that count themselves in, waits for all, \
             tells them to die and waits until they are gone); the 32 × 32 shape crosses the \
             rewrite's ownership-mode change both ways. Compaction follows the kernel's \
             `mm_cid_compaction_test`: one pinned thread per allowed CPU runs, all but one exit, \
             and the survivor (the lab's own thread, so that no other thread keeps a CID) polls \
             until its mm_cid reads 0; a survivor that held CID 0 all along measures nothing, \
             which its first row shows. Compare \
             kernels with `idspace bench --compare A/results.json B/results.json`.",
            cx.machine.kernel,
            workloads::glibc_version(),
            possible.map_or_else(|| "unknown".to_string(), |p| p.to_string()),
            allowed.len()
        ));
        Ok(Section {
            name: "mmcid".into(),
            title: "MM CID: a benchmark of the kernel's concurrency IDs".into(),
            intro: vec![
                "Measures the kernel this runs on only, to compare kernels: 6.18 (the design \
                 before the rewrite), 6.19 and later (the rewrite), and patches."
                    .into(),
            ],
            tables,
            plots: Vec::new(),
            notes: std::mem::take(&mut cx.notes),
        })
    }
}
