//! `idspace replay process --pid-design ... --table-design ...`: the process protocol, as
//! `idspace replay process --help` prints it (from `process.txt`):
//!
//! ```text
#![doc = include_str!("process.txt")]
//! ```

use idspace::cid::Rework;
use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, NsId, PerCpu};
use idspace::process::{Image, PidDesign as Pids, ProcessError, Processes, TableDesign as Table};
use idspace::table::{GlobalHash, Radix, ScaledHash};
use serde::Deserialize;
use serde_json::{json, Value};

use super::field::{fields, Integer, Kind, Natural};
use super::json::Json;
use super::pid::PidDesign;
use super::table::TableDesign;
use super::{error, ok, Replayer};

/// The protocol's table of operations and answers.
pub const PROTOCOL: &str = include_str!("process.txt");

/// The CPU every operation runs on: the replay is sequential, and the CID spaces are not
/// exercised beyond fork and exit.
const CPU: usize = 0;

/// Any JSON value: a checkpoint image passed back.
pub struct AnyJson;

impl Kind for AnyJson {
    type Value = Json;

    fn accept(json: &Json) -> Result<Json, String> {
        Ok(json.clone())
    }
}

fields! {
    /// The namespace a new one nests in.
    Parent: Natural = "parent";
    /// A namespace.
    Ns: Natural = "ns";
    /// A namespace's new `pid_max`.
    Max: Integer = "max";
    /// A process, by its root-level PID.
    Pid: Integer = "pid";
    /// A thread, by its root-level TID.
    Tid: Integer = "tid";
    /// A timer ID.
    Timer: Integer = "timer";
    /// An ID in a namespace.
    Id: Integer = "id";
    /// A checkpoint image.
    ImageField: AnyJson = "image";
}

/// One line of the process protocol.
#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[allow(
    missing_docs,
    reason = "a field is the line's field of that name; its type (in `fields!` above) says what it holds"
)]
pub enum ProcessOp {
    /// Creates a namespace below `parent`.
    NsNew { parent: Parent },
    /// Sets a namespace's `pid_max`.
    PidMax { ns: Ns, max: Max },
    /// A new process in a namespace.
    Fork { ns: Ns },
    /// A new thread of a process.
    Clone { pid: Pid },
    /// A thread exits.
    Exit { tid: Tid },
    /// Every thread of a process exits.
    Kill { pid: Pid },
    /// A new timer of a process.
    TimerCreate { pid: Pid },
    /// Deletes a timer.
    TimerDelete { pid: Pid, timer: Timer },
    /// A process's timer IDs.
    Timers { pid: Pid },
    /// A process's threads.
    Threads { pid: Pid },
    /// Who has an ID in a namespace.
    Lookup { ns: Ns, id: Id },
    /// A process's image.
    Checkpoint { pid: Pid },
    /// Recreates a process from its image.
    Restore { ns: Ns, image: ImageField },
    /// Bytes held.
    Memory,
}

/// The model under one PID design and one table design.
type Driver = Box<dyn FnMut(ProcessOp) -> Value>;

/// Replays the process protocol against one pair of designs.
pub struct ProcessReplay {
    driver: Driver,
}

impl ProcessReplay {
    /// A replayer over a fresh model of the given designs (CIDs from the rework, one CPU).
    pub fn new(pid: PidDesign, table: TableDesign) -> Self {
        fn with_table<P: Pids>(table: TableDesign) -> Driver {
            match table {
                TableDesign::Global => driver::<P, GlobalHash<()>>(),
                TableDesign::Scaled => driver::<P, ScaledHash<()>>(),
                TableDesign::Radix => driver::<P, Radix<()>>(),
            }
        }
        let driver = match pid {
            PidDesign::IdrRelock => with_table::<IdrRelock>(table),
            PidDesign::IdrOnce => with_table::<IdrOnce>(table),
            PidDesign::BitmapHash => with_table::<BitmapHash>(table),
            PidDesign::Percpu => with_table::<PerCpu>(table),
        };
        ProcessReplay { driver }
    }
}

impl Replayer for ProcessReplay {
    type Op = ProcessOp;

    fn apply(&mut self, _line: u64, op: ProcessOp) -> Value {
        (self.driver)(op)
    }
}

fn driver<P: Pids, T: Table>() -> Driver {
    match Processes::<P, Rework, T>::with_designs(1) {
        Ok(model) => Box::new(move |op| apply(&model, op)),
        // One CPU is always within the CID designs' range; should that change, every line says so.
        Err(e) => Box::new(move |_| error(e.name())),
    }
}

fn answer<T>(result: Result<T, ProcessError>, found: impl FnOnce(T) -> Value) -> Value {
    match result {
        Ok(value) => found(value),
        Err(e) => error(e.name()),
    }
}

/// A namespace number, if one can have it.
fn space(ns: u128) -> Result<NsId, ProcessError> {
    NsId::try_from(ns).map_err(|_| ProcessError::UnknownNs)
}

/// A process or thread ID, if one can have it.
fn named(id: i128, missing: ProcessError) -> Result<u32, ProcessError> {
    u32::try_from(id).map_err(|_| missing)
}

/// Clamps an integer to `u32`, mapping out-of-range values to ones refused alike.
fn clamp(value: i128) -> u32 {
    u32::try_from(value).unwrap_or(if value < 0 { 0 } else { u32::MAX })
}

/// The model a replay drives: the PID and table designs chosen, CIDs from the rewrite.
type Model<P, T> = Processes<P, Rework, T>;

fn apply<P: Pids, T: Table>(model: &Model<P, T>, op: ProcessOp) -> Value {
    let process = |pid: i128| named(pid, ProcessError::UnknownProcess);
    match op {
        ProcessOp::NsNew {
            parent: Parent(parent),
        } => answer(
            space(parent).and_then(|p| model.ns_new(p)),
            |ns| json!({ "ns": ns }),
        ),
        ProcessOp::PidMax {
            ns: Ns(ns),
            max: Max(max),
        } => answer(
            space(ns).and_then(|ns| model.set_pid_max(ns, clamp(max))),
            |()| ok(),
        ),
        ProcessOp::Fork { ns: Ns(ns) } => answer(
            space(ns).and_then(|ns| model.fork(ns, CPU)),
            |leader| json!({ "pid": leader.tid(), "ids": leader.ids() }),
        ),
        ProcessOp::Clone { pid: Pid(pid) } => answer(
            process(pid).and_then(|pid| model.clone_thread(pid, CPU)),
            |thread| json!({ "tid": thread.tid(), "ids": thread.ids() }),
        ),
        ProcessOp::Exit { tid: Tid(tid) } => answer(
            named(tid, ProcessError::UnknownThread).and_then(|tid| model.exit(tid, CPU)),
            |exited| json!({ "ok": true, "process_exited": exited.process_exited }),
        ),
        ProcessOp::Kill { pid: Pid(pid) } => answer(
            process(pid).and_then(|pid| model.kill(pid, CPU)),
            |exited| json!({ "exited": exited }),
        ),
        ProcessOp::TimerCreate { pid: Pid(pid) } => answer(
            process(pid).and_then(|pid| model.timer_create(pid)),
            |timer| json!({ "timer": timer }),
        ),
        ProcessOp::TimerDelete {
            pid: Pid(pid),
            timer: Timer(timer),
        } => timer_delete(model, pid, timer),
        ProcessOp::Timers { pid: Pid(pid) } => answer(
            process(pid).and_then(|pid| model.timers(pid)),
            |timers| json!({ "timers": timers }),
        ),
        ProcessOp::Threads { pid: Pid(pid) } => answer(
            process(pid).and_then(|pid| model.threads(pid)),
            |tids| json!({ "tids": tids }),
        ),
        ProcessOp::Lookup {
            ns: Ns(ns),
            id: Id(id),
        } => lookup(model, ns, id),
        ProcessOp::Checkpoint { pid: Pid(pid) } => checkpoint(model, pid),
        ProcessOp::Restore {
            ns: Ns(ns),
            image: ImageField(image),
        } => restore(model, ns, &image),
        ProcessOp::Memory => json!({ "bytes": model.memory_bytes() }),
    }
}

fn timer_delete<P: Pids, T: Table>(model: &Model<P, T>, pid: i128, timer: i128) -> Value {
    answer(
        named(pid, ProcessError::UnknownProcess).and_then(|pid| match u32::try_from(timer) {
            Ok(timer) => model.timer_delete(pid, timer),
            // No timer has that ID; the process must still exist.
            Err(_) => model.timers(pid).and(Err(ProcessError::NotFound)),
        }),
        |()| ok(),
    )
}

fn lookup<P: Pids, T: Table>(model: &Model<P, T>, ns: u128, id: i128) -> Value {
    answer(
        // No thread has ID 0, nor one out of `u32`'s range.
        space(ns).and_then(|ns| model.lookup(ns, u32::try_from(id).unwrap_or(0))),
        |found| match found {
            Some((pid, tid)) => json!({ "found": true, "pid": pid, "tid": tid }),
            None => json!({ "found": false }),
        },
    )
}

fn checkpoint<P: Pids, T: Table>(model: &Model<P, T>, pid: i128) -> Value {
    answer(
        named(pid, ProcessError::UnknownProcess).and_then(|pid| model.checkpoint(pid)),
        |image| match serde_json::to_value(image) {
            Ok(image) => json!({ "image": image }),
            // An image is numbers and booleans in structs: it always serialises.
            Err(e) => json!({ "error": "bad_image", "detail": e.to_string() }),
        },
    )
}

fn restore<P: Pids, T: Table>(model: &Model<P, T>, ns: u128, image: &Json) -> Value {
    let image = serde_json::from_str::<Image>(&image.to_string())
        .map_err(|e| ProcessError::BadImage(e.to_string()));
    answer(
        image.and_then(|image| {
            let ns = space(ns)?;
            model.restore(ns, &image, CPU)
        }),
        |restored| json!({ "pid": restored.leader.tid(), "ids": restored.leader.ids() }),
    )
}
