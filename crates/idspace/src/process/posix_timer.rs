//! One POSIX timer as a pure state machine ([`PosixTimer`]), and the types of its calls: the
//! clocks, `timespec` and `itimerspec`, and what an expiry and a checkpoint give.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The largest overrun count [`PosixTimer::getoverrun`] reports: `DELAYTIMER_MAX`, `INT_MAX` as
/// on Linux.
pub const DELAYTIMER_MAX: u32 = i32::MAX as u32;

/// Nanoseconds in a second: a [`TimeSpec`]'s `nsec` stays below it.
pub const NSEC_PER_SEC: i64 = 1_000_000_000;

/// The latest deadline, in nanoseconds of the monotonic clock: the kernel's `KTIME_MAX`.
pub const FOREVER: u64 = i64::MAX as u64;

/// A timer's clock.
///
/// # Examples
///
/// ```
/// use idspace::process::{Clock, TimerError};
///
/// assert_eq!(Clock::from_clockid(1), Ok(Clock::Monotonic));
/// assert_eq!(Clock::Realtime.clockid(), 0);
/// assert_eq!(Clock::from_clockid(7), Err(TimerError::BadClock(7)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Clock {
    /// `CLOCK_MONOTONIC`: elapsed time.
    Monotonic,
    /// `CLOCK_REALTIME`: wall-clock time; absolute times are converted with the offset at
    /// arming (see [`PosixTimer`]).
    Realtime,
}

impl Clock {
    /// The clock of a Linux clock ID: 0 (`CLOCK_REALTIME`) or 1 (`CLOCK_MONOTONIC`).
    ///
    /// # Errors
    /// [`TimerError::BadClock`] for any other ID.
    pub fn from_clockid(id: i32) -> Result<Clock, TimerError> {
        match id {
            libc::CLOCK_REALTIME => Ok(Clock::Realtime),
            libc::CLOCK_MONOTONIC => Ok(Clock::Monotonic),
            other => Err(TimerError::BadClock(other)),
        }
    }

    /// Its Linux clock ID.
    pub fn clockid(self) -> i32 {
        match self {
            Clock::Realtime => libc::CLOCK_REALTIME,
            Clock::Monotonic => libc::CLOCK_MONOTONIC,
        }
    }
}

/// A `struct timespec`: seconds and nanoseconds, signed as in C so that bad values can be
/// expressed (and refused).
///
/// # Examples
///
/// ```
/// use idspace::process::{TimeSpec, TimerError, NSEC_PER_SEC};
///
/// let time = TimeSpec::from_nanos(1_500_000_000);
/// assert_eq!(time, TimeSpec::new(1, 500_000_000));
/// assert_eq!(time.to_nanos(), Ok(1_500_000_000));
/// assert_eq!(time.to_string(), "{sec: 1, nsec: 500000000}");
/// assert!(TimeSpec::ZERO.is_zero());
/// let unnormalised = TimeSpec::new(0, NSEC_PER_SEC);
/// assert_eq!(unnormalised.to_nanos(), Err(TimerError::Unnormalised(unnormalised)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TimeSpec {
    /// Whole seconds.
    pub sec: i64,
    /// Nanoseconds, `0..1_000_000_000` when normalised.
    pub nsec: i64,
}

impl TimeSpec {
    /// Zero: as a timer's value it disarms, as an interval it makes a one-shot timer.
    pub const ZERO: TimeSpec = TimeSpec { sec: 0, nsec: 0 };

    /// `sec` seconds and `nsec` nanoseconds (not checked: the timer calls check).
    pub const fn new(sec: i64, nsec: i64) -> TimeSpec {
        TimeSpec { sec, nsec }
    }

    /// The time of `nanos` nanoseconds, normalised.
    pub const fn from_nanos(nanos: u64) -> TimeSpec {
        TimeSpec {
            sec: (nanos / NSEC_PER_SEC as u64) as i64,
            nsec: (nanos % NSEC_PER_SEC as u64) as i64,
        }
    }

    /// Whether both fields are zero.
    pub fn is_zero(self) -> bool {
        self.sec == 0 && self.nsec == 0
    }

    /// The time in nanoseconds, saturated at [`FOREVER`].
    ///
    /// # Errors
    /// [`TimerError::Negative`] if a field is negative, [`TimerError::Unnormalised`] if `nsec`
    /// is a second or more.
    pub fn to_nanos(self) -> Result<u64, TimerError> {
        if self.sec < 0 || self.nsec < 0 {
            return Err(TimerError::Negative(self));
        }
        if self.nsec >= NSEC_PER_SEC {
            return Err(TimerError::Unnormalised(self));
        }
        let nanos = (self.sec as u128) * NSEC_PER_SEC as u128 + self.nsec as u128;
        Ok(nanos.min(FOREVER as u128) as u64)
    }
}

impl fmt::Display for TimeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{sec: {}, nsec: {}}}", self.sec, self.nsec)
    }
}

/// A `struct itimerspec`: the time to the (next) expiry and the interval.
///
/// # Examples
///
/// ```
/// use idspace::process::{Clock, ITimerSpec, Now, PosixTimer, TimeSpec, When};
///
/// const SEC: u64 = 1_000_000_000;
/// let every = ITimerSpec::every(TimeSpec::new(5, 0), TimeSpec::new(1, 0));
/// let mut timer = PosixTimer::new(Clock::Monotonic);
/// let old = timer.settime(Now::at(0, 0), When::Relative, every)?;
/// assert_eq!(old, ITimerSpec::DISARMED);
/// // Two seconds later: three left to the first expiry, then every second.
/// let left = ITimerSpec::every(TimeSpec::new(3, 0), TimeSpec::new(1, 0));
/// assert_eq!(timer.gettime(Now::at(2 * SEC, 0)), left);
/// assert_eq!(ITimerSpec::once(TimeSpec::new(5, 0)).interval, TimeSpec::ZERO);
/// # Ok::<(), idspace::process::TimerError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ITimerSpec {
    /// Time to the next expiry (relative), or the expiry time itself ([`When::Absolute`]); zero
    /// disarms.
    pub value: TimeSpec,
    /// The period after the first expiry; zero for a one-shot timer.
    pub interval: TimeSpec,
}

impl ITimerSpec {
    /// A one-shot setting expiring after (or at) `value`.
    pub const fn once(value: TimeSpec) -> ITimerSpec {
        ITimerSpec {
            value,
            interval: TimeSpec::ZERO,
        }
    }

    /// A periodic setting: first expiry after (or at) `value`, then every `interval`.
    pub const fn every(value: TimeSpec, interval: TimeSpec) -> ITimerSpec {
        ITimerSpec { value, interval }
    }

    /// The disarmed setting (both zero).
    pub const DISARMED: ITimerSpec = ITimerSpec {
        value: TimeSpec::ZERO,
        interval: TimeSpec::ZERO,
    };
}

/// How [`PosixTimer::settime`] reads a setting's value: `flags` of `timer_settime`.
///
/// # Examples
///
/// ```
/// use idspace::process::{Clock, ITimerSpec, Now, PosixTimer, TimeSpec, When};
///
/// const SEC: u64 = 1_000_000_000;
/// let ten = ITimerSpec::once(TimeSpec::new(10, 0));
/// let mut timer = PosixTimer::new(Clock::Monotonic);
/// timer.settime(Now::at(4 * SEC, 0), When::Relative, ten)?;
/// assert_eq!(timer.deadline(), Some(14 * SEC), "ten seconds from now");
/// timer.settime(Now::at(4 * SEC, 0), When::Absolute, ten)?;
/// assert_eq!(timer.deadline(), Some(10 * SEC), "at the clock's ten seconds");
/// # Ok::<(), idspace::process::TimerError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// The value is a time from now.
    Relative,
    /// The value is a time of the timer's clock (`TIMER_ABSTIME`). One already past expires at
    /// once, and an interval timer keeps the grid it asked for: the periods since the time
    /// count as overruns (the kernel's `hrtimer_forward` from the requested expiry).
    Absolute,
}

/// Why a timer call was refused. Nothing changed.
///
/// # Examples
///
/// ```
/// use idspace::process::{Clock, ITimerSpec, Now, PosixTimer, TimeSpec, TimerError, When};
///
/// let mut timer = PosixTimer::new(Clock::Monotonic);
/// let negative = TimeSpec::new(-1, 0);
/// let refused = timer.settime(Now::at(0, 0), When::Relative, ITimerSpec::once(negative));
/// assert_eq!(refused, Err(TimerError::Negative(negative)));
/// assert_eq!(refused.unwrap_err().name(), "negative");
/// assert_eq!(timer.deadline(), None, "nothing changed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimerError {
    /// A negative field in a time.
    Negative(TimeSpec),
    /// A time whose nanoseconds are a second or more.
    Unnormalised(TimeSpec),
    /// A clock ID that is neither `CLOCK_REALTIME` (0) nor `CLOCK_MONOTONIC` (1).
    BadClock(i32),
}

impl TimerError {
    /// A short name (`negative`, `unnormalised`, `bad_clock`).
    pub fn name(&self) -> &'static str {
        match self {
            TimerError::Negative(_) => "negative",
            TimerError::Unnormalised(_) => "unnormalised",
            TimerError::BadClock(_) => "bad_clock",
        }
    }
}

impl fmt::Display for TimerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerError::Negative(time) => write!(f, "a negative time: {time}"),
            TimerError::Unnormalised(time) => {
                write!(f, "a time with a second or more of nanoseconds: {time}")
            }
            TimerError::BadClock(id) => write!(
                f,
                "clock {id} is neither CLOCK_REALTIME (0) nor CLOCK_MONOTONIC (1)"
            ),
        }
    }
}

impl std::error::Error for TimerError {}

/// The moment a call happens at, on both clocks.
///
/// # Examples
///
/// ```
/// use idspace::process::{Clock, ITimerSpec, Now, PosixTimer, TimeSpec, When};
///
/// const SEC: u64 = 1_000_000_000;
/// // Five seconds into the monotonic clock, with the realtime clock 1000 s ahead.
/// let now = Now::at(5 * SEC, 1000 * SEC as i64);
/// assert_eq!(now.real, 1005 * SEC as i64);
/// // An absolute realtime time becomes a monotonic deadline with that offset.
/// let mut timer = PosixTimer::new(Clock::Realtime);
/// timer.settime(now, When::Absolute, ITimerSpec::once(TimeSpec::new(1010, 0)))?;
/// assert_eq!(timer.deadline(), Some(10 * SEC));
/// # Ok::<(), idspace::process::TimerError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// The monotonic clock, in nanoseconds from any fixed epoch.
    pub mono: u64,
    /// The realtime clock at the same moment, in nanoseconds since 1970.
    pub real: i64,
}

impl Now {
    /// The moment `mono` with the realtime clock `offset` nanoseconds ahead of the monotonic
    /// one.
    pub fn at(mono: u64, offset: i64) -> Now {
        Now {
            mono,
            real: (mono as i128 + offset as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        }
    }
}

/// Names the setting a notification belongs to: [`PosixTimer::consume`] takes it only if the
/// timer was not set again since.
///
/// # Examples
///
/// ```
/// use idspace::process::{Clock, ITimerSpec, Now, PosixTimer, TimeSpec, Token, When};
///
/// const MS: u64 = 1_000_000;
/// let mut timer = PosixTimer::new(Clock::Monotonic);
/// let in_1ms = ITimerSpec::once(TimeSpec::from_nanos(MS));
/// timer.settime(Now::at(0, 0), When::Relative, in_1ms)?;
/// let token: Token = timer.expire(MS).notify.expect("a notification to send");
/// assert!(timer.is_pending());
/// // Set again before that notification was delivered: it belongs to the old setting.
/// timer.settime(Now::at(MS, 0), When::Relative, in_1ms)?;
/// assert_ne!(timer.token(), token);
/// assert_eq!(timer.consume(token), None, "stale");
/// # Ok::<(), idspace::process::TimerError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token(pub u64);

/// What one [`PosixTimer::expire`] did.
///
/// # Examples
///
/// ```
/// use idspace::process::{Clock, Expired, ITimerSpec, Now, PosixTimer, TimeSpec, When};
///
/// const MS: u64 = 1_000_000;
/// let mut timer = PosixTimer::new(Clock::Monotonic);
/// let ms = TimeSpec::from_nanos(MS);
/// timer.settime(Now::at(0, 0), When::Relative, ITimerSpec::every(ms, ms))?;
/// // Fired late, at 3.5 ms: the expirations at 1, 2 and 3 ms, one notification.
/// let expired: Expired = timer.expire(3 * MS + MS / 2);
/// assert_eq!(expired.count, 3);
/// assert_eq!(timer.deadline(), Some(4 * MS));
/// let token = expired.notify.expect("a notification to send");
/// assert_eq!(timer.consume(token), Some(2), "the other two are its overruns");
/// assert_eq!(timer.getoverrun(), 2);
/// # Ok::<(), idspace::process::TimerError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expired {
    /// Expirations whose time passed by `now` (0 if the call was early or the timer
    /// disarmed: a stale firing).
    pub count: u64,
    /// A notification to send, if none was pending: consume it with this token.
    pub notify: Option<Token>,
}

/// What a checkpoint keeps of a timer (apart from its ID and notification target): relative
/// times, so that it means the same on any clock epoch.
///
/// # Examples
///
/// ```
/// use idspace::process::{Clock, ITimerSpec, Now, PosixTimer, TimeSpec, TimerSnapshot, When};
///
/// const SEC: u64 = 1_000_000_000;
/// let mut timer = PosixTimer::new(Clock::Monotonic);
/// let setting = ITimerSpec::every(TimeSpec::new(10, 0), TimeSpec::new(1, 0));
/// timer.settime(Now::at(0, 0), When::Relative, setting)?;
/// let snapshot: TimerSnapshot = timer.snapshot(4 * SEC);
/// assert_eq!(snapshot.remaining, Some(6 * SEC));
/// assert_eq!(snapshot.interval, SEC);
/// // Restored on a clock 100 s later, it has the same time left.
/// let restored = PosixTimer::restore(&snapshot, 100 * SEC)?;
/// assert_eq!(restored.deadline(), Some(106 * SEC));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerSnapshot {
    /// Its clock.
    pub clock: Clock,
    /// Nanoseconds to the next expiry (0 if already due), or `None` if disarmed.
    pub remaining: Option<u64>,
    /// Its interval in nanoseconds, 0 for one-shot.
    pub interval: u64,
    /// A notification is pending (queued, not yet delivered).
    pub pending: bool,
    /// Expirations counted since the pending notification was queued.
    pub overrun: u64,
    /// What `timer_getoverrun` reports.
    pub last_overrun: u32,
}

/// One POSIX timer as a pure state machine: arming, reading, expiring and the overrun count,
/// with the time passed in by the caller (so that every transition is deterministic and can be
/// checked against a model).
///
/// # The kernel design
///
/// A `k_itimer` holds its clock, its next expiry (an hrtimer), its interval, and two overrun
/// counts: `it_overrun`, expirations counted since the notification was queued, and
/// `it_overrun_last`, what `timer_getoverrun` reports: the count taken when the last
/// notification was delivered (dequeued), capped at `DELAYTIMER_MAX` (`INT_MAX` on Linux). While
/// a notification is queued and not yet delivered, further expirations only add to the count;
/// no second notification is queued. `timer_settime` (`common_timer_set`) cancels the hrtimer,
/// clears `it_overrun_last`, and bumps the timer's signal sequence so that a notification of the
/// old setting still queued is dropped when it would be delivered (Linux 6.13's rework). A zero
/// `it_value` disarms and clears the interval too. `timer_gettime` reports the time left (at
/// least 1 ns while armed, so that an expired timer whose notification is not out yet does not
/// read as disarmed) and the interval.
///
/// # This machine
///
/// Times are nanoseconds of one monotonic clock ([`Now::mono`]); the realtime clock is
/// [`Now::real`] at the same moment, so its offset is `real - mono`. [`PosixTimer::expire`] is
/// what the timer wheel calls when a deadline passed: it counts every expiration up to `now`
/// at once (an interval timer fired late has `1 + late / interval` of them), queues a
/// notification if none is pending and counts the rest as overruns. [`PosixTimer::consume`] is
/// the delivery: it takes the pending notification and sets what
/// [`getoverrun`](PosixTimer::getoverrun) reports. A [`Token`] names the setting a notification
/// belongs to, so that one still in flight after a re-arm or a disarm is recognised as stale.
///
/// # Where we differ from the kernel
///
/// * **Realtime absolute times are converted once.** An absolute `CLOCK_REALTIME` time is turned
///   into a monotonic deadline with the offset at the moment of `timer_settime`. If the
///   realtime clock is set later (a jump forwards or backwards), the deadline does not move:
///   the timer fires after the elapsed time it had when it was armed. The kernel keeps such
///   timers on the realtime clock base and re-evaluates them on `clock_settime` (and on leap
///   seconds), so there a jump forwards past the time fires them at once and a jump backwards
///   delays them. Relative realtime timers and every interval are elapsed time in both.
/// * **Deadlines saturate at `KTIME_MAX`** ([`FOREVER`], about 292 years from the epoch), as
///   the kernel's `ktime_t` arithmetic does; a timer armed past it is armed and never fires.
/// * **Overruns accumulate at firing time.** The kernel does not re-arm an interval timer while
///   its signal is queued and computes the missed periods with `hrtimer_forward` at delivery;
///   here the wheel keeps firing each period and the count grows as it goes. Both count the
///   same expirations: those whose time passed before the delivery.
///
/// # Examples
///
/// ```
/// use idspace::process::{Clock, ITimerSpec, Now, PosixTimer, TimeSpec, When};
///
/// const SEC: u64 = 1_000_000_000;
/// let mut timer = PosixTimer::new(Clock::Monotonic);
/// assert_eq!(timer.gettime(Now::at(0, 0)), ITimerSpec::DISARMED);
/// timer.settime(Now::at(0, 0), When::Relative, ITimerSpec::once(TimeSpec::new(2, 0)))?;
/// assert_eq!(timer.gettime(Now::at(SEC, 0)).value, TimeSpec::new(1, 0));
/// // The wheel calls `expire` once the deadline passed; the delivery `consume`s.
/// let expired = timer.expire(2 * SEC);
/// assert_eq!(expired.count, 1);
/// assert_eq!(timer.deadline(), None, "a one-shot timer is spent");
/// assert_eq!(timer.consume(expired.notify.expect("sent")), Some(0));
/// assert!(!timer.is_pending());
/// # Ok::<(), idspace::process::TimerError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PosixTimer {
    clock: Clock,
    /// The next expiry on the monotonic clock, or `None` while disarmed.
    next: Option<u64>,
    /// The period, 0 for one-shot.
    interval: u64,
    /// A notification is queued and not yet consumed.
    pending: bool,
    /// Expirations since the pending notification was queued (the kernel's `it_overrun`).
    overrun: u64,
    /// The overrun count of the last consumed notification (`it_overrun_last`).
    last_overrun: u32,
    /// The setting's sequence number, bumped by every `settime`.
    seq: u64,
}

impl PosixTimer {
    /// A disarmed timer on `clock`.
    pub fn new(clock: Clock) -> PosixTimer {
        PosixTimer {
            clock,
            next: None,
            interval: 0,
            pending: false,
            overrun: 0,
            last_overrun: 0,
            seq: 0,
        }
    }

    /// Its clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The next expiry on the monotonic clock (where the wheel should fire), if armed.
    pub fn deadline(&self) -> Option<u64> {
        self.next
    }

    /// Whether a notification is pending.
    pub fn is_pending(&self) -> bool {
        self.pending
    }

    /// The current setting's token.
    pub fn token(&self) -> Token {
        Token(self.seq)
    }

    /// `timer_settime`: arms (or, with a zero value, disarms) the timer and returns the old
    /// setting as [`gettime`](Self::gettime) would have read it. A notification of the old
    /// setting that is still pending is dropped and the overrun count cleared.
    ///
    /// # Errors
    /// [`TimerError::Negative`], [`TimerError::Unnormalised`] for either time; the timer is
    /// unchanged.
    pub fn settime(
        &mut self,
        now: Now,
        when: When,
        setting: ITimerSpec,
    ) -> Result<ITimerSpec, TimerError> {
        let value = setting.value.to_nanos()?;
        let interval = setting.interval.to_nanos()?;
        let old = self.gettime(now);
        self.seq += 1;
        self.pending = false;
        self.overrun = 0;
        self.last_overrun = 0;
        if setting.value.is_zero() {
            self.next = None;
            self.interval = 0;
            return Ok(old);
        }
        self.interval = interval;
        self.next = Some(match (when, self.clock) {
            (When::Relative, _) => now.mono.saturating_add(value).min(FOREVER),
            // A time already past stays the deadline: the wheel fires it at once and the
            // periods missed since count as overruns, on the grid the caller asked for.
            (When::Absolute, Clock::Monotonic) => value,
            (When::Absolute, Clock::Realtime) => {
                let ahead = value as i128 - now.real as i128;
                (now.mono as i128 + ahead).clamp(0, FOREVER as i128) as u64
            }
        });
        Ok(old)
    }

    /// `timer_gettime`: the time left to the next expiry (at least 1 ns while armed) and the
    /// interval; both zero when disarmed.
    pub fn gettime(&self, now: Now) -> ITimerSpec {
        let value = match self.next {
            None => TimeSpec::ZERO,
            Some(next) => TimeSpec::from_nanos(next.saturating_sub(now.mono).max(1)),
        };
        ITimerSpec {
            value,
            interval: TimeSpec::from_nanos(self.interval),
        }
    }

    /// `timer_getoverrun`: expirations that happened while the last consumed notification was
    /// pending, capped at [`DELAYTIMER_MAX`]. Zero after a `settime`.
    pub fn getoverrun(&self) -> u32 {
        self.last_overrun
    }

    /// The wheel fired at `now`: counts every expiration due by then, moves the deadline past
    /// `now` (or disarms a one-shot timer) and returns a notification to send if none was
    /// pending. A call before the deadline or while disarmed changes nothing (count 0).
    pub fn expire(&mut self, now: u64) -> Expired {
        let Some(next) = self.next.filter(|&next| next <= now && next < FOREVER) else {
            return Expired {
                count: 0,
                notify: None,
            };
        };
        let count = match (now - next).checked_div(self.interval) {
            None => {
                self.next = None;
                1
            }
            Some(periods) => {
                let count = periods + 1;
                let after = next as u128 + count as u128 * self.interval as u128;
                self.next = Some(after.min(FOREVER as u128) as u64);
                count
            }
        };
        let notify = if self.pending {
            self.overrun = self.overrun.saturating_add(count);
            None
        } else {
            self.pending = true;
            self.overrun = count - 1;
            Some(Token(self.seq))
        };
        Expired { count, notify }
    }

    /// Delivers the pending notification if it belongs to the current setting (`token`):
    /// returns its overrun count (expirations since it was queued, capped at
    /// [`DELAYTIMER_MAX`]), which [`getoverrun`](Self::getoverrun) reports from then on.
    /// `None` for a stale token or when nothing is pending; nothing changes then.
    pub fn consume(&mut self, token: Token) -> Option<u32> {
        if !self.pending || token.0 != self.seq {
            return None;
        }
        self.pending = false;
        self.last_overrun = self.overrun.min(u64::from(DELAYTIMER_MAX)) as u32;
        self.overrun = 0;
        Some(self.last_overrun)
    }

    /// The timer's state relative to `now`, for a checkpoint.
    pub fn snapshot(&self, now: u64) -> TimerSnapshot {
        TimerSnapshot {
            clock: self.clock,
            remaining: self.next.map(|next| next.saturating_sub(now)),
            interval: self.interval,
            pending: self.pending,
            overrun: self.overrun,
            last_overrun: self.last_overrun,
        }
    }

    /// A timer in the state of `snapshot`, its remaining time counted from `now`.
    ///
    /// # Errors
    /// A [`TimerSnapshot::last_overrun`] above [`DELAYTIMER_MAX`], or a count of overruns
    /// without a pending notification: the text says which.
    pub fn restore(snapshot: &TimerSnapshot, now: u64) -> Result<PosixTimer, &'static str> {
        if snapshot.last_overrun > DELAYTIMER_MAX {
            return Err("an overrun count above DELAYTIMER_MAX");
        }
        if !snapshot.pending && snapshot.overrun != 0 {
            return Err("overruns counted without a pending notification");
        }
        if snapshot.remaining.is_none() && snapshot.interval != 0 {
            return Err("an interval on a disarmed timer");
        }
        Ok(PosixTimer {
            clock: snapshot.clock,
            next: snapshot
                .remaining
                .map(|left| now.saturating_add(left).min(FOREVER)),
            interval: snapshot.interval,
            pending: snapshot.pending,
            overrun: snapshot.overrun,
            last_overrun: snapshot.last_overrun,
            seq: 0,
        })
    }
}

#[cfg(test)]
mod tests;
