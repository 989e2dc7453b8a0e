//! Loom models of the lazy design's lock-free transitions (Linux 6.4 to 6.18): the scan's and
//! the migration's lazy-put mark racing a CPU's switch-in or switch-out (the Dekker pair against
//! the CPU's current task), and two switch-ins racing for one free CID (the `use_cid_lock`
//! fallback). In every interleaving: no two running tasks share a CID, no CID leaks and none is
//! freed twice (the bitmap holds exactly the CIDs the CPUs hold).
//!
//! Run with `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test
//! --release --target-dir target/loom -p idspace --test loom_cid_lazy`.

#![cfg(loom)]

use idspace::cid::{CidAllocator, LazyCids, ScanPlacement, Task};
use loom::sync::Arc;
use loom::thread;

mod loom_util;
use loom_util::run_model;

/// A 2-CPU space whose scan runs only when asked, with two tasks allowed everywhere.
fn space() -> (Arc<LazyCids>, Task, Task) {
    let space = Arc::new(LazyCids::with_scan(2, ScanPlacement::OnDemand).unwrap());
    let a = space.fork(0b11).unwrap();
    let b = space.fork(0b11).unwrap();
    (space, a, b)
}

/// Both ABI rules for the running tasks, and the bitmap against the CPUs' words: every CID
/// taken is held by exactly one CPU, and every running task's CID is one of them (a CID freed
/// under a running task would be missing).
fn check(space: &LazyCids) {
    let running: Vec<u32> = space.state().running.iter().map(|r| r.1).collect();
    assert!(
        running.iter().all(|&cid| cid < 2),
        "a CID beyond the CPUs: {running:?}"
    );
    assert!(
        running.len() < 2 || running[0] != running[1],
        "two running tasks share a CID: {running:?}"
    );
    let held: Vec<u32> = space.cpu_cids().into_iter().flatten().collect();
    assert!(
        held.len() < 2 || held[0] != held[1],
        "two CPUs hold one CID: {held:?}"
    );
    assert_eq!(
        space.cids_in_use() as usize,
        held.len(),
        "the bitmap disagrees with the CPUs' words {held:?}"
    );
    assert!(
        running.iter().all(|cid| held.contains(cid)),
        "a running task's CID was freed: running {running:?}, held {held:?}"
    );
}

/// The scan takes CPU 1's CID back (unused for a period) while a task switches in there: either
/// the scan sees the task and leaves the mark, which the switch-in then clears itself, or the
/// switch-in sees the word unset and allocates.
#[test]
fn scan_races_a_switch_in() {
    run_model("scan_races_a_switch_in", || {
        let (space, a, b) = space();
        assert_eq!(space.switch(0, Some(&a)).unwrap(), Some(0));
        assert_eq!(space.switch(1, Some(&b)).unwrap(), Some(1));
        space.switch(1, None).unwrap();
        space.run_deferred(); // CPU 1 was used in this period: it keeps CID 1
        let cpu1 = {
            let (space, b) = (space.clone(), b.clone());
            thread::spawn(move || space.switch(1, Some(&b)).unwrap().unwrap())
        };
        space.run_deferred(); // CPU 1 looks unused for a period
        let cid = cpu1.join().unwrap();
        assert_ne!(cid, 0, "task a runs with CID 0");
        check(&space);
    });
}

/// The scan marks the CID of a running task (at or above the bitmap's weight) while that task
/// switches out: whichever side sees the other frees it, exactly once.
#[test]
fn scan_races_a_switch_out() {
    run_model("scan_races_a_switch_out", || {
        let (space, a, b) = space();
        space.switch(0, Some(&a)).unwrap();
        space.switch(1, Some(&b)).unwrap();
        space.switch(0, None).unwrap();
        space.run_deferred();
        let cpu1 = {
            let space = space.clone();
            thread::spawn(move || space.switch(1, None).unwrap())
        };
        // CPU 0 is cleared as unused; then CPU 1's CID 1 is at the weight (1): marked.
        space.run_deferred();
        cpu1.join().unwrap();
        check(&space);
        assert_eq!(
            space.cpu_cids(),
            vec![None, None],
            "both CIDs went back, once each"
        );
        assert_eq!(space.cids_in_use(), 0);
    });
}

/// Task a last ran on CPU 0, which went idle keeping CID 0; a switches in on CPU 1 and steals
/// that CID without CPU 0's runqueue lock while task b switches in on CPU 0.
#[test]
fn migration_steal_races_a_switch_in_on_the_source() {
    run_model("migration_steal_races_a_switch_in_on_the_source", || {
        let (space, a, b) = space();
        assert_eq!(space.switch(0, Some(&a)).unwrap(), Some(0));
        space.switch(0, None).unwrap();
        let cpu1 = {
            let (space, a) = (space.clone(), a.clone());
            thread::spawn(move || space.switch(1, Some(&a)).unwrap().unwrap())
        };
        let on0 = space.switch(0, Some(&b)).unwrap().unwrap();
        let on1 = cpu1.join().unwrap();
        assert_ne!(on0, on1, "tasks a and b share a CID");
        check(&space);
    });
}

/// Two CPUs with no CID switch in at once and race for the first free one: the loser retries
/// (through `cid_lock` if the race was lost on the bitmap).
#[test]
fn two_allocations_race() {
    run_model("two_allocations_race", || {
        let (space, a, b) = space();
        let cpu1 = {
            let (space, b) = (space.clone(), b.clone());
            thread::spawn(move || space.switch(1, Some(&b)).unwrap().unwrap())
        };
        let on0 = space.switch(0, Some(&a)).unwrap().unwrap();
        let on1 = cpu1.join().unwrap();
        assert_ne!(on0, on1);
        check(&space);
    });
}
