//! Running a measurement over every candidate of an experiment, repeatedly, and taking medians.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use super::stats::{median, ratio};
use super::Progress;

/// Runs `measure` for every candidate `repetitions` times (candidates interleaved within each
/// repetition, so that drift in the machine's speed hits all alike) and returns each
/// candidate's per-metric medians. A candidate that fails gets no values and a note in
/// `notes`; the others go on.
pub fn medians<C>(
    candidates: &[C],
    name: impl Fn(&C) -> &str,
    repetitions: usize,
    progress: &mut Progress,
    label: &str,
    notes: &mut Vec<String>,
    measure: impl Fn(&C) -> Result<Vec<f64>, String>,
) -> Vec<Vec<Option<f64>>> {
    let mut samples: Vec<Option<Vec<Vec<f64>>>> = vec![Some(Vec::new()); candidates.len()];
    for _ in 0..repetitions {
        for (index, candidate) in candidates.iter().enumerate() {
            progress.step(&format!("{label}: {}", name(candidate)));
            let Some(runs) = samples[index].as_mut() else {
                continue;
            };
            match measure(candidate) {
                Ok(metrics) => runs.push(metrics),
                Err(error) => {
                    notes.push(format!("*{label}, {}:* {error}", name(candidate)));
                    samples[index] = None;
                }
            }
        }
    }
    samples
        .into_iter()
        .map(|runs| {
            let Some(runs) = runs else {
                return Vec::new();
            };
            let metrics = runs.first().map_or(0, Vec::len);
            (0..metrics)
                .map(|m| median(&runs.iter().map(|r| r[m]).collect::<Vec<_>>()))
                .collect()
        })
        .collect()
}

/// Column `metric` of each candidate's medians.
pub fn column(medians: &[Vec<Option<f64>>], metric: usize) -> Vec<Option<f64>> {
    medians
        .iter()
        .map(|m| m.get(metric).copied().flatten())
        .collect()
}

/// Each value divided by `reference`.
pub fn ratios_to(values: &[Option<f64>], reference: Option<f64>) -> Vec<Option<f64>> {
    values.iter().map(|&v| ratio(v, reference)).collect()
}

/// Runs `work(worker, stop)` on `workers` threads that start together (a barrier), lets them
/// run for `duration`, then raises `stop`; returns the elapsed time and the sum of what the
/// workers return (their operation counts).
pub fn timed(
    workers: usize,
    duration: Duration,
    work: &(dyn Fn(usize, &AtomicBool) -> u64 + Sync),
) -> (Duration, u64) {
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(workers + 1);
    let total = AtomicU64::new(0);
    let start = thread::scope(|scope| {
        for worker in 0..workers {
            let (stop, barrier, total) = (&stop, &barrier, &total);
            scope.spawn(move || {
                barrier.wait();
                total.fetch_add(work(worker, stop), Ordering::Relaxed);
            });
        }
        barrier.wait();
        let start = Instant::now();
        thread::sleep(duration);
        // Relaxed: the flag only ends the loops; the counts are read after the joins.
        stop.store(true, Ordering::Relaxed);
        start
    });
    (start.elapsed(), total.load(Ordering::Relaxed))
}
