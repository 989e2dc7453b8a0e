//! Loom models of the tables' concurrent protocols: create, get and remove on the scaled hash's
//! chains while another thread splits buckets (growth by linear hashing, which lock-free
//! lookups validate with the bucket's split count), in every design a lookup racing a remove or
//! a `remove_owner`, its entry then held across both, in the hash designs a lock-free walk
//! over a node that is removed and freed meanwhile, and a create through an owner handle (no
//! registry lock) racing `remove_owner` and `forget_idle`.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_table`.
//! Tables start with one bucket and split past one entry per bucket, so each model crosses at
//! least one split.

#![cfg(loom)]

use idspace::table::{GlobalHash, IdTable, Radix, ScaledHash, Sizing, TableError};
use loom::sync::Arc;
use loom::thread;

mod loom_util;
use loom_util::run_model;

fn tiny() -> Arc<ScaledHash<u64>> {
    Arc::new(tiny_table())
}

fn tiny_table() -> ScaledHash<u64> {
    ScaledHash::with_sizing(Sizing::Growing {
        initial: 1,
        max_load: 1,
    })
    .expect("a valid sizing")
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
/// Hashing is deterministic, so a scratch table tells; each candidate is tried in a model of
/// its own (one execution, one thread), so that the search's operations do not count towards
/// the racing model's branch limit.
fn splitting_owner() -> u64 {
    (3..1000)
        .find(|&owner| {
            let splits = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let found = splits.clone();
            loom::model(move || {
                let scratch = prefilled();
                let before = scratch.buckets();
                scratch.create(owner, 0).unwrap();
                found.store(
                    scratch.buckets() > before,
                    std::sync::atomic::Ordering::Relaxed,
                );
            });
            splits.load(std::sync::atomic::Ordering::Relaxed)
        })
        .expect("some owner's key collides")
}

/// A lookup and a remove of existing entries race a create whose insert splits the bucket the
/// existing entries live in: the lookup must find its entry whichever bucket it is in.
#[test]
fn lookup_and_remove_race_a_split() {
    let splitter = splitting_owner();
    run_model("lookup_and_remove_race_a_split", move || {
        let table = prefilled();
        let before = table.buckets();
        let creator = table.clone();
        let reader = table.clone();
        let create = thread::spawn(move || creator.create(splitter, 300).unwrap());
        let read = thread::spawn(move || reader.get(2, 0).map(|e| *e));
        assert_eq!(table.remove(1, 0).map(|e| *e), Ok(100));
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

/// A shared table of any design. The share itself is std's `Arc` (loom's cannot hold a trait
/// object); the table's own synchronisation is what the models check.
type Shared = std::sync::Arc<dyn IdTable<u64>>;

/// Design `index` of the three, each small: the growing hash at one bucket.
fn design(index: usize) -> Shared {
    match index {
        0 => std::sync::Arc::new(GlobalHash::new()),
        1 => std::sync::Arc::new(tiny_table()),
        _ => std::sync::Arc::new(Radix::new()),
    }
}

/// Runs `model` once per design, each its own loom model (in one model the designs'
/// interleavings would multiply).
fn each_design(name: &str, model: fn(Shared)) {
    for index in 0..3 {
        run_model(&format!("{name}, design {index}"), move || {
            model(design(index))
        });
    }
}

/// The end of a read racing the removal of owner 1's entry 0 (value 100): the reader saw the
/// value or nothing, and the entry is gone.
fn reader_saw_100_or_nothing(table: &Shared, read: thread::JoinHandle<Option<u64>>) {
    let seen = read.join().unwrap();
    assert!(
        matches!(seen, Some(100) | None),
        "{}: read {seen:?}",
        table.name()
    );
    assert!(table.get(1, 0).is_none());
}

/// A lookup races a remove of the same entry: it finds the entry with its value, or nothing;
/// an entry it found stays readable after the remove, and the remove gets the value either way.
#[test]
fn a_read_races_a_remove() {
    each_design("a_read_races_a_remove", |table| {
        table.create(1, 100).unwrap();
        table.create(2, 200).unwrap();
        let reader = table.clone();
        let read = thread::spawn(move || {
            let entry = reader.get(1, 0);
            // Held across the remove in the other thread.
            thread::yield_now();
            entry.map(|e| *e)
        });
        assert_eq!(table.remove(1, 0).map(|e| *e), Ok(100), "{}", table.name());
        reader_saw_100_or_nothing(&table, read);
        assert_eq!(table.get(2, 0).map(|e| *e), Some(200));
    });
}

/// A remover takes a `Copy` value back with `Entry::try_unwrap_copied` (as the C ABI's remove
/// does) while a lookup may hold the entry: the take succeeds only once the lookup's entry is
/// gone, with the value, and the lookup read the value or found nothing. The take clears the
/// count and the value's bit in one exchange, which a lookup's `try_retain` races.
#[test]
fn a_copied_take_waits_for_a_reader() {
    each_design("a_copied_take_waits_for_a_reader", |table| {
        table.create(1, 100).unwrap();
        let reader = table.clone();
        let read = thread::spawn(move || reader.get(1, 0).map(|e| *e));
        let mut entry = table.remove(1, 0).unwrap();
        let value = loop {
            match entry.try_unwrap_copied() {
                Ok(value) => break value,
                Err(held) => {
                    entry = held;
                    thread::yield_now();
                }
            }
        };
        assert_eq!(value, 100, "{}", table.name());
        reader_saw_100_or_nothing(&table, read);
    });
}

/// A lookup races `remove_owner` of the entry's owner: it finds the value or nothing, and the
/// owner's entries are all gone afterwards while another owner's stay.
#[test]
fn a_read_races_remove_owner() {
    each_design("a_read_races_remove_owner", |table| {
        table.create(1, 100).unwrap();
        table.create(1, 101).unwrap();
        table.create(2, 200).unwrap();
        let reader = table.clone();
        let read = thread::spawn(move || {
            let entry = reader.get(1, 1);
            thread::yield_now();
            entry.map(|e| *e)
        });
        assert_eq!(table.remove_owner(1), 2, "{}", table.name());
        let seen = read.join().unwrap();
        assert!(
            matches!(seen, Some(101) | None),
            "{}: read {seen:?}",
            table.name()
        );
        assert!(table.ids(1).is_empty());
        assert_eq!(table.get(2, 0).map(|e| *e), Some(200));
    });
}

/// A lookup walks a chain without its lock while a remove unlinks the node in front of the one
/// it looks for and frees it at once (its value dropped with the last reference): the walk
/// must never reach freed memory (nodes record, under loom, every walk that reaches them and
/// their free, so loom reports a free that is not ordered after such a walk), and the lookup
/// finds its entry. The two keys share one chain: owners 33 and 232 in the global table, any
/// two in a scaled table of one fixed bucket.
#[test]
fn a_read_walks_past_a_node_removed_and_freed() {
    let designs: [fn() -> Shared; 2] = [
        || std::sync::Arc::new(GlobalHash::new()),
        || std::sync::Arc::new(ScaledHash::with_sizing(Sizing::Fixed { buckets: 1 }).unwrap()),
    ];
    for (index, make) in designs.into_iter().enumerate() {
        run_model(
            &format!("a_read_walks_past_a_node_removed_and_freed, design {index}"),
            move || {
                let table = make();
                table.create(33, 330).unwrap();
                table.create(232, 2320).unwrap(); // linked first, in front of 33's
                let reader = table.clone();
                let read = thread::spawn(move || reader.get(33, 0).map(|e| *e));
                drop(table.remove(232, 0).unwrap()); // the last reference: freed here
                assert_eq!(read.join().unwrap(), Some(330), "{}", table.name());
                assert!(table.get(232, 0).is_none());
            },
        );
    }
}

/// `contains` answers without taking a reference: it races a remove of the node it asks about,
/// whose value goes with the remove's entry at once, and a node behind it in the same chain.
/// It answers either way for the removed key, never reads freed memory (as above, loom reports
/// a free not ordered after a walk that reached the node), and finds the key that stays.
#[test]
fn contains_races_a_remove_that_drops_the_value() {
    let designs: [fn() -> Shared; 2] = [
        || std::sync::Arc::new(GlobalHash::new()),
        || std::sync::Arc::new(ScaledHash::with_sizing(Sizing::Fixed { buckets: 1 }).unwrap()),
    ];
    for (index, make) in designs.into_iter().enumerate() {
        run_model(
            &format!("contains_races_a_remove_that_drops_the_value, design {index}"),
            move || {
                let table = make();
                table.create(33, 330).unwrap();
                table.create(232, 2320).unwrap(); // linked first, in front of 33's
                let reader = table.clone();
                let read = thread::spawn(move || (reader.contains(232, 0), reader.contains(33, 0)));
                drop(table.remove(232, 0).unwrap()); // the last reference: value dropped here
                let (_either, stays) = read.join().unwrap();
                assert!(stays, "{}", table.name());
                assert!(!table.contains(232, 0));
                assert!(table.contains(33, 0));
            },
        );
    }
}

/// A remove races a restore-mode create of the same ID. The hash designs record an ID in the
/// owner's list after its chain and forget it from the list before the chain, each under a
/// different lock: the create is refused while the removed entry is still in its chain, and
/// whichever way the race goes, the owner's list ends up naming exactly the live entries.
#[test]
fn a_remove_races_a_create_of_the_same_id() {
    each_design("a_remove_races_a_create_of_the_same_id", |table| {
        table.set_restore(1, true);
        table.create_at(1, 5, 100).unwrap();
        let creator = table.clone();
        let create = thread::spawn(move || creator.create_at(1, 5, 200).is_ok());
        assert_eq!(table.remove(1, 5).map(|e| *e), Ok(100), "{}", table.name());
        let created = create.join().unwrap();
        let (ids, value) = (table.ids(1), table.get(1, 5).map(|e| *e));
        if created {
            assert_eq!((ids, value), (vec![5], Some(200)), "{}", table.name());
        } else {
            assert_eq!((ids, value), (vec![], None), "{}", table.name());
        }
        assert_eq!(table.cursor(1), 6);
    });
}

/// Two creates and a remove of one owner run at once: the list of IDs and the chains agree at
/// the end (the stripes of the list are taken one at a time, never with a chain).
#[test]
fn creates_and_a_remove_of_one_owner() {
    run_model("creates_and_a_remove_of_one_owner", || {
        let table = std::sync::Arc::new(
            ScaledHash::<u64>::with_sizing(Sizing::Fixed { buckets: 2 }).unwrap(),
        );
        table.create(1, 7).unwrap(); // id 0
        let creator = table.clone();
        let create = thread::spawn(move || creator.create(1, 8).unwrap());
        let id = table.create(1, 9).unwrap();
        assert_eq!(table.remove(1, 0).map(|e| *e), Ok(7));
        let other = create.join().unwrap();
        let mut expected = vec![id, other];
        expected.sort_unstable();
        assert_eq!(table.ids(1), expected);
        assert_eq!(table.len(), 2);
    });
}

/// A create through an owner handle (which takes no registry lock) races `remove_owner` of its
/// owner: either the create came first and `remove_owner` removes its entry too, or it comes
/// after and creates afresh through the registry, as any create after the removal. No entry is
/// left in a chain without its owner's list naming it.
#[test]
fn a_handle_create_races_remove_owner() {
    run_model("a_handle_create_races_remove_owner", || {
        let table = std::sync::Arc::new(
            ScaledHash::<u64>::with_sizing(Sizing::Fixed { buckets: 2 }).unwrap(),
        );
        let handle = table.owner_handle(1).unwrap();
        assert_eq!(table.create_in(&handle, 100), Ok(0));
        let creator = table.clone();
        let create = thread::spawn(move || creator.create_in(&handle, 200).unwrap());
        let removed = table.remove_owner(1);
        let id = create.join().unwrap();
        match removed {
            // The create came first: both entries went with the owner.
            2 => {
                assert_eq!(id, 1);
                assert!(table.ids(1).is_empty());
                assert!(table.get(1, 1).is_none(), "an entry outlived its owner");
                assert_eq!(table.len(), 0);
            }
            // It came after: a fresh state, from ID 0, or from 1 if the removed entry 0 was
            // not yet unhashed (a removed ID stays taken until then, as with a create by
            // number racing `remove_owner`).
            1 => {
                assert!(id <= 1, "ID {id}");
                assert_eq!(table.ids(1), [id]);
                assert_eq!(table.get(1, id).map(|e| *e), Some(200));
                assert!(
                    table.get(1, 1 - id).is_none(),
                    "an entry outlived its owner"
                );
            }
            other => panic!("remove_owner removed {other} entries"),
        }
    });
}

/// A remove through an owner handle (no registry lock) races `remove_owner` of its owner and a
/// lookup: exactly one of the removes takes the entry, nothing of the owner is left, and the
/// node's memory outlives the lookup's walk whichever remove unlinked it.
#[test]
fn a_handle_remove_races_remove_owner() {
    run_model("a_handle_remove_races_remove_owner", || {
        let table = tiny();
        let handle = table.owner_handle(1).unwrap();
        assert_eq!(table.create_in(&handle, 100), Ok(0));
        let remover = table.clone();
        let remove = thread::spawn(move || remover.remove_in(&handle, 0).map(|e| *e));
        let reader = table.clone();
        let look = thread::spawn(move || reader.get_copied(1, 0));
        let removed = table.remove_owner(1);
        let taken = remove.join().unwrap();
        assert!(matches!(look.join().unwrap(), None | Some(100)));
        match (removed, taken) {
            (0, Ok(100)) | (1, Err(TableError::NotFound)) => {}
            other => panic!("remove_owner and remove_in answered {other:?}"),
        }
        assert!(table.ids(1).is_empty());
        assert!(table.get(1, 0).is_none(), "an entry outlived its owner");
        assert_eq!(table.len(), 0);
    });
}

/// A create through an owner handle races `forget_idle` while the owner holds nothing: a state
/// someone keeps is never dropped as idle, so the entry stays listed under its owner.
#[test]
fn a_handle_create_races_forget_idle() {
    run_model("a_handle_create_races_forget_idle", || {
        let table = tiny();
        let handle = table.owner_handle(1).unwrap();
        let creator = table.clone();
        let create = thread::spawn(move || creator.create_in(&handle, 7).unwrap());
        table.forget_idle();
        let id = create.join().unwrap();
        assert_eq!(id, 0);
        assert_eq!(table.ids(1), [0], "the entry left its owner's list");
        assert_eq!(table.get(1, 0).map(|e| *e), Some(7));
        assert_eq!(table.owners(), [1]);
    });
}
