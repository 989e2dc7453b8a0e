//! Model-based property test: every design against a simple `BTreeMap` reference model of the
//! kernel semantics (cursor, wrap at the largest ID, restore mode, errors, owner removal).
//!
//! Invariants checked after every step: the design answers exactly as the model does, so it
//! never hands out an ID twice, never loses an entry, and lists IDs in ascending order.

#![cfg(not(loom))]

mod common;

use std::collections::{BTreeMap, HashMap};

use common::{label, table_designs};
use idspace::table::{Id, IdTable, OwnerHandle, ScaledHash, Sizing, TableError, MAX_ID};
use proptest::prelude::*;

#[derive(Default)]
struct ModelOwner {
    cursor: Id,
    restoring: bool,
    entries: BTreeMap<Id, u64>,
}

struct Model {
    max_id: Id,
    owners: HashMap<u64, ModelOwner>,
}

impl Model {
    fn next(&self, id: Id) -> Id {
        if id >= self.max_id {
            0
        } else {
            id + 1
        }
    }

    fn create(&mut self, owner: u64, value: u64) -> Result<Id, TableError> {
        let max_id = self.max_id;
        let state = self.owners.entry(owner).or_default();
        if state.entries.len() > max_id as usize {
            return Err(TableError::Full);
        }
        let mut id = state.cursor;
        while state.entries.contains_key(&id) {
            id = if id >= max_id { 0 } else { id + 1 };
        }
        state.entries.insert(id, value);
        state.cursor = if id >= max_id { 0 } else { id + 1 };
        Ok(id)
    }

    fn create_at(&mut self, owner: u64, id: Id, value: u64) -> Result<Id, TableError> {
        let next = self.next(id);
        let max_id = self.max_id;
        let Some(state) = self.owners.get_mut(&owner) else {
            return Err(TableError::NotRestoring);
        };
        if !state.restoring {
            return Err(TableError::NotRestoring);
        }
        if id > max_id {
            return Err(TableError::Invalid);
        }
        if state.entries.contains_key(&id) {
            return Err(TableError::Busy);
        }
        state.entries.insert(id, value);
        state.cursor = next;
        Ok(id)
    }
}

#[derive(Debug, Clone)]
enum Op {
    Create(u64),
    CreateAt(u64, Id),
    Restore(u64, bool),
    Get(u64, Id),
    Remove(u64, Id),
    Ids(u64),
    RemoveOwner(u64),
}

fn id_strategy(max_id: Id) -> impl Strategy<Value = Id> {
    prop_oneof![
        4 => 0..8u32,
        2 => (max_id.saturating_sub(3))..=max_id,
        1 => any::<u32>(),
    ]
}

fn op_strategy(max_id: Id) -> impl Strategy<Value = Op> {
    let owner = 0..3u64;
    prop_oneof![
        6 => owner.clone().prop_map(Op::Create),
        3 => (owner.clone(), id_strategy(max_id)).prop_map(|(o, id)| Op::CreateAt(o, id)),
        2 => (owner.clone(), any::<bool>()).prop_map(|(o, on)| Op::Restore(o, on)),
        3 => (owner.clone(), id_strategy(max_id)).prop_map(|(o, id)| Op::Get(o, id)),
        4 => (owner.clone(), id_strategy(max_id)).prop_map(|(o, id)| Op::Remove(o, id)),
        1 => owner.clone().prop_map(Op::Ids),
        1 => owner.prop_map(Op::RemoveOwner),
    ]
}

/// How the check creates and removes: by number, or through owner handles a caller keeps.
trait Creator {
    fn create(
        &mut self,
        table: &dyn IdTable<u64>,
        owner: u64,
        value: u64,
    ) -> Result<Id, (TableError, u64)>;
    fn remove(&mut self, table: &dyn IdTable<u64>, owner: u64, id: Id) -> Result<u64, TableError> {
        table.remove(owner, id).map(|e| *e)
    }
    fn owner_removed(&mut self, _owner: u64, _step: usize) {}
}

/// Creates with `IdTable::create`.
struct ByNumber;

impl Creator for ByNumber {
    fn create(
        &mut self,
        table: &dyn IdTable<u64>,
        owner: u64,
        value: u64,
    ) -> Result<Id, (TableError, u64)> {
        table.create(owner, value).map_err(|r| (r.error, r.value))
    }
}

/// Creates and removes through an owner handle per owner, made on first create, in a
/// `ScaledHash`. After a `remove_owner` the handle is kept on odd steps (its creates and removes
/// then go through the registry) and made afresh on even ones.
struct ByHandle<'a> {
    table: &'a ScaledHash<u64>,
    handles: HashMap<u64, OwnerHandle>,
}

impl Creator for ByHandle<'_> {
    fn create(
        &mut self,
        _: &dyn IdTable<u64>,
        owner: u64,
        value: u64,
    ) -> Result<Id, (TableError, u64)> {
        let table = self.table;
        let handle = self
            .handles
            .entry(owner)
            .or_insert_with(|| table.owner_handle(owner).expect("memory for an owner"));
        assert_eq!(handle.owner(), owner);
        table
            .create_in(handle, value)
            .map_err(|r| (r.error, r.value))
    }

    fn remove(&mut self, table: &dyn IdTable<u64>, owner: u64, id: Id) -> Result<u64, TableError> {
        // Through the owner's handle if one was made (a removed owner's kept handle removes
        // through the registry), else by number.
        match self.handles.get(&owner) {
            Some(handle) => self.table.remove_in(handle, id).map(|e| *e),
            None => table.remove(owner, id).map(|e| *e),
        }
    }

    fn owner_removed(&mut self, owner: u64, step: usize) {
        if step % 2 == 0 {
            self.handles.remove(&owner);
        }
    }
}

fn check(max_id: Id, ops: &[Op]) {
    for (index, table) in table_designs(max_id).iter().enumerate() {
        let name = label(table.as_ref(), index);
        check_one(table.as_ref(), &name, &mut ByNumber, max_id, ops);
    }
    // Creates through owner handles answer as creates by number do.
    for (index, sizing) in [
        Sizing::Growing {
            initial: 1,
            max_load: 1,
        },
        Sizing::growing(),
    ]
    .into_iter()
    .enumerate()
    {
        let table = ScaledHash::with_sizing_and_max_id(sizing, max_id).expect("a valid sizing");
        let mut creator = ByHandle {
            table: &table,
            handles: HashMap::new(),
        };
        let name = format!("scaled with owner handles #{index}");
        check_one(&table, &name, &mut creator, max_id, ops);
    }
}

fn check_one(
    table: &dyn IdTable<u64>,
    name: &str,
    creator: &mut dyn Creator,
    max_id: Id,
    ops: &[Op],
) {
    {
        let mut model = Model {
            max_id,
            owners: HashMap::new(),
        };
        for (step, op) in ops.iter().enumerate() {
            let value = step as u64 * 1000 + 7;
            let at = format!("{name}, step {step}: {op:?}");
            match *op {
                Op::Create(owner) => {
                    let got = creator.create(table, owner, value);
                    let want = model.create(owner, value).map_err(|e| (e, value));
                    assert_eq!(got, want, "{at}");
                }
                Op::CreateAt(owner, id) => {
                    let got = table
                        .create_at(owner, id, value)
                        .map_err(|r| (r.error, r.value));
                    let want = model.create_at(owner, id, value).map_err(|e| (e, value));
                    assert_eq!(got, want, "{at}");
                }
                Op::Restore(owner, on) => {
                    table.set_restore(owner, on);
                    if on {
                        model.owners.entry(owner).or_default().restoring = true;
                    } else if let Some(state) = model.owners.get_mut(&owner) {
                        state.restoring = false;
                    }
                    assert_eq!(table.is_restoring(owner), on, "{at}");
                }
                Op::Get(owner, id) => {
                    let got = table.get(owner, id).map(|entry| *entry);
                    let want = model
                        .owners
                        .get(&owner)
                        .and_then(|s| s.entries.get(&id))
                        .copied();
                    assert_eq!(got, want, "{at}");
                    // The lookup that takes no reference agrees with the one that does.
                    assert_eq!(table.contains(owner, id), want.is_some(), "{at}");
                }
                Op::Remove(owner, id) => {
                    let got = creator.remove(table, owner, id);
                    let want = model
                        .owners
                        .get_mut(&owner)
                        .and_then(|s| s.entries.remove(&id))
                        .ok_or(TableError::NotFound);
                    assert_eq!(got, want, "{at}");
                }
                Op::Ids(owner) => {
                    let want: Vec<Id> = model
                        .owners
                        .get(&owner)
                        .map(|s| s.entries.keys().copied().collect())
                        .unwrap_or_default();
                    assert_eq!(table.ids(owner), want, "{at}");
                }
                Op::RemoveOwner(owner) => {
                    let want = model.owners.remove(&owner).map_or(0, |s| s.entries.len());
                    assert_eq!(table.remove_owner(owner), want, "{at}");
                    creator.owner_removed(owner, step);
                }
            }
        }
        for (owner, state) in &model.owners {
            let want: Vec<Id> = state.entries.keys().copied().collect();
            assert_eq!(
                table.ids(*owner),
                want,
                "{name}: final IDs of owner {owner}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The kernel's ID range: exercises the wrap at i32::MAX through restore mode.
    #[test]
    fn designs_match_the_model(ops in proptest::collection::vec(op_strategy(MAX_ID), 1..120)) {
        check(MAX_ID, &ops);
    }

    /// A tiny ID space (0..=5): exercises wrap-around probing and `Full`.
    #[test]
    fn designs_match_the_model_in_a_tiny_id_space(
        ops in proptest::collection::vec(op_strategy(5), 1..120)
    ) {
        check(5, &ops);
    }
}
