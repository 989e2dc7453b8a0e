//! Runs the `percid` experiment's object-cache loop alone on one thread, for a profiler:
//! bursts of 4 takes (making an object where the cache has none) then 4 gives of 64-byte
//! objects, through `&dyn Fn` as the experiment calls them, with `PerCidPool` or with
//! `thread_local` caches.
//!
//! ```text
//! percid_pool [pool|thread_local] [PAIRS]
//! ```
//!
//! Prints the source the pool indexes by and ns per take+give pair. Under valgrind there is no
//! rseq area (valgrind refuses the system call), so the pool runs its thread-ID fallback: count
//! the rseq path with `perf record -e cpu-clock` instead.

use std::cell::RefCell;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use idspace::percid::{IndexSource, PerCidPool};
use idspace_lab::{take_give_bursts, PoolObject, POOL_CACHE as CACHE};
use thread_local::ThreadLocal;

type Object = PoolObject;

/// The experiment's loop, each take and give an indirect call as in the experiment (where the
/// closures cross `&dyn` boundaries the compiler does not see through; here it would, and
/// inline one shape's closures and not the other's).
fn run(pairs: u64, take: &dyn Fn() -> Box<Object>, give: &dyn Fn(Box<Object>)) {
    let (take, give) = black_box((take, give));
    take_give_bursts(pairs, take, give);
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let shape = args.get(1).map_or("pool", String::as_str);
    let pairs: u64 = args
        .get(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000_000);
    let make = || Box::new([0u64; 8]);
    let start = Instant::now();
    match shape {
        "pool" => {
            let source = IndexSource::best();
            let pool = match PerCidPool::<Object>::with_source(source, CACHE) {
                Ok(pool) => pool,
                Err(error) => {
                    eprintln!("{error}");
                    return ExitCode::FAILURE;
                }
            };
            println!("source: {source:?}");
            run(pairs, &|| pool.take().unwrap_or_else(make), &|o| {
                pool.give(o)
            });
        }
        "thread_local" => {
            let caches: ThreadLocal<RefCell<Vec<Box<Object>>>> = ThreadLocal::new();
            let cache = || caches.get_or(|| RefCell::new(Vec::with_capacity(CACHE)));
            run(
                pairs,
                &|| cache().borrow_mut().pop().unwrap_or_else(make),
                &|o| {
                    let mut cache = cache().borrow_mut();
                    if cache.len() < CACHE {
                        cache.push(o);
                    }
                },
            );
        }
        other => {
            eprintln!("unknown shape {other}: pool or thread_local");
            return ExitCode::FAILURE;
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / pairs as f64;
    println!("{shape}: {ns:.2} ns per take+give");
    ExitCode::SUCCESS
}
