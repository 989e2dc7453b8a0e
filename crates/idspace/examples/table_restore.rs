//! A handle table with checkpoint/restore.
//!
//! Two processes (owners) create timers in a [`ScaledHash`], delete a few (leaving gaps in
//! their IDs), and the table is checkpointed as a list of (owner, id, value). A fresh table is
//! then restored from that list with restore mode (`create_at`, the kernel's
//! `PR_TIMER_CREATE_RESTORE_IDS`): every handle gets back exactly its old ID, and once restore
//! mode is off new handles continue after the restored ones, as they would have in the
//! original table.
//!
//! Run with `cargo run -p idspace --example table_restore`.

use idspace::table::{Id, IdTable, Owner, ScaledHash, TableError};

/// One saved handle.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Saved {
    owner: Owner,
    id: Id,
    value: String,
}

/// Saves every handle of `owners`, in ascending ID order per owner.
fn checkpoint(table: &dyn IdTable<String>, owners: &[Owner]) -> Vec<Saved> {
    let mut saved = Vec::new();
    for &owner in owners {
        for id in table.ids(owner) {
            // A handle removed between `ids` and `get` is simply not saved.
            if let Some(value) = table.get(owner, id) {
                saved.push(Saved {
                    owner,
                    id,
                    value: String::clone(&value),
                });
            }
        }
    }
    saved
}

/// Recreates every saved handle with its exact ID. Restoring in ascending order leaves each
/// owner's cursor just past its highest ID.
fn restore(table: &dyn IdTable<String>, saved: &[Saved]) -> Result<(), TableError> {
    for handle in saved {
        table.set_restore(handle.owner, true);
        table
            .create_at(handle.owner, handle.id, handle.value.clone())
            .map_err(|rejected| rejected.error)?;
    }
    for handle in saved {
        table.set_restore(handle.owner, false);
    }
    Ok(())
}

fn main() -> Result<(), TableError> {
    let owners: [Owner; 2] = [100, 200];
    let original = ScaledHash::new();
    for &owner in &owners {
        for n in 0..6 {
            original
                .create(owner, format!("timer {n} of process {owner}"))
                .map_err(|rejected| rejected.error)?;
        }
    }
    // Gaps: the restored table must keep them.
    original.remove(100, 1)?;
    original.remove(100, 4)?;
    original.remove(200, 0)?;

    let saved = checkpoint(&original, &owners);
    println!("checkpoint: {} handles", saved.len());
    for handle in &saved {
        println!(
            "  owner {} id {} = {:?}",
            handle.owner, handle.id, handle.value
        );
    }

    let restored = ScaledHash::new();
    restore(&restored, &saved)?;
    assert_eq!(
        checkpoint(&restored, &owners),
        saved,
        "every handle came back"
    );
    for &owner in &owners {
        println!("restored owner {owner}: ids {:?}", restored.ids(owner));
    }

    // Without restore mode, exact IDs are refused and new IDs follow the restored ones.
    let refused = restored.create_at(100, 1, "late".to_string());
    assert_eq!(refused.map_err(|r| r.error), Err(TableError::NotRestoring));
    for table in [&original, &restored] {
        let next = table
            .create(100, "a new timer".to_string())
            .map_err(|rejected| rejected.error)?;
        assert_eq!(next, 6, "the cursor is past the highest ID");
    }
    println!("next new ID for owner 100: 6 in both tables");
    Ok(())
}
