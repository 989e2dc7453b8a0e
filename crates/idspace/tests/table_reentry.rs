//! Entries returned by `get` hold no lock: every design lets a thread keep them across any other
//! call of the same table. Each test runs under a watchdog, so a deadlock fails it instead of
//! hanging the suite.

#![cfg(not(loom))]

mod common;

use common::{label, miri_scaled, table_designs, without_deadlock};
use idspace::table::{IdTable, MAX_ID};

fn each_design(what: &'static str, test: fn(&dyn IdTable<u64>, &str)) {
    for (index, table) in table_designs(MAX_ID).into_iter().enumerate() {
        let name = label(table.as_ref(), index);
        without_deadlock(&format!("{what}, {name}"), move || {
            test(table.as_ref(), &name)
        });
    }
}

#[test]
fn two_entries_of_colliding_keys_are_held_and_both_removed() {
    each_design("two colliding entries", |table, name| {
        // Owners 33 and 232 with ID 0 share a chain in the global design.
        table.create(33, 330).unwrap();
        table.create(232, 2320).unwrap();
        let first = table.get(33, 0).expect("created");
        let second = table.get(232, 0).expect("created");
        assert!(table.remove(33, 0).is_ok(), "{name}");
        assert!(table.remove(232, 0).is_ok(), "{name}");
        assert_eq!(
            (*first, *second),
            (330, 2320),
            "{name}: held values stay valid"
        );
    });
}

#[test]
fn every_entry_is_held_while_all_are_removed() {
    each_design("all entries held", |table, name| {
        // More entries than the global design has chains: some two share one, by pigeonhole,
        // in every fixed-size design; the growing ones collide before they split.
        let entries = miri_scaled(600) as u64;
        for value in 0..entries {
            table.create(value % 7, value).unwrap();
        }
        let held: Vec<_> = (0..entries)
            .map(|value| table.get(value % 7, (value / 7) as u32).expect("created"))
            .collect();
        for value in 0..entries {
            assert!(
                table.remove(value % 7, (value / 7) as u32).is_ok(),
                "{name}"
            );
        }
        for (value, entry) in (0..entries).zip(&held) {
            assert_eq!(**entry, value, "{name}");
        }
        assert!(table.get(0, 0).is_none(), "{name}");
    });
}

#[test]
fn an_entry_is_held_across_its_own_remove() {
    each_design("get then remove", |table, name| {
        table.create(1, 11).unwrap();
        let held = table.get(1, 0).expect("created");
        assert!(table.remove(1, 0).is_ok(), "{name}");
        assert!(
            table.get(1, 0).is_none(),
            "{name}: removed for everyone else"
        );
        assert_eq!(*held, 11, "{name}");
    });
}

#[test]
fn an_entry_is_held_across_remove_owner() {
    each_design("get then remove_owner", |table, name| {
        table.create(1, 11).unwrap();
        table.create(1, 12).unwrap();
        let held = table.get(1, 1).expect("created");
        assert_eq!(table.remove_owner(1), 2, "{name}");
        assert!(table.ids(1).is_empty(), "{name}");
        assert_eq!(*held, 12, "{name}");
    });
}

#[test]
fn an_entry_is_held_across_every_call_of_its_owner() {
    each_design("get then the owner's calls", |table, name| {
        table.create(1, 11).unwrap();
        let held = table.get(1, 0).expect("created");
        assert_eq!(table.create(1, 12), Ok(1), "{name}");
        table.set_restore(1, true);
        assert!(table.is_restoring(1), "{name}");
        assert_eq!(table.create_at(1, 50, 13), Ok(50), "{name}");
        assert_eq!(table.ids(1), [0, 1, 50], "{name}");
        assert!(table.contains(1, 50), "{name}");
        assert!(table.memory_bytes() > 0, "{name}");
        let again = table.get(1, 0).expect("still there");
        assert_eq!((*held, *again), (11, 11), "{name}");
    });
}
