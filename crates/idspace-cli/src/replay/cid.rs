//! `idspace replay cid --design rework|bitmap|lazy [--cpus N]`: the CID protocol, as
//! `idspace replay cid --help` prints it (from `cid.txt`):
//!
//! ```text
#![doc = include_str!("cid.txt")]
//! ```

use std::collections::HashMap;

use idspace::cid::{
    BitmapCids, CidAllocator, CidError, LazyCids, Rework, ScanPlacement, Task, MAX_CPUS,
};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::field::{fields, Name, NameOrNull, Natural, Naturals};
use super::{error, ok, Replayer};

/// The protocol's table of operations and answers.
pub const PROTOCOL: &str = include_str!("cid.txt");

/// The CID designs `replay cid` can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CidDesign {
    /// The MM CID rewrite (Linux 6.19).
    Rework,
    /// The first design: a bitmap under a lock at every switch (Linux 6.3).
    Bitmap,
    /// Per-CPU cached CIDs with periodic compaction (before the rewrite); its scan runs at
    /// each `compact`, so that a replay's answers do not depend on timing.
    Lazy,
}

/// The default `--cpus`: this machine's CPU count, at most [`MAX_CPUS`], the most the designs
/// support.
pub fn default_cpus() -> u16 {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    u16::try_from(cpus.min(MAX_CPUS)).unwrap_or(u16::MAX)
}

fields! {
    /// A task, by the caller's name for it.
    TaskName: Name = "task";
    /// The task a switch puts on the CPU, or none.
    Incoming: NameOrNull = "task";
    /// A CPU as the line gives it: any non-negative integer.
    Cpu: Natural = "cpu";
    /// The CPUs a task may run on.
    Cpus: Naturals = "cpus";
}

/// One line of the CID protocol.
#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[allow(
    missing_docs,
    reason = "a field is the line's field of that name; its type (in `fields!` above) says what it holds"
)]
pub enum CidOp {
    /// Creates a task, not running, allowed on all CPUs.
    Fork { task: TaskName },
    /// Ends a task.
    Exit { task: TaskName },
    /// Puts a task (or none) on a CPU.
    Switch { cpu: Cpu, task: Incoming },
    /// Sets the CPUs a task may run on.
    Affinity { task: TaskName, cpus: Cpus },
    /// Runs deferred work.
    Compact,
    /// The space's mode, users, budget and running tasks.
    State,
}

/// Replays the CID protocol against one design.
pub struct CidReplay {
    space: Box<dyn CidAllocator>,
    /// Caller's name → task.
    tasks: HashMap<u64, Task>,
    /// Task id → caller's name.
    names: HashMap<u64, u64>,
}

impl CidReplay {
    /// A replayer over a fresh space of `cpus` CPUs.
    ///
    /// # Errors
    /// [`CidError::BadCpuCount`] unless `cpus` is in `1..=64` (`idspace::cid::MAX_CPUS`).
    pub fn new(design: CidDesign, cpus: usize) -> Result<Self, CidError> {
        let space: Box<dyn CidAllocator> = match design {
            CidDesign::Rework => Box::new(Rework::new(cpus)?),
            CidDesign::Bitmap => Box::new(BitmapCids::new(cpus)?),
            // The scan on demand (at `compact`), not at a timed tick: reproducible answers.
            CidDesign::Lazy => Box::new(LazyCids::with_scan(cpus, ScanPlacement::OnDemand)?),
        };
        Ok(CidReplay {
            space,
            tasks: HashMap::new(),
            names: HashMap::new(),
        })
    }

    fn all(&self) -> u64 {
        let cpus = self.space.cpus();
        if cpus >= 64 {
            u64::MAX
        } else {
            (1 << cpus) - 1
        }
    }
}

/// A CPU number as an index; any beyond `usize` is as far out of range as `usize::MAX`.
fn cpu_index(cpu: u128) -> usize {
    usize::try_from(cpu).unwrap_or(usize::MAX)
}

fn answer(result: Result<Value, CidError>) -> Value {
    result.unwrap_or_else(|e| error(e.as_str()))
}

impl Replayer for CidReplay {
    type Op = CidOp;

    fn apply(&mut self, _line: u64, op: CidOp) -> Value {
        match op {
            CidOp::Fork {
                task: TaskName(name),
            } => {
                if self.tasks.contains_key(&name) {
                    error("task_exists")
                } else {
                    let all = self.all();
                    answer(self.space.fork(all).map(|task| {
                        self.names.insert(task.id(), name);
                        self.tasks.insert(name, task);
                        ok()
                    }))
                }
            }
            CidOp::Exit {
                task: TaskName(name),
            } => match self.tasks.remove(&name) {
                Some(task) => {
                    self.names.remove(&task.id());
                    answer(self.space.exit(&task).map(|()| ok()))
                }
                None => error("unknown_task"),
            },
            CidOp::Switch {
                cpu: Cpu(cpu),
                task: Incoming(incoming),
            } => {
                let cpu = cpu_index(cpu);
                match incoming {
                    None => answer(self.space.switch(cpu, None).map(|_| ok())),
                    Some(name) => match self.tasks.get(&name) {
                        None => error("unknown_task"),
                        Some(task) => answer(
                            self.space
                                .switch(cpu, Some(task))
                                .map(|cid| json!({ "cid": cid.unwrap_or(0) })),
                        ),
                    },
                }
            }
            CidOp::Affinity {
                task: TaskName(name),
                cpus: Cpus(cpus),
            } => match self.tasks.get(&name) {
                None => error("unknown_task"),
                Some(task) => {
                    let cpus: Vec<usize> = cpus.into_iter().map(cpu_index).collect();
                    answer(
                        idspace::cid::affinity_mask(&cpus, self.space.cpus())
                            .and_then(|mask| self.space.set_affinity(task, mask))
                            .map(|()| ok()),
                    )
                }
            },
            CidOp::Compact => {
                self.space.run_deferred();
                ok()
            }
            CidOp::State => {
                let state = self.space.state();
                let mut running = Map::new();
                for (id, cid) in state.running {
                    let name = self.names.get(&id).copied().unwrap_or(id);
                    running.insert(name.to_string(), json!(cid));
                }
                json!({
                    "mode": state.mode.as_str(),
                    "users": state.users,
                    "max_cids": state.max_cids,
                    "running": running,
                })
            }
        }
    }
}
