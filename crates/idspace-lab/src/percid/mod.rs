//! Experiment `percid`: per-CID data. A counter in the shape of ClickHouse PR
//! #109283 (rseq sections indexed by mm_cid and by cpu_id, an atomic per CID, one shared
//! atomic, thread_local shards) and an object cache (`PerCidPool` against a `Mutex<Vec>`,
//! thread_local caches and crossbeam's `ArrayQueue`), at 1 to 256 threads, with memory; the
//! cost of reading a counter's total after many threads added to it; and a goals table
//! (every goal a ratio of theirs over ours, so at least 1 means ours is better, with its
//! bound and whether it was met).
//!
//! Every multi-thread cell runs its threads at once for a time window
//! ([`crate::measure::window_or_longer`]) and is refused, with its reason, if they did not.

pub mod workloads;

use std::time::Duration;

use idspace::percid::{kernel_aborts, rseq_registration, IndexSource};

use crate::declare::{self, custom, Declared, Measurement, Produced, Sweep, Swept};
use crate::goals::{Goal, Goals};
use crate::model::Section;
use crate::{Context, Experiment, Scale};

/// The experiment.
pub struct PerCidData;

const THREADS: [usize; 5] = [1, 2, 8, 64, 256];
/// The thread counts whose counters' totals are read.
const SUM_THREADS: [usize; 3] = [2, 64, 256];
const OURS: &str = "rseq by mm_cid";
const THREAD_LOCAL: &str = "thread_local shards";
const POOL: &str = "PerCidPool";
const CACHES: &str = "thread_local caches";

impl Experiment for PerCidData {
    fn name(&self) -> &'static str {
        "percid"
    }

    fn about(&self) -> &'static str {
        "Per-CID data: rseq counters and object caches vs atomics, thread_local and queues"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        // Each cell runs its threads at once for this long, plus 2 ms a thread so
        // that every thread of an oversubscribed cell gets its turns (`workloads::window`).
        let base = match cx.scale {
            Scale::Quick => Duration::from_millis(60),
            Scale::Full => Duration::from_millis(500),
        };
        let aborts_before = kernel_aborts();
        let goals = Goals::default();
        let declared = Declared {
            name: self.name(),
            title: "Per-CID data: rseq counters and object caches".into(),
            intro: vec![
                "Counters and object caches indexed by the running thread's concurrency ID, \
                 committed by rseq critical sections, against the usual alternatives. ns are per \
                 operation per thread (elapsed × threads ÷ operations)."
                    .into(),
            ],
            measurements: vec![
                counter(base, &goals),
                sum(base / 3, &goals),
                pool(base, &goals),
                custom(0, move |cx| {
                    let registration = rseq_registration()
                        .map_or_else(|| "none".to_string(), |r| format!("{r:?}").to_lowercase());
                    cx.notes.push(format!(
                        "Index source of `PerCidPool` here: {}; rseq area registered by: \
                         {registration}; rseq sections aborted by the kernel during this \
                         experiment: {}.",
                        IndexSource::best().as_str(),
                        kernel_aborts() - aborts_before
                    ));
                    Produced::default()
                }),
                custom(0, |_| goals.table("x", 2).into()),
            ],
            notes: vec![NOTE.into()],
        };
        Ok(declare::run(cx, declared))
    }
}

const NOTE: &str = "\"rseq by mm_cid\" and \"rseq by cpu_id\" are `PerCidCounter`: a plain add \
    committed by an rseq critical section, no lock prefix. \"atomic per CID\" is \
    `PerCid<AtomicU64>` indexed by mm_cid with an atomic add. \"thread_local shards\" looks its \
    shard up at every increment (`thread_local::ThreadLocal::get_or`) and keeps one per thread; \
    the per-CID shapes keep one per possible CPU.";

/// The counters at every thread count.
fn counter(base: Duration, goals: &Goals) -> Box<dyn Measurement + '_> {
    Sweep::new(
        workloads::COUNTERS.to_vec(),
        THREADS.to_vec(),
        |threads| format!("counter, {threads} threads"),
        move |&shape, &threads| {
            workloads::counter(shape, threads, crate::measure::cell_window(base, threads))
                .map(|run| vec![run.ns, run.slots as f64, run.bytes as f64])
        },
    )
    .tables(move |swept, cx| {
        let over = |t: usize| cx.oversubscribed(t);
        let mut rows = swept.numbers(0, 2, |&t| {
            format!("ns per increment, {t} threads{}", over(t))
        });
        rows.extend(swept.ratios(0, "rseq by mm_cid", |&t| {
            format!("÷ rseq by mm_cid, {t} threads{}", over(t))
        }));
        rows.extend(swept.numbers(1, 0, |t| format!("slots, {t} threads")));
        rows.extend(swept.numbers(2, 0, |t| format!("bytes, {t} threads")));
        rows.extend(swept.ratios(2, OURS, |&t| format!("bytes ÷ rseq by mm_cid, {t} threads")));
        counter_goals(swept, goals);
        let title = format!(
            "Counter (ClickHouse PR #109283's shape): ns per increment per thread, and the \
             memory the counter holds; every cell's threads run at once for {} ms plus 2 ms a \
             thread, or 4 times as long if they did not (cells where they still did not are refused), median of {}; {} CPUs",
            base.as_millis(),
            cx.repetitions(),
            cx.cpus()
        );
        swept
            .table("counter", title, "ns, x, slots, bytes", rows)
            .into()
    })
}

/// The goals the counter table bears on: per increment within 1.2x of `thread_local`'s (a
/// ratio of theirs over ours of at least 1 ÷ 1.2), 2.5x a shared atomic from 2 threads on, and
/// the memory at 64 threads.
fn counter_goals(swept: &Swept<usize>, goals: &Goals) {
    for (&threads, ns) in swept.values(0) {
        let over = |other: &str| Some(ns.get(other)? / ns.get(OURS)?);
        goals.push(Goal::at_least(
            format!("counter, {threads} threads: thread_local shards ÷ ours, ns per increment"),
            over(THREAD_LOCAL),
            1.0 / 1.2,
            "x",
        ));
        if threads >= 2 {
            goals.push(Goal::at_least(
                format!("counter, {threads} threads: shared atomic ÷ ours, ns per increment"),
                over("shared atomic"),
                2.5,
                "x",
            ));
        }
    }
    for (_, bytes) in swept.values(2).filter(|(&t, _)| t == 64) {
        goals.push(Goal::at_least(
            "counter, 64 threads: thread_local shards ÷ ours, bytes",
            bytes
                .get(THREAD_LOCAL)
                .zip(bytes.get(OURS))
                .map(|(t, o)| t / o),
            1.0,
            "x",
        ));
    }
}

/// Reading a counter's total after many threads added to it: ours reads a slot per possible
/// CPU, `thread_local`'s walks a shard per thread.
fn sum(duration: Duration, goals: &Goals) -> Box<dyn Measurement + '_> {
    Sweep::new(
        workloads::SUMS.to_vec(),
        SUM_THREADS.to_vec(),
        |threads| format!("sum, {threads} threads"),
        move |&shape, &threads| {
            workloads::sum(shape, threads, duration).map(|run| vec![run.ns, run.bytes as f64])
        },
    )
    .tables(move |swept, cx| {
        let mut rows = swept.numbers(0, 2, |&t| format!("ns per sum, {t} threads' counter"));
        rows.extend(swept.ratios(0, OURS, |&t| {
            format!("÷ rseq by mm_cid, {t} threads' counter")
        }));
        rows.extend(swept.numbers(1, 0, |t| format!("bytes, {t} threads' counter")));
        for (_, ns) in swept.values(0).filter(|(&t, _)| t == 64) {
            goals.push(Goal::at_least(
                "sum, 64 threads' counter: thread_local shards ÷ ours, ns per read",
                ns.get(THREAD_LOCAL).zip(ns.get(OURS)).map(|(t, o)| t / o),
                10.0,
                "x",
            ));
        }
        let title = format!(
            "Counter total: ns per read of the whole counter (`sum()`, or a walk over \
             `thread_local`'s shards) after every thread, all alive at once, added to it; reads \
             repeated for {} ms, median of {}; {} CPUs",
            duration.as_millis(),
            cx.repetitions(),
            cx.cpus()
        );
        swept.table("sum", title, "ns, x, bytes", rows).into()
    })
}

/// The object caches at every thread count.
fn pool(base: Duration, goals: &Goals) -> Box<dyn Measurement + '_> {
    Sweep::new(
        workloads::POOLS.to_vec(),
        THREADS.to_vec(),
        |threads| format!("pool, {threads} threads"),
        move |&shape, &threads| {
            workloads::pool(shape, threads, crate::measure::cell_window(base, threads))
                .map(|run| vec![run.ns, run.held as f64])
        },
    )
    .tables(move |swept, cx| {
        let over = |t: usize| cx.oversubscribed(t);
        let mut rows = swept.numbers(0, 2, |&t| {
            format!("ns per take+give, {t} threads{}", over(t))
        });
        rows.extend(swept.ratios(0, "PerCidPool", |&t| {
            format!("÷ PerCidPool, {t} threads{}", over(t))
        }));
        rows.extend(swept.numbers(1, 0, |t| format!("objects held, {t} threads")));
        for (&threads, ns) in swept.values(0) {
            goals.push(Goal::at_least(
                format!("pool, {threads} threads: thread_local caches ÷ ours, ns per take+give"),
                ns.get(CACHES).zip(ns.get(POOL)).map(|(t, o)| t / o),
                1.0,
                "x",
            ));
        }
        let title = format!(
            "Object cache: ns per take+give pair per thread (bursts of 4 takes, then 4 gives, \
             64-byte objects; 64 objects per slot, thread or queue), and the objects each cache \
             holds at the end; every cell's threads run at once for {} ms plus 2 ms a thread, \
             or 4 times as long if they did not (cells where they still did not are refused), median of {}",
            base.as_millis(),
            cx.repetitions()
        );
        swept.table("pool", title, "ns, x, objects", rows).into()
    })
}
