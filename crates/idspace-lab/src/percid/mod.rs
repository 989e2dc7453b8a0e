//! Experiment `percid`: per-CID data (issue 11). A counter in the shape of ClickHouse PR
//! #109283 (rseq sections indexed by mm_cid and by cpu_id, an atomic per CID, one shared
//! atomic, thread_local shards) and an object cache (`PerCidPool` against a `Mutex<Vec>`,
//! thread_local caches and crossbeam's `ArrayQueue`), at 1 to 256 threads, with memory.

pub(crate) mod workloads;

use idspace::percid::{kernel_aborts, rseq_registration, IndexSource};

use crate::model::{Row, Section, Table};
use crate::{Context, Experiment, Scale};

/// The experiment.
pub struct PerCidData;

const THREADS: [usize; 5] = [1, 2, 8, 64, 256];

impl Experiment for PerCidData {
    fn name(&self) -> &'static str {
        "percid"
    }

    fn about(&self) -> &'static str {
        "Per-CID data: rseq counters and object caches vs atomics, thread_local and queues"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        // Operations per cell, shared by the threads: about 60 ms (quick) or 0.5 s (full) of
        // one thread's increments on this kind of machine.
        let (increments, pairs) = match cx.scale {
            Scale::Quick => (20_000_000, 2_000_000),
            Scale::Full => (150_000_000, 15_000_000),
        };
        let repetitions = cx.repetitions();
        let steps =
            repetitions * THREADS.len() * (workloads::COUNTERS.len() + workloads::POOLS.len());
        cx.progress.set_total(steps as u64);
        let aborts_before = kernel_aborts();

        let mut ns_rows = Vec::new();
        let mut slot_rows = Vec::new();
        let mut byte_rows = Vec::new();
        let mut ratio_rows = Vec::new();
        for threads in THREADS {
            let over = cx.oversubscribed(threads);
            let result = cx.measure(
                &workloads::COUNTERS,
                &format!("counter, {threads} threads"),
                |&shape| {
                    workloads::counter(shape, threads, increments)
                        .map(|run| vec![run.ns, run.slots as f64, run.bytes as f64])
                },
            );
            let ns = result.metric(0);
            ratio_rows.push(Row::ratios(
                format!("÷ rseq by mm_cid, {threads} threads{over}"),
                ns.over("rseq by mm_cid"),
            ));
            ns_rows.push(Row::numbers(
                format!("ns per increment, {threads} threads{over}"),
                ns,
                2,
            ));
            slot_rows.push(Row::numbers(
                format!("slots, {threads} threads"),
                result.metric(1),
                0,
            ));
            byte_rows.push(Row::numbers(
                format!("bytes, {threads} threads"),
                result.metric(2),
                0,
            ));
        }
        let mut rows = ns_rows;
        rows.extend(ratio_rows);
        rows.extend(slot_rows);
        rows.extend(byte_rows);
        let mut tables = vec![Table {
            id: "counter".into(),
            title: format!(
                "Counter (ClickHouse PR #109283's shape): ns per increment per thread, and the \
                 memory the counter holds; {increments} increments per cell, shared by the threads, \
                 median of {repetitions}; {} CPUs",
                cx.cpus()
            ),
            unit: "ns, x, slots, bytes".into(),
            columns: workloads::COUNTERS.iter().map(|c| c.to_string()).collect(),
            rows,
        }];

        let mut rows = Vec::new();
        let mut held_rows = Vec::new();
        let mut pool_ratios = Vec::new();
        for threads in THREADS {
            let over = cx.oversubscribed(threads);
            let result = cx.measure(
                &workloads::POOLS,
                &format!("pool, {threads} threads"),
                |&shape| {
                    workloads::pool(shape, threads, pairs).map(|run| vec![run.ns, run.held as f64])
                },
            );
            let ns = result.metric(0);
            pool_ratios.push(Row::ratios(
                format!("÷ PerCidPool, {threads} threads{over}"),
                ns.over("PerCidPool"),
            ));
            rows.push(Row::numbers(
                format!("ns per take+give, {threads} threads{over}"),
                ns,
                2,
            ));
            held_rows.push(Row::numbers(
                format!("objects held, {threads} threads"),
                result.metric(1),
                0,
            ));
        }
        rows.extend(pool_ratios);
        rows.extend(held_rows);
        tables.push(Table {
            id: "pool".into(),
            title: format!(
                "Object cache: ns per take+give pair per thread (bursts of 4 takes, then 4 gives, \
                 64-byte objects; 64 objects per slot, thread or queue), and the objects each \
                 cache holds at the end; {pairs} pairs per cell, shared by the threads, median of \
                 {repetitions}"
            ),
            unit: "ns, x, objects".into(),
            columns: workloads::POOLS.iter().map(|c| c.to_string()).collect(),
            rows,
        });
        let registration = rseq_registration()
            .map_or_else(|| "none".to_string(), |r| format!("{r:?}").to_lowercase());
        cx.notes.push(format!(
            "Index source of `PerCidPool` here: {}; rseq area registered by: {registration}; \
             rseq sections aborted by the kernel during this experiment: {}.",
            IndexSource::best().as_str(),
            kernel_aborts() - aborts_before
        ));
        cx.notes.push(
            "\"rseq by mm_cid\" and \"rseq by cpu_id\" are `PerCidCounter`: a plain add committed \
             by an rseq critical section, no lock prefix. \"atomic per CID\" is `PerCid<AtomicU64>` \
             indexed by mm_cid with an atomic add. \"thread_local shards\" looks its shard up at \
             every increment (`thread_local::ThreadLocal::get_or`) and keeps one per thread; the \
             per-CID shapes keep one per possible CPU."
                .into(),
        );
        Ok(Section {
            name: "percid".into(),
            title: "Per-CID data: rseq counters and object caches".into(),
            intro: vec![
                "Counters and object caches indexed by the running thread's concurrency ID, \
                 committed by rseq critical sections, against the usual alternatives. ns are per \
                 operation per thread (elapsed × threads ÷ operations)."
                    .into(),
            ],
            tables,
            plots: Vec::new(),
            notes: std::mem::take(&mut cx.notes),
        })
    }
}
