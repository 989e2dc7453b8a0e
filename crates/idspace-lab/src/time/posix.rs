//! The timer tests of the posix-timers hash-table rework (Linux 6.15) through the runtime: one
//! process creates and arms N timers (20k, 50k, 100k), then deletes them. Our column is
//! `idspace::process`'s POSIX timers on the runtime's wheel, from a task of the process; tokio's is
//! `tokio::time::sleep` futures armed (polled once) and dropped; the kernel's is real
//! `timer_create`, `timer_settime` and `timer_delete` system calls. Every timer is armed an hour
//! ahead (1 µs apart, so that none shares a deadline), so none fires: the figures are the cost of
//! arming and cancelling.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Waker};
use std::time::{Duration, Instant};

use idspace::pid::ROOT;
use idspace::process::{Clock, ITimerSpec, Notify, ProcessHooks, TimeSpec, When};
use idspace::sched::Builder;

use super::{OURS, POSIX_TIMERS_TABLE, TOKIO};
use crate::declare::{Measurement, Sweep};
use crate::measure::{Candidate, Values};
use crate::model::Row;
use crate::sys::timer;

/// The timer counts of the rework's tests.
const SIZES: [usize; 3] = [20_000, 50_000, 100_000];

/// Where every timer's deadline lies: an hour ahead, plus a microsecond per timer.
const AHEAD: Duration = Duration::from_secs(3600);

#[derive(Clone, Copy)]
enum Column {
    Ours,
    Tokio,
    Kernel,
}

impl Candidate for Column {
    fn name(&self) -> &str {
        match self {
            Column::Ours => OURS,
            Column::Tokio => TOKIO,
            Column::Kernel => "kernel",
        }
    }
}

/// Nanoseconds per timer of the two phases.
fn per_timer(n: usize, arm: Duration, delete: Duration) -> Vec<f64> {
    let n = n as f64;
    vec![
        arm.as_secs_f64() * 1e9 / n,
        delete.as_secs_f64() * 1e9 / n,
        (arm + delete).as_secs_f64() * 1e9 / n,
    ]
}

/// Ours: a process of a one-worker runtime creates and arms `n` timers from its task, then
/// deletes them.
fn ours(n: usize) -> Result<Vec<f64>, String> {
    let err = |e: idspace::process::ProcessError| e.to_string();
    let hooks: ProcessHooks = ProcessHooks::for_workers(1).map_err(err)?;
    let model = Arc::clone(hooks.model());
    let runtime = Builder::new()
        .workers(1)
        .hooks(Arc::new(hooks))
        .build()
        .map_err(|e| e.to_string())?;
    model.attach_wheel(runtime.handle()).map_err(err)?;
    // The root's init came with the hooks: this process is the second.
    let pid = model.fork(ROOT, 0).map_err(err)?.tid();
    let m = Arc::clone(&model);
    let join = runtime
        .handle()
        .spawn_thread_of(pid, async move {
            let mut ids = Vec::with_capacity(n);
            let start = Instant::now();
            for i in 0..n {
                let id = m.timer_create_with(pid, Clock::Monotonic, Notify::None)?;
                let value = TimeSpec::from_nanos((AHEAD.as_nanos() + i as u128 * 1000) as u64);
                m.timer_settime(pid, id, When::Relative, ITimerSpec::once(value))?;
                ids.push(id);
            }
            let arm = start.elapsed();
            let start = Instant::now();
            for id in ids {
                m.timer_delete(pid, id)?;
            }
            Ok::<_, idspace::process::ProcessError>((arm, start.elapsed()))
        })
        .map_err(err)?;
    let (arm, delete) = join.join().map_err(|e| e.to_string())?.map_err(err)?;
    Ok(per_timer(n, arm, delete))
}

/// Tokio: `n` sleeps created and polled once (which registers them with the timer wheel) on a
/// one-thread runtime, then dropped (which cancels them).
fn tokio(n: usize) -> Result<Vec<f64>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    Ok(runtime.block_on(async move {
        let mut cx = TaskContext::from_waker(Waker::noop());
        let mut sleeps: Vec<Pin<Box<tokio::time::Sleep>>> = Vec::with_capacity(n);
        let start = Instant::now();
        for i in 0..n {
            let mut sleep = Box::pin(tokio::time::sleep(AHEAD + Duration::from_micros(i as u64)));
            let _ = sleep.as_mut().poll(&mut cx);
            sleeps.push(sleep);
        }
        let arm = start.elapsed();
        let start = Instant::now();
        drop(sleeps);
        per_timer(n, arm, start.elapsed())
    }))
}

/// The kernel: `timer_create(CLOCK_MONOTONIC, SIGEV_NONE)` and `timer_settime` (relative),
/// `n` times, then `timer_delete` of each.
fn kernel(n: usize) -> Result<Vec<f64>, String> {
    let limit = timer::raise_sigpending(n as u64 + 64);
    if limit < n as u64 {
        return Err(format!(
            "RLIMIT_SIGPENDING is {limit}, below the {n} timers (each is charged one)"
        ));
    }
    let mut ids = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let id = timer::create(0).map_err(|e| format!("timer_create: {e}"))?;
        timer::arm(id, AHEAD + Duration::from_micros(i as u64))
            .map_err(|e| format!("timer_settime: {e}"))?;
        ids.push(id);
    }
    let arm = start.elapsed();
    let start = Instant::now();
    for id in ids {
        timer::delete(id).map_err(|e| format!("timer_delete: {e}"))?;
    }
    Ok(per_timer(n, arm, start.elapsed()))
}

/// The table: per-timer cost at each N (create and arm, delete, both), and the ratio of the
/// largest N's total cost to the smallest's; that ratio for our column is the flatness goal,
/// which `goal` receives.
pub(super) fn measurement<'a>(goal: impl FnOnce(Option<f64>) + 'a) -> Box<dyn Measurement + 'a> {
    let columns = vec![Column::Ours, Column::Tokio, Column::Kernel];
    Sweep::new(
        columns,
        SIZES.to_vec(),
        |n| format!("posix timers, {n}"),
        |column, &n| match column {
            Column::Ours => ours(n),
            Column::Tokio => tokio(n),
            Column::Kernel => kernel(n),
        },
    )
    .tables(move |swept, cx| {
        let mut rows = Vec::new();
        for (n, result) in &swept.results {
            for (metric, what) in ["create and arm", "delete", "total"]
                .into_iter()
                .enumerate()
            {
                let label = format!("{n} timers: {what}, per timer");
                rows.push(Row::numbers(label, result.metric(metric), 0));
            }
        }
        let totals: Vec<Values> = swept.values(2).map(|(_, v)| v).collect();
        let mut ours = None;
        if let (Some(small), Some(large)) = (totals.first(), totals.last()) {
            let flat: Vec<Option<f64>> = large
                .cells()
                .iter()
                .zip(small.cells())
                .map(|(large, small)| large.zip(*small).map(|(l, s)| l / s))
                .collect();
            ours = flat.first().copied().flatten();
            let (largest, smallest) = (SIZES[SIZES.len() - 1], SIZES[0]);
            let label = format!("cost per timer, {largest} ÷ {smallest} (goal ≤ 1.3x)");
            rows.push(Row::ratios(label, flat));
        }
        goal(ours);
        let title = format!(
            "The posix-timers hash-table rework's timer tests (Linux 6.15) through the runtime: \
             one process creates and arms N timers (an hour ahead), then deletes them (median of \
             {})",
            cx.repetitions()
        );
        swept.table(POSIX_TIMERS_TABLE, title, "ns", rows).into()
    })
}
