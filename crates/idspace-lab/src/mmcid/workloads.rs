//! The mmcid experiment's workloads: tglx's thread pool program, CID footprint under thread
//! churn, and the compaction of a survivor's CID.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use idspace::cid::rseq;

use crate::measure::timed;
use crate::sys::thread::{self as raw, CpuSet};

pub(crate) use crate::sys::thread::glibc_version;

/// One pool's shared state, as in tglx's program: threads count themselves in, wait until told
/// to die, and count themselves out.
#[derive(Default)]
struct Pool {
    state: Mutex<PoolState>,
    changed: Condvar,
}

#[derive(Default)]
struct PoolState {
    /// Threads alive and counted in.
    alive: u32,
    /// Threads told to die and not yet gone.
    die: u32,
}

fn lock(pool: &Pool) -> std::sync::MutexGuard<'_, PoolState> {
    pool.state.lock().unwrap_or_else(|p| p.into_inner())
}

/// A pool thread (`tfn`): count in, wait to be told to die, count out.
fn pool_thread(pool: Arc<Pool>) {
    let mut state = lock(&pool);
    state.alive += 1;
    pool.changed.notify_all();
    while state.die == 0 {
        state = pool.changed.wait(state).unwrap_or_else(|p| p.into_inner());
    }
    state.die -= 1;
    state.alive -= 1;
    pool.changed.notify_all();
}

/// Tglx's pool program with pthreads: `pools` threads each create `threads` detached pthreads,
/// wait until all have started, tell them to die and wait until all are gone, again and again.
/// Returns threads created per second.
pub fn tglx_pools(pools: usize, threads: usize, duration: Duration) -> Result<f64, String> {
    let failed = AtomicBool::new(false);
    let (elapsed, created) = timed(pools, duration, &|_, stop| {
        let pool = Arc::new(Pool::default());
        let mut created = 0;
        while !stop.load(Ordering::Relaxed) {
            let mut started = 0;
            for _ in 0..threads {
                let pool = Arc::clone(&pool);
                if raw::spawn_detached(move || pool_thread(pool)) {
                    started += 1;
                } else {
                    failed.store(true, Ordering::Relaxed);
                }
            }
            let mut state = lock(&pool);
            while state.alive < started {
                state = pool.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            state.die = started;
            pool.changed.notify_all();
            while state.alive > 0 {
                state = pool.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            created += u64::from(started);
        }
        created
    })?;
    if failed.load(Ordering::Relaxed) {
        return Err("pthread_create failed".into());
    }
    Ok(created as f64 / elapsed.as_secs_f64())
}

/// What the churn saw.
pub struct Footprint {
    /// The largest mm_cid any thread read.
    pub max_cid: u32,
    /// How many different mm_cid values were read.
    pub distinct: usize,
    /// The most threads alive at once (the waves' size plus the lab's thread).
    pub live: usize,
}

/// Waves of `width` threads, `waves` times: each reads its mm_cid after starting, after a
/// yield and after a short sleep, so that it is read while threads come and go.
pub fn churn(width: usize, waves: usize) -> Result<Footprint, String> {
    if !rseq::available() {
        return Err("rseq mm_cid is not available here".into());
    }
    let seen = Mutex::new(HashSet::new());
    let max = AtomicU32::new(0);
    for _ in 0..waves {
        thread::scope(|scope| {
            for _ in 0..width {
                let (seen, max) = (&seen, &max);
                scope.spawn(move || {
                    for pause in 0..3 {
                        match pause {
                            1 => thread::yield_now(),
                            2 => thread::sleep(Duration::from_micros(200)),
                            _ => {}
                        }
                        if let Some(cid) = rseq::current_mm_cid() {
                            max.fetch_max(cid, Ordering::Relaxed);
                            seen.lock().unwrap_or_else(|p| p.into_inner()).insert(cid);
                        }
                    }
                });
            }
        });
    }
    let distinct = seen.lock().unwrap_or_else(|p| p.into_inner()).len();
    Ok(Footprint {
        max_cid: max.load(Ordering::Relaxed),
        distinct,
        live: width + 1,
    })
}

/// Compaction, after the kernel selftest's shape: one thread on each allowed CPU, each pinned,
/// runs a while; then all exit but one, and that survivor polls until its mm_cid reads 0. The
/// survivor is the calling thread (pinned to the first CPU meanwhile, its affinity restored
/// after), so that no other thread of the process holds on to a CID: with the caller kept
/// waiting beside the others, 2 users would stay on a 2-CPU machine and a CID of 1 would be
/// within the optimum. Between polls the survivor sleeps, as in the selftest, or (`running`)
/// spins, so that the kernel's tick finds it on the CPU (before the rewrite, compaction ran from
/// the tick). Returns the survivor's mm_cid right after the others exit and the time until it
/// read 0 (zero if it was 0 already; `None` if not within `limit`), or an error if the test
/// cannot run here.
pub fn compaction(
    cpus: &[usize],
    limit: Duration,
    running: bool,
) -> Result<(u32, Option<Duration>), String> {
    if !rseq::available() {
        return Err("rseq mm_cid is not available here".into());
    }
    if cpus.len() < 2 {
        return Err("compaction needs at least 2 allowed CPUs".into());
    }
    let saved = CpuSet::current().ok_or("cannot read this thread's affinity")?;
    pin(cpus[0]);
    thread::scope(|scope| {
        for &cpu in &cpus[1..] {
            scope.spawn(move || {
                pin(cpu);
                let spin = Instant::now();
                while spin.elapsed() < Duration::from_millis(50) {
                    std::hint::black_box(rseq::current_mm_cid());
                }
            });
        }
        thread::sleep(Duration::from_millis(50));
    });
    let start = Instant::now();
    let first = rseq::current_mm_cid().unwrap_or(0);
    let outcome = loop {
        if rseq::current_mm_cid() == Some(0) {
            break Some(start.elapsed());
        }
        if start.elapsed() > limit {
            break None;
        }
        if running {
            let spin = Instant::now();
            while spin.elapsed() < Duration::from_millis(5) {
                std::hint::spin_loop();
            }
        } else {
            thread::sleep(Duration::from_millis(5));
        }
    };
    saved.apply();
    Ok((first, outcome))
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    CpuSet::only(cpu).apply();
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    CpuSet::current().map_or_else(Vec::new, |set| set.cpus())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workload_runs() {
        let rate = crate::measure::unless_not_at_once(tglx_pools(2, 3, Duration::from_millis(20)));
        assert!(rate.is_none_or(|rate| rate > 0.0));
        if rseq::available() {
            let footprint = churn(4, 2).unwrap();
            assert!(footprint.distinct >= 1);
            assert!((footprint.max_cid as usize) < rseq::possible_cpus().unwrap());
        }
        assert!(!glibc_version().is_empty());
    }
}
