//! `idspace replay pid --design idr-relock|idr-once|bitmap-hash|percpu`: the PID protocol, as
//! `idspace replay pid --help` prints it (from `pid.txt`):
//!
//! ```text
#![doc = include_str!("pid.txt")]
//! ```

use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, NsId, PerCpu, PidAllocator, PidError};
use serde::Deserialize;
use serde_json::{json, Value};

use super::field::{fields, Below, Integer, Integers, Natural};
use super::{error, ok, Replayer};

/// The protocol's table of operations and answers.
pub const PROTOCOL: &str = include_str!("pid.txt");

/// Worker slots the replayer offers (`"cpu"` values `0..SLOTS`).
pub const SLOTS: usize = 64;

/// The PID designs `replay pid` can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PidDesign {
    /// One global lock per level plus one to publish, over radix trees (before Linux 7.0).
    IdrRelock,
    /// One global lock hold for all levels (Linux 7.0).
    IdrOnce,
    /// Flat bitmaps under one lock, a striped hash for lookup (FreeBSD).
    BitmapHash,
    /// Per-CPU ranges of IDs (the design sketched on LKML with the single-lock alloc_pid series).
    Percpu,
}

fields! {
    /// The space a new one nests in.
    Parent: Natural = "parent";
    /// A PID namespace.
    Ns: Natural = "ns";
    /// A space's new `pid_max`.
    Max: Integer = "max";
    /// The IDs to allocate, innermost first (absent: any).
    #[derive(Default)]
    SetTid: Integers = "set_tid";
    /// The worker slot allocating or freeing (absent: 0).
    #[derive(Default)]
    Cpu: Below<SLOTS> = "cpu";
    /// A PID as the line gives it: any integer.
    PidId: Integer = "id";
}

/// One line of the PID protocol.
#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[allow(
    missing_docs,
    reason = "a field is the line's field of that name; its type (in `fields!` above) says what it holds"
)]
pub enum PidOp {
    /// Creates a space nested in `parent`.
    NsNew { parent: Parent },
    /// Sets a space's `pid_max`.
    PidMax { ns: Ns, max: Max },
    /// Allocates a PID in a space and all its ancestors.
    Alloc {
        ns: Ns,
        #[serde(default)]
        set_tid: SetTid,
        #[serde(default)]
        cpu: Cpu,
    },
    /// Frees a PID given by its number in a space.
    Free {
        ns: Ns,
        id: PidId,
        #[serde(default)]
        cpu: Cpu,
    },
    /// Whether a space has a PID.
    Lookup { ns: Ns, id: PidId },
    /// The allocator's memory.
    Memory,
}

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
            PidDesign::Percpu => {
                Box::new(PerCpu::new(SLOTS).expect("SLOTS is within PerCpu::MAX_CPUS"))
            }
        };
        PidReplay { pids }
    }
}

/// A space number, if a space can have it: spaces beyond `u32` do not exist.
fn space(ns: u128) -> Option<NsId> {
    NsId::try_from(ns).ok()
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
    type Op = PidOp;

    fn apply(&mut self, _line: u64, op: PidOp) -> Value {
        let unknown = || error(PidError::UnknownNs.as_str());
        match op {
            PidOp::NsNew {
                parent: Parent(parent),
            } => match space(parent) {
                Some(parent) => answer(self.pids.new_ns(parent), |ns| json!({ "ns": ns })),
                None => unknown(),
            },
            PidOp::PidMax {
                ns: Ns(ns),
                max: Max(max),
            } => match space(ns) {
                Some(ns) => answer(self.pids.set_pid_max(ns, clamp(max)), |()| ok()),
                None => unknown(),
            },
            PidOp::Alloc {
                ns: Ns(ns),
                set_tid: SetTid(set_tid),
                cpu: Cpu(cpu),
            } => match space(ns) {
                Some(ns) => {
                    let set_tid: Vec<u32> = set_tid.into_iter().map(clamp).collect();
                    answer(
                        self.pids.alloc(ns, &set_tid, cpu),
                        |pid| json!({ "ids": pid.ids() }),
                    )
                }
                None => unknown(),
            },
            PidOp::Free {
                ns: Ns(ns),
                id: PidId(id),
                cpu: Cpu(cpu),
            } => match (space(ns), u32::try_from(id)) {
                (None, _) => unknown(),
                (Some(ns), Ok(id)) => answer(self.pids.free(ns, id, cpu), |()| ok()),
                // No ID is that large or negative; the space must still exist.
                (Some(ns), Err(_)) => match self.pids.lookup(ns, 0) {
                    Err(e) => error(e.as_str()),
                    Ok(_) => error(PidError::NotFound.as_str()),
                },
            },
            PidOp::Lookup {
                ns: Ns(ns),
                id: PidId(id),
            } => match space(ns) {
                None => unknown(),
                // No PID is 0, nor out of `u32`'s range.
                Some(ns) => answer(
                    self.pids.lookup(ns, u32::try_from(id).unwrap_or(0)),
                    |pid| json!({ "found": pid.is_some() }),
                ),
            },
            PidOp::Memory => json!({ "bytes": self.pids.memory_bytes() }),
        }
    }
}
