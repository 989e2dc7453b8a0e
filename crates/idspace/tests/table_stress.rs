//! Real threads hammering every design: no ID handed out twice, nothing lost.
//!
//! Each thread creates entries with values unique to it, in a shared owner and in its own
//! owner, looks them up, removes some, and once in a while drops its own owner wholesale. The
//! checks: a lookup of an entry the thread holds always finds the thread's own value (an ID
//! handed out twice would show another thread's value, or make `remove` return it), and at the
//! end every owner's ID list is exactly the union of what the threads still hold.

#![cfg(not(loom))]

mod common;

use std::collections::BTreeSet;
use std::sync::Barrier;
use std::thread;

use common::{label, table_designs};
use idspace::table::{IdTable, MAX_ID};

const THREADS: u64 = 8;
const ROUNDS: u64 = if cfg!(debug_assertions) {
    3_000
} else {
    30_000
};
const SHARED: u64 = 1_000;

fn hammer(table: &dyn IdTable<u64>, name: &str) {
    let barrier = Barrier::new(THREADS as usize);
    let shared_held: Vec<Vec<(u32, u64)>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let own = thread;
                    let mut shared = Vec::new();
                    let mut mine = Vec::new();
                    barrier.wait();
                    for round in 0..ROUNDS {
                        let value = (thread << 40) | round;
                        let id = table.create(SHARED, value).expect("never full");
                        shared.push((id, value));
                        let id = table.create(own, value).expect("never full");
                        mine.push((id, value));
                        if round % 3 == 0 {
                            let (id, value) =
                                shared.swap_remove((round as usize * 7) % shared.len());
                            assert_eq!(
                                table.remove(SHARED, id).map(|e| *e),
                                Ok(value),
                                "{name}: shared id {id}"
                            );
                        }
                        if round % 2 == 0 {
                            let (id, value) = mine.swap_remove(mine.len() / 2);
                            assert_eq!(
                                table.remove(own, id).map(|e| *e),
                                Ok(value),
                                "{name}: own id {id}"
                            );
                        }
                        if let Some(&(id, value)) = shared.get(round as usize % shared.len().max(1))
                        {
                            assert_eq!(table.get(SHARED, id).map(|e| *e), Some(value), "{name}");
                            assert!(table.contains(SHARED, id), "{name}");
                        }
                        if round % 5_000 == 4_999 {
                            assert_eq!(table.remove_owner(own), mine.len(), "{name}");
                            mine.clear();
                        }
                    }
                    let ids: BTreeSet<u32> = mine.iter().map(|&(id, _)| id).collect();
                    assert_eq!(ids.len(), mine.len(), "{name}: an own id handed out twice");
                    assert_eq!(
                        table.ids(own),
                        ids.into_iter().collect::<Vec<_>>(),
                        "{name}"
                    );
                    for &(id, value) in &mine {
                        assert_eq!(table.remove(own, id).map(|e| *e), Ok(value), "{name}");
                    }
                    shared
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let all: Vec<(u32, u64)> = shared_held.into_iter().flatten().collect();
    let ids: BTreeSet<u32> = all.iter().map(|&(id, _)| id).collect();
    assert_eq!(ids.len(), all.len(), "{name}: a shared id handed out twice");
    assert_eq!(
        table.ids(SHARED),
        ids.iter().copied().collect::<Vec<_>>(),
        "{name}"
    );
    for (id, value) in all {
        assert_eq!(table.get(SHARED, id).map(|e| *e), Some(value), "{name}");
    }
    for owner in 0..THREADS {
        assert!(
            table.ids(owner).is_empty(),
            "{name}: owner {owner} kept entries"
        );
    }
}

#[test]
fn stress_every_design() {
    for (index, table) in table_designs(MAX_ID).iter().enumerate() {
        hammer(table.as_ref(), &label(table.as_ref(), index));
    }
}

/// Threads of one owner reuse a 16-ID space as fast as they can: the cursor wraps every few
/// creates, so an ID is created again right after its remove, while one thread restores exact
/// IDs into the same space. In the hash designs an ID enters its chain before the owner's list
/// and leaves the list before its chain; with the opposite order a create slipping in between
/// would find its fresh ID still listed, and the earlier remove would then unlist a live ID.
fn reuse_a_small_space(table: &dyn IdTable<u64>, name: &str) {
    const OWNER: u64 = 7;
    const WORKERS: u64 = 4;
    let rounds: u64 = ROUNDS / 3;
    table.set_restore(OWNER, true);
    let barrier = Barrier::new(WORKERS as usize);
    thread::scope(|scope| {
        for worker in 0..WORKERS {
            let barrier = &barrier;
            scope.spawn(move || {
                let mut held: Vec<(u32, u64)> = Vec::new();
                barrier.wait();
                for round in 0..rounds {
                    let value = (worker << 40) | round;
                    let created = if worker == 0 {
                        let id = (round % 16) as u32;
                        table.create_at(OWNER, id, value).ok()
                    } else {
                        table.create(OWNER, value).ok()
                    };
                    if let Some(id) = created {
                        assert_eq!(table.get(OWNER, id).map(|e| *e), Some(value), "{name}");
                        // Held, so listed: no remove of an earlier holder may unlist it.
                        assert!(table.ids(OWNER).contains(&id), "{name}: id {id} unlisted");
                        held.push((id, value));
                    }
                    if held.len() > 2 || (created.is_none() && !held.is_empty()) {
                        let (id, value) = held.remove(0);
                        assert_eq!(
                            table.remove(OWNER, id).map(|e| *e),
                            Ok(value),
                            "{name}: id {id} of worker {worker}"
                        );
                    }
                }
                for (id, value) in held {
                    assert_eq!(table.remove(OWNER, id).map(|e| *e), Ok(value), "{name}");
                }
            });
        }
    });
    assert!(
        table.ids(OWNER).is_empty(),
        "{name}: {:?}",
        table.ids(OWNER)
    );
    assert_eq!(table.len(), 0, "{name}");
}

#[test]
fn stress_reuse_of_a_small_id_space() {
    for (index, table) in table_designs(15).iter().enumerate() {
        reuse_a_small_space(table.as_ref(), &label(table.as_ref(), index));
    }
}

/// A value on the heap that names its key, so that a lookup which read a freed or reused node
/// would see the wrong name (and AddressSanitizer, which CI runs this under, the bad access).
type Named = Box<(u32, u64)>;

fn named(id: u32) -> Named {
    Box::new((id, u64::from(id) * 3 + 1))
}

/// Lookups race removes of the very entries they look for (whose values are freed at once),
/// while another owner's creates make the growing tables split: every entry found names its
/// key.
#[test]
fn lookups_race_removes_and_splits() {
    use idspace::table::{GlobalHash, Radix, ScaledHash, Sizing};
    use std::sync::atomic::{AtomicBool, Ordering};
    let tiny = Sizing::Growing {
        initial: 1,
        max_load: 1,
    };
    let designs: Vec<Box<dyn IdTable<Named>>> = vec![
        Box::new(GlobalHash::new()),
        Box::new(ScaledHash::with_sizing(tiny).expect("a valid sizing")),
        Box::new(ScaledHash::new()),
        Box::new(Radix::new()),
    ];
    let rounds: u32 = if cfg!(debug_assertions) {
        20_000
    } else {
        200_000
    };
    for table in &designs {
        let table = table.as_ref();
        let name = table.name();
        let stop = AtomicBool::new(false);
        table.set_restore(1, true);
        thread::scope(|scope| {
            for reader in 0..3u32 {
                let stop = &stop;
                scope.spawn(move || {
                    let mut id = reader;
                    while !stop.load(Ordering::Relaxed) {
                        id = (id + 1) % 64;
                        if let Some(entry) = table.get(1, id) {
                            assert_eq!(**entry, *named(id), "{name}: found under ID {id}");
                        }
                    }
                });
            }
            // Splits: another owner's entries pile up (the tiny table grows all along).
            scope.spawn(|| {
                for _ in 0..rounds / 4 {
                    table.create(2, named(0)).expect("never full");
                }
            });
            for round in 0..rounds {
                let id = round.wrapping_mul(7) % 64;
                if let Err(rejected) = table.create_at(1, id, named(id)) {
                    drop(rejected);
                    let removed = table.remove(1, id).expect("created before");
                    assert_eq!(**removed, *named(id), "{name}: removed ID {id}");
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(table.remove_owner(2), (rounds / 4) as usize, "{name}");
    }
}

/// Lookups walk whole chains (of keys that are not there, and of keys that are) while a
/// growing table splits under them: a split moves nodes that lookups may be standing on into
/// new chains, and a lookup that follows such a node's link walks on in the new chain. Every
/// key created before a lookup must be found, whatever moved; under ThreadSanitizer the walk
/// into the new chain must also be ordered after the writes that made its nodes.
#[test]
fn lookups_walk_chains_that_splits_move() {
    use idspace::table::{ScaledHash, Sizing};
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    let creates: u32 = if cfg!(debug_assertions) {
        6_000
    } else {
        60_000
    };
    for round in 0..4u64 {
        // Long chains, so that a split moves many nodes past the lookups walking them.
        let sizing = Sizing::Growing {
            initial: 1,
            max_load: 24,
        };
        let table: ScaledHash<u64> = ScaledHash::with_sizing(sizing).expect("a valid sizing");
        let (stop, created) = (AtomicBool::new(false), AtomicU32::new(0));
        thread::scope(|scope| {
            for reader in 0..2u32 {
                let (stop, created, table) = (&stop, &created, &table);
                scope.spawn(move || {
                    let mut step = reader;
                    while !stop.load(Ordering::Relaxed) {
                        step = step.wrapping_add(1);
                        // An absent key: the lookup walks its whole chain.
                        assert!(table.get(3 + round, step % 1024).is_none());
                        assert!(!table.contains(3 + round, step % 1024));
                        // Acquire pairs with the Release increment below: the ID was created.
                        let known = created.load(Ordering::Acquire);
                        if known > 0 {
                            let id = step % known;
                            assert_eq!(table.get(2, id).map(|e| *e), Some(u64::from(id)));
                        }
                    }
                });
            }
            scope.spawn(|| {
                for id in 0..creates {
                    assert_eq!(table.create(2, u64::from(id)), Ok(id));
                    // Release pairs with the readers' Acquire load.
                    created.fetch_add(1, Ordering::Release);
                }
                stop.store(true, Ordering::Relaxed);
            });
        });
    }
}
