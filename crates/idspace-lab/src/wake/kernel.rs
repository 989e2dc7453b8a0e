//! The kernel's own wakeups: the same three shapes with OS threads blocking on pipes, as
//! `perf bench sched pipe -T`, `hackbench -p -T` and the pipe-woken schbench do.
//!
//! The threads are the lab process's own (no fork), so a run's CPU time is read like the
//! runtimes': `RUSAGE_SELF` around the run, which counts the threads after they exit too
//! (see [`crate::cputime`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Instant;

use super::workloads::{burn, LatencyShape, Ran};
use crate::cputime::CpuClock;
use crate::sys::pipe::OsPipe;

/// Where started threads wait until all are started: then they all go, or, if a thread could
/// not be started, they all return without running.
struct Gate {
    state: Mutex<Option<bool>>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match *state {
                Some(go) => return go,
                None => state = self.opened.wait(state).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }

    fn open(&self, go: bool) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Some(go);
        self.opened.notify_all();
    }
}

/// A body run on its own OS thread.
pub(crate) type Body = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Runs `bodies` on OS threads started together; returns the wall time from the start signal
/// until all have finished and the process's CPU time over the same interval (the threads are
/// the lab's own, so `RUSAGE_SELF` counts them, exited ones included), or the first error.
pub(crate) fn run_threads(bodies: Vec<Body>) -> Result<Ran, String> {
    let gate = Arc::new(Gate {
        state: Mutex::new(None),
        opened: Condvar::new(),
    });
    let mut threads = Vec::with_capacity(bodies.len());
    for body in bodies {
        let waiting = Arc::clone(&gate);
        let spawned = thread::Builder::new().stack_size(64 * 1024).spawn(move || {
            if waiting.wait() {
                body()
            } else {
                Ok(())
            }
        });
        match spawned {
            Ok(thread) => threads.push(thread),
            Err(error) => {
                gate.open(false);
                for thread in threads {
                    let _ = thread.join();
                }
                return Err(format!("cannot start a thread: {error}"));
            }
        }
    }
    let cpu = CpuClock::start()?;
    let start = Instant::now();
    gate.open(true);
    let mut first_error = None;
    for thread in threads {
        match thread.join() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                first_error.get_or_insert(error);
            }
            Err(_) => {
                first_error.get_or_insert_with(|| "a thread panicked".to_string());
            }
        }
    }
    let elapsed = start.elapsed();
    match first_error {
        Some(error) => Err(error),
        None => Ok(Ran {
            elapsed,
            cpu: cpu.elapsed()?,
            stats: None,
        }),
    }
}

/// `pairs` pairs of threads ping-ponging 4 bytes over two pipes, `rounds` round trips each.
pub fn ping_pong(pairs: usize, rounds: u64) -> Result<Ran, String> {
    let mut bodies: Vec<Body> = Vec::new();
    for _ in 0..pairs {
        let there = Arc::new(OsPipe::new()?);
        let back = Arc::new(OsPipe::new()?);
        let (there2, back2) = (there.clone(), back.clone());
        bodies.push(Box::new(move || {
            let mut word = [0u8; 4];
            for round in 0..rounds {
                there.send(&(round as u32).to_ne_bytes())?;
                back.receive(&mut word)?;
            }
            Ok(())
        }));
        bodies.push(Box::new(move || {
            let mut word = [0u8; 4];
            for _ in 0..rounds {
                there2.receive(&mut word)?;
                back2.send(&word)?;
            }
            Ok(())
        }));
    }
    run_threads(bodies)
}

/// hackbench -p -T: `groups` groups of 20 sender and 20 receiver threads, each receiver with its
/// own pipe, every sender writing `loops` 100-byte messages to every receiver.
pub fn messaging(groups: usize, loops: usize) -> Result<Ran, String> {
    const SIDE: usize = 20;
    let mut bodies: Vec<Body> = Vec::new();
    for _ in 0..groups {
        let pipes: Vec<Arc<OsPipe>> = (0..SIDE)
            .map(|_| OsPipe::new().map(Arc::new))
            .collect::<Result<_, _>>()?;
        for pipe in &pipes {
            let pipe = Arc::clone(pipe);
            bodies.push(Box::new(move || {
                let mut message = [0u8; 100];
                for _ in 0..SIDE * loops {
                    pipe.receive(&mut message)?;
                }
                Ok(())
            }));
        }
        for _ in 0..SIDE {
            let pipes = pipes.clone();
            bodies.push(Box::new(move || {
                let message = [7u8; 100];
                for _ in 0..loops {
                    for pipe in &pipes {
                        pipe.send(&message)?;
                    }
                }
                Ok(())
            }));
        }
    }
    run_threads(bodies)
}

/// schbench with pipes: each message thread sleeps, stamps, writes a byte to each of its
/// workers' pipes; a worker records the time from the stamp until its read returns. Returns the
/// latencies (ns) and the run.
pub fn latency(shape: LatencyShape) -> Result<(Vec<u64>, Ran), String> {
    let epoch = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::new()));
    let mut bodies: Vec<Body> = Vec::new();
    for _ in 0..shape.messengers {
        let back = Arc::new(OsPipe::new()?);
        let stamp = Arc::new(AtomicU64::new(0));
        let pipes: Vec<Arc<OsPipe>> = (0..shape.workers)
            .map(|_| OsPipe::new().map(Arc::new))
            .collect::<Result<_, _>>()?;
        for pipe in &pipes {
            let (pipe, back, stamp, samples) =
                (pipe.clone(), back.clone(), stamp.clone(), samples.clone());
            bodies.push(Box::new(move || {
                let mut mine = Vec::with_capacity(shape.rounds as usize);
                let mut byte = [0u8; 1];
                for _ in 0..shape.rounds {
                    pipe.receive(&mut byte)?;
                    // Relaxed: the pipe's write/read already orders the stamp before us.
                    let woken_at = stamp.load(Ordering::Relaxed);
                    mine.push((epoch.elapsed().as_nanos() as u64).saturating_sub(woken_at));
                    burn(shape.cputime);
                    back.send(&byte)?;
                }
                samples
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(mine);
                Ok(())
            }));
        }
        bodies.push(Box::new(move || {
            let mut replies = vec![0u8; shape.workers];
            for _ in 0..shape.rounds {
                thread::sleep(shape.interval);
                stamp.store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
                for pipe in &pipes {
                    pipe.send(&[1])?;
                }
                back.receive(&mut replies)?;
            }
            Ok(())
        }));
    }
    let ran = run_threads(bodies)?;
    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(|e| e.into_inner()));
    Ok((samples, ran))
}
