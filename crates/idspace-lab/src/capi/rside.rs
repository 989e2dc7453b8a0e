//! The Rust side: the same operations on the same structures, called directly (inlined
//! where the library allows), on threads that run at once for a window as the C side's do.

use std::hint::black_box;

use idspace::cid::rseq;
use idspace::percid::{PerCidCounter, PerCidPool};
use idspace::pid::{PerCpu, PidAllocator, ROOT};
use idspace::table::{IdTable, ScaledHash};

use std::time::Duration;

use crate::measure::{window_or_longer, Windowed};

/// ns per operation per thread, from a run's elapsed time and operation count.
fn ns(threads: usize, run: Windowed) -> f64 {
    run.elapsed.as_nanos() as f64 * threads as f64 / run.ops.max(1) as f64
}

/// `PerCidCounter::add(1)`; an error if the sum is not exact.
pub(crate) fn counter(threads: usize, window: Duration) -> Result<f64, String> {
    let counter = PerCidCounter::new();
    let run = window_or_longer(threads, window, &|n| {
        for _ in 0..n {
            counter.add(1);
        }
    })?;
    if counter.sum() != run.made {
        return Err(format!(
            "counter: sum {} of {} adds",
            counter.sum(),
            run.made
        ));
    }
    Ok(ns(threads, run))
}

/// `ScaledHash` create, lookup (a copy of the value, as C's), remove, each thread its own
/// owner.
pub(crate) fn table(threads: usize, window: Duration) -> Result<f64, String> {
    let table = ScaledHash::<u64>::new();
    let owners = std::sync::atomic::AtomicU64::new(0);
    let failures = std::sync::atomic::AtomicU64::new(0);
    let run = window_or_longer(threads, window, &|n| {
        let owner = owners.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for i in 0..n {
            let ok = table.create(owner, i).is_ok_and(|id| {
                table.get_copied(owner, id) == Some(i) && table.remove(owner, id).is_ok()
            });
            if !ok {
                failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    })?;
    match failures.into_inner() {
        0 => Ok(ns(threads, run)),
        failed => Err(format!("table: {failed} operations failed")),
    }
}

/// `PerCpu` alloc and free in the root namespace.
pub(crate) fn pid(threads: usize, window: Duration) -> Result<f64, String> {
    let slots = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pids = PerCpu::new(slots).map_err(|e| e.to_string())?;
    // The namespace's init stays: freeing it would leave the namespace dead.
    let _init = pids.alloc(ROOT, &[], 0).map_err(|e| e.to_string())?;
    let failures = std::sync::atomic::AtomicU64::new(0);
    let run = window_or_longer(threads, window, &|n| {
        for _ in 0..n {
            // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
            let cpu = usize::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(0) % slots;
            let ok = pids
                .alloc(ROOT, &[], cpu)
                .is_ok_and(|pid| pids.free(ROOT, pid.levels()[0].1, cpu).is_ok());
            if !ok {
                failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    })?;
    match failures.into_inner() {
        0 => Ok(ns(threads, run)),
        failed => Err(format!("pid: {failed} operations failed")),
    }
}

/// `PerCidPool` give then take, one object per thread.
pub(crate) fn pool(threads: usize, window: Duration) -> Result<f64, String> {
    let pool = PerCidPool::<[u8; 64]>::with_source(idspace::percid::IndexSource::best(), 64)
        .map_err(|e| e.to_string())?;
    let made = std::sync::atomic::AtomicUsize::new(0);
    let make = || {
        made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::new([0u8; 64])
    };
    let run = window_or_longer(threads, window, &|n| {
        let mut object = make();
        for _ in 0..n {
            pool.give(object);
            // A thread that moved to another CID in between may find nothing at hand there.
            object = pool.take().unwrap_or_else(make);
        }
        pool.give(object);
    })?;
    let made = made.into_inner();
    if pool.held() != made {
        return Err(format!("pool: {} objects back of {made}", pool.held()));
    }
    Ok(ns(threads, run))
}

/// `rseq::current_mm_cid()`.
pub(crate) fn mm_cid(threads: usize, window: Duration) -> Result<f64, String> {
    let run = window_or_longer(threads, window, &|n| {
        for _ in 0..n {
            black_box(rseq::current_mm_cid());
        }
    })?;
    Ok(ns(threads, run))
}
