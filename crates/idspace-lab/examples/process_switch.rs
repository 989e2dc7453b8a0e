//! Runs the `process` experiment's switch workload alone: ping-pong on one worker with no
//! hooks, or with each pair a process (its leader and one thread) taking a CID from a design at
//! every switch-in. A driver for instruction counts (callgrind) and for A/B timing of what the
//! IDs add to a switch.
//!
//! ```text
//! process_switch [HOOKS] [PAIRS] [ROUNDS] [REPEATS]
//! ```
//!
//! `HOOKS` is a comma-separated list of `none`, `rework`, `bitmap` and `lazy` (default: all
//! four); each runs `PAIRS` pairs (default 2) of `ROUNDS` round trips (default 250000),
//! `REPEATS` times in turn (default 1). Prints each run's CPU time per switch, then each one's
//! median. Under callgrind, run it twice with different `ROUNDS` and one `HOOKS`: the
//! difference of the totals over the difference of the switches is the cost per switch,
//! without the runtime's start and end.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use idspace::cid::{BitmapCids, LazyCids, Rework};
use idspace::pid::{PerCpu, ROOT};
use idspace::process::{CidDesign, ProcessHooks};
use idspace::sched::{Builder, NoHooks, Policy};
use idspace::table::ScaledHash;
use idspace_lab::cputime::{self, Scope};
use idspace_lab::driver::{arg, median};
use idspace_lab::workloads::{ping_pong, BoxedTask};

/// The CPU time this process has used so far, all threads together.
fn cpu_time() -> Result<Duration, String> {
    cputime::used(Scope::Process)
}

/// Ping-pong on a runtime of one worker without hooks; the CPU time it took.
fn plain(tasks: Vec<BoxedTask>) -> Result<Duration, String> {
    let runtime = Builder::new()
        .workers(1)
        .policy(Policy::Wakelist)
        .hooks(Arc::new(NoHooks))
        .build()
        .map_err(|e| e.to_string())?;
    let start = cpu_time()?;
    let joins: Vec<_> = tasks.into_iter().map(|task| runtime.spawn(task)).collect();
    for join in joins {
        join.join().map_err(|e| e.to_string())?;
    }
    Ok(cpu_time()?.saturating_sub(start))
}

/// Ping-pong with each pair a process (leader, then a thread of it), CIDs from `C`.
fn processes<C: CidDesign>(tasks: Vec<BoxedTask>) -> Result<Duration, String> {
    let hooks =
        ProcessHooks::<PerCpu, C, ScaledHash<()>>::for_workers(1).map_err(|e| e.to_string())?;
    let model = Arc::clone(hooks.model());
    let runtime = Builder::new()
        .workers(1)
        .policy(Policy::Wakelist)
        .hooks(Arc::new(hooks))
        .build()
        .map_err(|e| e.to_string())?;
    let start = cpu_time()?;
    let mut joins = Vec::with_capacity(tasks.len());
    let mut tasks = tasks.into_iter();
    while let (Some(leader), Some(partner)) = (tasks.next(), tasks.next()) {
        // As the experiment does: the leader forks the process, its partner is a thread of
        // it; the new PID is the one that was not there before (the leader waits for its
        // partner, so it cannot have ended yet).
        let handle = runtime.handle();
        let before = model.process_ids();
        joins.push(
            handle
                .spawn_process(ROOT, leader)
                .map_err(|e| e.to_string())?,
        );
        let pid = model
            .process_ids()
            .into_iter()
            .find(|pid| !before.contains(pid))
            .ok_or("the new process is gone")?;
        joins.push(
            handle
                .spawn_thread_of(pid, partner)
                .map_err(|e| e.to_string())?,
        );
    }
    for join in joins {
        join.join().map_err(|e| e.to_string())?;
    }
    Ok(cpu_time()?.saturating_sub(start))
}

fn run_one(hooks: &str, pairs: usize, rounds: u64) -> Result<Duration, String> {
    let tasks = ping_pong(pairs, rounds);
    match hooks {
        "none" => plain(tasks),
        "rework" => processes::<Rework>(tasks),
        "bitmap" => processes::<BitmapCids>(tasks),
        "lazy" => processes::<LazyCids>(tasks),
        other => Err(format!("no hooks called {other}")),
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let hooks: Vec<String> = args
        .get(1)
        .map_or("none,rework,bitmap,lazy", String::as_str)
        .split(',')
        .map(str::to_string)
        .collect();
    let pairs: usize = arg(&args, 2, 2)?;
    let rounds: u64 = arg(&args, 3, 250_000)?;
    let repeats: usize = arg(&args, 4, 1)?;
    // Every round trip switches each task of a pair in once.
    let switches = (pairs as u64 * rounds * 2) as f64;
    let mut results = vec![Vec::new(); hooks.len()];
    for repeat in 0..repeats {
        for (name, times) in hooks.iter().zip(results.iter_mut()) {
            let ns = run_one(name, pairs, rounds)?.as_secs_f64() * 1e9 / switches;
            println!("{repeat} {name:8} {ns:7.2} ns CPU/switch");
            times.push(ns);
        }
    }
    println!("medians over {repeats} runs, {pairs} pairs x {rounds} round trips, 1 worker:");
    let base = hooks
        .iter()
        .position(|name| name == "none")
        .map(|at| median(&mut results[at].clone()));
    for (name, times) in hooks.iter().zip(results.iter_mut()) {
        let ns = median(times);
        let added = base.map(|base| format!(", {:+.2} over none", ns - base));
        println!("{name:8} {ns:7.2} ns{}", added.unwrap_or_default());
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("process_switch: {error}");
            ExitCode::FAILURE
        }
    }
}
