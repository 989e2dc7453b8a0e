//! The three workloads as sets of futures, and how each subject runs them.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idspace::sched::{Builder, Placement, Policy, Stats};

use super::primitives::{Bell, Pipe, TimerHandle, MESSAGE};
use crate::cputime::CpuClock;

/// A task of a workload.
pub type BoxedTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Who runs the futures.
#[derive(Clone, Copy)]
pub enum Runner {
    /// Our runtime with a wakeup policy and the kernel's placement (the default).
    Ours(Policy),
    /// Our runtime with a wakeup policy and forced-remote placement: every wakeup made on a
    /// worker crosses to another one, so each travels by the policy.
    Remote(Policy),
    /// tokio's multi-thread runtime.
    Tokio,
}

/// What a run returns: its wall time, the process's CPU time over the same interval
/// ([`CpuClock`]) and, for our runtime, how its wakeups travelled.
pub struct Ran {
    /// Wall time from the first spawn to the last task's end.
    pub elapsed: Duration,
    /// CPU time of the whole process over the same interval.
    pub cpu: Duration,
    /// Our runtime's counters (`None` for tokio).
    pub stats: Option<Stats>,
}

impl Runner {
    /// Our runtime's policy and placement, or `None` for tokio.
    fn ours(self) -> Option<(Policy, Placement)> {
        match self {
            Runner::Ours(policy) => Some((policy, Placement::Kernel)),
            Runner::Remote(policy) => Some((policy, Placement::Remote)),
            Runner::Tokio => None,
        }
    }

    /// Runs `tasks` on `workers` workers until all have finished.
    pub fn run(self, workers: usize, tasks: Vec<BoxedTask>) -> Result<Ran, String> {
        match self.ours() {
            Some((policy, placement)) => {
                let runtime = Builder::new()
                    .workers(workers)
                    .policy(policy)
                    .placement(placement)
                    .build()
                    .map_err(|e| e.to_string())?;
                let cpu = CpuClock::start()?;
                let start = Instant::now();
                let handles: Vec<_> = tasks.into_iter().map(|t| runtime.spawn(t)).collect();
                for handle in handles {
                    handle.join().map_err(|e| e.to_string())?;
                }
                let elapsed = start.elapsed();
                Ok(Ran {
                    elapsed,
                    cpu: cpu.elapsed()?,
                    stats: Some(runtime.stats()),
                })
            }
            None => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .build()
                    .map_err(|e| format!("tokio: {e}"))?;
                let cpu = CpuClock::start()?;
                let start = Instant::now();
                tokio_run_all(&runtime, tasks)?;
                let elapsed = start.elapsed();
                Ok(Ran {
                    elapsed,
                    cpu: cpu.elapsed()?,
                    stats: None,
                })
            }
        }
    }
}

/// Spawns `tasks` on the tokio `runtime` and waits until all have finished.
pub(crate) fn tokio_run_all(
    runtime: &tokio::runtime::Runtime,
    tasks: Vec<BoxedTask>,
) -> Result<(), String> {
    let handles: Vec<_> = tasks.into_iter().map(|t| runtime.spawn(t)).collect();
    runtime.block_on(async {
        for handle in handles {
            handle.await.map_err(|e| format!("tokio task: {e}"))?;
        }
        Ok(())
    })
}

/// Ping-pong (`perf bench sched pipe`, UnixBench context1): `pairs` pairs of tasks pass a token
/// back and forth `rounds` times each.
pub fn ping_pong(pairs: usize, rounds: u64) -> Vec<BoxedTask> {
    let mut tasks: Vec<BoxedTask> = Vec::with_capacity(2 * pairs);
    for _ in 0..pairs {
        let (ping, pong) = (Bell::new(), Bell::new());
        let (ping2, pong2) = (ping.clone(), pong.clone());
        tasks.push(Box::pin(async move {
            for round in 1..=rounds {
                pong.ring();
                ping.until(round).await;
            }
        }));
        tasks.push(Box::pin(async move {
            for round in 1..=rounds {
                pong2.until(round).await;
                ping2.ring();
            }
        }));
    }
    tasks
}

/// Hackbench's shape: `groups` groups of 20 senders and 20 receivers; every sender writes
/// `loops` 100-byte messages to every receiver of its group, through the receiver's pipe.
pub fn messaging(groups: usize, loops: usize) -> Vec<BoxedTask> {
    const SIDE: usize = 20;
    let mut tasks: Vec<BoxedTask> = Vec::with_capacity(groups * 2 * SIDE);
    for group in 0..groups {
        let pipes: Vec<Arc<Pipe>> = (0..SIDE).map(|_| Pipe::new()).collect();
        for pipe in &pipes {
            let pipe = Arc::clone(pipe);
            tasks.push(Box::pin(async move {
                let mut checksum = 0u64;
                for _ in 0..SIDE * loops {
                    let message = pipe.read().await;
                    checksum = checksum.wrapping_add(u64::from(message[0]));
                }
                std::hint::black_box(checksum);
            }));
        }
        for sender in 0..SIDE {
            let pipes = pipes.clone();
            let fill = (group * SIDE + sender) as u8;
            tasks.push(Box::pin(async move {
                for _ in 0..loops {
                    for pipe in &pipes {
                        pipe.write([fill; MESSAGE]).await;
                    }
                }
            }));
        }
    }
    tasks
}

/// The wakeup-latency shape (schbench): what it measures and how hard it works.
#[derive(Clone, Copy)]
pub struct LatencyShape {
    /// Message tasks (`-m`).
    pub messengers: usize,
    /// Worker tasks per message task (`-t`).
    pub workers: usize,
    /// Rounds each message task runs.
    pub rounds: u64,
    /// The message task's sleep between rounds.
    pub interval: Duration,
    /// CPU time each worker burns after it wakes (`cputime`).
    pub cputime: Duration,
}

/// Sleeps on the lab's timer thread: the sleep of the latency workload in the `wake`
/// experiment.
pub fn lab_timer(
    timer: &TimerHandle,
) -> impl Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Clone + Send + 'static {
    let timer = timer.clone();
    move |duration| {
        let timer = timer.clone();
        Box::pin(async move { timer.sleep(duration).await })
    }
}

/// schbench's shape: each message task sleeps (with `sleep`: the lab's timer thread here, a
/// runtime's own timers in the `time` experiment), takes a time stamp and wakes each of its
/// worker tasks; a worker records the time from the stamp to the moment it runs, burns
/// `cputime`, and reports back. The latencies (ns) land in `samples`.
pub fn latency<S, F>(
    shape: LatencyShape,
    sleep: S,
    samples: &Arc<Mutex<Vec<u64>>>,
) -> Vec<BoxedTask>
where
    S: Fn(Duration) -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let epoch = Instant::now();
    let mut tasks: Vec<BoxedTask> = Vec::new();
    for _ in 0..shape.messengers {
        let back = Bell::new();
        let stamp = Arc::new(Mutex::new(Duration::ZERO));
        let bells: Vec<Arc<Bell>> = (0..shape.workers).map(|_| Bell::new()).collect();
        for bell in &bells {
            let (bell, back, stamp, samples) =
                (bell.clone(), back.clone(), stamp.clone(), samples.clone());
            tasks.push(Box::pin(async move {
                let mut mine = Vec::with_capacity(shape.rounds as usize);
                for round in 1..=shape.rounds {
                    bell.until(round).await;
                    let woken_at = *stamp.lock().unwrap_or_else(|e| e.into_inner());
                    mine.push((epoch.elapsed().saturating_sub(woken_at)).as_nanos() as u64);
                    burn(shape.cputime);
                    back.ring();
                }
                samples
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(mine);
            }));
        }
        let sleep = sleep.clone();
        tasks.push(Box::pin(async move {
            for round in 1..=shape.rounds {
                sleep(shape.interval).await;
                *stamp.lock().unwrap_or_else(|e| e.into_inner()) = epoch.elapsed();
                for bell in &bells {
                    bell.ring();
                }
                back.until(round * shape.workers as u64).await;
            }
        }));
    }
    tasks
}

/// Spins for `duration` (schbench's `cputime`).
pub fn burn(duration: Duration) {
    let start = Instant::now();
    while start.elapsed() < duration {
        std::hint::spin_loop();
    }
}

/// The `p`-th percentile (0–100, to a tenth) of sorted `samples`: the nearest-rank value.
pub fn percentile(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    // In integer tenths of a percent, so that 99.9% of 1000 is rank 999, not 999.0000001.
    let tenths = (p * 10.0).round().clamp(0.0, 1000.0) as usize;
    let rank = (tenths * sorted.len()).div_ceil(1000);
    Some(sorted[rank.clamp(1, sorted.len()) - 1] as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_sample() {
        let sorted: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&sorted, 50.0), Some(500.0));
        assert_eq!(percentile(&sorted, 99.9), Some(999.0));
        assert_eq!(percentile(&sorted, 100.0), Some(1000.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn every_workload_completes_on_every_runner() {
        let timer = super::super::primitives::Timer::start().unwrap();
        for runner in [
            Runner::Ours(Policy::Locked),
            Runner::Ours(Policy::Wakelist),
            Runner::Ours(Policy::WakelistAlways),
            Runner::Remote(Policy::Locked),
            Runner::Remote(Policy::Wakelist),
            Runner::Tokio,
        ] {
            runner.run(2, ping_pong(2, 200)).unwrap();
            runner.run(2, messaging(1, 5)).unwrap();
            let samples = Arc::new(Mutex::new(Vec::new()));
            let shape = LatencyShape {
                messengers: 2,
                workers: 3,
                rounds: 5,
                interval: Duration::from_micros(200),
                cputime: Duration::from_micros(5),
            };
            runner
                .run(2, latency(shape, lab_timer(&timer.handle()), &samples))
                .unwrap();
            assert_eq!(samples.lock().unwrap().len(), 2 * 3 * 5);
        }
    }
}
