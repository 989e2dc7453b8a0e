//! [`Interval`]: ticks at a fixed period.

use std::fmt;
use std::future::poll_fn;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::sleep::Sleep;
use crate::sched::{Handle, Hooks};

/// The error of an interval asked for with a zero period.
///
/// ```
/// use std::time::Duration;
/// use idspace::sched::time::{interval, ZeroPeriod};
///
/// assert_eq!(interval(Duration::ZERO).unwrap_err(), ZeroPeriod);
/// assert_eq!(ZeroPeriod.to_string(), "an interval's period must be longer than zero");
/// assert!(interval(Duration::from_nanos(1)).is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroPeriod;

impl fmt::Display for ZeroPeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an interval's period must be longer than zero")
    }
}

impl std::error::Error for ZeroPeriod {}

/// Ticks at `start`, `start + period`, `start + 2 × period`, …: from [`interval`],
/// [`interval_at`] or [`Handle::interval`].
///
/// **Missed ticks are skipped.** When [`tick`](Self::tick) is called late, more than a period
/// after the tick it was due for, it returns that tick at once and the ticks that would have
/// followed it before now are dropped: the next one is the first of the original schedule that
/// is still ahead (tokio's `MissedTickBehavior::Skip`, not its default `Burst`, which would
/// return every missed tick at once in a row). [`missed`](Self::missed) counts what was
/// skipped. The schedule never drifts: ticks stay on `start + n × period`.
///
/// Where it may be polled: see [`Sleep`].
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::interval_at;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let period = Duration::from_millis(20);
/// let start = Instant::now();
/// let mut ticks = interval_at(start, period)?;
/// assert_eq!(ticks.period(), period);
/// runtime.block_on(async {
///     assert_eq!(ticks.tick().await, start);
///     let missed_before = ticks.missed();
///     // Late by three and a half periods: the next tick of the schedule comes at once...
///     std::thread::sleep(period * 7 / 2);
///     let late = ticks.tick().await;
///     assert!(late > start);
///     // ... the ones that would have followed it before now are skipped...
///     let missed = ticks.missed() - missed_before;
///     assert!(missed >= 2);
///     // ... and the schedule goes on where it was: no drift.
///     let next = ticks.tick().await;
///     assert_eq!(next, late + period * (missed as u32 + 1));
///     assert!(Instant::now() >= next);
/// })?;
/// # Ok(())
/// # }
/// ```
pub struct Interval {
    period: Duration,
    /// The next tick of the schedule, and the sleep until it.
    sleep: Sleep,
    missed: u64,
}

/// An interval whose first tick is now, then every `period`.
///
/// # Errors
/// [`ZeroPeriod`] for a zero `period`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::interval;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// let start = Instant::now();
/// let task = runtime.spawn(async {
///     let mut every = interval(Duration::from_millis(1)).expect("not zero");
///     let mut seen = Vec::new();
///     for _ in 0..3 {
///         seen.push(every.tick().await);
///     }
///     seen
/// });
/// let seen = task.join()?;
/// // The first tick is at once; each later one at least a period after the one before.
/// assert!(seen[0] >= start);
/// assert!(seen.windows(2).all(|pair| pair[1] - pair[0] >= Duration::from_millis(1)));
/// # Ok(())
/// # }
/// ```
pub fn interval(period: Duration) -> Result<Interval, ZeroPeriod> {
    interval_at(Instant::now(), period)
}

/// An interval whose first tick is at `start`, then every `period`.
///
/// # Errors
/// [`ZeroPeriod`] for a zero `period`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::interval_at;
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// // The first tick 2 ms from now, then every 5 ms.
/// let first = Instant::now() + Duration::from_millis(2);
/// let mut every = interval_at(first, Duration::from_millis(5))?;
/// let ticked = runtime.block_on(every.tick())?;
/// assert_eq!(ticked, first);
/// assert!(Instant::now() >= first);
/// # Ok(())
/// # }
/// ```
pub fn interval_at(start: Instant, period: Duration) -> Result<Interval, ZeroPeriod> {
    Interval::new(Sleep::new(start, None), period)
}

impl Interval {
    fn new(sleep: Sleep, period: Duration) -> Result<Self, ZeroPeriod> {
        if period.is_zero() {
            return Err(ZeroPeriod);
        }
        Ok(Interval {
            period,
            sleep,
            missed: 0,
        })
    }

    /// Waits for the next tick and returns its scheduled instant.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick: its scheduled instant once it has come. For hand-written
    /// futures; [`tick`](Self::tick) is this in an `async fn`.
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use std::time::{Duration, Instant};
    /// use idspace::sched::time::interval_at;
    /// use idspace::sched::{Policy, Runtime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let runtime = Runtime::new(1, Policy::Wakelist)?;
    /// let start = Instant::now();
    /// let mut every = interval_at(start, Duration::from_millis(2))?;
    /// let (a, b) = runtime.block_on(async {
    ///     let a = poll_fn(|cx| every.poll_tick(cx)).await;
    ///     let b = poll_fn(|cx| every.poll_tick(cx)).await;
    ///     (a, b)
    /// })?;
    /// assert_eq!(a, start);
    /// assert!(b >= start + Duration::from_millis(2));
    /// # Ok(())
    /// # }
    /// ```
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if self.sleep.poll_at(cx).is_pending() {
            return Poll::Pending;
        }
        let scheduled = self.sleep.deadline();
        let now = Instant::now();
        let mut next = scheduled.checked_add(self.period).unwrap_or(scheduled);
        if next <= now {
            // Late by more than a period: skip to the first tick still ahead.
            let behind = now.duration_since(scheduled).as_nanos() / self.period.as_nanos();
            let skipped = u64::try_from(behind).unwrap_or(u64::MAX);
            self.missed = self.missed.saturating_add(skipped);
            next = u32::try_from(skipped.saturating_add(1))
                .ok()
                .and_then(|periods| self.period.checked_mul(periods))
                .and_then(|ahead| scheduled.checked_add(ahead))
                .unwrap_or(now + self.period);
        }
        self.sleep.reset(next);
        Poll::Ready(scheduled)
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Ticks skipped so far because [`tick`](Self::tick) was called too late for them.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

impl fmt::Debug for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interval")
            .field("period", &self.period)
            .field("next", &self.sleep.deadline())
            .field("missed", &self.missed)
            .finish()
    }
}

impl<H: Hooks> Handle<H> {
    /// An [`Interval`] on this runtime's timers whose first tick is now: unlike [`interval`],
    /// it can be polled from any thread and any executor.
    ///
    /// # Errors
    /// [`ZeroPeriod`] for a zero `period`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idspace::sched::{Policy, Runtime};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let timers = Runtime::new(1, Policy::Wakelist)?;
    /// let mut every = timers.handle().interval(Duration::from_millis(1))?;
    /// // Ticked from another runtime's block_on, on the first runtime's timers.
    /// let other = Runtime::new(1, Policy::Wakelist)?;
    /// let (a, b) = other.block_on(async { (every.tick().await, every.tick().await) })?;
    /// assert!(b - a >= Duration::from_millis(1));
    /// assert!(timers.handle().interval(Duration::ZERO).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn interval(&self, period: Duration) -> Result<Interval, ZeroPeriod> {
        Interval::new(self.sleep_until(Instant::now()), period)
    }
}
