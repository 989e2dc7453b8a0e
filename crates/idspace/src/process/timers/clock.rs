//! The clocks timers read: the kernel's `CLOCK_MONOTONIC`, read once and followed by
//! [`Instant`] from then on, and the system's realtime clock; and the conversions between
//! [`Instant`]s (the wheel's time) and the monotonic nanoseconds of [`PosixTimer`].

// `OnceLock`: the epoch is one process-wide static, set once; loom has no such lock and
// models no statics, so it stays std's.
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::process::posix_timer::{Clock, Now, TimeSpec, NSEC_PER_SEC};
#[cfg(doc)]
use crate::process::posix_timer::{PosixTimer, When};

/// The clocks timers read: a fixed epoch for the monotonic nanoseconds of [`PosixTimer`], and
/// the wall clock for realtime.
pub(crate) fn now() -> Now {
    let mono = mono_of(Instant::now());
    let real = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_nanos()).unwrap_or(i64::MAX),
    };
    Now { mono, real }
}

/// `clock_gettime` of the clocks timers use: the time to give [`When::Absolute`] settings.
/// The monotonic clock is the kernel's `CLOCK_MONOTONIC`, read once and followed by
/// [`Instant`] from then on (the same clock); the realtime clock is the system's.
///
/// # Examples
///
/// ```
/// use idspace::process::{clock_gettime, Clock};
///
/// let before = clock_gettime(Clock::Monotonic).to_nanos()?;
/// let after = clock_gettime(Clock::Monotonic).to_nanos()?;
/// assert!(after >= before);
/// assert!(clock_gettime(Clock::Realtime).sec > 1_600_000_000, "after September 2020");
/// # Ok::<(), idspace::process::TimerError>(())
/// ```
pub fn clock_gettime(clock: Clock) -> TimeSpec {
    let at = now();
    match clock {
        Clock::Monotonic => TimeSpec::from_nanos(at.mono),
        Clock::Realtime => TimeSpec::new(
            at.real.div_euclid(NSEC_PER_SEC),
            at.real.rem_euclid(NSEC_PER_SEC),
        ),
    }
}

/// An instant and its `CLOCK_MONOTONIC` reading, taken together once: what converts between
/// [`Instant`]s and the monotonic nanoseconds of [`PosixTimer`].
fn epoch() -> (Instant, u64) {
    static EPOCH: OnceLock<(Instant, u64)> = OnceLock::new();
    *EPOCH.get_or_init(|| (Instant::now(), crate::sys::clock::monotonic_nanos()))
}

/// Monotonic nanoseconds of `instant`.
pub(crate) fn mono_of(instant: Instant) -> u64 {
    let (base, nanos) = epoch();
    match instant.checked_duration_since(base) {
        Some(after) => nanos.saturating_add(u64::try_from(after.as_nanos()).unwrap_or(u64::MAX)),
        None => {
            let before = base.duration_since(instant).as_nanos();
            nanos.saturating_sub(u64::try_from(before).unwrap_or(u64::MAX))
        }
    }
}

/// The instant of monotonic nanoseconds `mono`, if representable.
pub(crate) fn instant_of(mono: u64) -> Option<Instant> {
    let (base, nanos) = epoch();
    if mono >= nanos {
        base.checked_add(Duration::from_nanos(mono - nanos))
    } else {
        base.checked_sub(Duration::from_nanos(nanos - mono))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn instants_and_monotonic_nanoseconds_convert_both_ways() {
        let now = Instant::now();
        let mono = mono_of(now);
        assert!(mono > 0, "the kernel's monotonic clock, not a count from 0");
        assert_eq!(instant_of(mono), Some(now));
        let later = now + Duration::from_millis(1500);
        assert_eq!(mono_of(later), mono + 1_500_000_000);
        assert_eq!(instant_of(mono + 1_500_000_000), Some(later));
    }
}
