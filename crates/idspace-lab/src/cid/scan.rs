//! Where the lazy design's periodic CID scan runs, and what that adds to switches (the lazy design
//! of Linux 6.4–6.18): the same switches, each timed, with the scan at a tick on the switch path
//! (6.4 to 6.18), in a worker thread (a `delayed_work`), or never (the reference).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use idspace::cid::{CidAllocator, CidError, LazyCids, ScanPlacement};

use crate::measure::timed;

/// The lab's scan period: the kernel's 100 ms scaled down 100 times, so that a quick cell of a
/// quarter second sees hundreds of scans (a scan's cost does not depend on the period; how many
/// switches pay for it does).
pub const LAB_PERIOD: Duration = Duration::from_millis(1);

/// Threads of the churn load.
pub const CHURN_THREADS: usize = 4;

/// The placements compared, by column name.
pub const PLACEMENTS: [&str; 3] = ["no scan", "tick (6.4–6.18)", "worker (delayed work)"];

/// The placement of a column.
pub fn placement(column: &str) -> ScanPlacement {
    match column {
        "tick (6.4–6.18)" => ScanPlacement::Tick { period: LAB_PERIOD },
        "worker (delayed work)" => ScanPlacement::Worker { period: LAB_PERIOD },
        _ => ScanPlacement::OnDemand,
    }
}

/// The loads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Load {
    /// One thread switches two tasks in turn on CPU 0; the other CPUs stay idle.
    None,
    /// [`CHURN_THREADS`] threads fork tasks, switch each in on a CPU and then on the next one
    /// (a migration), and exit them.
    Churn,
}

/// What one run measured: the load's cost per unit (ns per switch with no load, ns per task
/// under churn: its fork, four switches and exit), timed in bulk so that no timer sits on the
/// switch path, and the scans' probe (mean, max and sum in µs, invocations).
pub struct Run {
    /// Mean ns per unit of the load, per thread.
    pub per_unit: f64,
    /// Mean scan duration, µs.
    pub scan_mean: f64,
    /// Longest scan, µs.
    pub scan_max: f64,
    /// Summed scan duration, µs.
    pub scan_sum: f64,
    /// Scans run.
    pub invocations: f64,
}

/// Runs `load` on a space of `cpus` CPUs whose scan runs where `placement` says, for
/// `duration`.
pub fn run(
    placement: ScanPlacement,
    load: Load,
    cpus: usize,
    duration: Duration,
) -> Result<Run, String> {
    let space = LazyCids::with_scan(cpus, placement).map_err(|e| e.to_string())?;
    let all = if cpus >= 64 {
        u64::MAX
    } else {
        (1 << cpus) - 1
    };
    let failed = AtomicBool::new(false);
    let fail = || failed.store(true, Ordering::Relaxed);
    let threads = match load {
        Load::None => 1,
        Load::Churn => CHURN_THREADS,
    };
    let run = timed(threads, duration, &|thread, stop| {
        let mut units = 0u64;
        match load {
            Load::None => {
                let (Ok(a), Ok(b)) = (space.fork(all), space.fork(all)) else {
                    fail();
                    return 0;
                };
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        if black_box(space.switch(0, Some(&a))).is_err()
                            || black_box(space.switch(0, Some(&b))).is_err()
                        {
                            fail();
                        }
                    }
                    units += 128;
                }
            }
            Load::Churn => {
                let mut round = thread;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(task) = space.fork(all) else {
                        fail();
                        break;
                    };
                    for step in 0..4 {
                        match space.switch((round + step) % cpus, Some(&task)) {
                            Ok(_) | Err(CidError::RunningElsewhere) => {}
                            Err(_) => fail(),
                        }
                    }
                    if space.exit(&task).is_err() {
                        fail();
                    }
                    round += CHURN_THREADS;
                    units += 1;
                }
            }
        }
        units
    });
    if failed.load(Ordering::Relaxed) {
        return Err("a fork, switch or exit failed".into());
    }
    // A failure is the reason to give, before any about the threads' overlap.
    let (elapsed, units) = run?;
    let stats = space.scan_stats();
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    Ok(Run {
        per_unit: elapsed.as_nanos() as f64 * threads as f64 / units.max(1) as f64,
        scan_mean: micros(stats.mean()),
        scan_max: micros(stats.max),
        scan_sum: micros(stats.total),
        invocations: stats.invocations as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placement_and_load_runs() {
        for column in PLACEMENTS {
            for load in [Load::None, Load::Churn] {
                let run = run(placement(column), load, 4, Duration::from_millis(20));
                let Some(run) = crate::measure::unless_not_at_once(run) else {
                    continue;
                };
                assert!(run.per_unit > 0.0, "{column}, {load:?}");
                if column == "no scan" {
                    assert_eq!(run.invocations, 0.0);
                }
            }
        }
        // The worker scans whatever the switches do.
        let run = run(
            placement("worker (delayed work)"),
            Load::None,
            4,
            Duration::from_millis(30),
        )
        .unwrap();
        assert!(run.invocations > 0.0);
    }
}
