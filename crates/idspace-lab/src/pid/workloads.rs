//! The PID experiment's workloads, over any [`PidAllocator`], and the kernel's thread
//! create+join loop.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use idspace::pid::{NsId, PidAllocator, PID_MAX_LIMIT, ROOT};

use crate::measure::timed;
use crate::sys::thread::EmptyThread;

/// Builds the spaces a run allocates in: a chain of `depth` levels (each space with its init,
/// which stays), and for `own_space` a leaf per worker below the chain's second-deepest level.
/// Returns the target space of each worker.
pub fn spaces(
    d: &dyn PidAllocator,
    depth: usize,
    own_space: bool,
    workers: usize,
) -> Result<Vec<NsId>, String> {
    let err = |e: idspace::pid::PidError| format!("{}: {e}", d.name());
    d.alloc(ROOT, &[], 0).map_err(err)?; // the root's init
    let mut chain = vec![ROOT];
    for _ in 1..depth {
        let ns = d.new_ns(*chain.last().unwrap_or(&ROOT)).map_err(err)?;
        d.alloc(ns, &[], 0).map_err(err)?;
        chain.push(ns);
    }
    if !own_space || depth < 2 {
        return Ok(vec![*chain.last().unwrap_or(&ROOT); workers]);
    }
    let parent = chain[chain.len() - 2];
    (0..workers)
        .map(|worker| {
            let ns = d.new_ns(parent).map_err(err)?;
            d.alloc(ns, &[], worker).map_err(err)?;
            Ok(ns)
        })
        .collect()
}

/// will-it-scale's thread create/teardown, on the allocator: each worker allocates and frees in
/// its target space as fast as it can. Worker `w` uses slot `w`.
pub fn alloc_free(
    d: &dyn PidAllocator,
    targets: &[NsId],
    duration: Duration,
) -> Result<f64, String> {
    let failed = AtomicBool::new(false);
    let run = timed(targets.len(), duration, &|worker, stop| {
        let target = targets[worker];
        let mut ops = 0;
        while !stop.load(Ordering::Relaxed) {
            match d.alloc(target, &[], worker) {
                Ok(pid) => {
                    if d.free(target, pid.ids()[0], worker).is_err() {
                        failed.store(true, Ordering::Relaxed);
                        break;
                    }
                }
                Err(_) => {
                    failed.store(true, Ordering::Relaxed);
                    break;
                }
            }
            ops += 1;
        }
        ops
    });
    if failed.load(Ordering::Relaxed) {
        return Err(format!("{}: an allocation or free failed", d.name()));
    }
    // A failure is the reason to give, before any about the threads' overlap.
    let (elapsed, ops) = run?;
    Ok(ops as f64 / elapsed.as_secs_f64())
}

/// Lookups while allocations run: `lookers` threads look up a fixed set of live objects while
/// `allocators` threads allocate and free. Returns (lookups/s, allocations/s).
pub fn lookups_during_allocs(
    d: &dyn PidAllocator,
    lookers: usize,
    allocators: usize,
    duration: Duration,
) -> Result<(f64, f64), String> {
    d.alloc(ROOT, &[], 0).map_err(|e| e.to_string())?;
    let live: Vec<u32> = (0..1000)
        .map(|i| d.alloc(ROOT, &[], i % 4).map(|p| p.ids()[0]))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let lookups = AtomicU64::new(0);
    let allocs = AtomicU64::new(0);
    let missing = AtomicBool::new(false);
    let (elapsed, _) = timed(lookers + allocators, duration, &|worker, stop| {
        let mut ops = 0u64;
        if worker < lookers {
            let mut index = worker * 97;
            // The stop is checked after each operation, not before: every thread does at least
            // one, however late the scheduler runs it on a loaded machine.
            loop {
                index = (index + 31) % live.len();
                if !black_box(d.lookup(ROOT, live[index]).is_ok_and(|p| p.is_some())) {
                    missing.store(true, Ordering::Relaxed);
                }
                ops += 1;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            lookups.fetch_add(ops, Ordering::Relaxed);
        } else {
            loop {
                if let Ok(pid) = d.alloc(ROOT, &[], worker) {
                    let _ = d.free(ROOT, pid.ids()[0], worker);
                }
                ops += 1;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            allocs.fetch_add(ops, Ordering::Relaxed);
        }
        ops
    })?;
    if missing.load(Ordering::Relaxed) {
        return Err(format!("{}: a live object was not found", d.name()));
    }
    let seconds = elapsed.as_secs_f64();
    Ok((
        lookups.load(Ordering::Relaxed) as f64 / seconds,
        allocs.load(Ordering::Relaxed) as f64 / seconds,
    ))
}

/// Memory with `live` objects in the root (pid_max raised to the limit), then after freeing
/// them all: (bytes with them, bytes after).
pub fn memory(d: &dyn PidAllocator, live: usize) -> Result<(usize, usize), String> {
    d.set_pid_max(ROOT, PID_MAX_LIMIT)
        .map_err(|e| e.to_string())?;
    d.alloc(ROOT, &[], 0).map_err(|e| e.to_string())?;
    let pids: Vec<u32> = (0..live)
        .map(|i| d.alloc(ROOT, &[], i % 4).map(|p| p.ids()[0]))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let full = d.memory_bytes();
    for (i, id) in pids.into_iter().enumerate() {
        d.free(ROOT, id, (i + 1) % 4).map_err(|e| e.to_string())?;
    }
    Ok((full, d.memory_bytes()))
}

/// The kernel: `workers` threads each create and join a thread (doing nothing) in a loop, as
/// will-it-scale's thread create/teardown test. Returns create+join pairs per second.
pub fn kernel_threads(workers: usize, duration: Duration) -> Result<f64, String> {
    let failed = AtomicBool::new(false);
    let run = timed(workers, duration, &|_, stop| {
        let mut ops = 0;
        while !stop.load(Ordering::Relaxed) {
            let Some(thread) = EmptyThread::spawn() else {
                failed.store(true, Ordering::Relaxed);
                break;
            };
            thread.join();
            ops += 1;
        }
        ops
    });
    if failed.load(Ordering::Relaxed) {
        return Err("pthread_create failed".into());
    }
    // A failure is the reason to give, before any about the threads' overlap.
    let (elapsed, created) = run?;
    Ok(created as f64 / elapsed.as_secs_f64())
}
