//! One arbitrary sequence of table operations applied to every design: `GlobalHash`,
//! `ScaledHash` (growing from one bucket, splitting at every second entry of a chain, and fixed
//! at one bucket) and `Radix` must answer alike, call for call, values included. IDs run up to
//! a small `max_id`, so that owners fill up and cursors wrap.

#![no_main]

use arbitrary::Arbitrary;
use idspace::table::{GlobalHash, Id, IdTable, Radix, ScaledHash, Sizing};
use libfuzzer_sys::fuzz_target;

/// Owners the operations name (few, so that they collide).
const OWNERS: u8 = 4;

#[derive(Arbitrary, Debug)]
enum Op {
    Create(u8),
    CreateAt(u8, u8),
    SetRestore(u8, bool),
    Get(u8, u8),
    Remove(u8, u8),
    Ids(u8),
    Entries(u8),
    RemoveOwner(u8),
    Cursor(u8),
    SetCursor(u8, u8),
    ForgetIdle,
    /// Creates until the owner is full.
    Fill(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// The largest ID, 1 to 160 (past the radix tree's 64-slot node).
    max_id: u8,
    ops: Vec<Op>,
}

/// What one call answered, in a form every design gives alike.
#[derive(Debug, PartialEq)]
enum Answer {
    Id(Result<Id, String>),
    Value(Option<u64>),
    Removed(Result<u64, String>),
    Ids(Vec<Id>),
    Entries(Vec<(Id, u64)>),
    Count(usize),
    Cursor(Id),
    Set(Result<(), String>),
}

fn owner(pick: u8) -> u64 {
    u64::from(pick % OWNERS)
}

fn apply(table: &dyn IdTable<u64>, step: u64, op: &Op) -> Answer {
    let id = |raw: u8| Id::from(raw);
    match *op {
        Op::Create(o) => Answer::Id(
            table
                .create(owner(o), step)
                .map_err(|e| e.error.to_string()),
        ),
        Op::CreateAt(o, i) => Answer::Id(
            table
                .create_at(owner(o), id(i), step)
                .map_err(|e| e.error.to_string()),
        ),
        Op::SetRestore(o, on) => {
            table.set_restore(owner(o), on);
            Answer::Value(Some(u64::from(table.is_restoring(owner(o)))))
        }
        Op::Get(o, i) => Answer::Value(table.get(owner(o), id(i)).map(|entry| *entry)),
        Op::Remove(o, i) => Answer::Removed(
            table
                .remove(owner(o), id(i))
                .map(|entry| *entry)
                .map_err(|e| e.to_string()),
        ),
        Op::Ids(o) => Answer::Ids(table.ids(owner(o))),
        Op::Entries(o) => Answer::Entries(
            table
                .entries(owner(o))
                .into_iter()
                .map(|(id, entry)| (id, *entry))
                .collect(),
        ),
        Op::RemoveOwner(o) => Answer::Count(table.remove_owner(owner(o))),
        Op::Cursor(o) => Answer::Cursor(table.cursor(owner(o))),
        Op::SetCursor(o, c) => {
            Answer::Set(table.set_cursor(owner(o), id(c)).map_err(|e| e.to_string()))
        }
        Op::ForgetIdle => Answer::Count(table.forget_idle()),
        Op::Fill(o) => {
            let mut made = Vec::new();
            while let Ok(id) = table.create(owner(o), step) {
                made.push(id);
            }
            Answer::Ids(made)
        }
    }
}

/// What the whole table holds: every owner's entries, cursor and restore mode, and the totals.
fn snapshot(table: &dyn IdTable<u64>) -> Vec<Answer> {
    let mut all = vec![
        Answer::Ids(table.owners().iter().map(|&o| o as Id).collect()),
        Answer::Count(table.len()),
    ];
    for o in 0..OWNERS {
        all.push(apply(table, 0, &Op::Entries(o)));
        all.push(apply(table, 0, &Op::Cursor(o)));
        all.push(Answer::Value(Some(u64::from(table.is_restoring(owner(o))))));
    }
    all
}

fuzz_target!(|input: Input| {
    let max_id = Id::from(input.max_id % 160) + 1;
    let growing = Sizing::Growing {
        initial: 1,
        max_load: 2,
    };
    let designs: [(&str, Box<dyn IdTable<u64>>); 4] = [
        ("global", Box::new(GlobalHash::with_max_id(max_id))),
        (
            "scaled (growing)",
            Box::new(ScaledHash::with_sizing_and_max_id(growing, max_id).expect("in range")),
        ),
        (
            "scaled (one bucket)",
            Box::new(
                ScaledHash::with_sizing_and_max_id(Sizing::Fixed { buckets: 1 }, max_id)
                    .expect("in range"),
            ),
        ),
        ("radix", Box::new(Radix::with_max_id(max_id))),
    ];
    for (step, op) in input.ops.iter().enumerate() {
        let step = step as u64 + 1;
        let (first, rest) = designs.split_first().expect("four designs");
        let want = apply(first.1.as_ref(), step, op);
        for (name, table) in rest {
            let got = apply(table.as_ref(), step, op);
            assert_eq!(got, want, "step {step}, {op:?}: {name} against {}", first.0);
        }
    }
    let want = snapshot(designs[0].1.as_ref());
    for (name, table) in &designs[1..] {
        assert_eq!(
            snapshot(table.as_ref()),
            want,
            "{name}: the tables' final state"
        );
    }
});
