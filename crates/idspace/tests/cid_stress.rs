//! Real threads: OS threads play CPUs, switching tasks in and out, while other threads fork and
//! exit tasks so that the space crosses the per-task/per-CPU thresholds both ways. Every
//! switch-in claims its CID in a table of "who runs with this CID"; finding it claimed by
//! another CPU means two running tasks share a CID.
//!
//! The claim is made after the switch returns and released before the next switch starts, so
//! the table only ever under-reports who runs: a conflict in it is a real one.

#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;

use idspace::cid::{BitmapCids, CidAllocator, LazyCids, Rework, Task};

const CPUS: usize = 4;
const FREE: usize = usize::MAX;

fn hammer(design: &dyn CidAllocator) {
    let name = design.name();
    let all = (1u64 << CPUS) - 1;
    // Tasks not running anywhere: a CPU thread takes one out to run it, puts it back after.
    let idle: Mutex<Vec<Task>> = Mutex::new((0..6).map(|_| design.fork(all).unwrap()).collect());
    let holders: Vec<AtomicUsize> = (0..CPUS).map(|_| AtomicUsize::new(FREE)).collect();
    let stop = AtomicBool::new(false);
    let switches = AtomicUsize::new(0);
    let rounds = if cfg!(debug_assertions) { 300 } else { 3_000 };
    thread::scope(|scope| {
        for cpu in 0..CPUS {
            let (idle, holders, stop, switches) = (&idle, &holders, &stop, &switches);
            scope.spawn(move || {
                let mut current: Option<(Task, u32)> = None;
                let mut seed = cpu as u64 + 1;
                while !stop.load(Ordering::Relaxed) {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let next = if seed >> 60 == 0 {
                        None
                    } else {
                        idle.lock().unwrap().pop()
                    };
                    if let Some((_, cid)) = &current {
                        holders[*cid as usize].store(FREE, Ordering::SeqCst);
                    }
                    let got = design.switch(cpu, next.as_ref()).expect("a valid switch");
                    if let Some((prev, _)) = current.take() {
                        idle.lock().unwrap().push(prev);
                    }
                    if let (Some(task), Some(cid)) = (next, got) {
                        assert!((cid as usize) < CPUS, "{name}: CID {cid} beyond the CPUs");
                        let other = holders[cid as usize].swap(cpu, Ordering::SeqCst);
                        assert_eq!(
                            other, FREE,
                            "{name}: CPU {cpu} and CPU {other} both run with CID {cid}"
                        );
                        current = Some((task, cid));
                    }
                    switches.fetch_add(1, Ordering::Relaxed);
                }
                if let Some((task, cid)) = current {
                    holders[cid as usize].store(FREE, Ordering::SeqCst);
                    design.switch(cpu, None).unwrap();
                    idle.lock().unwrap().push(task);
                }
            });
        }
        // Fork up to 14 tasks (per-CPU mode on 4 CPUs), then exit down to 1 (back), repeatedly.
        let (idle, stop) = (&idle, &stop);
        scope.spawn(move || {
            for round in 0..rounds {
                let grow = (round / 20) % 2 == 0;
                if grow {
                    let task = design.fork(all).unwrap();
                    let mut idle = idle.lock().unwrap();
                    if idle.len() < 14 {
                        idle.push(task);
                    } else {
                        drop(idle);
                        design.exit(&task).unwrap();
                    }
                } else {
                    let task = {
                        let mut idle = idle.lock().unwrap();
                        if idle.len() > 1 {
                            idle.pop()
                        } else {
                            None
                        }
                    };
                    if let Some(task) = task {
                        design.exit(&task).unwrap();
                    }
                }
                if round % 7 == 0 {
                    design.run_deferred();
                }
                thread::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    assert!(switches.load(Ordering::Relaxed) > 0);
    for task in idle.into_inner().unwrap() {
        design.exit(&task).unwrap();
    }
    assert_eq!(design.state().users, 0, "{name}");
}

#[test]
fn stress_every_design() {
    hammer(&Rework::new(CPUS));
    hammer(&BitmapCids::new(CPUS));
    hammer(&LazyCids::new(CPUS));
}

#[test]
fn rework_leaks_no_cid_under_threads() {
    let design = Rework::new(CPUS);
    hammer(&design);
    assert_eq!(
        design.cids_in_use(),
        0,
        "every CID came back once every task exited"
    );
}
