//! `idspace replay table --design global|scaled|radix`: the handle-table protocol.
//!
//! | input | answer |
//! |---|---|
//! | `{"op":"create","owner":O}` | `{"id":N}` or `{"error":"full"}` |
//! | `{"op":"create_at","owner":O,"id":N}` | `{"id":N}` or `{"error":"busy"\|"invalid"\|"not_restoring"}` |
//! | `{"op":"restore","owner":O,"on":B}` | `{"ok":true}` |
//! | `{"op":"get","owner":O,"id":N}` | `{"found":B}` |
//! | `{"op":"remove","owner":O,"id":N}` | `{"ok":true}` or `{"error":"not_found"}` |
//! | `{"op":"ids","owner":O}` | `{"ids":[...]}` ascending |
//! | `{"op":"remove_owner","owner":O}` | `{"removed":K}` |
//! | `{"op":"memory"}` | `{"bytes":B}` |
//!
//! Owners are non-negative integers. IDs are integers: an ID outside `0..=i32::MAX` is the
//! `invalid` error of `create_at` (the kernel's `EINVAL`), and is simply not found by `get` and
//! `remove`; a non-integer ID is bad input.

use idspace::table::{GlobalHash, Id, IdTable, Radix, ScaledHash, MAX_ID};
use serde_json::{json, Value};

use super::{error, ok, unknown_op, BadInput, Fields, Replayer};

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

const OPS: &[&str] = &[
    "create",
    "create_at",
    "restore",
    "get",
    "remove",
    "ids",
    "remove_owner",
    "memory",
];

/// Replays the table protocol against one design. Values stored are the input line counts.
pub struct TableReplay {
    table: Box<dyn IdTable<u64>>,
    line: u64,
}

impl TableReplay {
    /// A replayer over a fresh table of the given design.
    pub fn new(design: TableDesign) -> Self {
        let table: Box<dyn IdTable<u64>> = match design {
            TableDesign::Global => Box::new(GlobalHash::new()),
            TableDesign::Scaled => Box::new(ScaledHash::new()),
            TableDesign::Radix => Box::new(Radix::new()),
        };
        TableReplay { table, line: 0 }
    }
}

/// The ID of a lookup, or `None` if no entry can have it.
fn lookup_id(fields: &Fields<'_>) -> Result<Option<Id>, BadInput> {
    let id = fields.int("id")?;
    Ok((0..=i128::from(MAX_ID)).contains(&id).then_some(id as Id))
}

impl Replayer for TableReplay {
    fn apply(&mut self, fields: &Fields<'_>) -> Result<Value, BadInput> {
        self.line += 1;
        let op = fields.op()?;
        let answer = match op {
            "create" => {
                let owner = fields.u64("owner")?;
                match self.table.create(owner, self.line) {
                    Ok(id) => json!({ "id": id }),
                    Err(rejected) => error(rejected.error.as_str()),
                }
            }
            "create_at" => {
                let owner = fields.u64("owner")?;
                let id = fields.int("id")?;
                if !self.table.is_restoring(owner) {
                    error("not_restoring")
                } else if !(0..=i128::from(MAX_ID)).contains(&id) {
                    error("invalid")
                } else {
                    match self.table.create_at(owner, id as Id, self.line) {
                        Ok(id) => json!({ "id": id }),
                        Err(rejected) => error(rejected.error.as_str()),
                    }
                }
            }
            "restore" => {
                let owner = fields.u64("owner")?;
                let on = fields.bool("on")?;
                self.table.set_restore(owner, on);
                ok()
            }
            "get" => {
                let owner = fields.u64("owner")?;
                let found = lookup_id(fields)?.is_some_and(|id| self.table.contains(owner, id));
                json!({ "found": found })
            }
            "remove" => {
                let owner = fields.u64("owner")?;
                match lookup_id(fields)?.map(|id| self.table.remove(owner, id)) {
                    Some(Ok(_)) => ok(),
                    Some(Err(e)) => error(e.as_str()),
                    None => error("not_found"),
                }
            }
            "ids" => {
                let owner = fields.u64("owner")?;
                json!({ "ids": self.table.ids(owner) })
            }
            "remove_owner" => {
                let owner = fields.u64("owner")?;
                json!({ "removed": self.table.remove_owner(owner) })
            }
            "memory" => json!({ "bytes": self.table.memory_bytes() }),
            other => return Err(unknown_op(other, OPS)),
        };
        Ok(answer)
    }
}
