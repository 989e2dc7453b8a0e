//! Model-based property test of the PID designs against the reference model of the kernel's
//! semantics: the sequential designs must match it ID for ID and error for error; `PerCpu`
//! must give valid, unique IDs, the `set_tid` it was asked for, ID 1 to a space's first object,
//! and exactly the model's errors (the model adopts its IDs). Spaces are small (`pid_max` down
//! to 301, and `Fill` fills a space to its end) so that wrap, the 300 floor, `Full` and failed
//! first allocations happen; `KillInit` makes dead spaces, which allocations keep targeting.

#![cfg(not(loom))]

mod common;
mod pid_model;

use common::pid_designs;
use idspace::pid::PidAllocator;
use pid_model::Model;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    NewNs(usize),
    PidMax(usize, u32),
    Alloc(usize, Vec<u32>, usize),
    /// Lower a space's `pid_max` to the least and allocate in it until an allocation fails.
    Fill(usize, usize),
    /// Free a space's ID 1 (its init) if it is taken: the space dies.
    KillInit(usize, usize),
    Free(usize, u32, usize),
    FreeLive(usize, usize),
    Lookup(usize, u32),
}

fn id() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => 0..12u32,
        2 => 1..4u32,
        2 => 295..310u32,
        1 => prop_oneof![Just(32767u32), Just(32768), Just(40000)],
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..8usize).prop_map(Op::NewNs),
        2 => (0..8usize, prop_oneof![Just(301u32), Just(302), Just(320), Just(600), Just(32768), Just(300), Just(5_000_000)])
            .prop_map(|(ns, max)| Op::PidMax(ns, max)),
        10 => (0..8usize, proptest::collection::vec(id(), 0..4), 0..4usize)
            .prop_map(|(ns, tid, cpu)| Op::Alloc(ns, tid, cpu)),
        1 => (0..8usize, 0..4usize).prop_map(|(ns, cpu)| Op::Fill(ns, cpu)),
        1 => (0..8usize, 0..4usize).prop_map(|(ns, cpu)| Op::KillInit(ns, cpu)),
        3 => (0..8usize, id(), 0..4usize).prop_map(|(ns, id, cpu)| Op::Free(ns, id, cpu)),
        4 => (0..64usize, 0..4usize).prop_map(|(pick, cpu)| Op::FreeLive(pick, cpu)),
        2 => (0..8usize, id()).prop_map(|(ns, id)| Op::Lookup(ns, id)),
    ]
}

/// One allocation on the design and the model, compared; whether it succeeded.
fn alloc_both(
    design: &dyn PidAllocator,
    model: &mut Model,
    ns: u32,
    set_tid: &[u32],
    cpu: usize,
    at: &str,
) -> bool {
    let got = design.alloc(ns, set_tid, cpu).map(|pid| pid.ids());
    let want = model.alloc(ns, set_tid, got.as_ref().ok().map(Vec::as_slice));
    assert_eq!(got, want, "{at}");
    got.is_ok()
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
                    alloc_both(design.as_ref(), &mut model, ns, set_tid, *cpu, &at);
                }
                Op::Fill(ns, cpu) => {
                    let ns = ns_of(*ns, &model);
                    let max = idspace::pid::PID_MAX_MIN;
                    assert_eq!(
                        design.set_pid_max(ns, max),
                        model.set_pid_max(ns, max),
                        "{at}"
                    );
                    for _ in 0..max {
                        if !alloc_both(design.as_ref(), &mut model, ns, &[], *cpu, &at) {
                            break;
                        }
                    }
                }
                Op::KillInit(ns, cpu) => {
                    let ns = ns_of(*ns, &model);
                    assert_eq!(design.free(ns, 1, *cpu), model.free(ns, 1), "{at}");
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

/// Failed first allocations, deterministic: a full root, then spaces whose first allocations
/// fail (at the root, or on an exact ID refused before any cursor moved), one and two levels
/// deep, their first objects, their deaths, and allocations into them once dead.
#[test]
fn failed_first_allocations_match_the_model() {
    let ops = vec![
        Op::Fill(0, 0),
        Op::NewNs(0),
        Op::NewNs(1),
        Op::Alloc(2, vec![], 1),
        Op::Alloc(1, vec![5], 2),
        Op::Alloc(1, vec![], 3),
        Op::Alloc(2, vec![1, 1], 0),
        Op::Free(0, 300, 0),
        Op::Alloc(2, vec![], 1),
        Op::Alloc(1, vec![], 2),
        Op::Lookup(1, 1),
        Op::NewNs(2),
        Op::Alloc(3, vec![], 3),
        Op::KillInit(2, 0),
        Op::Alloc(2, vec![], 1),
        Op::Alloc(1, vec![], 2),
        Op::Alloc(3, vec![1], 2),
        Op::NewNs(1),
        Op::Fill(4, 1),
        Op::FreeLive(3, 0),
        Op::Alloc(4, vec![], 3),
        Op::Fill(0, 2),
    ];
    check(&ops);
}
