//! The task-CID index source (`IndexSource::TaskCid`) on real workers: structures built inside
//! tasks of processes, used by many tasks of many processes at once, keep exact totals; a pool
//! never hands one object to two holders and loses none; a task's slot is its CID's; and
//! building one outside a runtime task of a process is an error, not a panic.

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod process_util;
mod sched_util;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idspace::percid::{IndexSource, PerCid, PerCidCounter, PerCidError, PerCidPool};
use idspace::pid::ROOT;
use idspace::process;
use idspace::sched::Policy;
use process_util::{runtime, WORKERS};
use sched_util::{join_within, yield_now};

const PROCESSES: usize = if cfg!(miri) { 2 } else { 8 };
const THREADS: usize = if cfg!(miri) { 1 } else { 4 };
const ADDS: u64 = if cfg!(miri) { 4 } else { 400 };

/// A pooled object that knows whether someone holds it.
struct Token {
    held: AtomicBool,
}

/// What every task of one process shares: structures bound to the process, and a counter bound
/// to another process (its adds take the shared fallback).
#[derive(Clone)]
struct ProcessStructures {
    counter: Arc<PerCidCounter>,
    slots: Arc<PerCid<AtomicU64>>,
    pool: Arc<PerCidPool<Token>>,
    made: Arc<AtomicUsize>,
    foreign: Arc<PerCidCounter>,
    violations: Arc<AtomicUsize>,
}

/// One task's work: `ADDS` adds to each counter and slot, and as many pool round trips, with
/// yields between, so that tasks switch, migrate and hand CIDs over.
async fn work(shared: ProcessStructures) {
    for i in 0..ADDS {
        shared.counter.add(1);
        shared.foreign.add(1);
        shared.slots.current().fetch_add(1, Ordering::Relaxed);
        // A task's slot is its CID's while it runs.
        let cid = process::current().and_then(|me| me.cid);
        if cid.map(|cid| cid as usize) != Some(shared.slots.current_index()) {
            shared.violations.fetch_add(1, Ordering::SeqCst);
        }
        let token = shared.pool.take_or_else(|| {
            shared.made.fetch_add(1, Ordering::SeqCst);
            Token {
                held: AtomicBool::new(false),
            }
        });
        if token.held.swap(true, Ordering::SeqCst) {
            shared.violations.fetch_add(1, Ordering::SeqCst); // two holders
        }
        if i % 3 == 0 {
            // Hold it across a switch: other tasks of the process take and give meanwhile.
            yield_now().await;
        }
        token.held.store(false, Ordering::SeqCst);
        shared.pool.give(token);
        if i % 5 == 0 {
            yield_now().await;
        }
    }
}

#[test]
fn task_cid_structures_keep_exact_totals_across_processes_on_real_workers() {
    for policy in Policy::ALL {
        let runtime = runtime(policy);
        // A counter bound to a process of its own: every other process's adds to it take the
        // shared fallback.
        let foreign = runtime
            .spawn_process(ROOT, async {
                PerCidCounter::with_source(IndexSource::TaskCid).map(Arc::new)
            })
            .unwrap();
        let foreign = join_within(foreign, Duration::from_secs(60), policy.name())
            .unwrap()
            .unwrap();
        let violations = Arc::new(AtomicUsize::new(0));
        let leaders: Vec<_> = (0..PROCESSES)
            .map(|_| {
                let (foreign, violations) = (Arc::clone(&foreign), Arc::clone(&violations));
                runtime
                    .spawn_process(ROOT, async move {
                        let counter = PerCidCounter::with_source(IndexSource::TaskCid).unwrap();
                        assert_eq!(counter.source(), IndexSource::TaskCid);
                        // One slot per CID of the process's space, not per possible CPU.
                        assert_eq!(counter.slots(), WORKERS);
                        let slots =
                            PerCid::with_source(IndexSource::TaskCid, |_| AtomicU64::new(0))
                                .unwrap();
                        assert_eq!(slots.source(), IndexSource::TaskCid);
                        let pool = PerCidPool::with_source(IndexSource::TaskCid, 2).unwrap();
                        assert_eq!(pool.source(), IndexSource::TaskCid);
                        let shared = ProcessStructures {
                            counter: Arc::new(counter),
                            slots: Arc::new(slots),
                            pool: Arc::new(pool),
                            made: Arc::new(AtomicUsize::new(0)),
                            foreign,
                            violations,
                        };
                        let threads: Vec<_> = (0..THREADS)
                            .map(|_| process::spawn_thread(work(shared.clone())).unwrap())
                            .collect();
                        work(shared.clone()).await;
                        for thread in threads {
                            thread.await.unwrap();
                        }
                        let tasks = THREADS as u64 + 1;
                        assert_eq!(shared.counter.sum(), tasks * ADDS);
                        let in_slots: u64 = shared
                            .slots
                            .iter()
                            .map(|slot| slot.load(Ordering::Relaxed))
                            .sum();
                        assert_eq!(in_slots, tasks * ADDS);
                        // Every object made is back in the pool: none lost.
                        assert_eq!(shared.pool.held(), shared.made.load(Ordering::SeqCst));
                    })
                    .unwrap()
            })
            .collect();
        for leader in leaders {
            join_within(leader, Duration::from_secs(120), policy.name()).unwrap();
        }
        assert_eq!(violations.load(Ordering::SeqCst), 0, "{policy}");
        let tasks = (PROCESSES * (THREADS + 1)) as u64;
        assert_eq!(foreign.sum(), tasks * ADDS, "{policy}");
    }
}

#[test]
fn the_task_cid_outside_a_runtime_task_of_a_process_is_an_error() {
    let check = || {
        let unavailable = Err(PerCidError::Unavailable(IndexSource::TaskCid));
        assert!(!IndexSource::TaskCid.available());
        assert_eq!(
            PerCidCounter::with_source(IndexSource::TaskCid).map(|_| ()),
            unavailable
        );
        assert_eq!(
            PerCid::with_source(IndexSource::TaskCid, |_| 0u8).map(|_| ()),
            unavailable
        );
        assert_eq!(
            PerCidPool::<u8>::with_source(IndexSource::TaskCid, 4).map(|_| ()),
            unavailable
        );
    };
    // On a plain thread...
    check();
    // ...and in a runtime task that belongs to no process.
    let runtime = runtime(Policy::Wakelist);
    let task = runtime.spawn(async move { check() });
    join_within(task, Duration::from_secs(60), "plain task").unwrap();
    assert_eq!(IndexSource::TaskCid.as_str(), "task CID");
}
