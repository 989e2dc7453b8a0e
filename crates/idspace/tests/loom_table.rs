//! Loom models of the scaled hash's concurrent protocol: create, get and remove on chains while
//! another thread splits buckets (growth by linear hashing).
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_table`.
//! Tables start with one bucket and split past one entry per bucket, so each model crosses at
//! least one split.

#![cfg(loom)]

use idspace::table::{IdTable, ScaledHash, Sizing};
use loom::sync::Arc;
use loom::thread;

mod loom_util;
use loom_util::run_model;

fn tiny() -> Arc<ScaledHash<u64>> {
    Arc::new(
        ScaledHash::with_sizing(Sizing::Growing {
            initial: 1,
            max_load: 1,
        })
        .expect("a valid sizing"),
    )
}

/// Two creates in one owner race; one of them splits the single bucket. Both IDs are distinct
/// and both entries are found afterwards.
#[test]
fn concurrent_creates_across_a_split() {
    run_model("concurrent_creates_across_a_split", || {
        let table = tiny();
        let other = table.clone();
        let a = thread::spawn(move || other.create(1, 10).unwrap());
        let b = table.create(1, 20).unwrap();
        let a = a.join().unwrap();
        assert_ne!(a, b, "one ID handed out twice");
        assert_eq!(table.get(1, a).map(|e| *e), Some(10));
        assert_eq!(table.get(1, b).map(|e| *e), Some(20));
        assert_eq!(table.ids(1).len(), 2);
    });
}

/// The table after the prefix every lookup model starts from.
fn prefilled() -> Arc<ScaledHash<u64>> {
    let table = tiny();
    table.create(1, 100).unwrap(); // id 0
    table.create(2, 200).unwrap(); // id 0 of owner 2; the table has split once
    table
}

/// An owner whose first create on the prefilled table overflows a chain and splits buckets.
/// Hashing is deterministic, so a scratch table tells.
fn splitting_owner() -> u64 {
    let before = prefilled().buckets();
    (3..1000)
        .find(|&owner| {
            let scratch = prefilled();
            scratch.create(owner, 0).unwrap();
            scratch.buckets() > before
        })
        .expect("some owner's key collides")
}

/// A lookup and a remove of existing entries race a create whose insert splits the bucket the
/// existing entries live in: the lookup must find its entry whichever bucket it is in.
#[test]
fn lookup_and_remove_race_a_split() {
    run_model("lookup_and_remove_race_a_split", || {
        let splitter = splitting_owner();
        let table = prefilled();
        let before = table.buckets();
        let creator = table.clone();
        let reader = table.clone();
        let create = thread::spawn(move || creator.create(splitter, 300).unwrap());
        let read = thread::spawn(move || reader.get(2, 0).map(|e| *e));
        assert_eq!(table.remove(1, 0), Ok(100));
        assert_eq!(
            read.join().unwrap(),
            Some(200),
            "lookup lost an entry during a split"
        );
        let id = create.join().unwrap();
        assert!(table.buckets() > before, "the model must cross a split");
        assert_eq!(table.get(splitter, id).map(|e| *e), Some(300));
        assert!(table.get(1, 0).is_none());
    });
}

/// Two owners create concurrently, each insert able to trigger a split; the loser of the
/// split `try_lock` must not lose its entry.
#[test]
fn two_splitters() {
    run_model("two_splitters", || {
        let table = tiny();
        table.create(9, 1).unwrap();
        let other = table.clone();
        let a = thread::spawn(move || {
            let id = other.create(1, 11).unwrap();
            other.get(1, id).map(|e| *e)
        });
        let id = table.create(2, 22).unwrap();
        assert_eq!(table.get(2, id).map(|e| *e), Some(22));
        assert_eq!(a.join().unwrap(), Some(11));
        assert_eq!(table.get(9, 0).map(|e| *e), Some(1));
    });
}
