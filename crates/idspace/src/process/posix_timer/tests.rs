//! The timer state machine's transitions, one behaviour at a time.

use super::*;

const MS: u64 = 1_000_000;

fn at(mono: u64) -> Now {
    Now::at(mono, 1_700_000_000 * NSEC_PER_SEC)
}

fn ms(n: i64) -> TimeSpec {
    TimeSpec::from_nanos(n as u64 * MS)
}

#[test]
fn a_one_shot_fires_once_and_disarms() {
    let mut timer = PosixTimer::new(Clock::Monotonic);
    let old = timer
        .settime(at(100), When::Relative, ITimerSpec::once(ms(5)))
        .unwrap();
    assert_eq!(old, ITimerSpec::DISARMED);
    assert_eq!(timer.deadline(), Some(100 + 5 * MS));
    assert_eq!(timer.gettime(at(100 + MS)).value, ms(4));
    assert_eq!(timer.expire(100 + MS).count, 0, "early: nothing");
    let fired = timer.expire(100 + 7 * MS);
    assert_eq!(fired.count, 1);
    let token = fired.notify.unwrap();
    assert_eq!(timer.deadline(), None);
    assert_eq!(timer.gettime(at(100 + 8 * MS)), ITimerSpec::DISARMED);
    assert_eq!(timer.expire(100 + 9 * MS).count, 0);
    assert_eq!(timer.consume(token), Some(0));
    assert_eq!(timer.consume(token), None, "consumed once");
}

#[test]
fn settime_returns_the_old_setting_and_zero_disarms() {
    let mut timer = PosixTimer::new(Clock::Monotonic);
    timer
        .settime(at(0), When::Relative, ITimerSpec::every(ms(10), ms(3)))
        .unwrap();
    let old = timer
        .settime(at(4 * MS), When::Relative, ITimerSpec::DISARMED)
        .unwrap();
    assert_eq!(old, ITimerSpec::every(ms(6), ms(3)));
    assert_eq!(timer.deadline(), None);
    assert_eq!(timer.gettime(at(5 * MS)), ITimerSpec::DISARMED);
    // A zero value with an interval disarms and clears the interval too.
    timer
        .settime(
            at(0),
            When::Relative,
            ITimerSpec::every(TimeSpec::ZERO, ms(3)),
        )
        .unwrap();
    assert_eq!(timer.gettime(at(0)), ITimerSpec::DISARMED);
}

#[test]
fn an_overdue_armed_timer_reads_one_nanosecond_left() {
    let mut timer = PosixTimer::new(Clock::Monotonic);
    timer
        .settime(at(0), When::Relative, ITimerSpec::once(ms(1)))
        .unwrap();
    assert_eq!(timer.gettime(at(5 * MS)).value, TimeSpec::new(0, 1));
}

#[test]
fn bad_times_are_refused_and_change_nothing() {
    let mut timer = PosixTimer::new(Clock::Realtime);
    timer
        .settime(at(0), When::Relative, ITimerSpec::every(ms(10), ms(3)))
        .unwrap();
    let before = timer.clone();
    for (setting, name) in [
        (ITimerSpec::once(TimeSpec::new(-1, 0)), "negative"),
        (ITimerSpec::once(TimeSpec::new(0, -1)), "negative"),
        (
            ITimerSpec::once(TimeSpec::new(0, NSEC_PER_SEC)),
            "unnormalised",
        ),
        (ITimerSpec::every(ms(1), TimeSpec::new(0, -5)), "negative"),
        (
            ITimerSpec::every(ms(1), TimeSpec::new(1, NSEC_PER_SEC + 1)),
            "unnormalised",
        ),
        (
            ITimerSpec::every(TimeSpec::ZERO, TimeSpec::new(-3, 0)),
            "negative",
        ),
    ] {
        let error = timer.settime(at(MS), When::Relative, setting).unwrap_err();
        assert_eq!(error.name(), name, "{setting:?}");
        assert!(!error.to_string().is_empty());
        assert_eq!(timer, before, "{setting:?} changed the timer");
    }
    assert_eq!(Clock::from_clockid(7), Err(TimerError::BadClock(7)));
    assert_eq!(Clock::from_clockid(1), Ok(Clock::Monotonic));
    assert_eq!(Clock::from_clockid(0), Ok(Clock::Realtime));
}

#[test]
fn absolute_times_on_both_clocks() {
    let offset = 1_700_000_000 * NSEC_PER_SEC;
    let mut mono = PosixTimer::new(Clock::Monotonic);
    mono.settime(at(10 * MS), When::Absolute, ITimerSpec::once(ms(25)))
        .unwrap();
    assert_eq!(mono.deadline(), Some(25 * MS));
    let mut real = PosixTimer::new(Clock::Realtime);
    let wall = TimeSpec::from_nanos((offset + 25 * MS as i64) as u64);
    real.settime(at(10 * MS), When::Absolute, ITimerSpec::once(wall))
        .unwrap();
    assert_eq!(real.deadline(), Some(25 * MS));
    // A time already past is due at once (and reads as 1 ns left).
    mono.settime(at(30 * MS), When::Absolute, ITimerSpec::once(ms(25)))
        .unwrap();
    assert_eq!(mono.deadline(), Some(25 * MS));
    assert_eq!(mono.gettime(at(30 * MS)).value, TimeSpec::new(0, 1));
    real.settime(at(30 * MS), When::Absolute, ITimerSpec::once(wall))
        .unwrap();
    assert_eq!(real.deadline(), Some(25 * MS));
    // The conversion is made once: a later realtime jump does not move the deadline.
    real.settime(
        Now::at(0, offset),
        When::Absolute,
        ITimerSpec::once(TimeSpec::from_nanos(offset as u64 + 50 * MS)),
    )
    .unwrap();
    assert_eq!(
        real.gettime(Now::at(10 * MS, offset + 1000 * MS as i64))
            .value,
        ms(40)
    );
}

#[test]
fn a_past_absolute_time_keeps_its_grid_and_counts_the_missed_periods() {
    // Asked to start at 10 ms with a 3 ms period, at 20.5 ms: the expiries at 10, 13, 16
    // and 19 ms have passed, the next is at 22 ms (the kernel forwards from the requested
    // time, not from the call).
    let mut timer = PosixTimer::new(Clock::Monotonic);
    timer
        .settime(
            at(20 * MS + MS / 2),
            When::Absolute,
            ITimerSpec::every(ms(10), ms(3)),
        )
        .unwrap();
    assert_eq!(timer.deadline(), Some(10 * MS));
    let fired = timer.expire(20 * MS + MS / 2);
    assert_eq!(fired.count, 4);
    assert_eq!(timer.deadline(), Some(22 * MS));
    assert_eq!(timer.consume(fired.notify.unwrap()), Some(3));
    // The same on the realtime clock.
    let offset = 1_700_000_000 * NSEC_PER_SEC;
    let mut real = PosixTimer::new(Clock::Realtime);
    let wall = TimeSpec::from_nanos((offset + 10 * MS as i64) as u64);
    real.settime(
        Now::at(20 * MS + MS / 2, offset),
        When::Absolute,
        ITimerSpec::every(wall, ms(3)),
    )
    .unwrap();
    assert_eq!(real.deadline(), Some(10 * MS));
}

#[test]
fn huge_times_saturate_and_never_fire() {
    let mut timer = PosixTimer::new(Clock::Monotonic);
    timer
        .settime(
            at(5),
            When::Relative,
            ITimerSpec::every(TimeSpec::new(i64::MAX, 0), TimeSpec::new(i64::MAX, 0)),
        )
        .unwrap();
    assert_eq!(timer.deadline(), Some(FOREVER));
    assert_eq!(timer.expire(u64::MAX).count, 0);
    assert!(timer.gettime(at(5)).value.sec > 200 * 365 * 86_400);
}

#[test]
fn overruns_count_while_pending_and_are_capped() {
    let mut timer = PosixTimer::new(Clock::Monotonic);
    timer
        .settime(at(0), When::Relative, ITimerSpec::every(ms(1), ms(1)))
        .unwrap();
    // Fired late: 1 ms .. 3.5 ms hold three expirations.
    let first = timer.expire(3 * MS + MS / 2);
    assert_eq!(first.count, 3);
    let token = first.notify.unwrap();
    assert_eq!(timer.deadline(), Some(4 * MS));
    assert_eq!(timer.expire(4 * MS).notify, None, "already pending");
    assert_eq!(timer.getoverrun(), 0, "nothing delivered yet");
    assert_eq!(timer.consume(token), Some(3));
    assert_eq!(timer.getoverrun(), 3);
    // A one-nanosecond period left alone for ten seconds: capped at DELAYTIMER_MAX.
    timer
        .settime(
            at(0),
            When::Relative,
            ITimerSpec::every(TimeSpec::new(0, 1), TimeSpec::new(0, 1)),
        )
        .unwrap();
    assert_eq!(timer.getoverrun(), 0, "settime clears it");
    let token = timer.expire(1).notify.unwrap();
    timer.expire(10 * NSEC_PER_SEC as u64);
    assert_eq!(timer.consume(token), Some(DELAYTIMER_MAX));
}

#[test]
fn a_notification_of_an_old_setting_is_stale() {
    let mut timer = PosixTimer::new(Clock::Monotonic);
    timer
        .settime(at(0), When::Relative, ITimerSpec::once(ms(1)))
        .unwrap();
    let old = timer.expire(2 * MS).notify.unwrap();
    timer
        .settime(at(2 * MS), When::Relative, ITimerSpec::once(ms(1)))
        .unwrap();
    assert!(
        !timer.is_pending(),
        "settime drops the pending notification"
    );
    assert_eq!(timer.consume(old), None);
    let new = timer.expire(3 * MS).notify.unwrap();
    assert_ne!(old, new);
    assert_eq!(timer.consume(old), None);
    assert_eq!(timer.consume(new), Some(0));
}

#[test]
fn snapshots_round_trip_relative_to_now() {
    let mut timer = PosixTimer::new(Clock::Realtime);
    timer
        .settime(at(0), When::Relative, ITimerSpec::every(ms(2), ms(5)))
        .unwrap();
    timer.expire(8 * MS);
    let snapshot = timer.snapshot(9 * MS);
    assert_eq!(snapshot.remaining, Some(3 * MS));
    assert_eq!((snapshot.pending, snapshot.overrun), (true, 1));
    let restored = PosixTimer::restore(&snapshot, 1000 * MS).unwrap();
    assert_eq!(restored.deadline(), Some(1003 * MS));
    assert_eq!(restored.snapshot(1000 * MS), snapshot);
    let bad = TimerSnapshot {
        pending: false,
        ..snapshot
    };
    assert!(PosixTimer::restore(&bad, 0).is_err());
    let bad = TimerSnapshot {
        last_overrun: DELAYTIMER_MAX + 1,
        ..snapshot
    };
    assert!(PosixTimer::restore(&bad, 0).is_err());
}
