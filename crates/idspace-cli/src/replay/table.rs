//! `idspace replay table --design global|scaled|radix`: the handle-table protocol, as
//! `idspace replay table --help` prints it (from `table.txt`):
//!
//! ```text
#![doc = include_str!("table.txt")]
//! ```

use idspace::table::{GlobalHash, Id, IdTable, Radix, ScaledHash, MAX_ID};
use serde::Deserialize;
use serde_json::{json, Value};

use super::field::{fields, Flag, Integer, Name};
use super::{error, ok, Replayer};

/// The protocol's table of operations and answers.
pub const PROTOCOL: &str = include_str!("table.txt");

/// The table designs `replay table` can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableDesign {
    /// 512 chains behind one global lock (before Linux 6.15).
    Global,
    /// A lock per bucket, sized from the CPU count, growing (Linux 6.15, grown).
    Scaled,
    /// A per-owner radix tree (the xarray).
    Radix,
}

fields! {
    /// The owner of an ID space.
    Owner: Name = "owner";
    /// An ID as the line gives it: any integer.
    TableId: Integer = "id";
    /// Whether restore mode is on.
    On: Flag = "on";
}

/// One line of the table protocol.
#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[allow(
    missing_docs,
    reason = "a field is the line's field of that name; its type (in `fields!` above) says what it holds"
)]
pub enum TableOp {
    /// Allocates the owner's next ID.
    Create { owner: Owner },
    /// Allocates an exact ID, in restore mode.
    CreateAt { owner: Owner, id: TableId },
    /// Turns the owner's restore mode on or off.
    Restore { owner: Owner, on: On },
    /// Whether the owner has the ID.
    Get { owner: Owner, id: TableId },
    /// Frees an ID.
    Remove { owner: Owner, id: TableId },
    /// The owner's IDs.
    Ids { owner: Owner },
    /// Frees all the owner's IDs.
    RemoveOwner { owner: Owner },
    /// The table's memory.
    Memory,
}

/// Replays the table protocol against one design. The value stored with each ID is the number
/// of the input line that created it.
pub struct TableReplay {
    table: Box<dyn IdTable<u64>>,
}

impl TableReplay {
    /// A replayer over a fresh table of the given design.
    pub fn new(design: TableDesign) -> Self {
        let table: Box<dyn IdTable<u64>> = match design {
            TableDesign::Global => Box::new(GlobalHash::new()),
            TableDesign::Scaled => Box::new(ScaledHash::new()),
            TableDesign::Radix => Box::new(Radix::new()),
        };
        TableReplay { table }
    }
}

/// The ID `id` is, if any entry can have it: `0..=MAX_ID`.
fn table_id(id: i128) -> Option<Id> {
    Id::try_from(id).ok().filter(|&id| id <= MAX_ID)
}

impl Replayer for TableReplay {
    type Op = TableOp;

    fn apply(&mut self, line: u64, op: TableOp) -> Value {
        match op {
            TableOp::Create {
                owner: Owner(owner),
            } => match self.table.create(owner, line) {
                Ok(id) => json!({ "id": id }),
                Err(rejected) => error(rejected.error.as_str()),
            },
            TableOp::CreateAt {
                owner: Owner(owner),
                id: TableId(id),
            } => {
                if !self.table.is_restoring(owner) {
                    return error("not_restoring");
                }
                match table_id(id).map(|id| self.table.create_at(owner, id, line)) {
                    Some(Ok(id)) => json!({ "id": id }),
                    Some(Err(rejected)) => error(rejected.error.as_str()),
                    None => error("invalid"),
                }
            }
            TableOp::Restore {
                owner: Owner(owner),
                on: On(on),
            } => {
                self.table.set_restore(owner, on);
                ok()
            }
            TableOp::Get {
                owner: Owner(owner),
                id: TableId(id),
            } => {
                let found = table_id(id).is_some_and(|id| self.table.contains(owner, id));
                json!({ "found": found })
            }
            TableOp::Remove {
                owner: Owner(owner),
                id: TableId(id),
            } => match table_id(id).map(|id| self.table.remove(owner, id)) {
                Some(Ok(_)) => ok(),
                Some(Err(e)) => error(e.as_str()),
                None => error("not_found"),
            },
            TableOp::Ids {
                owner: Owner(owner),
            } => json!({ "ids": self.table.ids(owner) }),
            TableOp::RemoveOwner {
                owner: Owner(owner),
            } => {
                json!({ "removed": self.table.remove_owner(owner) })
            }
            TableOp::Memory => json!({ "bytes": self.table.memory_bytes() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_hold_the_number_of_the_line_that_created_them() {
        let input = "not json\n\
            {\"op\":\"create\",\"owner\":1}\n\
            [1]\n\
            {\"op\":\"fly\"}\n\
            {\"op\":\"restore\",\"owner\":1,\"on\":true}\n\
            {\"op\":\"create_at\",\"owner\":1,\"id\":9}\n";
        let mut replay = TableReplay::new(TableDesign::Scaled);
        let mut output = Vec::new();
        let ended = super::super::run(&mut replay, input.as_bytes(), &mut output);
        assert!(ended.any_bad && ended.error.is_none());
        let value = |id| replay.table.get(1, id).map(|entry| *entry);
        assert_eq!(value(0), Some(2), "bad lines count too");
        assert_eq!(value(9), Some(6));
    }
}
