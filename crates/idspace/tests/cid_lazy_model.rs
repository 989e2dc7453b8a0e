//! `LazyCids` against a reference model: random sequences of fork, exit, switch, affinity
//! changes and scans, on 1 to 5 CPUs, with the scan on demand so that the run is sequential and
//! deterministic. The model is written from the kernel's description (Linux 6.4 to 6.18,
//! `../shared/reference/cid.md` §2) with plain collections: per-CPU words (unset, valid,
//! lazy-put), `recent_cid`, the expansion cursor `max_nr_cid`, last-use epochs, migrations and
//! the scan's clear-old and clear-weight passes.
//!
//! After every step the CID each call returned (or its error), the CPUs' words, the CIDs taken
//! and the running tasks' CIDs must be the model's; both ABI rules are checked on the model's
//! side too.

#![cfg(not(loom))]

use std::collections::BTreeSet;

use idspace::cid::{CidAllocator, CidError, LazyCids, ScanPlacement, Task};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Word {
    Unset,
    Valid(u32),
    Lazy(u32),
}

struct ModelTask {
    last_cid: Option<u32>,
    last_cpu: Option<usize>,
    on_cpu: Option<usize>,
    affinity: u64,
    exited: bool,
}

struct Model {
    cpus: usize,
    words: Vec<Word>,
    recent: Vec<Option<u32>>,
    time: Vec<u64>,
    curr: Vec<Option<usize>>,
    taken: BTreeSet<u32>,
    max_nr_cid: u32,
    users: u32,
    allowed: u64,
    epoch: u64,
    tasks: Vec<ModelTask>,
}

impl Model {
    fn new(cpus: usize) -> Model {
        Model {
            cpus,
            words: vec![Word::Unset; cpus],
            recent: vec![None; cpus],
            time: vec![0; cpus],
            curr: vec![None; cpus],
            taken: BTreeSet::new(),
            max_nr_cid: 0,
            users: 0,
            allowed: 0,
            epoch: 0,
            tasks: Vec::new(),
        }
    }

    fn all(&self) -> u64 {
        (1u64 << self.cpus) - 1
    }

    fn free(&mut self, cid: u32) {
        assert!(self.taken.remove(&cid), "model: CID {cid} freed twice");
    }

    fn fork(&mut self, affinity: u64) -> Result<(), CidError> {
        if affinity == 0 || affinity & !self.all() != 0 {
            return Err(CidError::BadCpu);
        }
        self.tasks.push(ModelTask {
            last_cid: None,
            last_cpu: None,
            on_cpu: None,
            affinity,
            exited: false,
        });
        self.users += 1;
        self.allowed |= affinity;
        Ok(())
    }

    fn exit(&mut self, task: usize) -> Result<(), CidError> {
        if self.tasks[task].exited {
            return Err(CidError::UnknownTask);
        }
        if let Some(cpu) = self.tasks[task].on_cpu {
            self.curr[cpu] = None;
            if let Word::Valid(cid) | Word::Lazy(cid) = self.words[cpu] {
                self.free(cid);
            }
            self.words[cpu] = Word::Unset;
        }
        let t = &mut self.tasks[task];
        t.on_cpu = None;
        t.exited = true;
        t.last_cid = None;
        self.users -= 1;
        Ok(())
    }

    fn set_affinity(&mut self, task: usize, affinity: u64) -> Result<(), CidError> {
        if affinity == 0 || affinity & !self.all() != 0 {
            return Err(CidError::BadCpu);
        }
        if self.tasks[task].exited {
            return Err(CidError::UnknownTask);
        }
        self.tasks[task].affinity = affinity;
        self.allowed |= affinity;
        Ok(())
    }

    fn switch(&mut self, cpu: usize, next: Option<usize>) -> Result<Option<u32>, CidError> {
        if cpu >= self.cpus {
            return Err(CidError::BadCpu);
        }
        if let Some(n) = next {
            let t = &self.tasks[n];
            if self.curr[cpu] == Some(n) {
                if t.affinity & (1 << cpu) == 0 {
                    return Err(CidError::NotAllowed);
                }
                return Ok(t.last_cid);
            }
            if t.exited {
                return Err(CidError::UnknownTask);
            }
            if t.on_cpu.is_some() {
                return Err(CidError::RunningElsewhere);
            }
            if t.affinity & (1 << cpu) == 0 {
                return Err(CidError::NotAllowed);
            }
        }
        let prev = std::mem::replace(&mut self.curr[cpu], next);
        if let Some(p) = prev {
            self.tasks[p].on_cpu = None;
            self.time[cpu] = self.epoch;
            if let Word::Lazy(cid) = self.words[cpu] {
                self.words[cpu] = Word::Unset;
                self.free(cid);
            }
        }
        let Some(n) = next else {
            return Ok(None);
        };
        self.tasks[n].on_cpu = Some(cpu);
        if let Some(src) = self.tasks[n].last_cpu.replace(cpu) {
            if src != cpu {
                self.migrate(cpu, src, n);
            }
        }
        let cid = self.get(cpu);
        self.tasks[n].last_cid = Some(cid);
        Ok(Some(cid))
    }

    fn migrate(&mut self, dst: usize, src: usize, task: usize) {
        let dst_set = self.words[dst] != Word::Unset || self.recent[dst].is_some();
        if dst_set && self.users >= self.allowed.count_ones() {
            return;
        }
        let Some(last) = self.tasks[task].last_cid else {
            return;
        };
        if self.words[src] != Word::Valid(last) {
            return;
        }
        if self.curr[src].is_some() {
            self.tasks[task].last_cid = None;
            return;
        }
        self.words[src] = Word::Unset;
        self.recent[src] = None;
        if dst_set {
            self.free(last);
        } else {
            self.words[dst] = Word::Valid(last);
            self.recent[dst] = Some(last);
            self.time[dst] = self.epoch;
        }
    }

    fn get(&mut self, cpu: usize) -> u32 {
        match self.words[cpu] {
            Word::Valid(cid) => {
                self.time[cpu] = self.epoch;
                return cid;
            }
            Word::Lazy(cid) => {
                self.words[cpu] = Word::Unset;
                self.free(cid);
            }
            Word::Unset => {}
        }
        let allowed = self.allowed.count_ones();
        self.max_nr_cid = self.max_nr_cid.min(allowed.min(self.users));
        let cid = self.allocate(cpu, allowed);
        assert!(self.taken.insert(cid), "model: CID {cid} taken twice");
        self.time[cpu] = self.epoch;
        self.words[cpu] = Word::Valid(cid);
        self.recent[cpu] = Some(cid);
        cid
    }

    fn allocate(&mut self, cpu: usize, allowed: u32) -> u32 {
        if let Some(recent) = self.recent[cpu] {
            if recent < self.max_nr_cid && !self.taken.contains(&recent) {
                return recent;
            }
        }
        while self.max_nr_cid < allowed && self.max_nr_cid < self.users {
            let cid = self.max_nr_cid;
            self.max_nr_cid += 1;
            if !self.taken.contains(&cid) {
                return cid;
            }
        }
        let cid = (0..).find(|c| !self.taken.contains(c)).unwrap();
        assert!(cid < allowed, "model: no free CID below the CPUs allowed");
        cid
    }

    fn scan(&mut self) {
        self.epoch += 1;
        let now = self.epoch;
        for cpu in 0..self.cpus {
            if self.curr[cpu].is_some() {
                self.time[cpu] = now;
            } else if now >= self.time[cpu] + 2 {
                self.remote_clear(cpu);
            }
        }
        let weight = self.taken.len() as u32;
        for cpu in 0..self.cpus {
            if matches!(self.words[cpu], Word::Valid(cid) if cid >= weight) {
                self.remote_clear(cpu);
            }
        }
    }

    fn remote_clear(&mut self, cpu: usize) {
        let Word::Valid(cid) = self.words[cpu] else {
            return;
        };
        if self.curr[cpu].is_some() {
            self.words[cpu] = Word::Lazy(cid);
        } else {
            self.words[cpu] = Word::Unset;
            self.free(cid);
        }
    }

    fn cpu_cids(&self) -> Vec<Option<u32>> {
        self.words
            .iter()
            .map(|w| match *w {
                Word::Unset => None,
                Word::Valid(c) | Word::Lazy(c) => Some(c),
            })
            .collect()
    }

    fn running(&self) -> Vec<(u64, u32)> {
        self.curr
            .iter()
            .flatten()
            .map(|&t| (t as u64, self.tasks[t].last_cid.unwrap()))
            .collect()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Fork(u64),
    Exit(usize),
    Switch(usize, Option<usize>),
    Affinity(usize, u64),
    Scan,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => any::<u64>().prop_map(Op::Fork),
        1 => any::<usize>().prop_map(Op::Exit),
        8 => (0..6usize, proptest::option::weighted(0.85, any::<usize>()))
            .prop_map(|(cpu, task)| Op::Switch(cpu, task)),
        1 => (any::<usize>(), any::<u64>()).prop_map(|(task, mask)| Op::Affinity(task, mask)),
        2 => Just(Op::Scan),
    ]
}

/// A mask of `cpus` CPUs from random bits: mostly all CPUs, sometimes a subset, rarely empty
/// or naming a CPU beyond the space (refused).
fn mask(bits: u64, cpus: usize) -> u64 {
    let all = (1u64 << cpus) - 1;
    match bits % 8 {
        0 => 0,
        1 => 1 << cpus,
        2 | 3 => (bits >> 8) & all,
        _ => all,
    }
}

fn run(cpus: usize, ops: &[Op]) {
    let space = LazyCids::with_scan(cpus, ScanPlacement::OnDemand).unwrap();
    let mut model = Model::new(cpus);
    let mut tasks: Vec<Task> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let at = format!("{cpus} CPUs, step {step}: {op:?}");
        match *op {
            Op::Fork(bits) => {
                let affinity = mask(bits, cpus);
                let got = space.fork(affinity);
                assert_eq!(
                    got.as_ref().err().copied(),
                    model.fork(affinity).err(),
                    "{at}"
                );
                if let Ok(task) = got {
                    assert_eq!(task.id() as usize, tasks.len(), "{at}");
                    tasks.push(task);
                }
            }
            Op::Exit(i) if !tasks.is_empty() => {
                let i = i % tasks.len();
                assert_eq!(space.exit(&tasks[i]), model.exit(i), "{at}");
            }
            Op::Affinity(i, bits) if !tasks.is_empty() => {
                let (i, affinity) = (i % tasks.len(), mask(bits, cpus));
                assert_eq!(
                    space.set_affinity(&tasks[i], affinity),
                    model.set_affinity(i, affinity),
                    "{at}"
                );
            }
            Op::Switch(cpu, next) => {
                let next = next.filter(|_| !tasks.is_empty()).map(|i| i % tasks.len());
                assert_eq!(
                    space.switch(cpu, next.map(|i| &tasks[i])),
                    model.switch(cpu, next),
                    "{at}"
                );
            }
            Op::Scan => {
                space.run_deferred();
                model.scan();
            }
            Op::Exit(_) | Op::Affinity(..) => {}
        }
        assert_eq!(space.cpu_cids(), model.cpu_cids(), "{at}: CPUs' CIDs");
        assert_eq!(
            space.cids_in_use() as usize,
            model.taken.len(),
            "{at}: CIDs taken"
        );
        let running = model.running();
        assert_eq!(space.state().running, running, "{at}: running tasks");
        let cids: BTreeSet<u32> = running.iter().map(|r| r.1).collect();
        assert_eq!(
            cids.len(),
            running.len(),
            "{at}: two running tasks share a CID"
        );
        assert!(cids.iter().all(|&c| (c as usize) < cpus), "{at}: {cids:?}");
    }
    assert_eq!(space.scan_stats().invocations, {
        ops.iter().filter(|op| matches!(op, Op::Scan)).count() as u64
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    #[test]
    fn lazy_cids_follow_the_reference_model(
        cpus in 1..=5usize,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        run(cpus, &ops);
    }
}

/// The kernel's compaction in three steps: an idle CPU keeps its CID through the first scan
/// after its last use, loses it at the second; a running task's CID above the weight is marked
/// and goes back at its switch-out; once the other tasks exited, its next switch-in takes CID 0
/// (with three users it would take its CPU's recent CID 2 again, below the cursor).
#[test]
fn the_scan_takes_back_unused_and_high_cids() {
    let space = LazyCids::with_scan(4, ScanPlacement::OnDemand).unwrap();
    let tasks: Vec<Task> = (0..3).map(|_| space.fork(0b1111).unwrap()).collect();
    for (cpu, task) in tasks.iter().enumerate() {
        assert_eq!(space.switch(cpu, Some(task)).unwrap(), Some(cpu as u32));
    }
    space.switch(0, None).unwrap();
    space.switch(1, None).unwrap();
    space.run_deferred();
    assert_eq!(space.cpu_cids(), [Some(0), Some(1), Some(2), None]);
    space.run_deferred();
    // CPUs 0 and 1 were unused for a period; CPU 2's CID 2 is above the weight (1) but its task
    // runs: marked, still held.
    assert_eq!(space.cpu_cids(), [None, None, Some(2), None]);
    space.switch(2, None).unwrap();
    assert_eq!(
        space.cids_in_use(),
        0,
        "the switch-out freed the marked CID"
    );
    space.exit(&tasks[0]).unwrap();
    space.exit(&tasks[1]).unwrap();
    assert_eq!(space.switch(2, Some(&tasks[2])).unwrap(), Some(0));
}

/// A task that migrates brings its previous CPU's CID along when that CPU is idle and the
/// destination has none; a task of the space running on the source keeps it.
#[test]
fn migration_moves_the_source_cid() {
    let space = LazyCids::with_scan(4, ScanPlacement::OnDemand).unwrap();
    let a = space.fork(0b1111).unwrap();
    let b = space.fork(0b1111).unwrap();
    assert_eq!(space.switch(0, Some(&a)).unwrap(), Some(0));
    space.switch(0, None).unwrap();
    assert_eq!(space.switch(3, Some(&a)).unwrap(), Some(0), "moved with a");
    assert_eq!(space.cpu_cids(), [None, None, None, Some(0)]);
    space.switch(3, Some(&b)).unwrap();
    assert_eq!(space.switch(1, Some(&a)).unwrap(), Some(1), "b kept CID 0");
}
