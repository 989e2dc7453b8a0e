//! One owner creates entries in a [`ScaledHash`] in sequence, as the timer lab's Tests 1-3
//! do: a driver to count a create's instructions under `valgrind --tool=callgrind`.
//!
//! Run with `cargo run --release -p idspace --example table_create -- <registry|handle> <N>`;
//! the difference between two counts over the difference of their `N` is a create's cost.
//! `registry` creates with `create(owner, value)`, `handle` with `create_in` on an owner
//! handle made once.

use std::hint::black_box;

use idspace::table::{IdTable, ScaledHash};

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "handle".into());
    let count: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(20_000);
    let table = ScaledHash::<u64>::new();
    let owner = 1;
    let mut last = 0;
    match mode.as_str() {
        "registry" => {
            for n in 0..count {
                last = table.create(owner, black_box(n)).expect("a free ID");
            }
        }
        "handle" => {
            let handle = table.owner_handle(owner).expect("memory for an owner");
            for n in 0..count {
                last = table.create_in(&handle, black_box(n)).expect("a free ID");
            }
        }
        other => {
            eprintln!("unknown mode {other:?}: registry or handle");
            std::process::exit(2);
        }
    }
    assert_eq!(table.len() as u64, count);
    println!("{mode}: {count} creates, last ID {last}");
    // The table's teardown is not a create's cost: leave it to the process exit.
    std::mem::forget(table);
}
