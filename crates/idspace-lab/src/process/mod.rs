//! Experiment `process`: what processes cost through the runtime. The IDs' cost per switch
//! (ping-pong with no hooks, with per-task data only, and with each task a thread of a process
//! taking a CID from each CID design at every switch-in), and the time to checkpoint and restore
//! a 64-thread process in a 4-level namespace with 2048 timers 512 apart.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idspace::cid::{BitmapCids, LazyCids, Rework};
use idspace::pid::{IdrOnce, PerCpu, ROOT};
use idspace::process::{CidDesign, PidDesign, Processes, TableDesign};
use idspace::sched::{Builder, Exit, Hooks, Policy, TaskId};
use idspace::table::{Radix, ScaledHash};

mod kernel;
mod pool;

use crate::declare::{self, Declared, Measurement, Sweep};
use crate::goals::{self, Goal};
use crate::model::{Row, Section, Table};
use crate::wake::workloads::{ping_pong, BoxedTask};
use crate::{Context, Experiment, Scale};

/// The experiment.
pub struct Process;

/// The workers of the ping-pong runs: one, so that every wakeup is local and no worker parks;
/// the time per switch is then the runtime's own path with the hooks, not wakeup latency
/// (which on a shared 2-core machine varies by tens of microseconds between runs).
const WORKERS: usize = 1;

/// The workers of the pool runs that are not oversubscribed: the benchmark's 2.
const WORKERS_POOL: usize = 2;

/// Hooks whose tasks carry data and touch it at every switch, without any IDs: the cost of
/// per-task data alone.
struct DataOnly;

impl Hooks for DataOnly {
    type Data = AtomicU64;

    fn created(&self, _task: TaskId, _worker: Option<usize>) -> AtomicU64 {
        AtomicU64::new(0)
    }

    fn switched_in(&self, _task: TaskId, data: &AtomicU64, worker: usize) {
        // Relaxed: only this task's switch hooks touch it, and they never overlap.
        data.store(worker as u64 + 1, Ordering::Relaxed);
    }

    fn switched_out(&self, _task: TaskId, data: &AtomicU64, _worker: usize) {
        data.store(0, Ordering::Relaxed);
    }

    fn exited(&self, _task: TaskId, data: &AtomicU64, _worker: Option<usize>, _how: Exit) {
        std::hint::black_box(data.load(Ordering::Relaxed));
    }
}

#[derive(Clone, Copy)]
enum Switch {
    NoHooks,
    DataOnly,
    Ids(&'static str),
}

impl crate::measure::Candidate for Switch {
    fn name(&self) -> &str {
        match self {
            Switch::NoHooks => "no hooks",
            Switch::DataOnly => "data only",
            Switch::Ids(cid) => cid,
        }
    }
}

/// The CPU time this process has used so far, all threads together.
fn process_cpu_time() -> Result<Duration, String> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a live timespec that the call only writes.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) } != 0 {
        return Err(format!(
            "clock_gettime(CLOCK_PROCESS_CPUTIME_ID): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
}

/// Runs `tasks` (pairs) on a runtime built by `builder`, spawning each with `spawn`; returns
/// the CPU time the process used meanwhile. With one worker, every switch runs on it and the
/// spawning thread sleeps in the joins, so that is the switches' own cost: on a shared machine
/// the worker is descheduled for long stretches, which wall time would count.
fn timed(
    tasks: Vec<BoxedTask>,
    spawn: impl Fn(BoxedTask, bool) -> Result<Box<dyn FnOnce() -> Result<(), String>>, String>,
) -> Result<Duration, String> {
    let start = process_cpu_time()?;
    let joins: Vec<_> = tasks
        .into_iter()
        .enumerate()
        .map(|(index, task)| spawn(task, index % 2 == 0))
        .collect::<Result<_, _>>()?;
    for join in joins {
        join()?;
    }
    Ok(process_cpu_time()?.saturating_sub(start))
}

/// Ping-pong with each pair a process (its leader and one thread), CIDs from design `C`.
fn ping_pong_ids<C: CidDesign>(pairs: usize, rounds: u64) -> Result<Duration, String> {
    let runtime = pool::process_runtime::<C>(WORKERS)?;
    let handle = runtime.handle().clone();
    let last = std::cell::Cell::new(0u32);
    timed(ping_pong(pairs, rounds), |task, leader| {
        let join = if leader {
            let model = handle.hooks().model();
            let before = model.process_ids();
            let join = handle
                .spawn_process(ROOT, task)
                .map_err(|e| e.to_string())?;
            // The leader's PID: the process that was not there before (its leader cannot have
            // ended yet, as it waits for its partner).
            let pid = model
                .process_ids()
                .into_iter()
                .find(|pid| !before.contains(pid))
                .ok_or("the new process is gone")?;
            last.set(pid);
            join
        } else {
            handle
                .spawn_thread_of(last.get(), task)
                .map_err(|e| e.to_string())?
        };
        Ok(Box::new(move || join.join().map_err(|e| e.to_string())))
    })
}

fn ping_pong_plain<H: Hooks>(hooks: Arc<H>, pairs: usize, rounds: u64) -> Result<Duration, String> {
    let runtime = Builder::new()
        .workers(WORKERS)
        .policy(Policy::Wakelist)
        .hooks(hooks)
        .build()
        .map_err(|e| e.to_string())?;
    timed(ping_pong(pairs, rounds), |task, _| {
        let join = runtime.spawn(task);
        Ok(Box::new(move || join.join().map_err(|e| e.to_string())))
    })
}

/// The checkpoint/restore subject: 64 threads, a 4-level namespace, 2048 timers 512 apart.
fn checkpoint_restore<P: PidDesign, T: TableDesign>() -> Result<Vec<f64>, String> {
    let err = |e: idspace::process::ProcessError| e.to_string();
    let model: Processes<P, Rework, T> = Processes::with_designs(WORKERS).map_err(err)?;
    model.fork(ROOT, 0).map_err(err)?;
    let mut ns = ROOT;
    for _ in 0..4 {
        ns = model.ns_new(ns).map_err(err)?;
        model.fork(ns, 0).map_err(err)?;
    }
    let pid = model.fork(ns, 0).map_err(err)?.tid();
    for _ in 0..63 {
        model.clone_thread(pid, 0).map_err(err)?;
    }
    for i in 0..2048 * 512u32 {
        let id = model.timer_create(pid).map_err(err)?;
        if i % 512 != 0 {
            model.timer_delete(pid, id).map_err(err)?;
        }
    }
    let start = Instant::now();
    let image = model.checkpoint(pid).map_err(err)?;
    let checkpoint = start.elapsed();
    model.kill(pid, 0).map_err(err)?;
    let start = Instant::now();
    model.restore(ns, &image, 0).map_err(err)?;
    let restore = start.elapsed();
    Ok(vec![us(checkpoint), us(restore)])
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The pool's column for the kernel's own pthreads.
const KERNEL_POOL: &str = "kernel pthreads";

/// The pool goal: the MM CID rework's own benchmark reports it 1.30x to 1.35x over the design
/// before it; through our runtime the rework should reach 1.3x the lazy design in every shape.
const POOL_GOAL: f64 = 1.3;

/// The switch goal: the IDs should add at most this much to a task switch (ns), as the
/// kernel's rework adds "a few loads and stores".
const SWITCH_GOAL_NS: f64 = 10.0;

/// The pool's ratio columns: (heading, numerator's column, denominator's column).
const POOL_RATIOS: [(&str, &str, &str); 3] = [
    ("rework ÷ bitmap", "rework", "bitmap"),
    ("rework ÷ lazy", "rework", "lazy"),
    ("kernel pthreads ÷ rework", KERNEL_POOL, "rework"),
];

/// A column of the pool table.
#[derive(Clone, Copy)]
struct PoolCandidate(&'static str);

impl crate::measure::Candidate for PoolCandidate {
    fn name(&self) -> &str {
        self.0
    }
}

fn pool_run(
    candidate: &PoolCandidate,
    shape: pool::Shape,
    workers: usize,
) -> Result<Vec<f64>, String> {
    let elapsed = match candidate.0 {
        "rework" => pool::runtime::<Rework>(shape, workers),
        "bitmap" => pool::runtime::<BitmapCids>(shape, workers),
        "lazy" => pool::runtime::<LazyCids>(shape, workers),
        KERNEL_POOL => pool::kernel(shape),
        other => Err(format!("no pool column {other}")),
    }?;
    let threads = (shape.pools * shape.threads) as f64 * shape.iterations as f64;
    Ok(vec![threads / elapsed.as_secs_f64()])
}

#[derive(Clone, Copy)]
struct Designs(&'static str, fn() -> Result<Vec<f64>, String>);

impl crate::measure::Candidate for Designs {
    fn name(&self) -> &str {
        self.0
    }
}

impl Experiment for Process {
    fn name(&self) -> &'static str {
        "process"
    }

    fn about(&self) -> &'static str {
        "processes through the runtime: the IDs' cost per switch, checkpoint and restore"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let (pairs, rounds) = match cx.scale {
            // Split into the paired rounds: runs of about 60 ms each at quick scale, long
            // against a runtime's start and a time slice, and a round's two runs close together.
            Scale::Quick => (2, 840_000u64),
            Scale::Full => (4, 1_680_000u64),
        };
        let measurements = vec![
            pool_table(pool_runs(cx)),
            switch_cost(pairs, rounds),
            checkpoint_restore_table(),
        ];
        let declared = Declared {
            name: self.name(),
            title: "Processes through the runtime".into(),
            intro: vec![
                "Tasks as threads of processes (`idspace::process` in the runtime): what the IDs \
                 add to a switch, and what checkpoint and restore take."
                    .into(),
            ],
            measurements,
            notes: vec![note()],
        };
        Ok(declare::run(cx, declared))
    }
}

/// The experiment's closing note.
fn note() -> String {
    format!(
        "Per switch: the process's CPU time over switch-ins on one worker (every \
    wakeup local, no parking), so it is the runtime's own path plus the hooks; CPU time rather \
    than wall time, since on a shared machine the worker is descheduled for stretches that wall \
    time would count. A cell is {PAIRED_ROUNDS} rounds, each running the no-hooks baseline and the column \
    one right after the other, half of them in each order; \"added over no hooks\" is the \
    median of the rounds' \
    differences (the no-hooks column's own, paired with itself, is the method's noise). \
    \"data only\" carries a word per \
    task and stores it at every switch (the per-task data path without IDs); the CID columns \
    make each pair one process (leader and a thread, PIDs from percpu) taking its CID at every \
    switch-in. Pool: threads created and torn down per second, each CID design through the \
    runtime's workers and the kernel's own pthreads in the same run; their ratios are in a \
    table of their own. Checkpoint and restore, kernel column: the kernel's own path for the \
    same 2048 timers, as CRIU takes it (read `/proc/self/timers`; then \
    `PR_TIMER_CREATE_RESTORE_IDS` and one `timer_create` per requested ID); it covers the \
    timers only, not the 64 threads' IDs, which CRIU restores with one `clone3` per thread."
    )
}

/// The pool's runs: two shapes, each on the benchmark's 2 workers and oversubscribed; with
/// their row labels.
fn pool_runs(cx: &Context) -> Vec<(pool::Shape, usize, String)> {
    let factor = match cx.scale {
        Scale::Quick => 1,
        Scale::Full => 5,
    };
    let oversubscribed = (4 * cx.cpus()).clamp(4, 64);
    [(8, 8, 40 * factor), (32, 32, 4 * factor)]
        .into_iter()
        .flat_map(|(pools, threads, iterations)| {
            let shape = pool::Shape {
                pools,
                threads,
                iterations,
            };
            [WORKERS_POOL, oversubscribed].map(|workers| {
                let over = cx.oversubscribed(workers);
                (
                    shape,
                    workers,
                    format!("{pools}x{threads} on {workers} workers{over}"),
                )
            })
        })
        .collect()
}

/// Tglx's pool through the runtime and with the kernel's pthreads, and its ratios.
fn pool_table(runs: Vec<(pool::Shape, usize, String)>) -> Box<dyn Measurement> {
    let candidates = ["rework", "bitmap", "lazy", KERNEL_POOL]
        .map(PoolCandidate)
        .to_vec();
    Sweep::new(
        candidates,
        runs,
        |run| format!("pool {}", run.2),
        |c, &(shape, workers, _)| pool_run(c, shape, workers),
    )
    .tables(|swept, cx| {
        let rows = swept.numbers(0, 0, |run| run.2.clone());
        let mut goals = Vec::new();
        let ratio_rows = swept
            .values(0)
            .map(|(run, rate)| {
                let ratio = |over: &str, under: &str| {
                    rate.get(over).zip(rate.get(under)).map(|(o, u)| o / u)
                };
                let cells: Vec<_> = POOL_RATIOS
                    .iter()
                    .map(|&(_, over, under)| ratio(over, under))
                    .collect();
                goals.push(Goal::at_least(
                    format!("{}: rework ÷ lazy, threads/s", run.2),
                    ratio("rework", "lazy"),
                    POOL_GOAL,
                    "x",
                ));
                Row::ratios(run.2.clone(), cells)
            })
            .collect();
        let title = format!(
            "tglx's thread create/teardown pool through the runtime, each pool a process (PIDs \
             from percpu, CIDs from each design), and with the kernel's pthreads (median of {})",
            cx.repetitions()
        );
        let ratios = Table {
            id: "pool_ratios".into(),
            title: "The pool's threads/s ratios (from the medians above; the MM CID rework \
                    (Linux 6.19) reports the rework 1.35x (8x8) and 1.30x (32x32) over the \
                    pre-rework kernel)"
                .into(),
            unit: "ratio".into(),
            columns: POOL_RATIOS
                .iter()
                .map(|&(name, _, _)| name.to_string())
                .collect(),
            rows: ratio_rows,
        };
        let goals = Table {
            id: "pool_goals".into(),
            title: "The pool's goals: measured, goal, met".into(),
            ..goals::table(goals, "x", 2)
        };
        vec![swept.table("pool", title, "threads/s", rows), ratios, goals].into()
    })
}

/// The switch table's ratio columns: (heading, the baseline whose added cost is divided by the
/// rework's).
const SWITCH_RATIOS: [(&str, &str); 2] = [("bitmap ÷ rework", "bitmap"), ("lazy ÷ rework", "lazy")];

/// Rounds of a switch-cost cell. Each round runs the no-hooks baseline and the candidate one
/// right after the other, in alternating order, and the cell's added cost is the median of the
/// rounds' differences: a drift of the machine's speed (another tenant, the host's steal) moves
/// both runs of a round alike, where a difference of two medians taken seconds apart carried
/// it whole. The baseline's own column, paired with itself, shows what is left of the noise.
///
/// An even number, so that as many rounds run the baseline first as second: a run's place in
/// its round moved it by several ns (the no-hooks column paired with itself read 7 ns with
/// five rounds, three of one order and two of the other).
const PAIRED_ROUNDS: u64 = 10;

/// One switch-cost cell of `candidate`: its median ns per switch, and the median of its paired
/// differences over the no-hooks baseline.
fn paired(candidate: &Switch, pairs: usize, rounds: u64) -> Result<Vec<f64>, String> {
    let per_round = (rounds / PAIRED_ROUNDS).max(1);
    let (mut own, mut added) = (Vec::new(), Vec::new());
    for round in 0..PAIRED_ROUNDS {
        let (base, mine) = if round % 2 == 0 {
            let base = per_switch(&Switch::NoHooks, pairs, per_round)?;
            (base, per_switch(candidate, pairs, per_round)?)
        } else {
            let mine = per_switch(candidate, pairs, per_round)?;
            (per_switch(&Switch::NoHooks, pairs, per_round)?, mine)
        };
        own.push(mine);
        added.push(mine - base);
    }
    let median = |v: &[f64]| crate::stats::median(v).unwrap_or(f64::NAN);
    Ok(vec![median(&own), median(&added)])
}

/// CPU ns per switch-in of one ping-pong run with `switch`'s hooks.
fn per_switch(switch: &Switch, pairs: usize, rounds: u64) -> Result<f64, String> {
    let elapsed = match switch {
        Switch::NoHooks => ping_pong_plain(Arc::new(idspace::sched::NoHooks), pairs, rounds),
        Switch::DataOnly => ping_pong_plain(Arc::new(DataOnly), pairs, rounds),
        Switch::Ids("rework") => ping_pong_ids::<Rework>(pairs, rounds),
        Switch::Ids("bitmap") => ping_pong_ids::<BitmapCids>(pairs, rounds),
        Switch::Ids(_) => ping_pong_ids::<LazyCids>(pairs, rounds),
    }?;
    // Every round trip switches each task of the pair in once.
    let count = (pairs as u64 * rounds * 2) as f64;
    Ok(elapsed.as_secs_f64() * 1e9 / count)
}

/// The IDs' cost per switch: ping-pong with each kind of hooks.
fn switch_cost(pairs: usize, rounds: u64) -> Box<dyn Measurement> {
    let switches = vec![
        Switch::NoHooks,
        Switch::DataOnly,
        Switch::Ids("rework"),
        Switch::Ids("bitmap"),
        Switch::Ids("lazy"),
    ];
    let workers = if WORKERS == 1 { "worker" } else { "workers" };
    let label = format!("ping-pong, {pairs} pairs x {rounds} round trips, {WORKERS} {workers}");
    let step = label.clone();
    Sweep::new(
        switches,
        vec![()],
        move |_| step.clone(),
        move |candidate, _| paired(candidate, pairs, rounds),
    )
    .tables(move |swept, cx| {
        let ns = swept.only().metric(0);
        let added = swept.only().metric(1).cells().to_vec();
        let of = |name: &str| {
            ns.names()
                .iter()
                .position(|n| n == name)
                .and_then(|i| added[i])
        };
        let rework = of("rework");
        // Only a positive added cost makes a ratio: on a noisy machine a median of paired
        // differences can still come out at or below zero, which no ratio describes.
        let ratios: Vec<Option<f64>> = SWITCH_RATIOS
            .iter()
            .map(|&(_, baseline)| {
                of(baseline)
                    .zip(rework)
                    .filter(|&(b, r)| b > 0.0 && r > 0.0)
                    .map(|(b, r)| b / r)
            })
            .collect();
        let rows = vec![
            Row::numbers("per switch", ns, 1),
            Row::numbers(
                "added over no hooks (median of paired differences)",
                added,
                1,
            ),
        ];
        let title = format!(
            "The IDs' cost per switch: {label} (median of {})",
            cx.repetitions()
        );
        let ratio_table = Table {
            id: "switch_ratios".into(),
            title: "The IDs' added cost per switch, each baseline's over the rework's (from the \
                    paired medians above; above 1 the rework adds less)"
                .into(),
            unit: "ratio".into(),
            columns: SWITCH_RATIOS
                .iter()
                .map(|&(name, _)| name.to_string())
                .collect(),
            rows: vec![Row::ratios("added over no hooks", ratios.clone())],
        };
        let mut goals = vec![Goal::at_most(
            "IDs' added cost per switch, rework",
            rework,
            SWITCH_GOAL_NS,
            "ns",
        )];
        for (&(name, _), &ratio) in SWITCH_RATIOS.iter().zip(&ratios) {
            goals.push(Goal::at_least(
                format!("IDs' added cost per switch, {name}"),
                ratio,
                1.0,
                "x",
            ));
        }
        let goals = Table {
            id: "switch_goals".into(),
            title: "The switch's goals: measured, goal, met".into(),
            ..goals::table(goals, "ns / x", 1)
        };
        vec![swept.table("switch", title, "ns", rows), ratio_table, goals].into()
    })
}

/// Checkpoint and restore of a big process, with two pairs of our designs and the kernel's
/// timers.
fn checkpoint_restore_table() -> Box<dyn Measurement> {
    let crs = vec![
        Designs(
            "percpu + scaled",
            checkpoint_restore::<PerCpu, ScaledHash<()>>,
        ),
        Designs("idr-once + radix", checkpoint_restore::<IdrOnce, Radix<()>>),
        Designs("kernel (timers only)", kernel::checkpoint_restore),
    ];
    Sweep::new(
        crs,
        vec![()],
        |_| "checkpoint/restore, 64 threads, 4 levels, 2048 timers".into(),
        |c, _| (c.1)(),
    )
    .tables(|swept, cx| {
        let cr = swept.only();
        let rows = vec![
            Row::numbers("checkpoint", cr.metric(0), 0),
            Row::numbers("restore", cr.metric(1), 0),
        ];
        let title = format!(
            "Checkpoint and restore of a 64-thread process in a 4-level namespace with 2048 \
                 timers 512 apart (median of {})",
            cx.repetitions()
        );
        swept.table("checkpoint_restore", title, "µs", rows).into()
    })
}
