//! The CID experiment's workloads.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use idspace::cid::{rseq, CidAllocator, CidError, Task};
use thread_local::ThreadLocal;

use crate::measure::timed;
use crate::sys::thread::EmptyThread;

/// Nanoseconds per switch pair (switch-in of one task and, with it, switch-out of the other) on
/// one CPU: `tasks` tasks exist, two alternate on CPU 0.
pub fn switch_pair(space: &dyn CidAllocator, tasks: usize, pairs: u32) -> Result<f64, String> {
    let all = if space.cpus() >= 64 {
        u64::MAX
    } else {
        (1 << space.cpus()) - 1
    };
    let tasks: Vec<Task> = (0..tasks)
        .map(|_| space.fork(all))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let (a, b) = (&tasks[0], &tasks[1]);
    // Warm up: both tasks have switched in (slow paths taken), and more than the 64 locks in a
    // row that bias a runqueue to a bound thread.
    for _ in 0..64 {
        space.switch(0, Some(a)).map_err(|e| e.to_string())?;
        space.switch(0, Some(b)).map_err(|e| e.to_string())?;
    }
    let start = Instant::now();
    for _ in 0..pairs {
        black_box(space.switch(0, Some(a)).map_err(|e| e.to_string())?);
        black_box(space.switch(0, Some(b)).map_err(|e| e.to_string())?);
    }
    Ok(start.elapsed().as_nanos() as f64 / f64::from(pairs) / 2.0)
}

/// Nanoseconds per read of the kernel's mm_cid.
pub fn rseq_read(reads: u32) -> Result<f64, String> {
    if !rseq::available() {
        return Err("rseq mm_cid is not available on this machine".into());
    }
    let start = Instant::now();
    for _ in 0..reads {
        black_box(rseq::current_mm_cid());
    }
    Ok(start.elapsed().as_nanos() as f64 / f64::from(reads))
}

/// tglx's thread create/teardown shape on a CID space: `pools` threads each fork `threads` tasks;
/// each task runs (is switched in on a CPU, preempting whatever ran there), then is woken once more
/// on the next CPU (the benchmark's threads wait on a condition variable before they die), then all
/// exit; repeated. Returns tasks created and torn down per second.
pub fn pools(
    space: &dyn CidAllocator,
    pools: usize,
    threads: usize,
    duration: Duration,
) -> Result<f64, String> {
    let cpus = space.cpus();
    let all = if cpus >= 64 {
        u64::MAX
    } else {
        (1 << cpus) - 1
    };
    let failed = AtomicBool::new(false);
    let (elapsed, created) = timed(pools, duration, &|pool, stop| {
        let mut created = 0;
        let mut mine = Vec::with_capacity(threads);
        while !stop.load(Ordering::Relaxed) {
            for index in 0..threads {
                match space.fork(all) {
                    Ok(task) => {
                        if space
                            .switch((pool * threads + index) % cpus, Some(&task))
                            .is_err()
                        {
                            failed.store(true, Ordering::Relaxed);
                        }
                        mine.push(task);
                    }
                    Err(_) => failed.store(true, Ordering::Relaxed),
                }
            }
            // The wake-up: each task runs once more, on the next CPU. If it still runs where it
            // was, the switch reports it running elsewhere and it simply goes on there.
            for (index, task) in mine.iter().enumerate() {
                let cpu = (pool * threads + index + 1) % cpus;
                match space.switch(cpu, Some(task)) {
                    Ok(_) | Err(CidError::RunningElsewhere) => {}
                    Err(_) => failed.store(true, Ordering::Relaxed),
                }
            }
            for task in mine.drain(..) {
                if space.exit(&task).is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
            }
            created += threads as u64;
        }
        created
    })?;
    if failed.load(Ordering::Relaxed) {
        return Err(format!("{}: a fork, switch or exit failed", space.name()));
    }
    Ok(created as f64 / elapsed.as_secs_f64())
}

/// The same shape with real threads: `pools` threads each create `threads` pthreads (which
/// return at once) and join them, repeatedly. Returns threads per second.
pub fn kernel_pools(pools: usize, threads: usize, duration: Duration) -> Result<f64, String> {
    let failed = AtomicBool::new(false);
    let (elapsed, created) = timed(pools, duration, &|_, stop| {
        let mut created = 0;
        let mut handles = Vec::with_capacity(threads);
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..threads {
                match EmptyThread::spawn() {
                    Some(handle) => handles.push(handle),
                    None => failed.store(true, Ordering::Relaxed),
                }
            }
            handles.drain(..).for_each(EmptyThread::join);
            created += threads as u64;
        }
        created
    })?;
    if failed.load(Ordering::Relaxed) {
        return Err("pthread_create failed".into());
    }
    Ok(created as f64 / elapsed.as_secs_f64())
}

/// CID footprint through a grow-then-shrink workload on one thread: tasks are forked up to
/// `3 × cpus`, then exited down to one; after each change every CPU switches in the next task
/// round-robin, and every fourth step runs the deferred work. Returns, per step, (users, CIDs
/// in use, budget).
pub fn footprint(space: &dyn CidAllocator) -> Vec<(u32, u32, u32)> {
    let cpus = space.cpus();
    let all = if cpus >= 64 {
        u64::MAX
    } else {
        (1 << cpus) - 1
    };
    let mut tasks: Vec<Task> = Vec::new();
    let mut trace = Vec::new();
    let mut next = 0usize;
    let peak = 3 * cpus;
    for step in 0..(2 * peak) {
        if step < peak {
            if let Ok(task) = space.fork(all) {
                tasks.push(task);
            }
        } else if tasks.len() > 1 {
            let task = tasks.remove(0);
            let _ = space.exit(&task);
        }
        for _ in 0..2 {
            for cpu in 0..cpus {
                // Tasks beyond the CPU count wait their turn; one running elsewhere is skipped.
                for _ in 0..tasks.len() {
                    next = (next + 1) % tasks.len().max(1);
                    if space.switch(cpu, Some(&tasks[next])).is_ok() {
                        break;
                    }
                }
            }
        }
        if step % 4 == 3 {
            space.run_deferred();
        }
        let state = space.state();
        trace.push((state.users, space.cids_in_use(), state.max_cids));
    }
    trace
}

/// How a counter shard is chosen.
#[derive(Clone, Copy)]
pub enum Shards<'a> {
    /// One shared atomic.
    Shared,
    /// A shard per thread (`thread_local::ThreadLocal`).
    PerThread,
    /// Shards indexed by a CID from our rework: each thread is a task that switches in on a CPU
    /// slot every `BATCH` increments (a time slice) and uses the CID it got.
    Rework(&'a dyn CidAllocator),
    /// Shards indexed by the kernel's mm_cid, read at every increment.
    Kernel,
}

const BATCH: u64 = 256;

/// Increments `shard` in batches until `stop`; returns the increments.
fn increment_until(shard: &AtomicU64, stop: &AtomicBool) -> u64 {
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..BATCH {
            shard.fetch_add(1, Ordering::Relaxed);
        }
        done += BATCH;
    }
    done
}

/// Worker `worker` as a task of `space`: switches in on its slot every batch and increments
/// the shard of the CID it got, until `stop`; returns the increments.
fn increment_by_rework_cid(
    space: &dyn CidAllocator,
    worker: usize,
    shards: &[CachePadded<AtomicU64>],
    stop: &AtomicBool,
) -> u64 {
    let all = if space.cpus() >= 64 {
        u64::MAX
    } else {
        (1 << space.cpus()) - 1
    };
    let Ok(task) = space.fork(all) else { return 0 };
    let slot = worker % space.cpus();
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        let Ok(Some(cid)) = space.switch(slot, Some(&task)) else {
            break;
        };
        let shard = &shards[cid as usize];
        for _ in 0..BATCH {
            shard.fetch_add(1, Ordering::Relaxed);
        }
        done += BATCH;
    }
    let _ = space.exit(&task);
    done
}

/// Increments the shard of the kernel's mm_cid, read at every increment, until `stop`;
/// returns the increments.
fn increment_by_mm_cid(shards: &[CachePadded<AtomicU64>], stop: &AtomicBool) -> u64 {
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..BATCH {
            let cid = rseq::current_mm_cid().unwrap_or(0) as usize;
            shards[cid % shards.len()].fetch_add(1, Ordering::Relaxed);
        }
        done += BATCH;
    }
    done
}

/// A sharded counter incremented by `threads` threads for `duration`: nanoseconds per
/// increment (per thread: elapsed × threads ÷ increments) and the bytes the shards take.
pub fn counter(
    shards: Shards<'_>,
    threads: usize,
    duration: Duration,
) -> Result<(f64, usize), String> {
    let padded = core::mem::size_of::<CachePadded<AtomicU64>>();
    let shared = CachePadded::new(AtomicU64::new(0));
    let per_thread: ThreadLocal<CachePadded<AtomicU64>> = ThreadLocal::new();
    let slots = match shards {
        Shards::Rework(space) => space.cpus(),
        Shards::Kernel => rseq::possible_cpus().ok_or("cannot read the possible CPUs")?,
        _ => 1,
    };
    if matches!(shards, Shards::Kernel) && !rseq::available() {
        return Err("rseq mm_cid is not available on this machine".into());
    }
    let array: Vec<CachePadded<AtomicU64>> = (0..slots)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();
    let (elapsed, total) = timed(threads, duration, &|worker, stop| match shards {
        Shards::Shared => increment_until(&shared, stop),
        Shards::PerThread => increment_until(
            per_thread.get_or(|| CachePadded::new(AtomicU64::new(0))),
            stop,
        ),
        Shards::Rework(space) => increment_by_rework_cid(space, worker, &array, stop),
        Shards::Kernel => increment_by_mm_cid(&array, stop),
    })?;
    let counted: u64 = match shards {
        Shards::Shared => shared.load(Ordering::Relaxed),
        Shards::PerThread => per_thread.iter().map(|s| s.load(Ordering::Relaxed)).sum(),
        _ => array.iter().map(|s| s.load(Ordering::Relaxed)).sum(),
    };
    if counted != total {
        return Err(format!("the counter lost increments: {counted} of {total}"));
    }
    let bytes = match shards {
        Shards::Shared => padded,
        Shards::PerThread => per_thread.iter().count() * padded,
        _ => slots * padded,
    };
    Ok((
        elapsed.as_nanos() as f64 * threads as f64 / total.max(1) as f64,
        bytes,
    ))
}
