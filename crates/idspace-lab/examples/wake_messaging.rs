//! Runs the `wake` experiment's messaging workload (hackbench's shape) alone, over and over, on
//! our runtime and on tokio, alternating the runners: a driver for profilers and for A/B
//! comparisons of the scheduler's cost per message.
//!
//! ```text
//! wake_messaging [RUNNERS] [GROUPS] [LOOPS] [ROUNDS] [WORKERS]
//! ```
//!
//! `RUNNERS` is a comma-separated list of `locked`, `wakelist`, `wakelist-always` and `tokio`
//! (default: all four); `GROUPS` and `LOOPS` are hackbench's `-g` and `-l` (default 4 and 250);
//! each round runs every runner once, in turn (default 9 rounds) on `WORKERS` workers (default
//! 2). Prints every run, then each runner's medians of wall time and of CPU time per message.

use std::process::ExitCode;
use std::time::Duration;

use idspace_lab::driver::{arg, median, runner};
use idspace_lab::workloads::messaging;

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let runners = args
        .get(1)
        .map_or("locked,wakelist,wakelist-always,tokio", String::as_str)
        .split(',')
        .map(runner)
        .collect::<Result<Vec<_>, _>>()?;
    let groups: usize = arg(&args, 2, 4)?;
    let loops: usize = arg(&args, 3, 250)?;
    let rounds: usize = arg(&args, 4, 9)?;
    let workers: usize = arg(&args, 5, 2)?;
    let messages = (groups * 20 * 20 * loops) as f64;
    let mut results: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); runners.len()];
    for round in 0..rounds {
        for ((name, runner), (times, cpus)) in runners.iter().zip(results.iter_mut()) {
            let ran = runner.run(workers, messaging(groups, loops))?;
            let ms = ran.elapsed.as_secs_f64() * 1e3;
            let cpu = ran.cpu.as_secs_f64() * 1e6 / messages;
            let stats = ran.stats.map(|s| format!(" {s:?}")).unwrap_or_default();
            println!("{round} {name:16} {ms:8.2} ms  {cpu:.4} µs CPU/message{stats}");
            times.push(ms);
            cpus.push(cpu);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("medians over {rounds} rounds, -g {groups} -l {loops}, {workers} workers:");
    for ((name, _), (times, cpus)) in runners.iter().zip(results.iter_mut()) {
        println!(
            "{name:16} {:8.2} ms  {:.4} µs CPU/message",
            median(times),
            median(cpus)
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("wake_messaging: {error}");
            ExitCode::FAILURE
        }
    }
}
