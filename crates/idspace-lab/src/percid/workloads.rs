//! The percid experiment's workloads: a counter and an object cache, each hammered by a number
//! of threads for a while, in every shape the experiment compares.

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use idspace::percid::{IndexSource, PerCid, PerCidCounter, PerCidPool};
use thread_local::ThreadLocal;

/// Runs `work(n)` on `threads` threads that start together (a barrier), each doing its share
/// `n` of `total` operations; returns the time until the last one finished and the operations
/// made. The C ABI's comparison uses it because its C side makes the same fixed amount of work;
/// this experiment's own cells use a [`window`], which checks that the threads ran at once.
pub(crate) fn fixed(threads: usize, total: u64, work: &(dyn Fn(u64) + Sync)) -> (Duration, u64) {
    let per_thread = (total / threads.max(1) as u64).max(1);
    let barrier = Barrier::new(threads + 1);
    let start = thread::scope(|scope| {
        for _ in 0..threads {
            let barrier = &barrier;
            scope.spawn(move || {
                barrier.wait();
                work(per_thread);
            });
        }
        barrier.wait();
        Instant::now()
    });
    (start.elapsed(), per_thread * threads as u64)
}

/// Operations a thread makes between two looks at the stop flag.
const CHUNK: u64 = 1024;

/// What every thread of a [`window`] run did.
struct Span {
    /// When the thread made its first operation, and when it saw the stop flag.
    start: Instant,
    end: Instant,
    /// Its operations.
    ops: u64,
}

/// Runs `work(CHUNK)` over and over on `threads` threads that start together (a barrier) until
/// `duration` has passed, and returns the time from the first thread's start to the last one's
/// end with the operations made.
///
/// A row must measure what it says: `threads` threads running at once, not one after another.
/// With a fixed amount of work per thread, an oversubscribed run (64 threads on 2 CPUs) lets
/// the first threads finish within their first time slices, before the last ones start; the
/// cell then times a few threads at a time, and a `thread_local` counter reuses the finished
/// threads' shards. A time window keeps every thread alive until the stop, and the run is
/// refused, rather than reported, unless every thread worked inside the window and every one
/// had started before any stopped.
pub(crate) fn window(
    threads: usize,
    duration: Duration,
    work: &(dyn Fn(u64) + Sync),
) -> Result<(Duration, u64), String> {
    let gate = crate::measure::StartGate::default();
    let stop = AtomicBool::new(false);
    let spans: Vec<Span> = thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (gate, stop) = (&gate, &stop);
                scope.spawn(move || {
                    gate.arrive_and_wait();
                    let start = Instant::now();
                    let mut ops = 0;
                    // Relaxed: the flag only ends the loop; the spans are read after the joins.
                    while !stop.load(Ordering::Relaxed) {
                        work(CHUNK);
                        ops += CHUNK;
                    }
                    Span {
                        start,
                        end: Instant::now(),
                        ops,
                    }
                })
            })
            .collect();
        gate.open_when(threads);
        thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().expect("a worker panicked"))
            .collect()
    });
    together(&spans)?;
    let first = spans
        .iter()
        .map(|s| s.start)
        .min()
        .expect("at least one thread");
    let last = spans
        .iter()
        .map(|s| s.end)
        .max()
        .expect("at least one thread");
    Ok((last - first, spans.iter().map(|s| s.ops).sum()))
}

/// Refuses a run whose threads did not all run at once: one that made no operation before the
/// stop, or one that started only after another had stopped.
fn together(spans: &[Span]) -> Result<(), String> {
    if let Some(idle) = spans.iter().position(|s| s.ops == 0) {
        return Err(format!(
            "thread {idle} of {} made no operation in the window: the threads did not all run \
             at once, so the cell is not reported",
            spans.len()
        ));
    }
    let last_start = spans.iter().map(|s| s.start).max();
    let first_end = spans.iter().map(|s| s.end).min();
    match (last_start, first_end) {
        (Some(start), Some(end)) if start > end => Err(format!(
            "a thread started {:?} after another had stopped: the {} threads did not all run \
             at once, so the cell is not reported",
            start - end,
            spans.len()
        )),
        _ => Ok(()),
    }
}

/// How long a cell of `threads` threads runs: `base`, plus time for every thread of an
/// oversubscribed run to get its turns on the CPUs (2 ms each: a few of the scheduler's time
/// slices spread over the CPUs).
pub(crate) fn cell_window(base: Duration, threads: usize) -> Duration {
    base + Duration::from_millis(2) * threads as u32
}

/// [`window`], run again once with a window four times as long if its threads did not all run
/// at once (a busy machine can keep an oversubscribed cell's last threads off the CPUs).
pub(crate) fn window_or_longer(
    threads: usize,
    duration: Duration,
    work: &(dyn Fn(u64) + Sync),
) -> Result<(Duration, u64), String> {
    window(threads, duration, work).or_else(|_| window(threads, duration * 4, work))
}

/// The counter's shapes (the table's columns).
pub const COUNTERS: [&str; 5] = [
    "rseq by mm_cid",
    "rseq by cpu_id",
    "atomic per CID",
    "shared atomic",
    "thread_local shards",
];

/// What one counter run measured.
pub struct CounterRun {
    /// Nanoseconds per increment, per thread (elapsed × threads ÷ increments).
    pub ns: f64,
    /// Slots the counter holds at the end.
    pub slots: usize,
    /// Bytes those slots take.
    pub bytes: usize,
}

/// The counter `shape`, incremented by `threads` threads at once for `duration` (a [`window`]);
/// an error if the shape cannot run here, the threads did not all run at once, or its total is
/// not the number of increments made.
pub fn counter(shape: &str, threads: usize, duration: Duration) -> Result<CounterRun, String> {
    let padded = core::mem::size_of::<CachePadded<AtomicU64>>();
    let per_cid = |source| PerCidCounter::with_source(source).map_err(|e| format!("{e}"));
    match shape {
        "rseq by mm_cid" | "rseq by cpu_id" => {
            let source = if shape == "rseq by mm_cid" {
                IndexSource::MmCid
            } else {
                IndexSource::CpuId
            };
            let counter = per_cid(source)?;
            let (elapsed, total) = window_or_longer(threads, duration, &|n| {
                for _ in 0..n {
                    counter.add(1);
                }
            })?;
            check(counter.sum(), total)?;
            Ok(CounterRun {
                ns: per_increment(elapsed, threads, total),
                slots: counter.slots(),
                bytes: counter.slot_bytes(),
            })
        }
        "atomic per CID" => {
            let slots = PerCid::with_source(IndexSource::MmCid, |_| AtomicU64::new(0))
                .map_err(|e| format!("{e}"))?;
            let (elapsed, total) = window_or_longer(threads, duration, &|n| {
                for _ in 0..n {
                    // Relaxed: a statistic, summed after the joins.
                    slots.current().fetch_add(1, Ordering::Relaxed);
                }
            })?;
            check(slots.iter().map(|s| s.load(Ordering::Relaxed)).sum(), total)?;
            Ok(CounterRun {
                ns: per_increment(elapsed, threads, total),
                slots: slots.len(),
                bytes: slots.len() * padded,
            })
        }
        "shared atomic" => {
            let shared = CachePadded::new(AtomicU64::new(0));
            let (elapsed, total) = window_or_longer(threads, duration, &|n| {
                for _ in 0..n {
                    shared.fetch_add(1, Ordering::Relaxed);
                }
            })?;
            check(shared.load(Ordering::Relaxed), total)?;
            Ok(CounterRun {
                ns: per_increment(elapsed, threads, total),
                slots: 1,
                bytes: padded,
            })
        }
        "thread_local shards" => {
            let shards: ThreadLocal<CachePadded<AtomicU64>> = ThreadLocal::new();
            let (elapsed, total) = window_or_longer(threads, duration, &|n| {
                for _ in 0..n {
                    // Looked up at every increment, as a counter shared by code that
                    // does not keep the shard around would.
                    let shard = shards.get_or(|| CachePadded::new(AtomicU64::new(0)));
                    shard.fetch_add(1, Ordering::Relaxed);
                }
            })?;
            check(
                shards.iter().map(|s| s.load(Ordering::Relaxed)).sum(),
                total,
            )?;
            let slots = shards.iter().count();
            if slots != threads {
                // Only threads that had exited hand their shards on to later ones.
                return Err(format!(
                    "thread_local kept {slots} shards for {threads} threads: they did not all \
                     run at once"
                ));
            }
            Ok(CounterRun {
                ns: per_increment(elapsed, threads, total),
                slots,
                bytes: slots * padded,
            })
        }
        other => Err(format!("unknown counter shape {other}")),
    }
}

fn check(counted: u64, made: u64) -> Result<(), String> {
    if counted == made {
        Ok(())
    } else {
        Err(format!("the counter lost increments: {counted} of {made}"))
    }
}

fn per_increment(elapsed: Duration, threads: usize, total: u64) -> f64 {
    elapsed.as_nanos() as f64 * threads as f64 / total.max(1) as f64
}

/// The object caches' shapes (the table's columns).
pub const POOLS: [&str; 4] = [
    "PerCidPool",
    "Mutex<Vec>",
    "thread_local caches",
    "crossbeam ArrayQueue",
];

/// The object every cache holds: a cache line's worth of bytes.
type Object = [u64; 8];

/// Objects a thread takes before it gives them back (a burst of allocations, then frees).
const BURST: usize = 4;
/// What a per-slot, per-thread or bounded cache keeps.
const CACHE: usize = 64;

/// What one pool run measured.
pub struct PoolRun {
    /// Nanoseconds per take/give pair, per thread.
    pub ns: f64,
    /// Objects the cache holds at the end (its memory, in objects).
    pub held: usize,
}

/// The cache `shape` under `threads` threads making take/give pairs at once for `duration` (a
/// [`window`]), in bursts of `BURST` takes (making an object where the cache has none) and as
/// many gives.
pub fn pool(shape: &str, threads: usize, duration: Duration) -> Result<PoolRun, String> {
    let make = || Box::new([0u64; 8]);
    let run = |take: &(dyn Fn() -> Box<Object> + Sync), give: &(dyn Fn(Box<Object>) + Sync)| {
        window_or_longer(threads, duration, &|n| {
            let mut burst = Vec::with_capacity(BURST);
            for _ in 0..n.div_ceil(BURST as u64) {
                for _ in 0..BURST {
                    let mut object = take();
                    object[0] += 1;
                    burst.push(object);
                }
                for object in burst.drain(..) {
                    give(black_box(object));
                }
            }
        })
    };
    let (run, held) = match shape {
        "PerCidPool" => {
            let pool = PerCidPool::<Object>::with_source(IndexSource::best(), CACHE)
                .map_err(|e| format!("{e}"))?;
            let result = run(&|| pool.take().unwrap_or_else(make), &|o| pool.give(o));
            (result, pool.held())
        }
        "Mutex<Vec>" => {
            let pool: Mutex<Vec<Box<Object>>> = Mutex::new(Vec::new());
            let lock = || pool.lock().unwrap_or_else(|p| p.into_inner());
            let result = run(&|| lock().pop().unwrap_or_else(make), &|o| lock().push(o));
            let held = lock().len();
            (result, held)
        }
        "thread_local caches" => {
            let mut caches: ThreadLocal<RefCell<Vec<Box<Object>>>> = ThreadLocal::new();
            let cache = || caches.get_or(|| RefCell::new(Vec::with_capacity(CACHE)));
            let result = run(&|| cache().borrow_mut().pop().unwrap_or_else(make), &|o| {
                let mut cache = cache().borrow_mut();
                if cache.len() < CACHE {
                    cache.push(o);
                }
            });
            let held = caches.iter_mut().map(|c| c.get_mut().len()).sum();
            (result, held)
        }
        "crossbeam ArrayQueue" => {
            // Bounded like the other caches: the per-CID pool's total room.
            let queue: ArrayQueue<Box<Object>> = ArrayQueue::new(CACHE * idspace_slots());
            let result = run(&|| queue.pop().unwrap_or_else(make), &|o| {
                // A full queue drops the object, as a full thread_local cache does.
                let _ = queue.push(o);
            });
            (result, queue.len())
        }
        other => return Err(format!("unknown pool shape {other}")),
    };
    // A window's chunks are whole bursts, so every pair counted was made.
    let (elapsed, pairs) = run?;
    Ok(PoolRun {
        ns: per_increment(elapsed, threads, pairs),
        held,
    })
}

/// The slots a per-CID structure has here (the possible CPUs).
fn idspace_slots() -> usize {
    PerCidCounter::new().slots()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_runs_and_counts_exactly() {
        for shape in COUNTERS {
            match counter(shape, 3, Duration::from_millis(50)) {
                Ok(run) => assert!(run.ns > 0.0 && run.slots > 0 && run.bytes > 0, "{shape}"),
                // Only the rseq shapes may be missing (no rseq here).
                Err(error) => assert!(
                    !idspace::percid::IndexSource::CpuId.available(),
                    "{shape}: {error}"
                ),
            }
        }
        for shape in POOLS {
            let run = pool(shape, 3, Duration::from_millis(50))
                .unwrap_or_else(|e| panic!("{shape}: {e}"));
            assert!(run.ns > 0.0, "{shape}");
            assert!(
                run.held <= 3 * BURST,
                "{shape}: more objects held than ever taken at once"
            );
        }
    }

    fn span(start_ms: u64, end_ms: u64, ops: u64) -> Span {
        let zero = Instant::now();
        Span {
            start: zero + Duration::from_millis(start_ms),
            end: zero + Duration::from_millis(end_ms),
            ops,
        }
    }

    #[test]
    fn runs_whose_threads_did_not_overlap_are_refused() {
        assert!(together(&[span(0, 10, 5), span(2, 12, 5)]).is_ok());
        let idle = together(&[span(0, 10, 5), span(2, 12, 0)]).unwrap_err();
        assert!(idle.contains("thread 1 of 2 made no operation"), "{idle}");
        let serial = together(&[span(0, 10, 5), span(11, 20, 5)]).unwrap_err();
        assert!(serial.contains("did not all run at once"), "{serial}");
    }

    #[test]
    fn a_window_counts_every_thread_and_spans_them_all() {
        let made = AtomicU64::new(0);
        let (elapsed, ops) = window(2, Duration::from_millis(100), &|n| {
            made.fetch_add(n, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(ops, made.load(Ordering::Relaxed));
        assert!(ops >= 2 * CHUNK, "every thread made at least one chunk");
        assert!(elapsed >= Duration::from_millis(50), "{elapsed:?}");
    }
}
