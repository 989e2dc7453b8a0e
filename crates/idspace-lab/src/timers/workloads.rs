//! The test shapes of the posix-timers hash-table rework (Linux 6.15), written once over any
//! [`Subject`].
//!
//! Timed loops touch only preallocated buffers, so the allocation they measure is the
//! subject's own.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::kernel::{self, KernelTimers};
use super::subjects::{Candidate, Kind, Subject};
use crate::measure::{cell_window, timed, together, Span};
use crate::sys::forked::run_forked;

/// Two timed phases.
#[derive(Debug, Clone, Copy)]
pub struct Phases {
    /// Creating the entries.
    pub create: Duration,
    /// Looking each up.
    pub lookup: Duration,
}

/// Creates `ids.len()` entries for `owner`, then looks each up; returns both phase times.
/// On success the entries stay (the caller removes them, or the process exit does); on failure
/// the entries already created are deleted, so that a failed run leaks nothing (kernel timers
/// would otherwise hold the per-user limit for every later run).
fn create_then_lookup(subject: &dyn Subject, owner: u64, ids: &mut [u32]) -> Option<Phases> {
    let start = Instant::now();
    for (made, slot) in (0..).zip(ids.iter_mut()) {
        match subject.create(owner) {
            Some(id) => *slot = id,
            None => {
                delete_all(subject, owner, &ids[..made]);
                return None;
            }
        }
    }
    let created = Instant::now();
    let all_found = ids.iter().all(|&id| black_box(subject.lookup(owner, id)));
    let lookup = created.elapsed();
    if !all_found {
        delete_all(subject, owner, ids);
        return None;
    }
    Some(Phases {
        create: created - start,
        lookup,
    })
}

fn delete_all(subject: &dyn Subject, owner: u64, ids: &[u32]) {
    for &id in ids {
        subject.delete(owner, id);
    }
}

/// Tests 1-3: one owner creates `count` entries, then looks each up.
pub fn single(candidate: &Candidate, count: usize) -> Result<Phases, String> {
    let subject = (candidate.make)();
    let mut ids = vec![0u32; count];
    let phases = create_then_lookup(subject.as_ref(), 0, &mut ids).ok_or_else(|| {
        format!(
            "{}: create or lookup failed at {count} entries",
            candidate.name
        )
    })?;
    delete_all(subject.as_ref(), 0, &ids);
    Ok(phases)
}

/// The results of forked children, or an error if one's work failed.
fn every_child<T>(results: Vec<Option<T>>) -> Result<Vec<T>, String> {
    let failed = results.iter().filter(|r| r.is_none()).count();
    if failed > 0 {
        return Err(format!(
            "{failed} of {} child processes failed their work (timer limit reached?)",
            results.len()
        ));
    }
    Ok(results.into_iter().flatten().collect())
}

/// Average of per-worker phase times.
fn average(samples: &[Phases]) -> Phases {
    let n = samples.len().max(1) as u32;
    Phases {
        create: samples.iter().map(|p| p.create).sum::<Duration>() / n,
        lookup: samples.iter().map(|p| p.lookup).sum::<Duration>() / n,
    }
}

/// What one worker of Tests 4-5 did: its rounds' phase times summed, how many rounds, and when
/// it started and stopped (plain data, so that it travels back from a forked child).
#[derive(Debug, Clone, Copy)]
struct Rounds {
    create: Duration,
    lookup: Duration,
    rounds: u32,
    start: Instant,
    end: Instant,
}

impl Rounds {
    /// The worker's phase times per round.
    fn per_round(&self) -> Phases {
        let rounds = self.rounds.max(1);
        Phases {
            create: self.create / rounds,
            lookup: self.lookup / rounds,
        }
    }
}

/// Rounds of Tests 4-5 for one worker until `done()`, at least one: create `ids.len()` entries
/// for `owner`, look each up, then delete them (untimed) so that the next round starts from the
/// same table. `None` if a create or a lookup failed.
fn rounds_until(
    subject: &dyn Subject,
    owner: u64,
    ids: &mut [u32],
    done: &dyn Fn() -> bool,
) -> Option<Rounds> {
    let start = Instant::now();
    let (mut create, mut lookup, mut rounds) = (Duration::ZERO, Duration::ZERO, 0);
    loop {
        let phases = create_then_lookup(subject, owner, ids)?;
        delete_all(subject, owner, ids);
        create += phases.create;
        lookup += phases.lookup;
        rounds += 1;
        if done() {
            break;
        }
    }
    Some(Rounds {
        create,
        lookup,
        rounds,
        start,
        end: Instant::now(),
    })
}

/// Tests 4-5: `workers` threads (or, for the kernel with an owner each, processes) start
/// together; each creates `per_worker` entries and then looks each up. `shared_owner`: all in
/// one owner (threads of one process) or one owner each (forked processes). Returns the
/// average per worker, as the rework's tests report.
///
/// One round of a fast subject fits in a scheduler time slice, so with more workers than CPUs
/// single rounds ran one worker after another and measured no contention. Every worker repeats
/// its round (deleting its entries, untimed, between rounds) until a time window closes, and
/// the figure is a round's phase times averaged over each worker's rounds, then over the
/// workers. A cell in which a worker made no round, or started only after another had stopped,
/// is refused (`measure::together`). Forked kernel processes each run their rounds for the
/// same window from their own start, and are checked the same way.
pub fn concurrent(
    candidate: &Candidate,
    workers: usize,
    per_worker: usize,
    shared_owner: bool,
) -> Result<Phases, String> {
    let window = cell_window(ROUNDS_WINDOW, workers);
    let rounds = if candidate.kind == Kind::Kernel && !shared_owner {
        let mut ids = vec![0u32; per_worker];
        let results = run_forked(workers, &mut ids, &|_, ids: &mut Vec<u32>| {
            let start = Instant::now();
            rounds_until(&KernelTimers, 0, ids, &|| start.elapsed() >= window)
        })?;
        every_child(results)?
    } else {
        threads_in_rounds(candidate, workers, per_worker, shared_owner, window)?
    };
    let spans: Vec<Span> = rounds
        .iter()
        .map(|r| Span {
            start: r.start,
            end: r.end,
            ops: u64::from(r.rounds),
        })
        .collect();
    together(&spans)?;
    let per_round: Vec<Phases> = rounds.iter().map(Rounds::per_round).collect();
    Ok(average(&per_round))
}

/// Tests 4-5 on threads of this process: every worker's [`Rounds`] over `window`.
fn threads_in_rounds(
    candidate: &Candidate,
    workers: usize,
    per_worker: usize,
    shared_owner: bool,
    window: Duration,
) -> Result<Vec<Rounds>, String> {
    let subject = (candidate.make)();
    let subject = subject.as_ref();
    let done: Vec<Mutex<Option<Rounds>>> = (0..workers).map(|_| Mutex::new(None)).collect();
    let broken = AtomicBool::new(false);
    timed(workers, window, &|worker, stop| {
        let owner = if shared_owner { 0 } else { worker as u64 };
        let mut ids = vec![0u32; per_worker];
        // Relaxed: the flag only ends the rounds; the results are read after the joins.
        let ran = rounds_until(subject, owner, &mut ids, &|| stop.load(Ordering::Relaxed));
        let Some(ran) = ran else {
            broken.store(true, Ordering::Relaxed);
            return 0;
        };
        *done[worker].lock().unwrap_or_else(|p| p.into_inner()) = Some(ran);
        u64::from(ran.rounds)
    })
    .map_err(|refused| {
        if broken.load(Ordering::Relaxed) {
            format!("{}: a worker's create or lookup failed", candidate.name)
        } else {
            refused
        }
    })?;
    done.into_iter()
        .map(|slot| slot.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect::<Option<Vec<Rounds>>>()
        .ok_or_else(|| format!("{}: a worker's create or lookup failed", candidate.name))
}

/// The window of a Tests 4-5 cell at one worker ([`cell_window`] adds to it per worker).
const ROUNDS_WINDOW: Duration = Duration::from_millis(100);

/// Loops `iterations` times creating and deleting one entry for `owner`.
fn create_delete(subject: &dyn Subject, owner: u64, iterations: usize) -> Option<Duration> {
    let start = Instant::now();
    for _ in 0..iterations {
        let id = subject.create(owner)?;
        if !subject.delete(owner, id) {
            return None;
        }
    }
    Some(start.elapsed())
}

/// Whether the kernel can hold `live` timers at once under RLIMIT_SIGPENDING (`limit`);
/// otherwise the reason, for the report.
pub fn kernel_fits(candidate: &Candidate, live: usize, limit: u64) -> Result<(), String> {
    // Keep a margin for timers and queued signals the rest of the machine holds.
    let usable = limit.saturating_sub(1024);
    if candidate.kind == Kind::Kernel && live as u64 > usable {
        Err(format!(
            "needs {live} live timers; RLIMIT_SIGPENDING allows {limit} per user here \
             (raising it needs CAP_SYS_RESOURCE)"
        ))
    } else {
        Ok(())
    }
}

/// The create+delete loop: `workers` threads (or kernel processes) each create and delete one
/// entry `iterations` times. Returns the average time per worker.
///
/// The threads run together for a time window rather than for a fixed count: a fast subject's
/// `iterations` fit in one scheduler time slice, so with more workers than CPUs fixed counts
/// ran the workers one after another and measured no contention. Every worker loops from a
/// start gate until the window closes (each must have made an iteration, and all must have
/// run at once, or the cell is refused); the result is the time `iterations` take at the rate
/// the workers sustained together (window × workers × `iterations` ÷ iterations made). Kernel
/// processes (an owner each) still make a fixed count each.
pub fn create_delete_loop(
    candidate: &Candidate,
    workers: usize,
    iterations: usize,
    shared_owner: bool,
) -> Result<Duration, String> {
    let failed = || format!("{}: create or delete failed in the loop", candidate.name);
    if candidate.kind == Kind::Kernel && !shared_owner {
        let results = run_forked(workers, &mut (), &|_, _: &mut ()| {
            create_delete(&KernelTimers, 0, iterations)
        })?;
        let total: Duration = every_child(results)?.iter().sum();
        return Ok(total / workers.max(1) as u32);
    }
    let subject = (candidate.make)();
    let subject = subject.as_ref();
    let broken = AtomicBool::new(false);
    let window = cell_window(LOOP_WINDOW, workers);
    let (elapsed, made) = timed(workers, window, &|worker, stop| {
        let owner = if shared_owner { 0 } else { worker as u64 };
        let mut made = 0;
        while !stop.load(Ordering::Relaxed) {
            if create_delete(subject, owner, LOOP_CHUNK).is_none() {
                broken.store(true, Ordering::Relaxed);
                break;
            }
            made += LOOP_CHUNK as u64;
        }
        made
    })?;
    if broken.load(Ordering::Relaxed) {
        return Err(failed());
    }
    let per_worker = made as f64 / workers.max(1) as f64;
    Ok(elapsed.mul_f64(iterations as f64 / per_worker))
}

/// The create+delete loop's window at one worker ([`cell_window`] adds to it per worker).
const LOOP_WINDOW: Duration = Duration::from_millis(100);
/// Iterations a loop worker makes between two looks at the window's end.
const LOOP_CHUNK: usize = 64;

/// The sparse-ID memory test: `count` entries with IDs `spacing` apart, created in restore
/// mode. Returns (self-reported bytes, allocator-measured bytes, creation time); the kernel
/// reports only the time.
pub fn sparse(
    candidate: &Candidate,
    count: u32,
    spacing: u32,
) -> Result<(Option<usize>, Option<isize>, Duration), String> {
    let failed = || format!("{}: restore-mode create failed", candidate.name);
    if candidate.kind == Kind::Kernel {
        if !kernel::set_restore_mode(true) {
            return Err("the kernel refused PR_TIMER_CREATE_RESTORE_IDS (before 6.15?)".into());
        }
        let subject = KernelTimers;
        let start = Instant::now();
        let made = (0..count)
            .take_while(|&i| subject.create_exact(0, i * spacing))
            .count() as u32;
        let elapsed = start.elapsed();
        kernel::set_restore_mode(false);
        for i in 0..made {
            subject.delete(0, i * spacing);
        }
        return if made == count {
            Ok((None, None, elapsed))
        } else {
            Err(failed())
        };
    }
    let ((subject, elapsed, all), allocated) = crate::alloc::measure(|| {
        let subject = (candidate.make)();
        let start = Instant::now();
        let all = (0..count).all(|i| subject.create_exact(0, i * spacing));
        (subject, start.elapsed(), all)
    })?;
    if !all {
        return Err(failed());
    }
    Ok((subject.memory_bytes(), Some(allocated), elapsed))
}
