//! `idspace replay pid --design idr-relock|idr-once|bitmap-hash|percpu`: the PID protocol.
//!
//! | input | answer |
//! |---|---|
//! | `{"op":"ns_new","parent":P}` | `{"ns":N}` (the root is 0) or `{"error":"too_deep"\|"too_many_ns"}` (`percpu` holds 65,536 spaces) |
//! | `{"op":"pid_max","ns":N,"max":M}` | `{"ok":true}` or `{"error":"invalid"}` |
//! | `{"op":"alloc","ns":N}`, optionally `"set_tid":[...]` and `"cpu":C` | `{"ids":[innermost, ..., root]}` or `{"error":"full"\|"exists"\|"invalid"\|"ns_dead"}` |
//! | `{"op":"free","ns":N,"id":X}`, optionally `"cpu":C` | `{"ok":true}` or `{"error":"not_found"}` |
//! | `{"op":"lookup","ns":N,"id":X}` | `{"found":B}` |
//! | `{"op":"memory"}` | `{"bytes":B}` |
//!
//! Unknown spaces answer `{"error":"unknown_ns"}`. `cpu` is a worker slot in `0..64` (0 by
//! default). Integers out of the kernel's ranges are the kernel's errors (a `set_tid` entry of
//! -1 is `invalid`, an ID of 2^40 is `not_found`); values of the wrong type are bad input.

use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, NsId, PerCpu, PidAllocator, PidError};
use serde_json::{json, Value};

use super::{error, ok, unknown_op, BadInput, Fields, Replayer};

/// Worker slots the replayer offers (`"cpu"` values `0..SLOTS`).
pub const SLOTS: u64 = 64;

/// The PID designs `replay pid` can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PidDesign {
    /// One global lock per level plus one to publish, over radix trees (before Linux 7.0).
    IdrRelock,
    /// One global lock hold for all levels (Linux 7.0).
    IdrOnce,
    /// Flat bitmaps under one lock, a striped hash for lookup (FreeBSD).
    BitmapHash,
    /// Per-CPU ranges of IDs (the seed's sketch).
    Percpu,
}

const OPS: &[&str] = &["ns_new", "pid_max", "alloc", "free", "lookup", "memory"];

/// Replays the PID protocol against one design.
pub struct PidReplay {
    pids: Box<dyn PidAllocator>,
}

impl PidReplay {
    /// A replayer over a fresh allocator of the given design.
    pub fn new(design: PidDesign) -> Self {
        let pids: Box<dyn PidAllocator> = match design {
            PidDesign::IdrRelock => Box::new(IdrRelock::new()),
            PidDesign::IdrOnce => Box::new(IdrOnce::new()),
            PidDesign::BitmapHash => Box::new(BitmapHash::new()),
            PidDesign::Percpu => Box::new(PerCpu::new(SLOTS as usize)),
        };
        PidReplay { pids }
    }
}

/// A space number: spaces beyond `u32` do not exist.
fn ns(fields: &Fields<'_>, name: &str) -> Result<Option<NsId>, BadInput> {
    Ok(NsId::try_from(fields.u64(name)?).ok())
}

/// Clamps an integer to `u32`, mapping out-of-range values to ones the kernel rejects alike.
fn clamp(value: i128) -> u32 {
    u32::try_from(value).unwrap_or(if value < 0 { 0 } else { u32::MAX })
}

fn answer<T>(result: Result<T, PidError>, found: impl FnOnce(T) -> Value) -> Value {
    match result {
        Ok(value) => found(value),
        Err(e) => error(e.as_str()),
    }
}

impl Replayer for PidReplay {
    fn apply(&mut self, fields: &Fields<'_>) -> Result<Value, BadInput> {
        let op = fields.op()?;
        let unknown = || error(PidError::UnknownNs.as_str());
        Ok(match op {
            "ns_new" => match ns(fields, "parent")? {
                Some(parent) => answer(self.pids.new_ns(parent), |ns| json!({ "ns": ns })),
                None => unknown(),
            },
            "pid_max" => {
                let space = ns(fields, "ns")?;
                let max = fields.int("max")?;
                match space {
                    Some(space) => answer(self.pids.set_pid_max(space, clamp(max)), |()| ok()),
                    None => unknown(),
                }
            }
            "alloc" => {
                let space = ns(fields, "ns")?;
                let set_tid: Vec<u32> = fields
                    .optional_ints("set_tid")?
                    .unwrap_or_default()
                    .into_iter()
                    .map(clamp)
                    .collect();
                let cpu = fields.optional_index("cpu", SLOTS)?.unwrap_or(0) as usize;
                match space {
                    Some(space) => answer(
                        self.pids.alloc(space, &set_tid, cpu),
                        |pid| json!({ "ids": pid.ids() }),
                    ),
                    None => unknown(),
                }
            }
            "free" => {
                let space = ns(fields, "ns")?;
                let id = fields.int("id")?;
                let cpu = fields.optional_index("cpu", SLOTS)?.unwrap_or(0) as usize;
                match (space, u32::try_from(id)) {
                    (None, _) => unknown(),
                    (Some(space), Ok(id)) => answer(self.pids.free(space, id, cpu), |()| ok()),
                    // No ID is that large or negative; the space must still exist.
                    (Some(space), Err(_)) => match self.pids.lookup(space, 0) {
                        Err(e) => error(e.as_str()),
                        Ok(_) => error(PidError::NotFound.as_str()),
                    },
                }
            }
            "lookup" => {
                let space = ns(fields, "ns")?;
                let id = fields.int("id")?;
                match space {
                    None => unknown(),
                    Some(space) => {
                        let id = u32::try_from(id).unwrap_or(0);
                        answer(
                            self.pids.lookup(space, id),
                            |pid| json!({ "found": pid.is_some() }),
                        )
                    }
                }
            }
            "memory" => json!({ "bytes": self.pids.memory_bytes() }),
            other => return Err(unknown_op(other, OPS)),
        })
    }
}
