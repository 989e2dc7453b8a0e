//! Model-based property test of the PID designs against the reference model of the kernel's
//! semantics: the sequential designs must match it ID for ID and error for error; `PerCpu`
//! must give valid, unique IDs and exactly the model's errors (the model adopts its IDs).
//! Spaces are small (`pid_max` down to 301) so that wrap, the 300 floor and `Full` happen.

#![cfg(not(loom))]

mod common;
mod pid_model;

use common::pid_designs;
use idspace::pid::PidError;
use pid_model::Model;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    NewNs(usize),
    PidMax(usize, u32),
    Alloc(usize, Vec<u32>, usize),
    Free(usize, u32, usize),
    FreeLive(usize, usize),
    Lookup(usize, u32),
}

fn id() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => 0..12u32,
        2 => 295..310u32,
        1 => prop_oneof![Just(32767u32), Just(32768), Just(40000)],
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..8usize).prop_map(Op::NewNs),
        2 => (0..8usize, prop_oneof![Just(301u32), Just(302), Just(320), Just(600), Just(32768), Just(300), Just(5_000_000)])
            .prop_map(|(ns, max)| Op::PidMax(ns, max)),
        10 => (0..8usize, proptest::collection::vec(id(), 0..3), 0..4usize)
            .prop_map(|(ns, tid, cpu)| Op::Alloc(ns, tid, cpu)),
        3 => (0..8usize, id(), 0..4usize).prop_map(|(ns, id, cpu)| Op::Free(ns, id, cpu)),
        4 => (0..64usize, 0..4usize).prop_map(|(pick, cpu)| Op::FreeLive(pick, cpu)),
        2 => (0..8usize, id()).prop_map(|(ns, id)| Op::Lookup(ns, id)),
    ]
}

fn check(ops: &[Op]) {
    for design in pid_designs() {
        let name = design.name();
        let kernel = name != "percpu";
        let mut model = Model::new(kernel);
        for (step, op) in ops.iter().enumerate() {
            let at = format!("{name}, step {step}: {op:?}");
            // Space numbers are the model's, which the designs hand out identically.
            let ns_of = |pick: usize, model: &Model| (pick % (model.spaces.len() + 1)) as u32;
            match op {
                Op::NewNs(parent) => {
                    let parent = ns_of(*parent, &model);
                    assert_eq!(design.new_ns(parent), model.new_ns(parent), "{at}");
                }
                Op::PidMax(ns, max) => {
                    let ns = ns_of(*ns, &model);
                    assert_eq!(
                        design.set_pid_max(ns, *max),
                        model.set_pid_max(ns, *max),
                        "{at}"
                    );
                }
                Op::Alloc(ns, set_tid, cpu) => {
                    let ns = ns_of(*ns, &model);
                    let got = design.alloc(ns, set_tid, *cpu).map(|pid| pid.ids());
                    let want = model.alloc(ns, set_tid, got.as_ref().ok().map(Vec::as_slice));
                    assert_eq!(got, want, "{at}");
                }
                Op::Free(ns, id, cpu) => {
                    let ns = ns_of(*ns, &model);
                    assert_eq!(design.free(ns, *id, *cpu), model.free(ns, *id), "{at}");
                }
                Op::FreeLive(pick, cpu) => {
                    let live: Vec<(u32, u32)> = model
                        .spaces
                        .iter()
                        .enumerate()
                        .flat_map(|(ns, s)| s.ids.keys().map(move |&id| (ns as u32, id)))
                        .collect();
                    if let Some(&(ns, id)) = live.get(pick % live.len().max(1)) {
                        assert_eq!(design.free(ns, id, *cpu), model.free(ns, id), "{at}");
                    }
                }
                Op::Lookup(ns, id) => {
                    let ns = ns_of(*ns, &model);
                    let got = design.lookup(ns, *id).map(|pid| pid.map(|p| p.ids()));
                    assert_eq!(got, model.lookup(ns, *id), "{at}");
                }
            }
        }
        // Every live ID is found, with its object's numbers.
        for (ns, space) in model.spaces.iter().enumerate() {
            for &id in space.ids.keys() {
                let found = design.lookup(ns as u32, id).unwrap();
                assert_eq!(
                    found.map(|p| p.ids()),
                    model.lookup(ns as u32, id).unwrap(),
                    "{name}: ({ns}, {id})"
                );
            }
        }
        let _ = PidError::Full;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn designs_follow_the_kernel_semantics(ops in proptest::collection::vec(op(), 1..150)) {
        check(&ops);
    }
}

/// Wrap at `pid_max` with the 300 floor, deterministic and long: fills a 320-ID space, frees
/// in a pattern, and goes round several times.
#[test]
fn long_wraps_match_the_model() {
    let mut ops = vec![Op::PidMax(0, 320)];
    for round in 0..6 {
        for _ in 0..330 {
            ops.push(Op::Alloc(0, vec![], round % 4));
        }
        for pick in (0..300).step_by(7) {
            ops.push(Op::FreeLive(pick, round % 3));
        }
    }
    check(&ops);
}

/// Depth 32 and failures at an outer level, checked against the model: a chain of 33 spaces
/// (the 34th is too deep), `set_tid` arrays of every length up to one too many, and a root so
/// full that allocations deep down fail at the outermost level, releasing the inner IDs.
#[test]
fn deep_chains_and_outer_failures_match_the_model() {
    let mut ops: Vec<Op> = (0..33).map(Op::NewNs).collect();
    for ns in 0..33 {
        ops.push(Op::Alloc(ns, vec![], ns % 4));
    }
    ops.push(Op::Alloc(32, vec![1; 33], 0));
    ops.push(Op::Alloc(32, vec![2; 33], 1));
    ops.push(Op::Alloc(32, vec![3; 34], 2));
    ops.push(Op::PidMax(0, 301));
    for i in 0..300 {
        ops.push(Op::Alloc(0, vec![], i % 4));
    }
    ops.push(Op::Alloc(32, vec![], 0));
    ops.push(Op::Alloc(20, vec![9], 1));
    ops.push(Op::Lookup(32, 3));
    ops.push(Op::FreeLive(5, 3));
    ops.push(Op::Alloc(32, vec![], 0));
    check(&ops);
}
