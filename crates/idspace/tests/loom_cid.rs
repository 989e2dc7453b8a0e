//! Loom models of the rework's concurrent protocol: switch-ins on two CPUs racing a fork that
//! changes the mode, and an exit that switches back while a CPU switches; no duplicate CID, no
//! dead or live lock. Then the task word that every design's switch checks under the task's
//! runqueue lock, without a task lock: a switch-in racing the walk towards per-CPU mode over a
//! sleeping task, an exit, a claim on another CPU (a migration) and the switch on the CPU the
//! task leaves.
//!
//! Run with `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test
//! --release --target-dir target/loom -p idspace --test loom_cid`.

#![cfg(loom)]

use idspace::cid::{BitmapCids, CidAllocator, CidError, LazyCids, Mode, Rework, ScanPlacement};
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

/// The walk towards per-CPU mode visits a sleeping task that owns no CID while a CPU switches
/// it in (the fast path's claim against the slow path's visit). The switch-in must not keep a
/// CID of its own after the walk: either the walk comes first and the switch-in reads the new
/// mode, or the switch-in comes first and the walk moves what it took to the CPU. Either way
/// the CPU owns the one CID taken, which the next task on that CPU borrows.
#[test]
fn a_claim_races_the_walk_over_a_sleeping_task() {
    run_model("a_claim_races_the_walk_over_a_sleeping_task", || {
        // Tasks allowed on CPUs 0 and 1 of 4: 3 users > max_cids 2 switch to per-CPU mode
        // (pcpu_thrs 2); two exits switch back with one user, which never ran: it owns no CID.
        let space = Arc::new(Rework::new(4).unwrap());
        let tasks: Vec<_> = (0..3).map(|_| space.fork(0b11).unwrap()).collect();
        assert_eq!(space.state().mode, Mode::Cpu);
        for task in &tasks[1..] {
            space.exit(task).unwrap();
        }
        assert_eq!(space.state().mode, Mode::Task);
        assert_eq!(space.cids_in_use(), 0);
        let second = space.fork(0b11).unwrap(); // per-task mode: it gets a CID
        let survivor = tasks[0].clone();
        let runner = {
            let (space, survivor) = (space.clone(), survivor.clone());
            thread::spawn(move || space.switch(0, Some(&survivor)).unwrap().unwrap())
        };
        // 3 users > max_cids 2: the fork walks the tasks to per-CPU mode.
        let newcomer = space.fork(0b11).unwrap();
        let cid = runner.join().unwrap();
        assert!(cid < 2, "{cid}");
        assert_eq!(space.state().mode, Mode::Cpu);
        assert_eq!(space.cids_in_use(), 1, "only CPU 0 holds a CID");
        // CPU 0 owns its CID: the next task there borrows it, and the one that left holds none.
        space.switch(0, Some(&newcomer)).unwrap();
        assert_eq!(space.cids_in_use(), 1, "the task that left kept a CID");
        assert_eq!(space.state().running, vec![(newcomer.id(), cid)]);
        drop(second);
    });
}

/// Exit of a sleeping task races a CPU switching it in: the task's runqueue lock decides who
/// wins; the task runs nowhere afterwards and its CID went back.
#[test]
fn exit_races_a_claim() {
    run_model("exit_races_a_claim", || {
        let space = Arc::new(Rework::new(2).unwrap());
        let all = space.all_cpus();
        let a = space.fork(all).unwrap();
        let b = space.fork(all).unwrap();
        let runner = {
            let (space, a) = (space.clone(), a.clone());
            thread::spawn(move || space.switch(0, Some(&a)))
        };
        space.exit(&a).unwrap();
        match runner.join().unwrap() {
            Ok(cid) => assert!(cid.is_some_and(|cid| cid < 2)),
            Err(error) => assert_eq!(error, CidError::UnknownTask),
        }
        assert!(space.state().running.is_empty(), "an exited task runs");
        assert_eq!(space.cids_in_use(), 1, "b's CID only");
        assert_eq!(space.switch(1, Some(&a)), Err(CidError::UnknownTask));
        let cid = space.switch(0, Some(&b)).unwrap().unwrap();
        assert!(cid < 2);
    });
}

/// A task leaves CPU 0 while CPU 1 claims it (a migration from CPU 0's runqueue), in every
/// design: it runs on at most one CPU at a time, and the running tasks' CIDs stay distinct.
fn claim_races_a_switch_out<S: CidAllocator + 'static>(space: Arc<S>) {
    let a = space.fork(0b11).unwrap();
    let b = space.fork(0b11).unwrap();
    space.switch(0, Some(&a)).unwrap();
    let claiming = {
        let (space, a) = (space.clone(), a.clone());
        thread::spawn(move || space.switch(1, Some(&a)))
    };
    let b_cid = space.switch(0, Some(&b)).unwrap().unwrap();
    let claimed = claiming.join().unwrap();
    let running = space.state().running;
    match claimed {
        Ok(cid) => {
            let a_cid = cid.unwrap();
            distinct(&[a_cid, b_cid], 2);
            assert_eq!(running.len(), 2);
        }
        Err(error) => {
            assert_eq!(error, CidError::RunningElsewhere);
            assert_eq!(running, vec![(b.id(), b_cid)]);
        }
    }
    distinct(&running.iter().map(|r| r.1).collect::<Vec<_>>(), 2);
}

#[test]
fn claim_races_a_switch_out_rework() {
    run_model("claim_races_a_switch_out_rework", || {
        claim_races_a_switch_out(Arc::new(Rework::new(2).unwrap()));
    });
}

#[test]
fn claim_races_a_switch_out_bitmap() {
    run_model("claim_races_a_switch_out_bitmap", || {
        claim_races_a_switch_out(Arc::new(BitmapCids::new(2).unwrap()));
    });
}

#[test]
fn claim_races_a_switch_out_lazy() {
    run_model("claim_races_a_switch_out_lazy", || {
        claim_races_a_switch_out(Arc::new(
            LazyCids::with_scan(2, ScanPlacement::OnDemand).unwrap(),
        ));
    });
}

/// Two CPUs claim one sleeping task at once: one wins, the other is told it runs elsewhere.
#[test]
fn two_claims_race() {
    run_model("two_claims_race", || {
        let space = Arc::new(Rework::new(2).unwrap());
        let a = space.fork(0b11).unwrap();
        let other = {
            let (space, a) = (space.clone(), a.clone());
            thread::spawn(move || space.switch(1, Some(&a)))
        };
        let here = space.switch(0, Some(&a));
        let there = other.join().unwrap();
        let won = [&here, &there].iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "{here:?} {there:?}");
        assert!([here, there].contains(&Err(CidError::RunningElsewhere)));
        assert_eq!(space.state().running, vec![(a.id(), 0)]);
    });
}

/// The rework's switch-out clears the CPU's current task without the runqueue lock, while a
/// fork walks the tasks towards per-CPU mode: whether the walk sees the task still running
/// (its CID moves to the CPU) or gone (its CID is dropped), afterwards the tasks switched in
/// see distinct CIDs and at most one CID per CPU stays taken.
#[test]
fn switch_out_races_the_walk_to_per_cpu() {
    run_model("switch_out_races_the_walk_to_per_cpu", || {
        let space = Arc::new(Rework::new(2).unwrap());
        let a = space.fork(0b11).unwrap();
        let b = space.fork(0b11).unwrap();
        space.switch(0, Some(&a)).unwrap();
        let leaving = {
            let space = space.clone();
            thread::spawn(move || space.switch(0, None).unwrap())
        };
        let c = space.fork(0b11).unwrap();
        assert_eq!(leaving.join().unwrap(), None);
        assert_eq!(space.state().mode, Mode::Cpu);
        assert!(space.state().running.is_empty(), "CPU 0 is idle");
        let b_cid = space.switch(1, Some(&b)).unwrap().unwrap();
        let c_cid = space.switch(0, Some(&c)).unwrap().unwrap();
        distinct(&[b_cid, c_cid], 2);
        assert!(space.cids_in_use() <= 2);
    });
}

/// The same switch-out racing an exit that walks the CPUs back to per-task mode: the leaving
/// task ends up owning the CPU's CID or the CPU drops it, never both, so that when it runs
/// again one CID is taken in all.
#[test]
fn switch_out_races_the_walk_back_to_per_task() {
    run_model("switch_out_races_the_walk_back_to_per_task", || {
        let space = Arc::new(Rework::new(4).unwrap());
        let all = space.all_cpus();
        let tasks: Vec<_> = (0..5).map(|_| space.fork(all).unwrap()).collect();
        assert_eq!(space.state().mode, Mode::Cpu);
        space.switch(0, Some(&tasks[0])).unwrap();
        for task in &tasks[1..4] {
            space.exit(task).unwrap();
        }
        let leaving = {
            let space = space.clone();
            thread::spawn(move || space.switch(0, None).unwrap())
        };
        space.exit(&tasks[4]).unwrap();
        assert_eq!(leaving.join().unwrap(), None);
        assert_eq!(space.state().mode, Mode::Task, "1 user < pcpu_thrs");
        let cid = space.switch(1, Some(&tasks[0])).unwrap().unwrap();
        assert!(cid < 4);
        assert_eq!(
            space.cids_in_use(),
            1,
            "the survivor owns one CID, no CPU keeps one"
        );
    });
}
