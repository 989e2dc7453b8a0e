//! How a runtime runs a workload: it is built with the experiment's worker count, the
//! workload's channels are opened inside it (so that its reactor registers them), and the clock
//! runs from the first spawn until every task has finished.

use std::time::Instant;

use idspace::sched::{Placement, Policy, Poller};

use super::ours;
use super::workloads::{Failed, Workload};
use crate::cputime::CpuClock;
use crate::wake::workloads::{tokio_run_all, Ran};

/// A runtime that runs the workloads' futures.
#[derive(Clone, Copy)]
pub(crate) enum Runtime {
    /// Ours, with a wakeup policy, a placement and a poller shape.
    Ours(Policy, Placement, Poller),
    /// tokio's multi-thread runtime, with its own I/O driver.
    Tokio,
}

impl Runtime {
    /// Runs the workload `make` opens, on `workers` workers; the run's wall time, the process's
    /// CPU time over it and (ours) how the wakeups travelled, or the first error a task met.
    pub(crate) fn run(
        self,
        workers: usize,
        make: impl FnOnce() -> std::io::Result<Workload> + Send + 'static,
    ) -> Result<Ran, String> {
        match self {
            Runtime::Ours(policy, placement, poller) => {
                ours::run((policy, placement, poller), workers, make)
            }
            Runtime::Tokio => tokio_run(workers, make),
        }
    }
}

fn tokio_run(
    workers: usize,
    make: impl FnOnce() -> std::io::Result<Workload>,
) -> Result<Ran, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_io()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    let workload = {
        let _inside = runtime.enter();
        make().map_err(|e| format!("cannot open the channels: {e}"))?
    };
    let cpu = CpuClock::start()?;
    let start = Instant::now();
    tokio_run_all(&runtime, workload.tasks)?;
    let elapsed = start.elapsed();
    let cpu = cpu.elapsed()?;
    succeeded(&workload.failed)?;
    Ok(Ran {
        elapsed,
        cpu,
        stats: None,
    })
}

/// An error if a task of the workload failed.
pub(crate) fn succeeded(failed: &Failed) -> Result<(), String> {
    match failed.get() {
        Some(error) => Err(error.clone()),
        None => Ok(()),
    }
}
