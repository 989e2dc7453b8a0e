//! `idspace replay cid --design rework|bitmap|lazy --cpus N`: the CID protocol.
//!
//! | input | answer |
//! |---|---|
//! | `{"op":"fork","task":T}` | `{"ok":true}` (not running; affinity all CPUs) |
//! | `{"op":"exit","task":T}` | `{"ok":true}` (if T runs, its CPU becomes idle) |
//! | `{"op":"switch","cpu":C,"task":T}` | `{"cid":X}`: the task on C is switched out, T in |
//! | `{"op":"switch","cpu":C,"task":null}` | `{"ok":true}`: C becomes idle |
//! | `{"op":"affinity","task":T,"cpus":[...]}` | `{"ok":true}` |
//! | `{"op":"compact"}` | `{"ok":true}`: runs deferred work |
//! | `{"op":"state"}` | `{"mode":"task"\|"cpu"\|"none","users":U,"max_cids":M,"running":{"T":X,...}}` |
//!
//! Errors: `unknown_task`, `task_exists`, `running_elsewhere`, `not_allowed`, `bad_cpu`. Task
//! names are the caller's non-negative integers; a name is free again once its task exited. A
//! CPU number at or beyond the space's CPU count is `bad_cpu`; a negative or non-integer one is
//! bad input.

use std::collections::HashMap;

use idspace::cid::{BitmapCids, CidAllocator, CidError, LazyCids, Rework, Task};
use serde_json::{json, Map, Value};

use super::{error, ok, unknown_op, BadInput, Fields, Replayer};

/// The CID designs `replay cid` can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CidDesign {
    /// The MM CID rewrite (Linux 6.19).
    Rework,
    /// The first design: a bitmap under a lock at every switch (Linux 6.3).
    Bitmap,
    /// Per-CPU cached CIDs with periodic compaction (before the rewrite).
    Lazy,
}

const OPS: &[&str] = &["fork", "exit", "switch", "affinity", "compact", "state"];

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
            CidDesign::Lazy => Box::new(LazyCids::new(cpus)?),
        };
        Ok(CidReplay {
            space,
            tasks: HashMap::new(),
            names: HashMap::new(),
        })
    }

    fn task(&self, fields: &Fields<'_>) -> Result<Result<&Task, CidError>, BadInput> {
        let name = fields.u64("task")?;
        Ok(self.tasks.get(&name).ok_or(CidError::UnknownTask))
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

fn answer(result: Result<Value, CidError>) -> Value {
    result.unwrap_or_else(|e| error(e.as_str()))
}

impl Replayer for CidReplay {
    fn apply(&mut self, fields: &Fields<'_>) -> Result<Value, BadInput> {
        let op = fields.op()?;
        Ok(match op {
            "fork" => {
                let name = fields.u64("task")?;
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
            "exit" => {
                let name = fields.u64("task")?;
                match self.tasks.remove(&name) {
                    Some(task) => {
                        self.names.remove(&task.id());
                        answer(self.space.exit(&task).map(|()| ok()))
                    }
                    None => error("unknown_task"),
                }
            }
            "switch" => {
                let cpu = fields.u64("cpu")?;
                let cpu = usize::try_from(cpu).unwrap_or(usize::MAX);
                match fields.optional_task()? {
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
            "affinity" => {
                let cpus = fields.index_list("cpus")?;
                let task = self.task(fields)?;
                answer(task.and_then(|task| {
                    let cpus: Vec<usize> = cpus
                        .iter()
                        .map(|&c| usize::try_from(c).unwrap_or(usize::MAX))
                        .collect();
                    let mask = idspace::cid::affinity_mask(&cpus, self.space.cpus())?;
                    self.space.set_affinity(task, mask).map(|()| ok())
                }))
            }
            "compact" => {
                self.space.run_deferred();
                ok()
            }
            "state" => {
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
            other => return Err(unknown_op(other, OPS)),
        })
    }
}
