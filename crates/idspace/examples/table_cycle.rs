//! One owner runs the cycle create, lookup (a copy of the value), remove on a [`ScaledHash`],
//! one live ID at a time, as the lab's `capi` experiment does from each thread: a driver to
//! count a cycle's instructions under `valgrind --tool=callgrind`.
//!
//! Run with `cargo run --release -p idspace --example table_cycle -- <registry|handle> <N>`;
//! the difference between two counts over the difference of their `N` is a cycle's cost.
//! `registry` creates and removes by owner number (the C ABI's path), `handle` with
//! `create_in` and `remove_in` on an owner handle made once; both look up by owner number.

use std::hint::black_box;

use idspace::table::{IdTable, ScaledHash};

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "registry".into());
    let count: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(20_000);
    let table = ScaledHash::<u64>::new();
    let owner = 1;
    let handle = table.owner_handle(owner).expect("memory for an owner");
    let mut failures = 0u64;
    for n in 0..count {
        let created = match mode.as_str() {
            "registry" => table.create(black_box(owner), black_box(n)),
            "handle" => table.create_in(&handle, black_box(n)),
            other => {
                eprintln!("unknown mode {other:?}: registry or handle");
                std::process::exit(2);
            }
        };
        let ok = created.is_ok_and(|id| {
            let found = table.get_copied(black_box(owner), id) == Some(n);
            let removed = match mode.as_str() {
                "handle" => table.remove_in(&handle, id),
                _ => table.remove(black_box(owner), id),
            };
            found && removed.is_ok()
        });
        failures += u64::from(!ok);
    }
    assert_eq!((failures, table.len()), (0, 0));
    println!("{mode}: {count} cycles");
    // The table's teardown is not a cycle's cost: leave it to the process exit.
    std::mem::forget(table);
}
