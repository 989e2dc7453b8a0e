//! The mmcid experiment's workloads: tglx's thread pool program, CID footprint under thread
//! churn, and the compaction of a survivor's CID.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use idspace::cid::rseq;

use crate::measure::timed;
use crate::sys::forked::run_forked;
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

/// How many fresh child processes the compaction set-up may try before the row is refused.
const SETUP_ATTEMPTS: usize = 5;

/// What a compaction child reports, through shared memory (plain data).
#[derive(Clone, Copy)]
struct ChildOutcome {
    /// The survivor's mm_cid once it is alone, before timing.
    first: u32,
    /// Nanoseconds until its mm_cid read 0; `u64::MAX` if not within the limit, or if the
    /// set-up failed (`first` is then 0 or unreadable).
    took_ns: u64,
}

/// Compaction, after the kernel selftest's shape, in a child process of its own so that the
/// survivor is the process's only thread (the lab's other threads would keep CIDs of the same
/// mm). In the child, the survivor starts on the first CPU with CID 0 and makes a holder thread
/// on the same CPU, then sleeps; the holder runs there, so it takes that CPU's CID 0, moves the
/// sleeping survivor to the second CPU and wakes it. The survivor wakes on a CPU with no CID
/// while the holder still runs with CID 0, so it takes CID 1; then the holder exits and CID 0
/// is free. (Set up from the survivor's side instead, by spinning while other threads start,
/// the survivor kept CID 0 on a quiet machine.) The child checks the survivor's CID before
/// timing: one that reads 0 would measure nothing, so that child is discarded and a fresh one
/// tried, [`SETUP_ATTEMPTS`] times; then the test is refused with what it read.
///
/// Between polls the survivor sleeps, as in the selftest, or (`running`) spins, so that the
/// kernel's tick finds it on the CPU (before the rewrite, compaction ran from the tick).
/// Returns the survivor's mm_cid when it was left alone (never 0) and the time until it read 0
/// (`None` if not within `limit`), or an error if the test cannot run here.
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
    let mut seen = Vec::with_capacity(SETUP_ATTEMPTS);
    for _ in 0..SETUP_ATTEMPTS {
        let outcome = run_forked(1, &mut (), &|_, _| {
            Some(compaction_child(cpus, limit, running))
        })?
        .into_iter()
        .next()
        .flatten()
        .ok_or("the compaction child returned nothing")?;
        if outcome.first != 0 && outcome.first != u32::MAX {
            let took = (outcome.took_ns != u64::MAX).then(|| Duration::from_nanos(outcome.took_ns));
            return Ok((outcome.first, took));
        }
        seen.push(outcome.first);
    }
    Err(format!(
        "refused: in {SETUP_ATTEMPTS} fresh processes the survivor never held a CID above 0 once \
         alone (it read {seen:?}; {} means unreadable), so there was nothing to compact",
        u32::MAX
    ))
}

/// The child's side of [`compaction`]: the set-up, its check, then the timing.
fn compaction_child(cpus: &[usize], limit: Duration, running: bool) -> ChildOutcome {
    pin(cpus[0]);
    // SAFETY: gettid has no preconditions.
    let survivor = unsafe { libc::gettid() };
    // 0: the holder is starting; 1: the survivor may run on (it was moved); 2: the holder may exit.
    let stage = Mutex::new(0u8);
    let changed = Condvar::new();
    thread::scope(|scope| {
        scope.spawn(|| {
            // Switched in on the survivor's CPU while the survivor sleeps, this thread takes
            // the CPU's CID (0), and keeps it while it stays on the CPU.
            pin(cpus[0]);
            CpuSet::only(cpus[1]).apply_to(survivor);
            *lock_stage(&stage) = 1;
            changed.notify_all();
            let mut at = lock_stage(&stage);
            while *at < 2 {
                // Stay on the CPU (a spin, not a sleep) so that CID 0 stays in use.
                drop(at);
                std::hint::spin_loop();
                at = lock_stage(&stage);
            }
        });
        let mut at = lock_stage(&stage);
        while *at < 1 {
            at = changed
                .wait(at)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        drop(at);
        // Switched in on the second CPU while the holder runs with CID 0, the survivor took
        // CID 1 there; the holder may go.
        *lock_stage(&stage) = 2;
    });
    let first = rseq::current_mm_cid().unwrap_or(u32::MAX);
    if first == 0 || first == u32::MAX {
        return ChildOutcome {
            first,
            took_ns: u64::MAX,
        };
    }
    let start = Instant::now();
    let took = loop {
        if rseq::current_mm_cid() == Some(0) {
            break start.elapsed().as_nanos() as u64;
        }
        if start.elapsed() > limit {
            break u64::MAX;
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
    ChildOutcome {
        first,
        took_ns: took,
    }
}

fn lock_stage(stage: &Mutex<u8>) -> std::sync::MutexGuard<'_, u8> {
    stage
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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

    #[test]
    fn the_compaction_survivor_starts_above_cid_0_or_is_refused() {
        let cpus = allowed_cpus();
        if !rseq::available() || cpus.len() < 2 {
            return;
        }
        match compaction(&cpus[..2], Duration::from_millis(50), true) {
            Ok((first, _)) => assert!(first >= 1 && first < cpus.len() as u32, "{first}"),
            Err(error) => assert!(error.starts_with("refused"), "{error}"),
        }
    }
}
