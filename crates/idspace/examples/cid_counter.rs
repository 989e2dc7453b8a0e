//! Per-CPU-bounded counting with concurrency IDs.
//!
//! Many more threads than CPUs count events into one counter per CID instead of one per
//! thread. A thread runs only while it holds a CPU slot (a worker slot, as a kernel task holds
//! a CPU); when it is switched in on a slot, the [`Rework`] space gives it a CID, unique among
//! the threads running at that moment and below the CPU count, and the thread adds to the
//! counter of that CID. The counters are summed at the end. Their number, and so their memory,
//! is bounded by the CPU count however many threads there are: here 48 threads count into
//! 4 counters, where per-thread counters would need 48.
//!
//! Run with `cargo run -p idspace --example cid_counter`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, TryLockError};
use std::thread;

use idspace::cid::{CidAllocator, CidError, Rework};

const CPUS: usize = 4;
const THREADS: usize = 48;
/// Times each thread is switched in, and events it counts per switch-in.
const SWITCHES: u64 = 200;
const EVENTS_PER_SWITCH: u64 = 50;

/// A counter alone on its cache line, so that two CIDs' counters never share one.
#[repr(align(64))]
#[derive(Default)]
struct Counter(AtomicU64);

/// A CPU slot: the thread that holds the lock runs "on" this CPU.
fn take_a_slot(slots: &[Mutex<()>]) -> (usize, std::sync::MutexGuard<'_, ()>) {
    loop {
        for (cpu, slot) in slots.iter().enumerate() {
            match slot.try_lock() {
                Ok(guard) => return (cpu, guard),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Poisoned(poisoned)) => return (cpu, poisoned.into_inner()),
            }
        }
        thread::yield_now();
    }
}

fn main() -> Result<(), CidError> {
    let space = Rework::new(CPUS)?;
    let slots: Vec<Mutex<()>> = (0..CPUS).map(|_| Mutex::new(())).collect();
    let counters: Vec<Counter> = (0..CPUS).map(|_| Counter::default()).collect();
    let most_cids_taken = AtomicU32::new(0);

    thread::scope(|scope| {
        for _ in 0..THREADS {
            let (space, slots, counters) = (&space, &slots, &counters);
            let most_cids_taken = &most_cids_taken;
            scope.spawn(move || -> Result<(), CidError> {
                // A thread is a task of the space (fork), for its whole life.
                let task = space.fork(space.all_cpus())?;
                for _ in 0..SWITCHES {
                    let (cpu, _running) = take_a_slot(slots);
                    let cid = space
                        .switch(cpu, Some(&task))?
                        .expect("a switched-in task has a CID");
                    for _ in 0..EVENTS_PER_SWITCH {
                        // No other running thread has this CID, so the counter's cache line
                        // stays with this CPU; Relaxed suffices for a sum read at the end.
                        counters[cid as usize].0.fetch_add(1, Ordering::Relaxed);
                    }
                    most_cids_taken.fetch_max(space.cids_in_use(), Ordering::Relaxed);
                    space.switch(cpu, None)?; // switch-out: the slot goes idle
                }
                space.exit(&task)
            });
        }
    });

    let per_cid: Vec<u64> = counters
        .iter()
        .map(|c| c.0.load(Ordering::Relaxed))
        .collect();
    let total: u64 = per_cid.iter().sum();
    let expected = THREADS as u64 * SWITCHES * EVENTS_PER_SWITCH;
    println!("{THREADS} threads on {CPUS} CPU slots counted {total} events (expected {expected})");
    println!("per-CID counters: {per_cid:?}");
    // CIDs follow how many threads really run at once (on a 2-core machine, about 2).
    println!(
        "most CIDs taken at once: {} (never more than the {CPUS} CPU slots)",
        most_cids_taken.load(Ordering::Relaxed)
    );
    println!(
        "counter memory: {} bytes for {CPUS} CIDs; per-thread counters would take {} bytes",
        counters.len() * std::mem::size_of::<Counter>(),
        THREADS * std::mem::size_of::<Counter>()
    );
    assert_eq!(total, expected);
    assert!(most_cids_taken.load(Ordering::Relaxed) as usize <= CPUS);
    assert_eq!(
        space.cids_in_use(),
        0,
        "every task exited, every CID is back"
    );
    Ok(())
}
