//! The `time` experiment's workloads, written once over a [`TimerApi`] so that our runtime's timers
//! and tokio's run the very same futures, and the two runtimes that run them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use idspace::sched::{Policy, Runtime};

pub use crate::wake::workloads::BoxedTask;

/// A runtime's timer futures: ours (`idspace::sched::time`) or tokio's (`tokio::time`). Every
/// future is created inside the task that awaits it, where tokio requires its runtime.
pub trait TimerApi: Copy + Send + Sync + 'static {
    /// Completes once `deadline` has passed.
    fn sleep_until(self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static;
    /// Runs `future` for at most `duration`: `true` if it completed in time.
    fn timeout<F>(self, duration: Duration, future: F) -> impl Future<Output = bool> + Send
    where
        F: Future + Send,
        F::Output: Send;
}

/// Our runtime's timers.
#[derive(Clone, Copy)]
pub struct Ours;

impl TimerApi for Ours {
    fn sleep_until(self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        idspace::sched::time::sleep_until(deadline)
    }

    async fn timeout<F>(self, duration: Duration, future: F) -> bool
    where
        F: Future + Send,
        F::Output: Send,
    {
        idspace::sched::time::timeout(duration, future)
            .await
            .is_ok()
    }
}

/// tokio's timers.
#[derive(Clone, Copy)]
pub struct Tokio;

impl TimerApi for Tokio {
    fn sleep_until(self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline))
    }

    async fn timeout<F>(self, duration: Duration, future: F) -> bool
    where
        F: Future + Send,
        F::Output: Send,
    {
        tokio::time::timeout(duration, future).await.is_ok()
    }
}

/// Runs `tasks` on our runtime (the default `wakelist` policy) with `workers` workers until all
/// have finished; returns the wall time.
pub fn run_ours(workers: usize, tasks: Vec<BoxedTask>) -> Result<Duration, String> {
    let runtime = Runtime::new(workers, Policy::Wakelist).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let handles: Vec<_> = tasks.into_iter().map(|t| runtime.spawn(t)).collect();
    for handle in handles {
        handle.join().map_err(|e| e.to_string())?;
    }
    Ok(start.elapsed())
}

/// Runs `tasks` on tokio's multi-thread runtime (timers enabled) with `workers` workers until
/// all have finished; returns the wall time.
pub fn run_tokio(workers: usize, tasks: Vec<BoxedTask>) -> Result<Duration, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    let start = Instant::now();
    crate::wake::workloads::tokio_run_all(&runtime, tasks)?;
    Ok(start.elapsed())
}

/// Pending once (waking itself at once), then ready: the request a timeout guards, answered
/// on the next turn, so that the timeout's timer is armed and then cancelled.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Timeout churn, the network server's pattern: `tasks` tasks each run `per_task` requests
/// under a 60-second timeout; every request is pending once (arming the timer) and answered on
/// the next turn (cancelling it). `completed` counts the requests answered in time. Without
/// `timeouts`, the same requests run bare: the runtime's own share of the cost.
pub fn churn<C: TimerApi>(
    clock: C,
    tasks: usize,
    per_task: u64,
    timeouts: bool,
    completed: &Arc<AtomicU64>,
) -> Vec<BoxedTask> {
    (0..tasks)
        .map(|_| {
            let completed = Arc::clone(completed);
            Box::pin(async move {
                let mut answered = 0;
                for _ in 0..per_task {
                    if !timeouts {
                        YieldOnce(false).await;
                        answered += 1;
                    } else if clock
                        .timeout(Duration::from_secs(60), YieldOnce(false))
                        .await
                    {
                        answered += 1;
                    }
                }
                // Relaxed: read after the runtime has joined every task.
                completed.fetch_add(answered, Ordering::Relaxed);
            }) as BoxedTask
        })
        .collect()
}

/// A small deterministic generator (splitmix64), so that every candidate sleeps the same
/// lengths.
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce5_e9b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Sleep lengths for the lateness workload: `count` lengths uniform in 1–50 ms (to the
/// microsecond), the same for every candidate.
pub fn sleep_lengths(count: usize) -> Vec<Duration> {
    let mut random = SplitMix::new(0x7431_6d65);
    (0..count)
        .map(|_| Duration::from_micros(1_000 + random.next_u64() % 49_001))
        .collect()
}

/// Lateness: one task per length, all started together, each sleeping until `now + length`
/// and recording how late it woke (ns) in its own cell of `late`.
pub fn lateness<C: TimerApi>(
    clock: C,
    lengths: &[Duration],
    late: &Arc<Vec<AtomicU64>>,
) -> Vec<BoxedTask> {
    lengths
        .iter()
        .enumerate()
        .map(|(index, &length)| {
            let late = Arc::clone(late);
            Box::pin(async move {
                let deadline = Instant::now() + length;
                clock.sleep_until(deadline).await;
                let lateness = Instant::now().saturating_duration_since(deadline);
                // Relaxed: read after the runtime has joined every task.
                late[index].store(lateness.as_nanos() as u64, Ordering::Relaxed);
            }) as BoxedTask
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(workers: usize, tasks: impl Fn(bool) -> Vec<BoxedTask>) {
        run_ours(workers, tasks(true)).unwrap();
        run_tokio(workers, tasks(false)).unwrap();
    }

    #[test]
    fn every_timeout_of_the_churn_is_answered_in_time_on_both_runtimes() {
        let completed = Arc::new(AtomicU64::new(0));
        both(2, |ours| {
            if ours {
                churn(Ours, 3, 100, true, &completed)
            } else {
                churn(Tokio, 3, 100, true, &completed)
            }
        });
        assert_eq!(completed.load(Ordering::Relaxed), 600);
    }

    #[test]
    fn lateness_is_recorded_for_every_sleep_and_no_sleep_ends_early() {
        let lengths = sleep_lengths(50);
        assert!(lengths
            .iter()
            .all(|l| (Duration::from_millis(1)..=Duration::from_millis(50)).contains(l)));
        assert_eq!(lengths, sleep_lengths(50), "the same lengths every time");
        for ours in [true, false] {
            // A sentinel no real lateness reaches: each task must overwrite its own cell.
            let late: Arc<Vec<AtomicU64>> = Arc::new(
                (0..lengths.len())
                    .map(|_| AtomicU64::new(u64::MAX))
                    .collect(),
            );
            if ours {
                run_ours(2, lateness(Ours, &lengths, &late)).unwrap();
            } else {
                run_tokio(2, lateness(Tokio, &lengths, &late)).unwrap();
            }
            assert!(late.iter().all(|l| l.load(Ordering::Relaxed) != u64::MAX));
        }
    }
}
