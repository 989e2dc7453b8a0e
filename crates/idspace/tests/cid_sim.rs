//! The deterministic CID simulator: seeded random schedules of fork, exit, switch, affinity
//! and deferred work on 1..64 CPUs with up to several hundred tasks.
//!
//! After every step, for every design: both ABI rules (no two running tasks share a CID; every
//! CID is below the CPU count) and that the running set is what the schedule says. For the
//! rework also: the mode and the budget against the formulas (an independent mirror of the
//! hysteresis), and convergence: in per-task mode, once the task count has been stable and a
//! running task has switched in twice, its CID is below `max_cids`.

#![cfg(not(loom))]

use std::collections::{BTreeMap, HashMap};

use idspace::cid::{BitmapCids, CidAllocator, LazyCids, Mode, Rework, Task};

/// splitmix64: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The rework's constraints, written from the formulas.
struct Formulas {
    cpus: u32,
    users: u32,
    allowed: u64,
    per_cpu: bool,
    thrs: u32,
    deferred: bool,
}

impl Formulas {
    fn limits(&self) -> (u32, u32) {
        let opt = self.users.min(self.allowed.count_ones());
        (opt, (opt + opt / 4).min(self.cpus))
    }
    fn threshold(&self, opt: u32) -> u32 {
        (opt - opt / 4).min(self.cpus / 2).max(1)
    }
    /// At fork and exit.
    fn update(&mut self) {
        let (opt, max) = self.limits();
        if !self.per_cpu && self.users > max {
            self.per_cpu = true;
            self.thrs = self.threshold(opt);
        } else if self.per_cpu && self.users < self.thrs {
            self.per_cpu = false;
            self.deferred = false;
        }
    }
    fn affinity(&mut self, mask: u64) {
        if self.allowed | mask == self.allowed {
            return;
        }
        self.allowed |= mask;
        let (opt, _) = self.limits();
        if self.per_cpu {
            self.thrs = self.threshold(opt);
            if self.users < self.thrs {
                self.deferred = true;
            }
        }
    }
    fn deferred_work(&mut self) {
        if self.deferred && self.per_cpu && self.users < self.thrs {
            self.per_cpu = false;
        }
        self.deferred = false;
    }
}

fn run(design: &dyn CidAllocator, seed: u64, steps: usize, max_tasks: usize) {
    let name = design.name();
    let cpus = design.cpus();
    let all = if cpus >= 64 {
        u64::MAX
    } else {
        (1u64 << cpus) - 1
    };
    let mut rng = Rng(seed);
    let mut tasks: Vec<Task> = Vec::new();
    let mut affinity: HashMap<u64, u64> = HashMap::new();
    let mut running: BTreeMap<usize, u64> = BTreeMap::new();
    let mut formulas = Formulas {
        cpus: cpus as u32,
        users: 0,
        allowed: 0,
        per_cpu: false,
        thrs: 1,
        deferred: false,
    };
    // Switch-ins per task since the task count last changed.
    let mut switched: HashMap<u64, u32> = HashMap::new();
    for step in 0..steps {
        let at = format!("{name}, {cpus} CPUs, seed {seed}, step {step}");
        let roll = rng.below(100);
        if roll < 12 && tasks.len() < max_tasks || tasks.is_empty() {
            let mask = if rng.below(4) == 0 {
                (rng.next() & all).max(1)
            } else {
                all
            };
            let task = design.fork(mask).unwrap();
            affinity.insert(task.id(), mask);
            formulas.users += 1;
            formulas.allowed |= mask;
            formulas.update();
            switched.clear();
            tasks.push(task);
        } else if roll < 22 {
            let task = tasks.swap_remove(rng.below(tasks.len()));
            design.exit(&task).unwrap();
            running.retain(|_, id| *id != task.id());
            formulas.users -= 1;
            formulas.update();
            switched.clear();
        } else if roll < 27 {
            let task = &tasks[rng.below(tasks.len())];
            let mask = (rng.next() & all).max(1);
            design.set_affinity(task, mask).unwrap();
            affinity.insert(task.id(), mask);
            formulas.affinity(mask);
            switched.clear();
        } else if roll < 30 {
            design.run_deferred();
            formulas.deferred_work();
        } else {
            let cpu = rng.below(cpus);
            if rng.below(8) == 0 {
                assert_eq!(design.switch(cpu, None), Ok(None), "{at}");
                running.remove(&cpu);
            } else {
                let task = &tasks[rng.below(tasks.len())];
                let elsewhere = running.iter().any(|(&c, &id)| id == task.id() && c != cpu);
                let allowed = affinity[&task.id()] & (1 << cpu) != 0;
                match design.switch(cpu, Some(task)) {
                    Ok(Some(_)) => {
                        assert!(
                            allowed && !elsewhere,
                            "{at}: switch should have been refused"
                        );
                        if running.get(&cpu) != Some(&task.id()) {
                            *switched.entry(task.id()).or_default() += 1;
                        }
                        running.insert(cpu, task.id());
                    }
                    Ok(None) => panic!("{at}: switching a task in returned no CID"),
                    Err(error) => assert!(!allowed || elsewhere, "{at}: refused with {error}"),
                }
            }
        }
        let state = design.state();
        // Both ABI rules.
        let mut cids: Vec<u32> = state.running.iter().map(|&(_, cid)| cid).collect();
        assert!(
            cids.iter().all(|&cid| (cid as usize) < cpus),
            "{at}: a CID beyond the CPUs: {state:?}"
        );
        cids.sort_unstable();
        let count = cids.len();
        cids.dedup();
        assert_eq!(
            cids.len(),
            count,
            "{at}: two running tasks share a CID: {state:?}"
        );
        let ids: Vec<u64> = state.running.iter().map(|&(id, _)| id).collect();
        assert_eq!(
            ids,
            running.values().copied().collect::<Vec<_>>(),
            "{at}: running set"
        );
        assert_eq!(state.users as usize, tasks.len(), "{at}");
        if name == "rework" {
            let (_, max) = formulas.limits();
            assert_eq!(state.max_cids, max, "{at}: max_cids");
            let want = if formulas.per_cpu {
                Mode::Cpu
            } else {
                Mode::Task
            };
            assert_eq!(
                state.mode, want,
                "{at}: mode (users {}, max {max}, thrs {})",
                formulas.users, formulas.thrs
            );
            if state.mode == Mode::Task {
                for &(id, cid) in &state.running {
                    if switched.get(&id).copied().unwrap_or(0) >= 2 {
                        assert!(
                            cid < state.max_cids,
                            "{at}: task {id} kept CID {cid} >= {}",
                            state.max_cids
                        );
                    }
                }
            }
        }
    }
}

fn designs(cpus: usize) -> Vec<Box<dyn CidAllocator>> {
    vec![
        Box::new(Rework::new(cpus).unwrap()),
        Box::new(BitmapCids::new(cpus).unwrap()),
        Box::new(LazyCids::new(cpus).unwrap()),
    ]
}

#[test]
fn random_schedules_keep_the_abi_and_the_formulas() {
    let steps = if cfg!(debug_assertions) {
        1_500
    } else {
        15_000
    };
    for cpus in [1, 2, 3, 4, 7, 8, 16, 64] {
        for seed in 0..4u64 {
            // Few tasks (per-task mode), about as many as CPUs (crossing), and hundreds.
            for max_tasks in [cpus.max(2) / 2, cpus + 2, 300] {
                for design in designs(cpus) {
                    run(design.as_ref(), seed * 1000 + cpus as u64, steps, max_tasks);
                }
            }
        }
    }
}

/// The kernel's `mm_cid_compaction_test`, ported: one task per CPU, each pinned and switched
/// in; the first whose CID is at least half the CPU count stays, the others exit; polling
/// (switch out and in, and the deferred work) until its CID is 0, ten polls at most.
#[test]
fn compaction_selftest() {
    for cpus in [2, 4, 8, 64] {
        for design in designs(cpus) {
            let name = design.name();
            let tasks: Vec<Task> = (0..cpus)
                .map(|cpu| design.fork(1 << cpu).unwrap())
                .collect();
            let mut cids = Vec::new();
            for (cpu, task) in tasks.iter().enumerate() {
                cids.push(design.switch(cpu, Some(task)).unwrap().unwrap());
            }
            let winner = cids
                .iter()
                .position(|&cid| cid as usize >= cpus / 2)
                .expect("some CID is high");
            for (cpu, task) in tasks.iter().enumerate() {
                if cpu != winner {
                    design.exit(task).unwrap();
                }
            }
            let mut cid = cids[winner];
            for _ in 0..10 {
                if cid == 0 {
                    break;
                }
                design.run_deferred();
                design.switch(winner, None).unwrap();
                cid = design
                    .switch(winner, Some(&tasks[winner]))
                    .unwrap()
                    .unwrap();
            }
            assert_eq!(
                cid, 0,
                "{name}, {cpus} CPUs: the survivor's CID did not converge"
            );
        }
    }
}

#[test]
fn refusals_leave_the_state_unchanged() {
    for design in designs(4) {
        let name = design.name();
        let a = design.fork(0b0011).unwrap();
        let b = design.fork(0b1111).unwrap();
        design.switch(0, Some(&a)).unwrap();
        let before = design.state();
        assert_eq!(
            design.switch(9, Some(&b)).unwrap_err().as_str(),
            "bad_cpu",
            "{name}"
        );
        assert_eq!(
            design.switch(2, Some(&a)).unwrap_err().as_str(),
            "running_elsewhere",
            "{name}"
        );
        design.switch(0, None).unwrap();
        assert_eq!(
            design.switch(3, Some(&a)).unwrap_err().as_str(),
            "not_allowed",
            "{name}"
        );
        assert_eq!(
            design.set_affinity(&a, 0).unwrap_err().as_str(),
            "bad_cpu",
            "{name}"
        );
        assert_eq!(
            design.set_affinity(&a, 1 << 5).unwrap_err().as_str(),
            "bad_cpu",
            "{name}"
        );
        assert_eq!(design.fork(0).unwrap_err().as_str(), "bad_cpu", "{name}");
        design.switch(0, Some(&a)).unwrap();
        assert_eq!(design.state(), before, "{name}");
        design.exit(&a).unwrap();
        assert_eq!(
            design.exit(&a).unwrap_err().as_str(),
            "unknown_task",
            "{name}"
        );
        assert_eq!(
            design.switch(1, Some(&a)).unwrap_err().as_str(),
            "unknown_task",
            "{name}"
        );
        assert!(
            design.state().running.is_empty(),
            "{name}: the exit idled the CPU"
        );
    }
}

#[test]
fn rework_changes_mode_both_ways_and_leaks_nothing() {
    let design = Rework::new(4).unwrap();
    let all = design.all_cpus();
    let tasks: Vec<Task> = (0..4).map(|_| design.fork(all).unwrap()).collect();
    assert_eq!(design.state().mode, Mode::Task);
    assert_eq!(design.cids_in_use(), 4, "every task owns one");
    for (cpu, task) in tasks.iter().enumerate().take(2) {
        design.switch(cpu, Some(task)).unwrap();
    }
    let extra: Vec<Task> = (0..3).map(|_| design.fork(all).unwrap()).collect();
    let state = design.state();
    assert_eq!(state.mode, Mode::Cpu, "7 users > max_cids 4");
    assert_eq!(
        design.cids_in_use(),
        2,
        "the sleeping tasks' CIDs went back; the CPUs kept two"
    );
    for task in extra.iter().chain(&tasks[1..]) {
        design.exit(task).unwrap();
    }
    assert_eq!(design.state().mode, Mode::Task, "1 user < pcpu_thrs 2");
    assert_eq!(design.cids_in_use(), 1, "only the survivor's");
    design.exit(&tasks[0]).unwrap();
    assert_eq!(design.cids_in_use(), 0);
}
