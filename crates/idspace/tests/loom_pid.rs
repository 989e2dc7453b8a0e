//! Loom models of `PerCpu`: range hand-off between CPUs and frees from a CPU that does not
//! hold the range. Under loom a range holds 4 IDs, so a few allocations cross ranges.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_pid`.

#![cfg(loom)]

use idspace::pid::{PerCpu, PidAllocator, RANGE, ROOT};
use loom::sync::Arc;
use loom::thread;

mod loom_util;
use loom_util::run_model;

/// Two CPUs allocate concurrently, both carving ranges from the root's directory, then each
/// frees one of the other's IDs (a remote free into the other CPU's range): every ID is
/// distinct, the freed ones are gone, the rest are found.
#[test]
fn concurrent_carving_and_remote_frees() {
    run_model("concurrent_carving_and_remote_frees", || {
        let pids = Arc::new(PerCpu::new(2).unwrap());
        pids.alloc(ROOT, &[], 0).unwrap(); // init, in range 0
        let shared = Arc::new(loom::sync::Mutex::new(Vec::new()));
        let workers: Vec<_> = (0..2usize)
            .map(|cpu| {
                let (pids, shared) = (pids.clone(), shared.clone());
                thread::spawn(move || {
                    // Range 0 has RANGE - 2 IDs left: both CPUs end up carving.
                    let mine: Vec<u32> = (0..RANGE - 1)
                        .map(|_| pids.alloc(ROOT, &[], cpu).unwrap().ids()[0])
                        .collect();
                    shared.lock().unwrap().push((cpu, mine.clone()));
                    mine
                })
            })
            .collect();
        let results: Vec<Vec<u32>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        let mut all: Vec<u32> = results.iter().flatten().copied().collect();
        all.sort_unstable();
        let count = all.len();
        all.dedup();
        assert_eq!(all.len(), count, "an ID was handed out twice: {results:?}");
        // Remote frees, concurrently: CPU 1 frees CPU 0's first ID and vice versa.
        let (p0, p1) = (pids.clone(), pids.clone());
        let (x, y) = (results[0][0], results[1][0]);
        let f0 = thread::spawn(move || p0.free(ROOT, y, 0).unwrap());
        let f1 = thread::spawn(move || p1.free(ROOT, x, 1).unwrap());
        f0.join().unwrap();
        f1.join().unwrap();
        for id in all {
            let found = pids.lookup(ROOT, id).unwrap().is_some();
            assert_eq!(found, id != x && id != y, "ID {id}");
        }
    });
}

/// CPU 1 frees the IDs of a range CPU 0 holds while CPU 0 uses the range up and moves on: the
/// range goes back to the space exactly once, and no ID is lost or duplicated.
#[test]
fn remote_free_races_range_hand_off() {
    run_model("remote_free_races_range_hand_off", || {
        let pids = Arc::new(PerCpu::new(2).unwrap());
        // Range 0 holds 1..RANGE: use it up on CPU 0.
        let first: Vec<u32> = (1..RANGE)
            .map(|_| pids.alloc(ROOT, &[], 0).unwrap().ids()[0])
            .collect();
        assert_eq!(first, (1..RANGE).collect::<Vec<_>>());
        // Two IDs of range 1, on CPU 0.
        let a = pids.alloc(ROOT, &[], 0).unwrap().ids()[0];
        let b = pids.alloc(ROOT, &[], 0).unwrap().ids()[0];
        let freer = pids.clone();
        let remote = thread::spawn(move || {
            freer.free(ROOT, a, 1).unwrap();
            freer.free(ROOT, b, 1).unwrap();
        });
        // Meanwhile CPU 0 uses range 1 up and carves another.
        let more: Vec<u32> = (0..RANGE - 1)
            .map(|_| pids.alloc(ROOT, &[], 0).unwrap().ids()[0])
            .collect();
        remote.join().unwrap();
        assert!(pids.lookup(ROOT, a).unwrap().is_none());
        assert!(pids.lookup(ROOT, b).unwrap().is_none());
        for id in &more {
            assert_ne!(*id, a, "a freed ID came back at once");
            assert_ne!(*id, b, "a freed ID came back at once");
            assert!(pids.lookup(ROOT, *id).unwrap().is_some());
        }
        // Freeing everything else leaves no range but the current one behind.
        for id in more.iter().chain(first.iter().skip(1)) {
            pids.free(ROOT, *id, 1).unwrap();
        }
        assert!(pids.lookup(ROOT, 1).unwrap().is_some(), "init survives");
    });
}

/// A lookup races the free of the last live ID of a range that is no longer any CPU's current
/// one, so that the free gives the range back and retires its lookup slots: the lookup finds
/// the object or nothing, and never reads retired slots.
#[test]
fn lookup_races_the_retirement_of_its_range() {
    run_model("lookup_races_the_retirement_of_its_range", || {
        let pids = Arc::new(PerCpu::new(2).unwrap());
        // Range 0 (1..RANGE) and range 1 (RANGE..2·RANGE), all on CPU 0; one more allocation
        // carves range 2, so range 1 stops being current.
        let ids: Vec<u32> = (1..2 * RANGE + 1)
            .map(|_| pids.alloc(ROOT, &[], 0).unwrap().ids()[0])
            .collect();
        let last = 2 * RANGE - 1;
        assert!(ids.contains(&last));
        for id in RANGE..last {
            pids.free(ROOT, id, 0).unwrap();
        }
        let reader = pids.clone();
        let lookup = thread::spawn(move || reader.lookup(ROOT, last).unwrap().map(|p| p.ids()));
        pids.free(ROOT, last, 1).unwrap();
        let seen = lookup.join().unwrap();
        assert!(
            seen.is_none() || seen == Some(vec![last]),
            "lookup of {last} read {seen:?}"
        );
        assert!(pids.lookup(ROOT, last).unwrap().is_none());
    });
}

/// A lookup and an allocation race the freeing of their (dead, empty) namespace: the lookup
/// finds nothing and the allocation is refused, whichever comes first; `free_ns` succeeds
/// (waiting out the allocation's reservation if it must), and loom checks that neither the
/// space nor its slot block is read after being freed (the allocation's hazard on the space,
/// the lookup's read-side section).
#[test]
fn free_ns_races_lookup_and_alloc() {
    use idspace::pid::PidError;
    run_model("free_ns_races_lookup_and_alloc", || {
        let pids = Arc::new(PerCpu::new(2).unwrap());
        pids.alloc(ROOT, &[], 0).unwrap(); // the root's init
        let ns = pids.new_ns(ROOT).unwrap();
        pids.alloc(ns, &[], 0).unwrap(); // its init, 1: its range and slot block exist
        pids.free(ns, 1, 0).unwrap(); // dead and empty
        let user = {
            let pids = pids.clone();
            thread::spawn(move || {
                assert!(pids.lookup(ns, 1).unwrap().is_none());
                match pids.alloc(ns, &[], 1) {
                    Err(PidError::NamespaceDead | PidError::NamespaceFreed) => {}
                    other => panic!("an allocation in a dead namespace: {other:?}"),
                }
            })
        };
        assert_eq!(pids.free_ns(ns), Ok(()));
        user.join().unwrap();
        assert!(matches!(pids.lookup(ns, 1), Ok(None)));
        assert_eq!(pids.free_ns(ns), Err(PidError::NamespaceFreed));
    });
}

/// A lookup races the free of its ID and the ID's reallocation (exact `set_tid` IDs, as a
/// restore would ask) to an object of another depth: as the kernel's `find_pid_ns` under RCU,
/// it finds the old object, nothing, or the new one, never a torn object (one object's levels
/// read with the other's count) or one of another ID; afterwards the new one.
#[test]
fn lookup_races_free_and_reallocation_of_its_id() {
    run_model("lookup_races_free_and_reallocation_of_its_id", || {
        let pids = Arc::new(PerCpu::new(2).unwrap());
        pids.alloc(ROOT, &[], 0).unwrap(); // the root's init, 1
        let child = pids.new_ns(ROOT).unwrap();
        pids.alloc(child, &[], 0).unwrap(); // the child's init
        let old = pids.alloc(ROOT, &[], 0).unwrap();
        let id = old.ids()[0];
        let reader = {
            let pids = pids.clone();
            thread::spawn(move || pids.lookup(ROOT, id).unwrap())
        };
        pids.free(ROOT, id, 1).unwrap();
        // The same root ID, now for a process of the child: two levels instead of one.
        let new = pids.alloc(child, &[2, id], 1).unwrap();
        if let Some(seen) = reader.join().unwrap() {
            assert_eq!(seen.id_in(ROOT), Some(id), "a foreign object");
            assert!(
                seen.same(&old) && seen.levels().len() == 1
                    || seen.same(&new) && seen.levels().len() == 2,
                "a torn object, or neither the old nor the new one: {:?}",
                seen.levels()
            );
        }
        assert!(pids.lookup(ROOT, id).unwrap().unwrap().same(&new));
    });
}

/// A lookup races the retirement of its range's lookup slots, and a second retirement on the
/// same CPU then frees the first block from the limbo if its grace period has passed: the
/// lookup finds the object or nothing, and never reads the block after it is freed.
#[test]
fn limbo_frees_a_block_only_after_its_lookups() {
    run_model("limbo_frees_a_block_only_after_its_lookups", || {
        let pids = Arc::new(PerCpu::new(2).unwrap());
        // Ranges 0..=2 on CPU 0, then range 3 carved: ranges 1 and 2 are used up and no
        // longer current.
        let ids: Vec<u32> = (1..3 * RANGE + 1)
            .map(|_| pids.alloc(ROOT, &[], 0).unwrap().ids()[0])
            .collect();
        let (first, second) = (2 * RANGE - 1, 3 * RANGE - 1);
        for id in (RANGE..3 * RANGE).filter(|&id| id != first && id != second) {
            pids.free(ROOT, id, 0).unwrap();
        }
        assert!(ids.contains(&first) && ids.contains(&second));
        let reader = {
            let pids = pids.clone();
            thread::spawn(move || pids.lookup(ROOT, first).unwrap().map(|p| p.ids()))
        };
        // Range 1's block goes to CPU 0's limbo; range 2's follows and may free range 1's.
        pids.free(ROOT, first, 1).unwrap();
        pids.free(ROOT, second, 1).unwrap();
        let seen = reader.join().unwrap();
        assert!(seen.is_none() || seen == Some(vec![first]), "read {seen:?}");
        assert!(pids.lookup(ROOT, first).unwrap().is_none());
    });
}
