//! Where the lazy design's periodic CID scan runs, and what that adds to switches (seed 003):
//! the same switches, each timed, with the scan at a tick on the switch path (6.4 to 6.18), in
//! a worker thread (the seed's `delayed_work`), or never (the reference).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use idspace::cid::{CidAllocator, CidError, LazyCids, ScanPlacement, Task};

use crate::measure::timed;

/// The lab's scan period: the kernel's 100 ms scaled down 100 times, so that a quick cell of a
/// quarter second sees hundreds of scans (a scan's cost does not depend on the period; how many
/// switches pay for it does).
pub const LAB_PERIOD: Duration = Duration::from_millis(1);

/// Threads of the churn load.
pub const CHURN_THREADS: usize = 4;

/// The placements compared, by column name.
pub const PLACEMENTS: [&str; 3] = ["no scan", "tick (6.4–6.18)", "worker (seed 003)"];

/// The placement of a column.
pub fn placement(column: &str) -> ScanPlacement {
    match column {
        "tick (6.4–6.18)" => ScanPlacement::Tick { period: LAB_PERIOD },
        "worker (seed 003)" => ScanPlacement::Worker { period: LAB_PERIOD },
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

/// What one run measured: per-switch time (mean and max, in ns, the timer's own cost
/// included, the same in every column), and the scans' probe (mean, max and sum in µs,
/// invocations).
pub struct Run {
    /// Mean ns per switch.
    pub switch_mean: f64,
    /// Longest switch, ns.
    pub switch_max: f64,
    /// Mean scan duration, µs.
    pub scan_mean: f64,
    /// Longest scan, µs.
    pub scan_max: f64,
    /// Summed scan duration, µs.
    pub scan_sum: f64,
    /// Scans run.
    pub invocations: f64,
}

/// Per-thread switch timings, summed.
#[derive(Default)]
struct Timings {
    sum: AtomicU64,
    count: AtomicU64,
    max: AtomicU64,
}

impl Timings {
    fn add(&self, sum: u64, count: u64, max: u64) {
        // Relaxed: totals read after the threads are joined.
        self.sum.fetch_add(sum, Ordering::Relaxed);
        self.count.fetch_add(count, Ordering::Relaxed);
        self.max.fetch_max(max, Ordering::Relaxed);
    }
}

/// Times one switch; returns its ns.
fn timed_switch(
    space: &dyn CidAllocator,
    cpu: usize,
    task: Option<&Task>,
) -> Result<u64, CidError> {
    let start = Instant::now();
    let result = space.switch(cpu, task);
    let ns = start.elapsed().as_nanos() as u64;
    match result {
        Ok(_) | Err(CidError::RunningElsewhere) => Ok(ns),
        Err(error) => Err(error),
    }
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
    let timings = Timings::default();
    let failed = AtomicBool::new(false);
    let threads = match load {
        Load::None => 1,
        Load::Churn => CHURN_THREADS,
    };
    timed(threads, duration, &|thread, stop| {
        let (mut sum, mut count, mut max) = (0u64, 0u64, 0u64);
        let mut note = |result: Result<u64, CidError>| match result {
            Ok(ns) => {
                sum += ns;
                count += 1;
                max = max.max(ns);
            }
            Err(_) => failed.store(true, Ordering::Relaxed),
        };
        match load {
            Load::None => {
                let (Ok(a), Ok(b)) = (space.fork(all), space.fork(all)) else {
                    failed.store(true, Ordering::Relaxed);
                    return 0;
                };
                while !stop.load(Ordering::Relaxed) {
                    note(timed_switch(&space, 0, Some(&a)));
                    note(timed_switch(&space, 0, Some(&b)));
                }
            }
            Load::Churn => {
                let mut round = thread;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(task) = space.fork(all) else {
                        failed.store(true, Ordering::Relaxed);
                        break;
                    };
                    for step in 0..4 {
                        note(timed_switch(&space, (round + step) % cpus, Some(&task)));
                    }
                    if space.exit(&task).is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    round += CHURN_THREADS;
                }
            }
        }
        timings.add(sum, count, max);
        count
    });
    if failed.load(Ordering::Relaxed) {
        return Err("a fork, switch or exit failed".into());
    }
    let stats = space.scan_stats();
    let count = timings.count.load(Ordering::Relaxed).max(1);
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    Ok(Run {
        switch_mean: timings.sum.load(Ordering::Relaxed) as f64 / count as f64,
        switch_max: timings.max.load(Ordering::Relaxed) as f64,
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
                let run = run(placement(column), load, 4, Duration::from_millis(20)).unwrap();
                assert!(run.switch_mean > 0.0, "{column}, {load:?}");
                if column == "no scan" {
                    assert_eq!(run.invocations, 0.0);
                }
            }
        }
        // The worker scans whatever the switches do.
        let run = run(
            placement("worker (seed 003)"),
            Load::None,
            4,
            Duration::from_millis(30),
        )
        .unwrap();
        assert!(run.invocations > 0.0);
    }
}
