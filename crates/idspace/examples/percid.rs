//! Per-CID counters, slots and object pools on real threads, with the kernel's own IDs.
//!
//! `cid_counter` builds per-CID counting by hand from a CID space of its own; this program uses
//! the ready structures of [`idspace::percid`], indexed by what the kernel gives each running
//! thread through rseq (its `mm_cid` where the kernel fills it, else its CPU; small thread IDs
//! where rseq is missing). Many more threads than CPUs:
//!
//! * count requests into a [`PerCidCounter`] (one cache line per possible CPU, whatever the
//!   number of threads; the sum is exact);
//! * keep per-slot statistics in a [`PerCid`] of mutex-guarded maxima (threads running at once
//!   rarely share a slot, so the locks are rarely contended);
//! * recycle 4 KiB buffers through a [`PerCidPool`], so that after warming up almost every
//!   buffer comes from the pool instead of the allocator.
//!
//! Run with `cargo run -p idspace --example percid`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread;

use idspace::percid::{kernel_aborts, rseq_registration, PerCid, PerCidCounter, PerCidPool};

const THREADS: usize = 32;
const REQUESTS_PER_THREAD: u64 = 20_000;
const BUFFER: usize = 4096;

fn main() {
    let requests = PerCidCounter::new();
    let largest = PerCid::new(|_| Mutex::new(0u64));
    let buffers = PerCidPool::<Vec<u8>>::new();
    let allocated = AtomicU64::new(0);
    println!(
        "index source: {}, rseq area: {:?}, {} slots of {} bytes per counter",
        requests.source().as_str(),
        rseq_registration(),
        requests.slots(),
        requests.slot_bytes()
    );

    thread::scope(|scope| {
        for thread in 0..THREADS as u64 {
            let (requests, largest, buffers, allocated) =
                (&requests, &largest, &buffers, &allocated);
            scope.spawn(move || {
                for request in 0..REQUESTS_PER_THREAD {
                    let mut buffer = buffers.take_or_else(|| {
                        allocated.fetch_add(1, Ordering::Relaxed);
                        Vec::with_capacity(BUFFER)
                    });
                    buffer.clear();
                    // A request of some size: the buffer's content is the work.
                    let size = ((thread * 7919 + request * 104_729) % BUFFER as u64) as usize;
                    buffer.resize(size, b'x');
                    requests.add(1);
                    let mut most = largest.current().lock().unwrap_or_else(|p| p.into_inner());
                    *most = (*most).max(buffer.len() as u64);
                    drop(most);
                    buffers.give(buffer);
                }
            });
        }
    });

    let total = THREADS as u64 * REQUESTS_PER_THREAD;
    assert_eq!(
        requests.sum(),
        total,
        "an exact sum, every add counted once"
    );
    let biggest = largest
        .iter()
        .map(|slot| *slot.lock().unwrap_or_else(|p| p.into_inner()))
        .max()
        .unwrap_or(0);
    let made = allocated.load(Ordering::Relaxed);
    println!(
        "{total} requests from {THREADS} threads counted into {} slots",
        requests.slots()
    );
    println!("largest request: {biggest} bytes");
    println!(
        "{made} buffers allocated for {total} requests; {} held by the pool at the end",
        buffers.held()
    );
    println!("rseq sections the kernel restarted: {}", kernel_aborts());
    assert!(made <= total);
    assert_eq!(buffers.held() as u64, made, "every buffer given back");
}
