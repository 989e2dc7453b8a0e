//! tglx's thread create/teardown pool (from the MM CID rework, Linux 6.19), through the runtime and
//! on the kernel: `pools` pool tasks each create `threads` threads; each thread signals its pool
//! and waits until told to die; the pool then releases them, waits for their ends, and starts
//! again.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use idspace::pid::{PerCpu, ROOT};
use idspace::process::{self, CidDesign, ProcessHooks};
use idspace::sched::{Builder, Policy, Runtime};
use idspace::table::ScaledHash;

use crate::wake::primitives::Bell;

/// The pool's shape.
#[derive(Clone, Copy)]
pub struct Shape {
    pub pools: usize,
    pub threads: usize,
    pub iterations: u64,
}

/// A runtime of `workers` workers (wakelist policy) whose tasks are threads of processes: PIDs
/// from percpu, CIDs from design `C`, timers in the scaled hash; the root's init comes with the hooks.
pub(super) fn process_runtime<C: CidDesign>(
    workers: usize,
) -> Result<Runtime<ProcessHooks<PerCpu, C, ScaledHash<()>>>, String> {
    let hooks = ProcessHooks::<PerCpu, C, ScaledHash<()>>::for_workers(workers)
        .map_err(|e| e.to_string())?;
    Builder::new()
        .workers(workers)
        .policy(Policy::Wakelist)
        .hooks(Arc::new(hooks))
        .build()
        .map_err(|e| e.to_string())
}

/// Runs the pool on a runtime of `workers` workers whose processes take CIDs from design `C`;
/// each pool is a process and its threads are the process's threads. Returns the wall time.
pub fn runtime<C: CidDesign>(shape: Shape, workers: usize) -> Result<Duration, String> {
    let runtime = process_runtime::<C>(workers)?;
    let start = Instant::now();
    let pools: Vec<_> = (0..shape.pools)
        .map(|_| {
            runtime.spawn_process(ROOT, async move {
                let ready = Bell::new();
                for iteration in 0..shape.iterations {
                    let mut threads = Vec::with_capacity(shape.threads);
                    let mut die = Vec::with_capacity(shape.threads);
                    for _ in 0..shape.threads {
                        let (ready, told) = (Arc::clone(&ready), Bell::new());
                        die.push(Arc::clone(&told));
                        let thread =
                            process::spawn_thread_in::<PerCpu, C, ScaledHash<()>, _>(async move {
                                ready.ring();
                                told.until(1).await;
                            })
                            .map_err(|e| e.to_string())?;
                        threads.push(thread);
                    }
                    ready.until((iteration + 1) * shape.threads as u64).await;
                    for told in &die {
                        told.ring();
                    }
                    for thread in threads {
                        thread.await.map_err(|e| e.to_string())?;
                    }
                }
                Ok::<(), String>(())
            })
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    for pool in pools {
        pool.join().map_err(|e| e.to_string())??;
    }
    Ok(start.elapsed())
}

/// The same pool with the kernel's threads (pthreads through `std::thread`).
pub fn kernel(shape: Shape) -> Result<Duration, String> {
    let start = Instant::now();
    std::thread::scope(|scope| {
        let pools: Vec<_> = (0..shape.pools)
            .map(|_| {
                scope.spawn(move || {
                    // (threads signalled so far, told to die)
                    let state = Arc::new((Mutex::new((0usize, false)), Condvar::new()));
                    for _ in 0..shape.iterations {
                        *state.0.lock().unwrap_or_else(|e| e.into_inner()) = (0, false);
                        let threads: Vec<_> = (0..shape.threads)
                            .map(|_| {
                                let state = Arc::clone(&state);
                                std::thread::Builder::new()
                                    .spawn(move || {
                                        let (lock, changed) = &*state;
                                        let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
                                        s.0 += 1;
                                        changed.notify_all();
                                        while !s.1 {
                                            s = changed.wait(s).unwrap_or_else(|e| e.into_inner());
                                        }
                                    })
                                    .map_err(|e| e.to_string())
                            })
                            .collect::<Result<_, _>>()?;
                        {
                            let (lock, changed) = &*state;
                            let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
                            while s.0 < shape.threads {
                                s = changed.wait(s).unwrap_or_else(|e| e.into_inner());
                            }
                            s.1 = true;
                            changed.notify_all();
                        }
                        for thread in threads {
                            thread
                                .join()
                                .map_err(|_| "a pool thread panicked".to_string())?;
                        }
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        for pool in pools {
            pool.join().map_err(|_| "a pool panicked".to_string())??;
        }
        Ok::<(), String>(())
    })?;
    Ok(start.elapsed())
}
