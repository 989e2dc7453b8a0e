//! Freeing spaces (`PidAllocator::free_ns`) in every PID design: refusals while a space holds
//! IDs or children change nothing, a freed space gives all its memory back, and its number
//! stays taken, answering as freed. A stress test frees spaces while other threads look up,
//! allocate and free in them.

#![cfg(not(loom))]

mod common;

use common::pid_designs;
use idspace::pid::{NsId, PidAllocator, PidError, ROOT};
use proptest::prelude::*;

const CPUS: usize = 4;

/// Takes and frees one root ID on every CPU, so that each CPU's structures for the root exist
/// (`PerCpu` keeps a current range per CPU) before memory is measured.
fn warm_up(pids: &dyn PidAllocator) {
    // The root's init stays: freeing it would kill the root.
    pids.alloc(ROOT, &[], 0).unwrap();
    for cpu in 0..CPUS {
        let pid = pids.alloc(ROOT, &[], cpu).unwrap();
        pids.free(ROOT, pid.ids().last().copied().unwrap(), cpu)
            .unwrap();
    }
}

/// A chain of `depth` nested spaces below the root, innermost last.
fn nest(pids: &dyn PidAllocator, depth: usize) -> Vec<NsId> {
    let mut chain = Vec::new();
    let mut parent = ROOT;
    for _ in 0..depth {
        parent = pids.new_ns(parent).unwrap();
        chain.push(parent);
    }
    chain
}

/// Allocates `allocs` objects (space pick, CPU) in the chain, frees them in `order`, trying to
/// free the spaces while they are busy, then frees the spaces innermost first: the memory is
/// back where it was before the first space was made.
fn round_trip(depth: usize, allocs: &[(usize, usize)], order: &[usize]) {
    for pids in pid_designs() {
        let pids = &*pids;
        let name = pids.name();
        warm_up(pids);
        let start = pids.memory_bytes();
        let chain = nest(pids, depth);
        let mut live = Vec::new();
        for &(pick, cpu) in allocs {
            let ns = chain[pick % depth];
            live.push(pids.alloc(ns, &[], cpu).unwrap());
        }
        // Refused while IDs or children are left: nothing changes.
        let before = pids.memory_bytes();
        for &ns in &chain {
            let busy = ns != *chain.last().unwrap() || live.iter().any(|pid| pid.ns() == ns);
            if busy {
                assert_eq!(pids.free_ns(ns), Err(PidError::NamespaceBusy), "{name}");
            }
        }
        assert_eq!(
            pids.memory_bytes(),
            before,
            "{name}: a refusal changed memory"
        );
        for &i in order {
            if i < live.len() {
                let pid = live.swap_remove(i);
                // Any level names the object.
                let (ns, id) = pid.levels()[i % pid.levels().len()];
                pids.free(ns, id, i % CPUS).unwrap();
            }
        }
        for pid in live.drain(..) {
            pids.free(pid.ns(), pid.ids()[0], 0).unwrap();
        }
        for &ns in chain.iter().rev() {
            pids.free_ns(ns).unwrap();
        }
        let back = pids.memory_bytes();
        if name == "bitmap-hash" {
            // Its one lookup hash serves every space and shrinks by its own policy, which may
            // leave it below its starting capacity; it must never keep more.
            assert!(back <= start, "{name}: memory not back: {back} > {start}");
        } else {
            assert_eq!(back, start, "{name}: memory not back");
        }
        for &ns in &chain {
            assert_eq!(pids.free_ns(ns), Err(PidError::NamespaceFreed), "{name}");
            assert_eq!(
                pids.alloc(ns, &[], 0).err(),
                Some(PidError::NamespaceFreed),
                "{name}"
            );
            assert_eq!(pids.new_ns(ns), Err(PidError::NamespaceFreed), "{name}");
            assert_eq!(
                pids.set_pid_max(ns, 1000),
                Err(PidError::NamespaceFreed),
                "{name}"
            );
            assert_eq!(pids.free(ns, 1, 0), Err(PidError::NamespaceFreed), "{name}");
            assert!(pids.lookup(ns, 1).unwrap().is_none(), "{name}");
        }
        assert_eq!(
            pids.memory_bytes(),
            back,
            "{name}: a refusal changed memory"
        );
        // Numbers are not reused; unknown ones stay unknown, the root cannot be freed.
        let next = pids.new_ns(ROOT).unwrap();
        assert_eq!(next, chain.last().unwrap() + 1, "{name}");
        assert_eq!(pids.free_ns(next + 1), Err(PidError::UnknownNs), "{name}");
        assert_eq!(pids.free_ns(ROOT), Err(PidError::UnknownNs), "{name}");
        assert_eq!(pids.lookup(next + 1, 1).err(), Some(PidError::UnknownNs));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 64 }))]

    #[test]
    fn freed_spaces_give_their_memory_back(
        depth in 1..4usize,
        allocs in proptest::collection::vec((0..4usize, 0..CPUS), 0..40),
        order in proptest::collection::vec(0..40usize, 0..40),
    ) {
        round_trip(depth, &allocs, &order);
    }
}

#[test]
fn an_allocation_in_flight_or_a_new_child_keeps_a_space() {
    for pids in pid_designs() {
        let name = pids.name();
        let ns = pids.new_ns(ROOT).unwrap();
        let child = pids.new_ns(ns).unwrap();
        assert_eq!(pids.free_ns(ns), Err(PidError::NamespaceBusy), "{name}");
        pids.free_ns(child).unwrap();
        pids.free_ns(ns).unwrap();
        // A dead space (its init freed) is freed like any other once empty.
        let ns = pids.new_ns(ROOT).unwrap();
        let init = pids.alloc(ns, &[], 1).unwrap();
        pids.free(ns, 1, 2).unwrap();
        assert_eq!(pids.alloc(ns, &[], 0).err(), Some(PidError::NamespaceDead));
        assert!(
            pids.lookup(ROOT, init.ids()[1]).unwrap().is_none(),
            "{name}"
        );
        pids.free_ns(ns).unwrap();
    }
}

/// Threads look up, allocate and free in spaces that a fourth thread frees as soon as they are
/// empty: every answer is one the API allows, and nothing is freed under a reader (the
/// sanitizer runs and Miri check the memory side; here, that nothing panics or misanswers).
#[test]
fn spaces_are_freed_under_concurrent_use() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let rounds = common::miri_scaled(200);
    for pids in pid_designs() {
        let pids: Arc<dyn PidAllocator> = Arc::from(pids);
        let name = pids.name();
        let stop = Arc::new(AtomicBool::new(false));
        pids.alloc(ROOT, &[], 0).unwrap(); // the root's init, kept
        let first = pids.new_ns(ROOT).unwrap();
        let current = Arc::new(std::sync::atomic::AtomicU32::new(first));
        let users: Vec<_> = (0..3usize)
            .map(|cpu| {
                let (pids, stop, current) = (pids.clone(), stop.clone(), current.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        // Acquire: pairs with the Release store below, so that the space's
                        // creation is seen.
                        let ns = current.load(Ordering::Acquire);
                        match pids.lookup(ns, 1) {
                            Ok(_) => {}
                            Err(error) => panic!("lookup in {ns}: {error:?}"),
                        }
                        match pids.alloc(ns, &[], cpu) {
                            Ok(pid) => {
                                // The freer cannot free a space holding this ID.
                                assert!(pids.lookup(ns, pid.ids()[0]).unwrap().is_some());
                                pids.free(ns, pid.ids()[0], cpu).unwrap();
                            }
                            Err(PidError::NamespaceFreed | PidError::NamespaceDead) => {}
                            Err(error) => panic!("alloc in {ns}: {error:?}"),
                        }
                    }
                })
            })
            .collect();
        for round in 0..rounds {
            let ns = if round == 0 {
                first
            } else {
                pids.new_ns(ROOT).unwrap()
            };
            // Release: publishes the new space with its number.
            current.store(ns, Ordering::Release);
            std::thread::yield_now();
            loop {
                match pids.free_ns(ns) {
                    Ok(()) => break,
                    Err(PidError::NamespaceBusy) => std::thread::yield_now(),
                    Err(error) => panic!("{name}: free_ns: {error:?}"),
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for user in users {
            user.join().unwrap();
        }
    }
}
