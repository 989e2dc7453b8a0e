//! Runs the `wake` experiment's wakeup-latency workload (schbench's shape) alone, over and over,
//! on our runtime and on tokio, alternating the runners: an A/B harness for placement changes,
//! which move these percentiles.
//!
//! ```text
//! wake_latency [RUNNERS] [MESSENGERS] [WORKERS_PER_MESSENGER] [REPEATS]
//! ```
//!
//! `RUNNERS` as in `wake_messaging` (default: all four); the shape defaults to the experiment's
//! `-m 2 -t 8` (300 rounds of 1 ms, 30 µs of work per wakeup) on 2 workers. Prints every run's
//! p50, p99 and p99.9 (µs) and CPU µs per wakeup, then each runner's medians over the repeats.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idspace_lab::driver::{arg, median, runner};
use idspace_lab::primitives::Timer;
use idspace_lab::workloads::{lab_timer, latency, percentile, LatencyShape, Runner};

/// p50, p99, p99.9 (µs) and CPU µs per wakeup of one run.
fn one_run(runner: Runner, shape: LatencyShape, timer: &Timer) -> Result<[f64; 4], String> {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let tasks = latency(shape, lab_timer(&timer.handle()), &samples);
    let ran = runner.run(2, tasks)?;
    let mut samples = std::mem::take(&mut *samples.lock().map_err(|e| e.to_string())?);
    samples.sort_unstable();
    let at = |p| percentile(&samples, p).map_or(f64::NAN, |ns| ns / 1e3);
    let wakeups = (shape.messengers * shape.workers) as f64 * shape.rounds as f64;
    Ok([
        at(50.0),
        at(99.0),
        at(99.9),
        ran.cpu.as_secs_f64() * 1e6 / wakeups,
    ])
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let runners = args
        .get(1)
        .map_or("locked,wakelist,wakelist-always,tokio", String::as_str)
        .split(',')
        .map(runner)
        .collect::<Result<Vec<_>, _>>()?;
    let shape = LatencyShape {
        messengers: arg(&args, 2, 2)?,
        workers: arg(&args, 3, 8)?,
        rounds: 300,
        interval: Duration::from_millis(1),
        cputime: Duration::from_micros(30),
    };
    let repeats: usize = arg(&args, 4, 5)?;
    let timer = Timer::start()?;
    let mut results = vec![[const { Vec::new() }; 4]; runners.len()];
    for repeat in 0..repeats {
        for ((name, runner), columns) in runners.iter().zip(results.iter_mut()) {
            let values = one_run(*runner, shape, &timer)?;
            println!(
                "{repeat} {name:16} p50 {:7.1}  p99 {:7.1}  p99.9 {:7.1} µs  {:6.2} µs CPU/wakeup",
                values[0], values[1], values[2], values[3]
            );
            for (column, value) in columns.iter_mut().zip(values) {
                column.push(value);
            }
        }
    }
    println!(
        "medians over {repeats} repeats, -m {} -t {}:",
        shape.messengers, shape.workers
    );
    for ((name, _), columns) in runners.iter().zip(results.iter_mut()) {
        let [p50, p99, p999, cpu] = columns;
        println!(
            "{name:16} p50 {:7.1}  p99 {:7.1}  p99.9 {:7.1} µs  {:6.2} µs CPU/wakeup",
            median(p50),
            median(p99),
            median(p999),
            median(cpu)
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("wake_latency: {error}");
            ExitCode::FAILURE
        }
    }
}
