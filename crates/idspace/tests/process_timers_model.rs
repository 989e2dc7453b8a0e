//! The POSIX timer state machine's overrun accounting against a reference model: the timer is
//! a list of expiry instants (`value + k × interval` from its arming), the wheel fires at
//! arbitrary later times, and notifications are consumed at arbitrary points. The model counts
//! expirations with a closed formula; the machine counts them incrementally as it fires.

#![cfg(feature = "std")]
#![cfg(not(loom))]

use idspace::process::{Clock, ITimerSpec, Now, PosixTimer, TimeSpec, Token, When, DELAYTIMER_MAX};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Time moves on by `.0` and the wheel fires.
    Fire(u64),
    /// Time moves on by `.0` and the notification last sent is consumed.
    Consume(u64),
    /// Time moves on by `.0` and the timer is set again (value, interval).
    Rearm(u64, u64, u64),
    /// Time moves on by `.0`; the timer is read.
    Read(u64),
}

fn step() -> impl Strategy<Value = u64> {
    // Mostly small steps, sometimes long enough to pass DELAYTIMER_MAX one-nanosecond periods.
    prop_oneof![8 => 0u64..40, 1 => Just(3_000_000_000u64)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => step().prop_map(Op::Fire),
        3 => step().prop_map(Op::Consume),
        1 => (step(), 1u64..50, 0u64..20).prop_map(|(dt, v, i)| Op::Rearm(dt, v, i)),
        1 => step().prop_map(Op::Read),
    ]
}

/// One arming as the model sees it.
struct Arming {
    start: u64,
    value: u64,
    interval: u64,
    /// The latest firing since this arming.
    fired_at: Option<u64>,
    /// Expirations observed by the previous consumption.
    cut: u64,
    last_overrun: u32,
}

impl Arming {
    fn new(start: u64, value: u64, interval: u64) -> Arming {
        Arming {
            start,
            value,
            interval,
            fired_at: None,
            cut: 0,
            last_overrun: 0,
        }
    }

    /// Expiry instants at or before `t`.
    fn due_by(&self, t: u64) -> u64 {
        let first = self.start + self.value;
        if t < first {
            return 0;
        }
        (t - first)
            .checked_div(self.interval)
            .map_or(1, |periods| periods + 1)
    }

    /// Expirations the wheel has seen.
    fn observed(&self) -> u64 {
        self.fired_at.map_or(0, |t| self.due_by(t))
    }

    /// The next expiry instant the wheel has not fired, if any.
    fn next(&self) -> Option<u64> {
        let seen = self.observed();
        if self.interval == 0 && seen == 1 {
            return None;
        }
        Some(self.start + self.value + seen * self.interval)
    }
}

fn now(t: u64) -> Now {
    Now::at(t, 0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn overruns_match_the_model(
        value in 1u64..50,
        interval in 0u64..20,
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mut timer = PosixTimer::new(Clock::Monotonic);
        let mut t = 0u64;
        timer
            .settime(now(t), When::Relative, ITimerSpec::every(
                TimeSpec::from_nanos(value), TimeSpec::from_nanos(interval)))
            .unwrap();
        let mut model = Arming::new(t, value, interval);
        let mut tokens: Vec<Token> = Vec::new();
        for op in ops {
            match op {
                Op::Fire(dt) => {
                    t += dt;
                    let before = model.observed();
                    let pending_before = before > model.cut;
                    let fired = timer.expire(t);
                    if model.next().is_some_and(|next| next <= t) {
                        model.fired_at = Some(t);
                    }
                    prop_assert_eq!(fired.count, model.observed() - before);
                    // A notification goes out exactly when expirations were seen and none was
                    // pending.
                    prop_assert_eq!(fired.notify.is_some(), fired.count > 0 && !pending_before);
                    tokens.extend(fired.notify);
                }
                Op::Consume(dt) => {
                    t += dt;
                    let got = tokens.last().and_then(|&token| timer.consume(token));
                    let seen = model.observed() - model.cut;
                    let want = (seen > 0).then(|| (seen - 1).min(u64::from(DELAYTIMER_MAX)) as u32);
                    prop_assert_eq!(got, want);
                    if let Some(overrun) = want {
                        model.cut = model.observed();
                        model.last_overrun = overrun;
                    }
                }
                Op::Rearm(dt, v, i) => {
                    t += dt;
                    let old = timer
                        .settime(now(t), When::Relative, ITimerSpec::every(
                            TimeSpec::from_nanos(v), TimeSpec::from_nanos(i)))
                        .unwrap();
                    let left = model.next().map_or(0, |next| next.saturating_sub(t).max(1));
                    prop_assert_eq!(old.value, TimeSpec::from_nanos(left));
                    model = Arming::new(t, v, i);
                    // Every earlier notification is stale now.
                    for &token in &tokens {
                        prop_assert_eq!(timer.consume(token), None);
                    }
                    tokens.clear();
                }
                Op::Read(dt) => t += dt,
            }
            prop_assert_eq!(timer.getoverrun(), model.last_overrun);
            prop_assert_eq!(timer.is_pending(), model.observed() > model.cut);
            let read = timer.gettime(now(t));
            let left = model.next().map_or(0, |next| next.saturating_sub(t).max(1));
            prop_assert_eq!(read.value, TimeSpec::from_nanos(left));
            let interval = if model.next().is_some() { model.interval } else { 0 };
            prop_assert_eq!(read.interval, TimeSpec::from_nanos(interval));
        }
    }
}
