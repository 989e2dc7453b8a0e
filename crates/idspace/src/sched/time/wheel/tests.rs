//! The wheel alone: cascades across levels, deadlines beyond the top level, cancelling from
//! every level, re-arming and releasing detached entries, and a proptest against a model (a
//! `BTreeMap` of deadlines) of which entries expire at each advance.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

/// Advances to `now` and returns the values that expired, sorted, releasing their entries.
fn advance(wheel: &mut Wheel<u64>, now: u64) -> Vec<u64> {
    let mut expired = Vec::new();
    wheel.advance(now, &mut expired);
    let mut values: Vec<u64> = expired
        .into_iter()
        .map(|(key, value)| {
            assert!(wheel.release(key), "an expired entry is detached");
            value
        })
        .collect();
    values.sort_unstable();
    values
}

/// The tick at which the first entry of level `level` would be placed, seen from tick 0.
fn level_start(level: usize) -> u64 {
    1 << (BITS as usize * level)
}

#[test]
fn an_entry_on_each_level_expires_at_its_tick_and_not_before() {
    for level in 0..LEVELS {
        // Just inside the level, in its middle and at its last tick.
        let span = level_start(level + 1);
        for tick in [level_start(level).max(1), span / 2 + 3, span - 1] {
            let mut wheel = Wheel::new();
            wheel.insert(tick, tick);
            assert_eq!(wheel.next_expiry().map(|start| start <= tick), Some(true));
            assert!(
                advance(&mut wheel, tick - 1).is_empty(),
                "tick {tick}: early"
            );
            assert_eq!(wheel.pending(), 1);
            assert_eq!(advance(&mut wheel, tick), vec![tick], "tick {tick}: late");
            assert_eq!(wheel.pending(), 0);
            assert_eq!(wheel.next_expiry(), None);
        }
    }
}

#[test]
fn entries_cascade_down_through_every_level() {
    let mut wheel = Wheel::new();
    // One entry per level, each a little past a level boundary so that it cascades.
    let ticks: Vec<u64> = (0..LEVELS).map(|level| level_start(level) + 5).collect();
    for &tick in &ticks {
        wheel.insert(tick, tick);
    }
    let mut fired = Vec::new();
    // Step through the earliest slot starts, as a worker sleeping until `next_expiry` would.
    while let Some(start) = wheel.next_expiry() {
        for value in advance(&mut wheel, start) {
            assert_eq!(value, start, "an entry expired away from its own tick");
            fired.push(value);
        }
    }
    assert_eq!(fired, ticks);
}

#[test]
fn deadlines_beyond_the_top_level_are_parked_and_never_fire_early() {
    let mut wheel = Wheel::new();
    let far = [SPAN, SPAN + 1, 3 * SPAN + 12_345, u64::MAX / 4];
    for &tick in &far {
        wheel.insert(tick, tick);
    }
    let mut fired = Vec::new();
    let mut steps = 0;
    while let Some(start) = wheel.next_expiry() {
        steps += 1;
        assert!(steps < 10_000, "the wheel does not progress");
        for value in advance(&mut wheel, start) {
            assert!(value <= start, "fired early");
            assert_eq!(value, start, "fired late");
            fired.push(value);
        }
        if fired.len() == 3 {
            break;
        }
    }
    assert_eq!(fired, far[..3]);
    assert_eq!(wheel.pending(), 1);
    // The wheel near the end of its own top rotation: a deadline just across the boundary.
    let mut wheel = Wheel::new();
    advance(&mut wheel, SPAN - 2);
    wheel.insert(SPAN + 1, 1);
    wheel.insert(2 * SPAN - 2, 2);
    assert!(advance(&mut wheel, SPAN).is_empty());
    assert_eq!(advance(&mut wheel, SPAN + 1), vec![1]);
    assert!(advance(&mut wheel, 2 * SPAN - 3).is_empty());
    assert_eq!(advance(&mut wheel, 2 * SPAN - 2), vec![2]);
}

#[test]
fn cancelling_from_every_level_frees_the_entry_at_once() {
    let mut wheel = Wheel::new();
    advance(&mut wheel, 1_000);
    let keys: Vec<(Key, u64)> = (0..=LEVELS)
        .map(|level| {
            let tick = 1_000 + level_start(level) * 2;
            (wheel.insert(tick, tick), tick)
        })
        .collect();
    let capacity = wheel.capacity();
    for (key, tick) in keys {
        assert_eq!(wheel.state(key), Some(State::Pending(tick)));
        assert_eq!(wheel.cancel(key), Cancelled::Pending(tick));
        assert_eq!(wheel.state(key), None, "a cancelled key is stale");
        assert_eq!(wheel.cancel(key), Cancelled::Stale);
    }
    assert_eq!(wheel.pending(), 0);
    assert_eq!(wheel.next_expiry(), None);
    // The freed entries are reused: arming as many again allocates nothing.
    for level in 0..=LEVELS {
        wheel.insert(2_000 + level as u64, 0);
    }
    assert_eq!(wheel.capacity(), capacity);
    assert!(advance(&mut wheel, u64::MAX / 2).len() == LEVELS + 1);
}

#[test]
fn a_detached_entry_is_rearmed_released_or_cancelled_exactly_once() {
    let mut wheel = Wheel::new();
    let key = wheel.insert(10, 7);
    let mut expired = Vec::new();
    wheel.advance(10, &mut expired);
    assert_eq!(expired, vec![(key, 7)]);
    assert_eq!(wheel.state(key), Some(State::Detached));
    // Re-armed, it is pending under the same key and fires again.
    assert_eq!(wheel.rearm(key, 20, 8), Ok(()));
    assert_eq!(wheel.state(key), Some(State::Pending(20)));
    assert_eq!(
        wheel.rearm(key, 30, 9),
        Err(9),
        "only a detached entry is re-armed"
    );
    expired.clear();
    wheel.advance(25, &mut expired);
    assert_eq!(expired, vec![(key, 8)]);
    // Cancelled while detached (its target firing): freed now, and the re-arm is refused.
    assert_eq!(wheel.cancel(key), Cancelled::Detached);
    assert_eq!(wheel.rearm(key, 40, 10), Err(10));
    assert!(!wheel.release(key));
    assert_eq!(wheel.state(key), None);
    // A reused index does not answer to the old key.
    let other = wheel.insert(50, 11);
    assert_ne!(other, key);
    assert_eq!(wheel.cancel(key), Cancelled::Stale);
    assert_eq!(wheel.state(other), Some(State::Pending(50)));
}

#[test]
fn a_deadline_in_the_past_is_due_at_the_next_advance() {
    let mut wheel = Wheel::new();
    advance(&mut wheel, 5_000);
    wheel.insert(3, 3);
    assert_eq!(wheel.next_expiry(), Some(5_000));
    assert_eq!(advance(&mut wheel, 5_000), vec![3]);
}

#[test]
fn drain_hands_back_pending_values_and_frees_everything() {
    let mut wheel = Wheel::new();
    let detached = wheel.insert(1, 1);
    wheel.insert(100, 2);
    wheel.insert(SPAN * 2, 3);
    let mut expired = Vec::new();
    wheel.advance(1, &mut expired);
    let mut values = wheel.drain();
    values.sort_unstable();
    assert_eq!(values, vec![2, 3]);
    assert_eq!(wheel.pending(), 0);
    assert_eq!(wheel.state(detached), None);
    assert_eq!(wheel.next_expiry(), None);
}

/// One step of the model test.
#[derive(Debug, Clone)]
enum Op {
    /// Arm an entry `delay` ticks after the wheel's time (may be 0, or far).
    Insert(u64),
    /// Cancel the n-th entry ever armed (modulo their count).
    Cancel(usize),
    /// Advance by `step` ticks.
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop_oneof![
            0..70u64,
            0..5_000u64,
            0..300_000u64,
            (SPAN - 100)..(SPAN + 100),
            (0..4 * SPAN),
        ]
        .prop_map(Op::Insert),
        2 => any::<usize>().prop_map(Op::Cancel),
        3 => prop_oneof![0..3u64, 0..100u64, 0..10_000u64, 0..2 * SPAN].prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    /// At each advance exactly the entries the model says are due expire: none early, none
    /// lost, none twice; cancel reports pending exactly for entries the model still holds.
    #[test]
    fn the_wheel_matches_a_model_of_deadlines(ops in proptest::collection::vec(op(), 1..120)) {
        let mut wheel = Wheel::new();
        // Model: armed entry number -> its tick, while pending.
        let mut model: BTreeMap<u64, u64> = BTreeMap::new();
        let mut keys: Vec<Key> = Vec::new();
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Insert(delay) => {
                    let tick = now.saturating_add(delay);
                    let id = keys.len() as u64;
                    keys.push(wheel.insert(tick, id));
                    model.insert(id, tick);
                }
                Op::Cancel(n) if !keys.is_empty() => {
                    let id = n % keys.len();
                    let found = wheel.cancel(keys[id]);
                    match model.remove(&(id as u64)) {
                        Some(_) => prop_assert_eq!(found, Cancelled::Pending(id as u64)),
                        None => prop_assert_eq!(found, Cancelled::Stale),
                    }
                }
                Op::Cancel(_) => {}
                Op::Advance(step) => {
                    now = now.saturating_add(step);
                    let fired = advance(&mut wheel, now);
                    let due: Vec<u64> = model
                        .iter()
                        .filter(|&(_, &tick)| tick <= now)
                        .map(|(&id, _)| id)
                        .collect();
                    prop_assert_eq!(&fired, &due, "at tick {}", now);
                    for id in due {
                        model.remove(&id);
                    }
                }
            }
            prop_assert_eq!(wheel.pending(), model.len());
            // The next expiry is never after the earliest deadline (a sleeping worker would
            // oversleep), and there is one exactly when something is pending.
            let earliest = model.values().min().copied();
            match (wheel.next_expiry(), earliest) {
                (Some(start), Some(tick)) => prop_assert!(start <= tick.max(now)),
                (None, None) => {}
                (start, tick) => prop_assert!(false, "next expiry {:?} for earliest {:?}", start, tick),
            }
        }
    }
}
