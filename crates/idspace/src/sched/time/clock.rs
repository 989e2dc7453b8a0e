//! The runtime's clock: `Instant`s to wheel ticks and back, at the runtime's resolution.

use std::time::{Duration, Instant};

/// The resolution of the runtime's timers: one wheel tick.
///
/// A deadline is rounded *up* to the next tick and a tick expires once the clock has passed it,
/// so a timer never fires before its deadline and, on an idle worker, fires at most one tick
/// plus the futex wakeup's latency after it. 100 µs rather than tokio's 1 ms keeps the rounding
/// well inside the lateness budget of a millisecond; the cost is more cascading of long timers,
/// which is paid only by timers that live long enough to cascade (a level-0 slot spans 6.4 ms,
/// level 1 0.41 s, level 2 26 s, level 3 28 min, level 4 30 h, level 5 79.5 days).
///
/// ```
/// use std::time::{Duration, Instant};
/// use idspace::sched::time::{sleep_until, RESOLUTION};
/// use idspace::sched::{Policy, Runtime};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// assert_eq!(RESOLUTION, Duration::from_micros(100));
/// let runtime = Runtime::new(1, Policy::Wakelist)?;
/// // Deadlines between ticks are rounded up: never early.
/// for micros in [1, 150, 950] {
///     let deadline = Instant::now() + Duration::from_micros(micros);
///     runtime.block_on(sleep_until(deadline))?;
///     assert!(Instant::now() >= deadline);
/// }
/// # Ok(())
/// # }
/// ```
pub const RESOLUTION: Duration = Duration::from_micros(100);

/// Nanoseconds per tick.
const TICK_NANOS: u128 = RESOLUTION.as_nanos();

// `WheelClock::split` relies on a tick dividing a second.
const _: () = assert!(RESOLUTION.as_secs() == 0 && 1_000_000_000 % RESOLUTION.subsec_nanos() == 0);

/// Converts between instants and ticks counted from the runtime's start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WheelClock {
    origin: Instant,
}

impl WheelClock {
    /// A clock whose tick 0 is now.
    pub(crate) fn new() -> Self {
        WheelClock {
            origin: Instant::now(),
        }
    }

    /// The first tick at or after `deadline` (0 for a deadline before the runtime started).
    pub(crate) fn tick_at_or_after(&self, deadline: Instant) -> u64 {
        let since = deadline.saturating_duration_since(self.origin);
        let (ticks, rest) = Self::split(since);
        ticks.saturating_add(u64::from(rest != 0))
    }

    /// The last tick at or before `now`: every tick up to it has passed.
    pub(crate) fn tick_passed(&self, now: Instant) -> u64 {
        Self::split(now.saturating_duration_since(self.origin)).0
    }

    /// Whole ticks in `duration`, and the nanoseconds left over. In 64-bit arithmetic: these
    /// run on every arm and expiry check, where a 128-bit division would be a library call.
    fn split(duration: Duration) -> (u64, u32) {
        const TICK: u32 = RESOLUTION.subsec_nanos();
        const PER_SECOND: u64 = 1_000_000_000 / TICK as u64;
        let nanos = duration.subsec_nanos();
        let ticks = duration
            .as_secs()
            .saturating_mul(PER_SECOND)
            .saturating_add(u64::from(nanos / TICK));
        (ticks, nanos % TICK)
    }

    /// The instant of `tick`, or `None` if it is beyond what `Instant` can hold.
    pub(crate) fn instant(&self, tick: u64) -> Option<Instant> {
        let nanos = u128::from(tick) * TICK_NANOS;
        let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
        let duration = Duration::new(secs, (nanos % 1_000_000_000) as u32);
        self.origin.checked_add(duration)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_and_the_present_rounds_down() {
        let clock = WheelClock::new();
        let at = |micros| clock.origin + Duration::from_micros(micros);
        assert_eq!(clock.tick_at_or_after(at(0)), 0);
        assert_eq!(clock.tick_at_or_after(at(1)), 1);
        assert_eq!(clock.tick_at_or_after(at(100)), 1);
        assert_eq!(clock.tick_at_or_after(at(101)), 2);
        assert_eq!(clock.tick_passed(at(99)), 0);
        assert_eq!(clock.tick_passed(at(100)), 1);
        assert_eq!(clock.tick_passed(at(250)), 2);
        // A tick that has passed lies at or after every deadline rounded up to it.
        for micros in [0, 1, 99, 100, 101, 12_345] {
            let tick = clock.tick_at_or_after(at(micros));
            assert!(clock.instant(tick).unwrap() >= at(micros));
            assert_eq!(clock.tick_passed(clock.instant(tick).unwrap()), tick);
        }
        // Before the origin, and absurdly far.
        assert_eq!(
            clock.tick_at_or_after(clock.origin - Duration::from_secs(1)),
            0
        );
        assert!(clock
            .instant(u64::MAX)
            .is_none_or(|instant| instant > clock.origin));
    }
}
