//! The table suite: every design must pass every test here.

#![cfg(not(loom))]

mod common;

use common::{label, miri_scaled, table_designs};
use idspace::table::{IdTable, Rejected, TableError, MAX_ID};

fn each_design(max_id: u32, test: impl Fn(&dyn IdTable<u64>, &str)) {
    for (index, table) in table_designs(max_id).iter().enumerate() {
        test(table.as_ref(), &label(table.as_ref(), index));
    }
}

#[test]
fn create_takes_ids_from_the_owner_cursor() {
    each_design(MAX_ID, |table, name| {
        assert_eq!(table.create(1, 10), Ok(0), "{name}");
        assert_eq!(table.create(1, 11), Ok(1), "{name}");
        assert_eq!(table.create(2, 20), Ok(0), "{name}: owners are independent");
        assert_eq!(table.remove(1, 0).map(|e| *e), Ok(10), "{name}");
        assert_eq!(
            table.create(1, 12),
            Ok(2),
            "{name}: the cursor does not go back"
        );
        assert_eq!(table.ids(1), vec![1, 2], "{name}");
        assert_eq!(*table.get(1, 2).unwrap(), 12, "{name}");
        assert!(table.get(1, 0).is_none(), "{name}");
        assert!(table.get(3, 0).is_none(), "{name}: unknown owner");
    });
}

#[test]
fn restore_mode_creates_exact_ids_and_moves_the_cursor() {
    each_design(MAX_ID, |table, name| {
        let not_restoring = table.create_at(5, 7, 1);
        assert_eq!(
            not_restoring,
            Err(Rejected {
                error: TableError::NotRestoring,
                value: 1
            }),
            "{name}"
        );
        table.set_restore(5, true);
        assert!(table.is_restoring(5), "{name}");
        assert_eq!(table.create_at(5, 1_000_000, 2), Ok(1_000_000), "{name}");
        assert_eq!(table.create_at(5, 2_000_000, 3), Ok(2_000_000), "{name}");
        let busy = table.create_at(5, 1_000_000, 4).unwrap_err();
        assert_eq!((busy.error, busy.value), (TableError::Busy, 4), "{name}");
        let invalid = table.create_at(5, MAX_ID + 1, 5).unwrap_err();
        assert_eq!(invalid.error, TableError::Invalid, "{name}");
        assert_eq!(table.create(5, 6), Ok(2_000_001), "{name}: cursor = id + 1");
        table.set_restore(5, false);
        assert!(!table.is_restoring(5), "{name}");
        let off = table.create_at(5, 9, 7).unwrap_err();
        assert_eq!(off.error, TableError::NotRestoring, "{name}");
        assert_eq!(
            table.ids(5),
            vec![1_000_000, 2_000_000, 2_000_001],
            "{name}"
        );
    });
}

#[test]
fn cursor_wraps_from_i32_max_to_zero() {
    each_design(MAX_ID, |table, name| {
        table.set_restore(9, true);
        assert_eq!(table.create(9, 0), Ok(0), "{name}");
        assert_eq!(table.create_at(9, MAX_ID - 1, 1), Ok(MAX_ID - 1), "{name}");
        assert_eq!(table.create(9, 2), Ok(MAX_ID), "{name}");
        assert_eq!(
            table.create(9, 3),
            Ok(1),
            "{name}: wrapped past i32::MAX, 0 is taken"
        );
        assert_eq!(table.ids(9), vec![0, 1, MAX_ID - 1, MAX_ID], "{name}");
    });
}

#[test]
fn a_full_owner_reports_full_and_keeps_the_value() {
    each_design(3, |table, name| {
        for expected in 0..=3 {
            assert_eq!(table.create(1, expected.into()), Ok(expected), "{name}");
        }
        let full = table.create(1, 99).unwrap_err();
        assert_eq!((full.error, full.value), (TableError::Full, 99), "{name}");
        assert_eq!(
            table.create(2, 5),
            Ok(0),
            "{name}: another owner is not full"
        );
        assert_eq!(table.remove(1, 2).map(|e| *e), Ok(2), "{name}");
        assert_eq!(table.create(1, 7), Ok(2), "{name}: the only free ID");
    });
}

#[test]
fn remove_reports_not_found() {
    each_design(MAX_ID, |table, name| {
        assert_eq!(
            table.remove(1, 0).map(|e| *e),
            Err(TableError::NotFound),
            "{name}"
        );
        table.create(1, 1).unwrap();
        assert_eq!(
            table.remove(1, 1).map(|e| *e),
            Err(TableError::NotFound),
            "{name}"
        );
        assert_eq!(
            table.remove(2, 0).map(|e| *e),
            Err(TableError::NotFound),
            "{name}"
        );
        assert_eq!(table.remove(1, 0).map(|e| *e), Ok(1), "{name}");
        assert_eq!(
            table.remove(1, 0).map(|e| *e),
            Err(TableError::NotFound),
            "{name}"
        );
    });
}

#[test]
fn remove_owner_forgets_entries_cursor_and_restore_mode() {
    each_design(MAX_ID, |table, name| {
        let empty = table.memory_bytes();
        table.set_restore(4, true);
        for value in 0..100 {
            table.create(4, value).unwrap();
        }
        table.create(8, 1).unwrap();
        assert_eq!(table.remove_owner(4), 100, "{name}");
        assert_eq!(table.remove_owner(4), 0, "{name}");
        assert!(table.ids(4).is_empty(), "{name}");
        assert!(!table.is_restoring(4), "{name}");
        assert_eq!(table.create(4, 5), Ok(0), "{name}: the cursor starts again");
        assert_eq!(table.ids(8), vec![0], "{name}: other owners keep theirs");
        table.remove_owner(4);
        table.remove_owner(8);
        assert!(table.memory_bytes() >= empty, "{name}");
    });
}

#[test]
fn memory_grows_with_entries() {
    each_design(MAX_ID, |table, name| {
        let empty = table.memory_bytes();
        // Enough entries to outgrow the chains' inline room (the global table's 512 chains hold
        // a few hundred entries without allocating); fewer under Miri.
        let entries = if cfg!(miri) { 1000 } else { 5000 };
        for value in 0..entries as u64 {
            table.create(1, value).unwrap();
        }
        assert!(
            table.memory_bytes() > empty + entries * 8,
            "{name}: entries are counted"
        );
    });
}

#[test]
fn sparse_ids_cost_the_radix_tree_a_leaf_each() {
    use idspace::table::{Radix, ScaledHash};
    let radix = Radix::new();
    let hash = ScaledHash::new();
    // What the entries add: the hash's fixed buckets would outweigh Miri's few entries.
    let (radix_empty, hash_empty) = (radix.memory_bytes(), hash.memory_bytes());
    let sparse = miri_scaled(2048);
    for table in [&radix as &dyn IdTable<u64>, &hash] {
        table.set_restore(1, true);
        for index in 0..sparse as u32 {
            table.create_at(1, index * 512, index.into()).unwrap();
        }
    }
    // A leaf of 64 eight-byte slots at least for each entry.
    assert!(
        radix.memory_bytes() > sparse * 64 * 8,
        "{}",
        radix.memory_bytes()
    );
    let (radix_added, hash_added) = (
        radix.memory_bytes() - radix_empty,
        hash.memory_bytes() - hash_empty,
    );
    assert!(
        hash_added < radix_added / 2,
        "{hash_added} vs {radix_added}"
    );
}

#[test]
fn growing_table_splits_buckets_as_it_fills() {
    use idspace::table::{ScaledHash, Sizing};
    let table = ScaledHash::with_sizing(Sizing::Growing {
        initial: 16,
        max_load: 2,
    })
    .unwrap();
    let entries = miri_scaled(10_000) as u64;
    for value in 0..entries {
        table.create(value % 7, value).unwrap();
    }
    assert!(
        table.buckets() as u64 >= entries / 2 / 2,
        "{} buckets",
        table.buckets()
    );
    let fixed = ScaledHash::<u64>::with_sizing(Sizing::Fixed { buckets: 100 }).unwrap();
    assert_eq!(fixed.buckets(), 128, "rounded up to a power of two");
    for value in 0..miri_scaled(1000) as u64 {
        fixed.create(1, value).unwrap();
    }
    assert_eq!(fixed.buckets(), 128, "a fixed table does not grow");
}

#[test]
fn entries_guard_their_values() {
    each_design(MAX_ID, |table, name| {
        table.create(3, 42).unwrap();
        {
            let entry = table.get(3, 0).expect("present");
            assert_eq!(*entry, 42, "{name}");
            assert!(format!("{entry:?}").contains("42"), "{name}");
        }
        assert!(table.contains(3, 0), "{name}");
        assert!(!table.contains(3, 1), "{name}");
    });
}

#[test]
fn owners_len_and_entries_list_what_is_stored() {
    each_design(MAX_ID, |table, name| {
        assert!(table.is_empty(), "{name}");
        for value in 0..5 {
            table.create(3, value).unwrap();
        }
        table.create(1, 10).unwrap();
        table.set_restore(2, true);
        assert_eq!(
            table.owners(),
            [1, 2, 3],
            "{name}: restore mode is state too"
        );
        assert_eq!(table.len(), 6, "{name}");
        table.remove(3, 1).unwrap();
        let entries: Vec<(u32, u64)> = table
            .entries(3)
            .into_iter()
            .map(|(id, entry)| (id, *entry))
            .collect();
        assert_eq!(entries, [(0, 0), (2, 2), (3, 3), (4, 4)], "{name}");
        assert!(table.entries(9).is_empty(), "{name}");
        assert_eq!(table.len(), 5, "{name}");
    });
}

#[test]
fn a_restored_cursor_does_not_reuse_closed_handles() {
    each_design(1000, |table, name| {
        for value in 0..3 {
            table.create(1, value).unwrap();
        }
        table.remove(1, 2).unwrap();
        assert_eq!(table.cursor(1), 3, "{name}");
        assert_eq!(table.cursor(2), 0, "{name}: an unknown owner starts at 0");

        // The checkpoint: entries and cursor. The restore: exact IDs, then the cursor.
        let saved: Vec<(u32, u64)> = table
            .entries(1)
            .into_iter()
            .map(|(id, entry)| (id, *entry))
            .collect();
        let cursor = table.cursor(1);
        table.remove_owner(1);
        table.set_restore(1, true);
        for (id, value) in saved {
            table.create_at(1, id, value).unwrap();
        }
        table.set_restore(1, false);
        assert_eq!(
            table.cursor(1),
            2,
            "{name}: restore moved it past the last ID"
        );
        assert_eq!(table.set_cursor(1, cursor), Ok(()), "{name}");
        assert_eq!(table.create(1, 9), Ok(3), "{name}: handle 2 was closed");
        assert_eq!(
            table.set_cursor(1, 1001),
            Err(TableError::Invalid),
            "{name}: above the largest ID"
        );
        assert_eq!(table.set_cursor(1, 1000), Ok(()), "{name}");
        assert_eq!(table.create(1, 9), Ok(1000), "{name}");
        assert_eq!(
            table.create(1, 9),
            Ok(2),
            "{name}: wrapped to the first free ID"
        );
    });
}

#[test]
fn owners_that_hold_nothing_leave_no_state() {
    each_design(MAX_ID, |table, name| {
        let empty = table.memory_bytes();
        let owners = miri_scaled(2000) as u64;
        for owner in 0..owners {
            table.set_restore(owner, true);
            table.set_restore(owner, false);
        }
        assert!(
            table.owners().is_empty(),
            "{name}: toggled owners are forgotten"
        );
        assert_eq!(table.memory_bytes(), empty, "{name}");

        // Owners whose cursor moved keep it until told to forget.
        for owner in 0..owners {
            table.create(owner, owner).unwrap();
            table.remove(owner, 0).unwrap();
        }
        table.create(owners, 1).unwrap();
        assert_eq!(table.owners().len(), owners as usize + 1, "{name}");
        assert_eq!(table.cursor(0), 1, "{name}");
        assert_eq!(table.forget_idle(), owners as usize, "{name}");
        assert_eq!(
            table.owners(),
            [owners],
            "{name}: an owner with entries stays"
        );
        assert_eq!(table.cursor(0), 0, "{name}: forgotten");
        table.remove_owner(owners);
        assert!(
            table.memory_bytes() <= empty + 4096,
            "{name}: {} bytes left of {empty}",
            table.memory_bytes()
        );
    });
}

#[test]
fn concurrent_creates_of_one_owner_take_the_ids_in_order() {
    each_design(MAX_ID, |table, name| {
        let per_thread = miri_scaled(500);
        let ids: Vec<u32> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4u64)
                .map(|worker| {
                    scope.spawn(move || {
                        (0..per_thread)
                            .map(|n| table.create(1, worker * 1000 + n as u64).unwrap())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|worker| worker.join().unwrap())
                .collect()
        });
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        let expected: Vec<u32> = (0..4 * per_thread as u32).collect();
        assert_eq!(sorted, expected, "{name}: every ID from the cursor, once");
        assert_eq!(table.ids(1), expected, "{name}");
        assert_eq!(table.cursor(1), 4 * per_thread as u32, "{name}");
    });
}

/// A value that counts its drops.
struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>, u64);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn every_value_is_dropped_exactly_once_whoever_holds_it_last() {
    use idspace::table::{GlobalHash, Radix, ScaledHash, Sizing};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let tiny = Sizing::Growing {
        initial: 1,
        max_load: 1,
    };
    type Make = Box<dyn Fn() -> Box<dyn IdTable<Counted>>>;
    let designs: Vec<Make> = vec![
        Box::new(|| Box::new(GlobalHash::new())),
        Box::new(move || Box::new(ScaledHash::with_sizing(tiny).unwrap())),
        Box::new(|| Box::new(ScaledHash::new())),
        Box::new(|| Box::new(Radix::new())),
    ];
    let entries = miri_scaled(400) as u64;
    for make in &designs {
        let drops = std::sync::Arc::new(AtomicUsize::new(0));
        let table = make();
        let name = table.name();
        for value in 0..entries {
            let counted = Counted(drops.clone(), value);
            table
                .create(value % 3, counted)
                .map_err(|r| r.error)
                .unwrap();
        }
        // Held across everything below: every fourth entry.
        let held: Vec<_> = (0..entries)
            .step_by(4)
            .map(|value| table.get(value % 3, (value / 3) as u32).expect("created"))
            .collect();
        // Removed and dropped at once: every odd entry; held ones stay alive.
        for value in (1..entries).step_by(2) {
            drop(table.remove(value % 3, (value / 3) as u32).unwrap());
        }
        let odd_held = held.iter().filter(|entry| entry.1 % 2 == 1).count();
        assert_eq!(odd_held, 0, "{name}: every fourth is even");
        let removed = (entries / 2) as usize;
        assert_eq!(drops.load(Ordering::Relaxed), removed, "{name}");
        // A removed value held elsewhere is not unwrapped; once alone, it is.
        table.set_restore(9, true);
        table
            .create_at(9, 0, Counted(drops.clone(), 1000))
            .map_err(|r| r.error)
            .unwrap();
        let other = table.get(9, 0).unwrap();
        let removed_entry = table.remove(9, 0).unwrap();
        let removed_entry = removed_entry
            .try_unwrap()
            .map(|_| ())
            .expect_err("held twice");
        drop(other);
        let value = removed_entry.try_unwrap().ok().expect("alone now");
        assert_eq!(value.1, 1000, "{name}");
        drop(value);
        assert_eq!(drops.load(Ordering::Relaxed), removed + 1, "{name}");
        // Owner 0 goes with `remove_owner`, the rest with the table; held values outlive both.
        table.remove_owner(0);
        drop(table);
        let alive = held.len();
        assert_eq!(
            drops.load(Ordering::Relaxed),
            entries as usize + 1 - alive,
            "{name}: only the held values are alive"
        );
        drop(held);
        assert_eq!(
            drops.load(Ordering::Relaxed),
            entries as usize + 1,
            "{name}"
        );
    }
}

#[test]
fn sparse_ids_fit_in_a_hundred_kilobytes_on_two_cpus() {
    use idspace::table::{ScaledHash, Sizing};
    // The kernel's sizing for two CPUs, growing as `ScaledHash::new` does.
    let table = ScaledHash::<u64>::with_sizing(Sizing::Growing {
        initial: Sizing::kernel_buckets(2),
        max_load: idspace::table::DEFAULT_MAX_LOAD,
    })
    .unwrap();
    table.set_restore(1, true);
    let sparse = miri_scaled(2048) as u32;
    for index in 0..sparse {
        table.create_at(1, index * 512, index.into()).unwrap();
    }
    let bytes = table.memory_bytes();
    eprintln!("sparse: {bytes} bytes, {} buckets", table.buckets());
    assert!(bytes <= 100_000, "{bytes} bytes");
}

/// Creates through an owner handle answer as creates by number: the same cursor, wrap and
/// `Full`; a handle keeps its owner's state from being dropped as idle; after `remove_owner`, or
/// in another table, a handle creates through the registry.
#[test]
fn owner_handles_create_as_creates_by_number() {
    use idspace::table::{ScaledHash, Sizing};
    let table = ScaledHash::with_sizing_and_max_id(Sizing::growing(), 2).unwrap();
    let handle = table.owner_handle(1).unwrap();
    assert_eq!(handle.owner(), 1);
    // A kept state is not idle: it stays though it is back to the initial one.
    table.set_restore(1, true);
    table.set_restore(1, false);
    assert_eq!((table.forget_idle(), table.owners()), (0, vec![1]));
    assert_eq!(table.create_in(&handle, 10), Ok(0));
    assert_eq!(
        table.create(1, 11),
        Ok(1),
        "one cursor, by handle or by number"
    );
    assert_eq!(table.create_in(&handle.clone(), 12), Ok(2));
    assert_eq!(table.remove(1, 0).map(|e| *e), Ok(10));
    assert_eq!(
        table.create_in(&handle, 13),
        Ok(0),
        "wrapped past the largest ID"
    );
    let full = table.create_in(&handle, 14).unwrap_err();
    assert_eq!((full.error, full.value), (TableError::Full, 14));
    assert_eq!(table.ids(1), [0, 1, 2]);
    // After the owner's removal the old handle still creates, from a fresh state through the
    // registry.
    assert_eq!(table.remove_owner(1), 3);
    assert_eq!(table.create_in(&handle, 15), Ok(0));
    assert_eq!(table.create_in(&handle, 16), Ok(1));
    assert_eq!(table.ids(1), [0, 1]);
    // A handle of another table creates for its owner there, through the registry.
    let other = ScaledHash::new();
    assert_eq!(other.create_in(&handle, 17), Ok(0));
    assert_eq!((other.ids(1), table.ids(1)), (vec![0], vec![0, 1]));
    let fresh = table.owner_handle(2).unwrap();
    drop(fresh);
    assert_eq!(
        table.forget_idle(),
        1,
        "owner 2, no longer kept, holds nothing"
    );
    assert_eq!(table.owners(), [1]);
}

/// Removes through an owner handle answer as removes by number: the entry, then `NotFound`;
/// an ID of another owner is not the handle's; after `remove_owner` the old handle removes
/// from the owner's fresh state, and in another table it removes there.
#[test]
fn owner_handles_remove_as_removes_by_number() {
    use idspace::table::ScaledHash;
    let table = ScaledHash::new();
    let handle = table.owner_handle(1).unwrap();
    assert_eq!(table.create_in(&handle, 10), Ok(0));
    assert_eq!(table.create(2, 20), Ok(0));
    assert_eq!(table.remove_in(&handle, 0).map(|e| *e), Ok(10));
    assert_eq!(
        table.remove_in(&handle, 0).map(|e| *e),
        Err(TableError::NotFound)
    );
    assert_eq!(
        table.get(2, 0).map(|e| *e),
        Some(20),
        "owner 2's ID 0 stays"
    );
    assert_eq!(table.create_in(&handle, 11), Ok(1));
    assert_eq!(table.remove_owner(1), 1);
    assert_eq!(
        table.remove_in(&handle, 1).map(|e| *e),
        Err(TableError::NotFound),
        "the owner's entries went with it"
    );
    assert_eq!(table.create(1, 12), Ok(0));
    assert_eq!(table.remove_in(&handle, 0).map(|e| *e), Ok(12));
    assert!(table.ids(1).is_empty());
    let other = ScaledHash::new();
    assert_eq!(other.create(1, 30), Ok(0));
    assert_eq!(other.remove_in(&handle, 0).map(|e| *e), Ok(30));
    assert_eq!(table.len(), 1, "only owner 2's entry is left here");
}

/// `get_with` lends the value to a closure in every design: the closure's answer for a live
/// entry, `None` for a missing one, and a value removed and let go while a closure reads it is
/// dropped once, after the closure.
#[test]
fn get_with_lends_the_value_and_a_racing_remove_drops_it_after() {
    use idspace::table::{GlobalHash, Radix, ScaledHash};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    /// Counts its drops and fails a read after one.
    struct Watched(Arc<AtomicUsize>);
    impl Drop for Watched {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn check<D: IdTable<Watched> + 'static>(table: D) {
        let table = Arc::new(table);
        let drops = Arc::new(AtomicUsize::new(0));
        let id = table.create(1, Watched(drops.clone())).ok().unwrap();
        assert!(table.get_with(1, id + 1, |_| ()).is_none());
        assert!(table.get_with(2, id, |_| ()).is_none());
        let reading = Arc::new(Barrier::new(2));
        let remover = {
            let (table, reading) = (table.clone(), reading.clone());
            std::thread::spawn(move || {
                reading.wait();
                drop(table.remove(1, id).ok().unwrap()); // the table's reference, let go
            })
        };
        let seen = table.get_with(1, id, |value| {
            reading.wait();
            // The remover now races this read; the value must outlive it.
            std::thread::sleep(std::time::Duration::from_millis(20));
            value.0.load(Ordering::SeqCst)
        });
        remover.join().unwrap();
        assert_eq!(seen, Some(0), "the value was dropped under the closure");
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "dropped once, after the read"
        );
        assert!(table.get_with(1, id, |_| ()).is_none());
    }

    check(GlobalHash::new());
    check(ScaledHash::new());
    check(Radix::new());
}
