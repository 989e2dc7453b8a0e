//! The mmcid experiment's workloads: tglx's thread pool program, CID footprint under thread
//! churn, and the compaction of a survivor's CID.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use idspace::cid::rseq;

use crate::measure::timed;

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
extern "C" fn pool_thread(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `arg` is a reference `Arc::into_raw` gave to this thread alone.
    let pool = unsafe { Arc::from_raw(arg as *const Pool) };
    let mut state = lock(&pool);
    state.alive += 1;
    pool.changed.notify_all();
    while state.die == 0 {
        state = pool.changed.wait(state).unwrap_or_else(|p| p.into_inner());
    }
    state.die -= 1;
    state.alive -= 1;
    pool.changed.notify_all();
    drop(state);
    core::ptr::null_mut()
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
                let arg = Arc::into_raw(Arc::clone(&pool)) as *mut libc::c_void;
                let mut handle: libc::pthread_t = 0;
                // SAFETY: a live out-parameter, default attributes, and a start routine that
                // takes over the reference `arg` carries.
                let rc = unsafe {
                    libc::pthread_create(&mut handle, core::ptr::null(), pool_thread, arg)
                };
                if rc == 0 {
                    // SAFETY: a thread just created and not joined or detached before.
                    unsafe { libc::pthread_detach(handle) };
                    started += 1;
                } else {
                    // SAFETY: the thread never started, so the reference is still ours.
                    drop(unsafe { Arc::from_raw(arg as *const Pool) });
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
    });
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

/// The kernel selftest's compaction check: one thread pinned to each allowed CPU reads its
/// mm_cid; all but the one with the largest exit; the survivor polls until its mm_cid reads 0.
/// Returns the time that took, `None` if it did not within `limit`, or an error if the test
/// cannot run here (no mm_cid, one CPU, or no thread got a CID above 0).
pub fn compaction(cpus: &[usize], limit: Duration) -> Result<Option<Duration>, String> {
    if !rseq::available() {
        return Err("rseq mm_cid is not available here".into());
    }
    if cpus.len() < 2 {
        return Err("compaction needs at least 2 allowed CPUs".into());
    }
    let cids: Mutex<Vec<(usize, u32)>> = Mutex::new(Vec::new());
    let survivor = AtomicU32::new(u32::MAX);
    let decided = AtomicBool::new(false);
    let result: Mutex<Option<Result<Option<Duration>, String>>> = Mutex::new(None);
    thread::scope(|scope| {
        for (me, &cpu) in cpus.iter().enumerate() {
            let (cids, survivor, decided, result) = (&cids, &survivor, &decided, &result);
            scope.spawn(move || {
                pin(cpu);
                // Let every thread run on its CPU for a while, as the selftest does.
                thread::sleep(Duration::from_millis(50));
                let cid = rseq::current_mm_cid().unwrap_or(0);
                cids.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((me, cid));
                while cids.lock().unwrap_or_else(|p| p.into_inner()).len() < cpus.len() {
                    thread::sleep(Duration::from_millis(1));
                }
                if me == 0 {
                    let all = cids.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let &(winner, top) = all
                        .iter()
                        .max_by_key(|&&(_, cid)| cid)
                        .expect("one per CPU");
                    if top == 0 {
                        *result.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(Err("no thread had a CID above 0".into()));
                    }
                    survivor.store(
                        if top == 0 {
                            u32::MAX - 1
                        } else {
                            winner as u32
                        },
                        Ordering::Relaxed,
                    );
                    decided.store(true, Ordering::Release);
                }
                // Acquire pairs with the Release above.
                while !decided.load(Ordering::Acquire) {
                    thread::sleep(Duration::from_millis(1));
                }
                if survivor.load(Ordering::Relaxed) != me as u32 {
                    return;
                }
                // Every other thread of the test is gone or going; time the survivor's CID.
                let start = Instant::now();
                let outcome = loop {
                    if rseq::current_mm_cid() == Some(0) {
                        break Some(start.elapsed());
                    }
                    if start.elapsed() > limit {
                        break None;
                    }
                    thread::sleep(Duration::from_millis(5));
                };
                *result.lock().unwrap_or_else(|p| p.into_inner()) = Some(Ok(outcome));
            });
        }
    });
    result
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .unwrap_or_else(|| Err("the survivor reported nothing".into()))
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: `cpu` came from the allowed set, below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: a valid set of the size passed, for the calling thread. A refusal leaves the
    // thread unpinned, which the test survives (it measures the CID, not the placement).
    unsafe { libc::sched_setaffinity(0, core::mem::size_of_val(&set), &set) };
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: a valid set of the size passed, for the calling thread.
    if unsafe { libc::sched_getaffinity(0, core::mem::size_of_val(&set), &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// The C library's version (`gnu_get_libc_version`).
pub fn glibc_version() -> String {
    // SAFETY: returns a pointer to a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    version.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workload_runs() {
        assert!(tglx_pools(2, 3, Duration::from_millis(20)).unwrap() > 0.0);
        if rseq::available() {
            let footprint = churn(4, 2).unwrap();
            assert!(footprint.distinct >= 1);
            assert!((footprint.max_cid as usize) < rseq::possible_cpus().unwrap());
        }
        assert!(!glibc_version().is_empty());
    }
}
