//! Loom models of the rework's concurrent protocol: switch-ins on two CPUs racing a fork that
//! changes the mode, and an exit that switches back while a CPU switches; no duplicate CID, no
//! dead or live lock.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_cid`.

#![cfg(loom)]

use idspace::cid::{CidAllocator, Mode, Rework};
use loom::sync::Arc;
use loom::thread;

mod loom_util;
use loom_util::run_model;

fn distinct(cids: &[u32], cpus: usize) {
    let mut sorted = cids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        cids.len(),
        "two running tasks share a CID: {cids:?}"
    );
    assert!(
        cids.iter().all(|&cid| (cid as usize) < cpus),
        "a CID beyond the CPUs: {cids:?}"
    );
}

/// Two tasks on two CPUs (per-task mode); a third fork makes users exceed `max_cids` and the
/// forking context walks the tasks while both CPUs switch their tasks in.
#[test]
fn switch_ins_race_the_switch_to_per_cpu() {
    run_model("switch_ins_race_the_switch_to_per_cpu", || {
        let space = Arc::new(Rework::new(2).unwrap());
        let all = space.all_cpus();
        let a = space.fork(all).unwrap();
        let b = space.fork(all).unwrap();
        let cpus: Vec<_> = [(0, a), (1, b)]
            .into_iter()
            .map(|(cpu, task)| {
                let space = space.clone();
                thread::spawn(move || space.switch(cpu, Some(&task)).unwrap().unwrap())
            })
            .collect();
        let c = space.fork(all).unwrap();
        let cids: Vec<u32> = cpus.into_iter().map(|h| h.join().unwrap()).collect();
        distinct(&cids, 2);
        let state = space.state();
        assert_eq!(state.mode, Mode::Cpu);
        distinct(&state.running.iter().map(|r| r.1).collect::<Vec<_>>(), 2);
        // The third task can run too, borrowing a CPU's CID.
        space.switch(0, Some(&c)).unwrap();
        distinct(
            &space
                .state()
                .running
                .iter()
                .map(|r| r.1)
                .collect::<Vec<_>>(),
            2,
        );
    });
}

/// Per-CPU mode on 4 CPUs with two tasks left; an exit brings users below `pcpu_thrs` (2) and
/// walks the CPUs back to per-task mode while another CPU switches the survivor in.
#[test]
fn exit_switches_back_while_a_cpu_switches() {
    run_model("exit_switches_back_while_a_cpu_switches", || {
        let space = Arc::new(Rework::new(4).unwrap());
        let all = space.all_cpus();
        let tasks: Vec<_> = (0..5).map(|_| space.fork(all).unwrap()).collect();
        assert_eq!(space.state().mode, Mode::Cpu);
        space.switch(0, Some(&tasks[0])).unwrap();
        space.switch(1, Some(&tasks[1])).unwrap();
        for task in &tasks[2..4] {
            space.exit(task).unwrap();
        }
        let runner = {
            let (space, survivor) = (space.clone(), tasks[4].clone());
            thread::spawn(move || space.switch(2, Some(&survivor)).unwrap().unwrap())
        };
        space.exit(&tasks[0]).unwrap();
        space.exit(&tasks[1]).unwrap();
        let cid = runner.join().unwrap();
        assert!(cid < 4);
        let state = space.state();
        assert_eq!(state.mode, Mode::Task, "1 user < pcpu_thrs");
        assert_eq!(state.running.len(), 1);
        assert_eq!(space.cids_in_use(), 1, "only the survivor holds a CID");
    });
}
