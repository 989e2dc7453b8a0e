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
use std::time::Duration;

use idspace::cid::{
    bind_current_thread, BitmapCids, CidAllocator, LazyCids, Rework, ScanPlacement, Task,
};

const CPUS: usize = 4;
const FREE: usize = usize::MAX;

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The stress itself. With `bound`, each CPU thread binds itself to its CPU, so that its
/// runqueue locks become biased and every migration, exit and walk from another thread revokes
/// the bias.
fn hammer(design: &dyn CidAllocator, bound: bool) {
    let name = design.name();
    let all = (1u64 << CPUS) - 1;
    // Tasks not running anywhere: a CPU thread takes one out to run it, puts it back after.
    let idle: Mutex<Vec<Task>> = Mutex::new((0..6).map(|_| design.fork(all).unwrap()).collect());
    let holders: Vec<AtomicUsize> = (0..CPUS).map(|_| AtomicUsize::new(FREE)).collect();
    let stop = AtomicBool::new(false);
    let switches = AtomicUsize::new(0);
    // CPU threads that have made their first switch: forking waits for all of them, so that
    // fork and exit always race with switches (a forking thread that finished before any CPU
    // thread started once failed the `switches` check below under load).
    let started = AtomicUsize::new(0);
    let rounds = if cfg!(debug_assertions) { 300 } else { 3_000 };
    thread::scope(|scope| {
        let cpu_threads: Vec<_> = (0..CPUS)
            .map(|cpu| {
                let (idle, holders, stop) = (&idle, &holders, &stop);
                let (switches, started) = (&switches, &started);
                scope.spawn(move || {
                    if bound {
                        bind_current_thread(Some(cpu));
                    }
                    let mut current: Option<(Task, u32)> = None;
                    let mut seed = cpu as u64 + 1;
                    let mut first = true;
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
                        switches.fetch_add(1, Ordering::SeqCst);
                        if first {
                            started.fetch_add(1, Ordering::SeqCst);
                            first = false;
                        }
                    }
                    if let Some((task, cid)) = current {
                        holders[cid as usize].store(FREE, Ordering::SeqCst);
                        design.switch(cpu, None).unwrap();
                        idle.lock().unwrap().push(task);
                    }
                })
            })
            .collect();
        // Waits until `done` holds, or until every CPU thread has ended (one that panicked
        // fails the test when the scope joins it; waiting on would hang instead).
        let wait_for_cpus = |done: &dyn Fn() -> bool| {
            while !done() && !cpu_threads.iter().all(|t| t.is_finished()) {
                thread::yield_now();
            }
        };
        // Stops the CPU threads however this thread leaves the scope (a failed fork included),
        // so that the scope's join does not wait forever.
        let _stop = StopOnDrop(&stop);
        wait_for_cpus(&|| started.load(Ordering::SeqCst) == CPUS);
        // Fork up to 14 tasks (per-CPU mode on 4 CPUs), then exit down to 1 (back), repeatedly;
        // each round waits for a switch, so that switches interleave with every round.
        for round in 0..rounds {
            let switched = switches.load(Ordering::SeqCst);
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
            wait_for_cpus(&|| switches.load(Ordering::SeqCst) > switched);
        }
    });
    assert!(
        switches.load(Ordering::Relaxed) >= rounds,
        "{name}: CPU threads switched while tasks were forked and exited"
    );
    for task in idle.into_inner().unwrap() {
        design.exit(&task).unwrap();
    }
    assert_eq!(design.state().users, 0, "{name}");
}

#[test]
fn stress_every_design() {
    hammer(&Rework::new(CPUS).unwrap(), false);
    hammer(&BitmapCids::new(CPUS).unwrap(), false);
    hammer(&LazyCids::new(CPUS).unwrap(), false);
}

/// The same with each CPU thread bound to its CPU: biased runqueue locks, revoked by the
/// forks, exits, walks and migrations of the other threads.
#[test]
fn stress_every_design_with_biased_runqueues() {
    hammer(&Rework::new(CPUS).unwrap(), true);
    hammer(&BitmapCids::new(CPUS).unwrap(), true);
    hammer(&LazyCids::new(CPUS).unwrap(), true);
}

#[test]
fn rework_leaks_no_cid_under_threads() {
    let design = Rework::new(CPUS).unwrap();
    hammer(&design, true);
    assert_eq!(
        design.cids_in_use(),
        0,
        "every CID came back once every task exited"
    );
}

/// The thread create/teardown shape: pool threads fork tasks, switch each in on one CPU and
/// then on another (where it may have been preempted meanwhile by another pool), and exit them.
/// Tasks are not held by one CPU thread here, so a switch-out and a switch-in elsewhere race
/// on the same task. Every CID returned is below the CPU count, nothing hangs, and when all
/// tasks have exited no CID is left taken.
fn pools(design: &dyn CidAllocator) {
    let name = design.name();
    let all = (1u64 << CPUS) - 1;
    let rounds = if cfg!(debug_assertions) { 150 } else { 1_500 };
    thread::scope(|scope| {
        for pool in 0..6usize {
            scope.spawn(move || {
                for _ in 0..rounds {
                    let tasks: Vec<Task> = (0..5).map(|_| design.fork(all).unwrap()).collect();
                    for (step, cpu_shift) in [0, 1].into_iter().enumerate() {
                        for (index, task) in tasks.iter().enumerate() {
                            let cpu = (pool + index + cpu_shift) % CPUS;
                            match design.switch(cpu, Some(task)) {
                                Ok(Some(cid)) => {
                                    assert!((cid as usize) < CPUS, "{name}: CID {cid}")
                                }
                                Ok(None) => panic!("{name}: no CID for a switched-in task"),
                                Err(e) if step == 1 && e.as_str() == "running_elsewhere" => {}
                                Err(e) => panic!("{name}: {e}"),
                            }
                        }
                    }
                    for task in &tasks {
                        design.exit(task).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(design.state().users, 0, "{name}");
    let left = design.cids_in_use();
    // The lazy design's idle CPUs keep their cached CIDs until the compaction pass.
    design.run_deferred();
    assert_eq!(
        design.cids_in_use(),
        0,
        "{name}: {left} CIDs taken with no task left"
    );
}

#[test]
fn pools_race_switch_out_and_switch_in_of_one_task() {
    pools(&Rework::new(CPUS).unwrap());
    pools(&BitmapCids::new(CPUS).unwrap());
    pools(&LazyCids::new(CPUS).unwrap());
}

/// The lazy design with its scan running while real threads switch, migrate, fork and exit: at
/// a tick on the switch path, and in a worker thread, with a period short enough that scans
/// race everything else all the time. Both ABI rules hold throughout (checked by `hammer` and
/// `pools`); once quiet, the bitmap holds exactly the CIDs the CPUs hold.
#[test]
fn lazy_scans_race_switches_migrations_and_exits() {
    let placements = [
        ScanPlacement::Tick {
            period: Duration::from_micros(20),
        },
        // The worker placement is a thread: a `std` build's only.
        #[cfg(feature = "std")]
        ScanPlacement::Worker {
            period: Duration::from_micros(100),
        },
    ];
    for placement in placements {
        let design = LazyCids::with_scan(CPUS, placement).unwrap();
        hammer(&design, true);
        if let ScanPlacement::Tick { .. } = placement {
            // Quiet now (a worker could be mid-scan, holding a CID it is freeing).
            let held: Vec<u32> = design.cpu_cids().into_iter().flatten().collect();
            let distinct: std::collections::BTreeSet<u32> = held.iter().copied().collect();
            assert_eq!(
                distinct.len(),
                held.len(),
                "two CPUs hold one CID: {held:?}"
            );
            assert_eq!(
                design.cids_in_use() as usize,
                held.len(),
                "{placement:?}: the bitmap disagrees with the CPUs {held:?}"
            );
        }
        pools(&design);
        assert!(
            design.scan_stats().invocations > 0,
            "{placement:?}: no scan ran"
        );
    }
}
