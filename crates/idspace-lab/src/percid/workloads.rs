//! The percid experiment's workloads: a counter and an object cache, each hammered by a number
//! of threads for a while, in every shape the experiment compares.

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use idspace::percid::{IndexSource, PerCid, PerCidCounter, PerCidPool};
use thread_local::ThreadLocal;

use crate::measure::window_or_longer;

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

/// The counter `shape`, incremented by `threads` threads at once for `duration`
/// ([`window_or_longer`]); an error if the shape cannot run here, the threads did not all run
/// at once, or its total is not the number of increments made.
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
            let run = window_or_longer(threads, duration, &|n| {
                for _ in 0..n {
                    counter.add(1);
                }
            })?;
            check(counter.sum(), run.made)?;
            Ok(CounterRun {
                ns: per_increment(run.elapsed, threads, run.ops),
                slots: counter.slots(),
                bytes: counter.slot_bytes(),
            })
        }
        "atomic per CID" => {
            let slots = PerCid::with_source(IndexSource::MmCid, |_| AtomicU64::new(0))
                .map_err(|e| format!("{e}"))?;
            let run = window_or_longer(threads, duration, &|n| {
                for _ in 0..n {
                    // Relaxed: a statistic, summed after the joins.
                    slots.current().fetch_add(1, Ordering::Relaxed);
                }
            })?;
            check(
                slots.iter().map(|s| s.load(Ordering::Relaxed)).sum(),
                run.made,
            )?;
            Ok(CounterRun {
                ns: per_increment(run.elapsed, threads, run.ops),
                slots: slots.len(),
                bytes: slots.len() * padded,
            })
        }
        "shared atomic" => {
            let shared = CachePadded::new(AtomicU64::new(0));
            let run = window_or_longer(threads, duration, &|n| {
                for _ in 0..n {
                    shared.fetch_add(1, Ordering::Relaxed);
                }
            })?;
            check(shared.load(Ordering::Relaxed), run.made)?;
            Ok(CounterRun {
                ns: per_increment(run.elapsed, threads, run.ops),
                slots: 1,
                bytes: padded,
            })
        }
        "thread_local shards" => {
            let shards: ThreadLocal<CachePadded<AtomicU64>> = ThreadLocal::new();
            let run = window_or_longer(threads, duration, &|n| {
                for _ in 0..n {
                    // Looked up at every increment, as a counter shared by code that
                    // does not keep the shard around would.
                    let shard = shards.get_or(|| CachePadded::new(AtomicU64::new(0)));
                    shard.fetch_add(1, Ordering::Relaxed);
                }
            })?;
            check(
                shards.iter().map(|s| s.load(Ordering::Relaxed)).sum(),
                run.made,
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
                ns: per_increment(run.elapsed, threads, run.ops),
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

/// The shapes whose `sum()` is timed (the sum table's columns).
pub const SUMS: [&str; 2] = ["rseq by mm_cid", "thread_local shards"];

/// What one sum run measured.
pub struct SumRun {
    /// Nanoseconds per read of the whole counter.
    pub ns: f64,
    /// Bytes the counter holds after `threads` threads have added to it.
    pub bytes: usize,
}

/// The counter `shape` after `threads` threads, all alive at once, have each added 1: the
/// time one read of its total takes (`PerCidCounter::sum`, or walking `thread_local`'s
/// shards), read over and over for `duration`, and its memory. An error if a total is wrong.
pub fn sum(shape: &str, threads: usize, duration: Duration) -> Result<SumRun, String> {
    let padded = core::mem::size_of::<CachePadded<AtomicU64>>();
    // Every thread waits for the others before it exits, so a thread_local keeps a shard for
    // each (an exited thread's shard goes to the next thread that starts).
    let alive = Barrier::new(threads);
    let fill = |add: &(dyn Fn() + Sync)| {
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    add();
                    alive.wait();
                });
            }
        })
    };
    match shape {
        "rseq by mm_cid" => {
            let counter =
                PerCidCounter::with_source(IndexSource::MmCid).map_err(|e| format!("{e}"))?;
            fill(&|| counter.add(1));
            let ns = per_read(duration, threads as u64, &|| black_box(&counter).sum())?;
            Ok(SumRun {
                ns,
                bytes: counter.slot_bytes(),
            })
        }
        "thread_local shards" => {
            let shards: ThreadLocal<CachePadded<AtomicU64>> = ThreadLocal::new();
            fill(&|| {
                let shard = shards.get_or(|| CachePadded::new(AtomicU64::new(0)));
                shard.fetch_add(1, Ordering::Relaxed);
            });
            let read = || {
                black_box(&shards)
                    .iter()
                    .map(|s| s.load(Ordering::Relaxed))
                    .sum()
            };
            let ns = per_read(duration, threads as u64, &read)?;
            Ok(SumRun {
                ns,
                bytes: shards.iter().count() * padded,
            })
        }
        other => Err(format!("unknown sum shape {other}")),
    }
}

/// Calls `read` over and over for `duration`: ns per call; an error if one returned other
/// than `total`.
fn per_read(duration: Duration, total: u64, read: &dyn Fn() -> u64) -> Result<f64, String> {
    const BATCH: u64 = 256;
    let start = Instant::now();
    let mut reads = 0u64;
    while start.elapsed() < duration {
        for _ in 0..BATCH {
            let seen = read();
            if seen != total {
                return Err(format!("a sum read {seen}, not {total}"));
            }
        }
        reads += BATCH;
    }
    Ok(start.elapsed().as_nanos() as f64 / reads as f64)
}

/// The object caches' shapes (the table's columns).
pub const POOLS: [&str; 4] = [
    "PerCidPool",
    "Mutex<Vec>",
    "thread_local caches",
    "crossbeam ArrayQueue",
];

/// The object every cache holds: a cache line's worth of bytes.
pub type Object = [u64; 8];

/// Objects a thread takes before it gives them back (a burst of allocations, then frees).
const BURST: usize = 4;
/// What a per-slot, per-thread or bounded cache keeps.
pub const CACHE: usize = 64;

/// `pairs` take/give pairs on the calling thread, in bursts of `BURST` takes, each object
/// touched, then as many gives: the object-cache experiment's loop, which
/// `examples/percid_pool.rs` runs alone under a profiler.
pub fn take_give_bursts(pairs: u64, take: &dyn Fn() -> Box<Object>, give: &dyn Fn(Box<Object>)) {
    let mut burst = Vec::with_capacity(BURST);
    for _ in 0..pairs.div_ceil(BURST as u64) {
        for _ in 0..BURST {
            let mut object = take();
            object[0] += 1;
            burst.push(object);
        }
        for object in burst.drain(..) {
            give(black_box(object));
        }
    }
}

/// What one pool run measured.
pub struct PoolRun {
    /// Nanoseconds per take/give pair, per thread.
    pub ns: f64,
    /// Objects the cache holds at the end (its memory, in objects).
    pub held: usize,
}

/// The cache `shape` under `threads` threads making take/give pairs at once for `duration`
/// ([`window_or_longer`]), in bursts of `BURST` takes (making an object where the cache has
/// none) and as many gives.
pub fn pool(shape: &str, threads: usize, duration: Duration) -> Result<PoolRun, String> {
    let make = || Box::new([0u64; 8]);
    let run = |take: &(dyn Fn() -> Box<Object> + Sync), give: &(dyn Fn(Box<Object>) + Sync)| {
        window_or_longer(threads, duration, &|n| take_give_bursts(n, take, give))
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
    let run = run?;
    Ok(PoolRun {
        ns: per_increment(run.elapsed, threads, run.ops),
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
                Err(error) if crate::measure::starved(&error) => {
                    eprintln!("{shape}: not measured on this busy machine: {error}")
                }
                // Only the rseq shapes may be missing (no rseq here).
                Err(error) => assert!(
                    !idspace::percid::IndexSource::CpuId.available(),
                    "{shape}: {error}"
                ),
            }
        }
        for shape in SUMS {
            let run = sum(shape, 5, Duration::from_millis(5));
            if shape == "rseq by mm_cid" && !IndexSource::MmCid.available() {
                assert!(run.is_err(), "no mm_cid here, yet {shape} ran");
                continue;
            }
            let run = run.unwrap_or_else(|e| panic!("{shape}: {e}"));
            assert!(run.ns > 0.0 && run.bytes > 0, "{shape}");
        }
        for shape in POOLS {
            let run = match pool(shape, 3, Duration::from_millis(50)) {
                Err(error) if crate::measure::starved(&error) => {
                    eprintln!("{shape}: not measured on this busy machine: {error}");
                    continue;
                }
                run => run.unwrap_or_else(|e| panic!("{shape}: {e}")),
            };
            assert!(run.ns > 0.0, "{shape}");
            // A per-CID cache makes an object when its own list and the shared one are empty,
            // even with objects waiting in the list of a CID the thread held a moment ago (it
            // migrated mid-burst): at most every list's capacity more than the threads ever
            // held at once. The other caches have one list per thread, or one in all.
            let stranded = if shape == "PerCidPool" {
                PerCidPool::<Object>::with_source(IndexSource::best(), CACHE)
                    .map_or(0, |pool| pool.slots() * CACHE)
            } else {
                0
            };
            assert!(
                run.held <= 3 * BURST + stranded,
                "{shape}: more objects held than ever taken at once (and stranded in other CIDs' lists)"
            );
        }
    }
}
