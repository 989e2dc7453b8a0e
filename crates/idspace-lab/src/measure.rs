//! Measuring every candidate of an experiment, repeatedly, and taking medians; and running
//! timed work on threads that start together.
//!
//! Candidates are the columns of an experiment's tables, and they are known by name: a result
//! is a set of [`Values`], one per candidate, and a ratio row is asked for against a named
//! reference column ([`Values::over`]), never against a column index.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::cputime;
use crate::progress::Progress;
use crate::stats::{median, ratio};

/// Something an experiment measures: one column of its tables, known by its name.
pub trait Candidate {
    /// The column heading, unique among the experiment's candidates.
    fn name(&self) -> &str;
}

impl Candidate for str {
    fn name(&self) -> &str {
        self
    }
}

impl Candidate for String {
    fn name(&self) -> &str {
        self
    }
}

impl<C: Candidate + ?Sized> Candidate for &C {
    fn name(&self) -> &str {
        (**self).name()
    }
}

/// The candidates' names, in column order.
pub fn names<C: Candidate>(candidates: &[C]) -> Vec<String> {
    candidates.iter().map(|c| c.name().to_string()).collect()
}

/// Runs `run` for every candidate `repetitions` times (candidates interleaved within each
/// repetition, so that drift in the machine's speed hits all alike) and returns each
/// candidate's per-metric medians. A candidate that fails gets no values and a note in
/// `notes`; the others go on.
pub(crate) fn medians<C: Candidate>(
    candidates: &[C],
    repetitions: usize,
    progress: &mut Progress,
    label: &str,
    notes: &mut Vec<String>,
    mut run: impl FnMut(&C) -> Result<Vec<f64>, String>,
) -> Medians {
    let mut samples: Vec<Option<Vec<Vec<f64>>>> = vec![Some(Vec::new()); candidates.len()];
    for _ in 0..repetitions {
        for (index, candidate) in candidates.iter().enumerate() {
            progress.step(&format!("{label}: {}", candidate.name()));
            let Some(runs) = samples[index].as_mut() else {
                continue;
            };
            match run(candidate) {
                Ok(metrics) => runs.push(metrics),
                Err(error) => {
                    notes.push(format!("*{label}, {}:* {error}", candidate.name()));
                    samples[index] = None;
                }
            }
        }
    }
    let per_candidate = samples
        .into_iter()
        .map(|runs| {
            let Some(runs) = runs else {
                return Vec::new();
            };
            let metrics = runs.first().map_or(0, Vec::len);
            (0..metrics)
                .map(|m| median(&runs.iter().map(|r| r[m]).collect::<Vec<_>>()))
                .collect()
        })
        .collect();
    Medians {
        names: names(candidates),
        per_candidate,
    }
}

/// Each candidate's medians of every metric its runs returned.
#[derive(Debug, Clone)]
pub struct Medians {
    names: Vec<String>,
    /// Per candidate, in column order: the median of each metric (empty if it failed).
    per_candidate: Vec<Vec<Option<f64>>>,
}

impl Medians {
    /// Metric `metric` (the index into what the runs returned) of every candidate. A median
    /// that is not a number (a run's way of saying "does not apply") is `None`.
    pub fn metric(&self, metric: usize) -> Values {
        Values {
            names: self.names.clone(),
            cells: self
                .per_candidate
                .iter()
                .map(|m| m.get(metric).copied().flatten().filter(|v| !v.is_nan()))
                .collect(),
        }
    }
}

/// One figure per candidate (the cells of a table row), each known by its candidate's name.
#[derive(Debug, Clone, PartialEq)]
pub struct Values {
    names: Vec<String>,
    cells: Vec<Option<f64>>,
}

impl Values {
    /// Values for the named columns; `cells` and `names` pair up in order.
    pub fn new(names: Vec<String>, cells: Vec<Option<f64>>) -> Values {
        debug_assert_eq!(names.len(), cells.len(), "one cell per column");
        Values { names, cells }
    }

    /// The cell of the candidate called `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<f64> {
        let index = self.names.iter().position(|n| n == name)?;
        self.cells[index]
    }

    /// Each cell divided by the cell of the reference candidate called `reference` (all `None`
    /// if the reference has no value).
    pub fn over(&self, reference: &str) -> Vec<Option<f64>> {
        let reference = self.get(reference);
        self.cells.iter().map(|&v| ratio(v, reference)).collect()
    }

    /// `f` applied to every cell that has a value.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Values {
        Values {
            names: self.names.clone(),
            cells: self.cells.iter().map(|v| v.map(&f)).collect(),
        }
    }

    /// Only the columns called `names`, in that order.
    pub fn only(&self, names: &[&str]) -> Values {
        Values {
            names: names.iter().map(|n| n.to_string()).collect(),
            cells: names.iter().map(|n| self.get(n)).collect(),
        }
    }

    /// The column names, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The cells, in column order.
    pub fn cells(&self) -> &[Option<f64>] {
        &self.cells
    }
}

impl From<Values> for Vec<Option<f64>> {
    fn from(values: Values) -> Vec<Option<f64>> {
        values.cells
    }
}

impl From<&Values> for Vec<Option<f64>> {
    fn from(values: &Values) -> Vec<Option<f64>> {
        values.cells.clone()
    }
}

/// The start line of a timed run: threads count themselves in and yield until the caller
/// opens it. A `std::sync::Barrier` would release them through its mutex one at a time, and in
/// an oversubscribed run each of them waits behind the threads already working before it can
/// take it: 256 threads took minutes to get through.
#[derive(Default)]
pub(crate) struct StartGate {
    arrived: AtomicU32,
    open: AtomicBool,
}

impl StartGate {
    /// Counts the calling thread in, then waits for the gate to open.
    pub(crate) fn arrive_and_wait(&self) {
        // Release pairs with the Acquire load in `open_when`: a thread counted is running.
        self.arrived.fetch_add(1, Ordering::Release);
        // Acquire pairs with the Release store in `open_when`.
        while !self.open.load(Ordering::Acquire) {
            thread::yield_now();
        }
    }

    /// Waits until `threads` threads have arrived, then lets them all go.
    pub(crate) fn open_when(&self, threads: usize) {
        // Acquire pairs with every thread's Release increment.
        while (self.arrived.load(Ordering::Acquire) as usize) < threads {
            thread::yield_now();
        }
        // Release pairs with the threads' Acquire loads.
        self.open.store(true, Ordering::Release);
    }
}

/// What one worker of a timed run did: when it started (after the gate), when its work
/// returned, and the operations it counted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub(crate) start: Instant,
    pub(crate) end: Instant,
    pub(crate) ops: u64,
}

/// Runs `work(worker, stop)` on `workers` threads that start together (at a start gate), raises
/// `stop` after `duration` and returns the moment the gate opened with every worker's [`Span`].
fn gated(
    workers: usize,
    duration: Duration,
    work: &(dyn Fn(usize, &AtomicBool) -> u64 + Sync),
) -> (Instant, Vec<Span>) {
    let stop = AtomicBool::new(false);
    let gate = StartGate::default();
    thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let (stop, gate) = (&stop, &gate);
                scope.spawn(move || {
                    gate.arrive_and_wait();
                    let start = Instant::now();
                    let ops = work(worker, stop);
                    Span {
                        start,
                        end: Instant::now(),
                        ops,
                    }
                })
            })
            .collect();
        gate.open_when(workers);
        let opened = Instant::now();
        thread::sleep(duration);
        // Relaxed: the flag only ends the loops; the spans are read after the joins.
        stop.store(true, Ordering::Relaxed);
        let spans = handles
            .into_iter()
            .map(|h| h.join().expect("a worker panicked"))
            .collect();
        (opened, spans)
    })
}

/// Refuses a run whose workers did not all run at once: one that counted no operation, or one
/// that started only after another had stopped. A row must measure what it says: with 64
/// threads on 2 CPUs the scheduler may otherwise run them a few at a time, and the cell would
/// time a few threads, not 64.
pub(crate) fn together(spans: &[Span]) -> Result<(), String> {
    if let Some(idle) = spans.iter().position(|s| s.ops == 0) {
        return Err(format!(
            "thread {idle} of {} made no operation in the window: the threads did not all run \
             at once, so the cell is not reported",
            spans.len()
        ));
    }
    let last_start = spans.iter().map(|s| s.start).max();
    let first_end = spans.iter().map(|s| s.end).min();
    match (last_start, first_end) {
        (Some(start), Some(end)) if start > end => Err(format!(
            "a thread started {:?} after another had stopped: the {} threads did not all run \
             at once, so the cell is not reported",
            start - end,
            spans.len()
        )),
        _ => Ok(()),
    }
}

/// Runs `work(worker, stop)` on `workers` threads that start together (at a start gate), lets
/// them run for `duration`, then raises `stop`; returns the time from the gate's opening to the
/// last join and the sum of what the workers return (their operation counts). Refused
/// (see `together`) unless every worker counted an operation and all ran at once, so `work` must
/// return the operations it made, at least one if it ran.
pub fn timed(
    workers: usize,
    duration: Duration,
    work: &(dyn Fn(usize, &AtomicBool) -> u64 + Sync),
) -> Result<(Duration, u64), String> {
    let (opened, spans) = gated(workers, duration, work);
    let elapsed = opened.elapsed();
    together(&spans)?;
    Ok((elapsed, spans.iter().map(|s| s.ops).sum()))
}

/// Operations a [`window_or_longer`] worker makes between two looks at the stop flag.
pub(crate) const CHUNK: u64 = 1024;

/// Runs `work(CHUNK)` over and over on `threads` threads that start together until `duration`
/// has passed; every thread's span, checked or not. The measure of [`window_or_longer`], for
/// work whose operations are too short to look at a flag between them.
/// With the spans, the CPU time the threads had between them (`None` if a thread could not
/// read its own).
fn window_spans(
    threads: usize,
    duration: Duration,
    work: &(dyn Fn(u64) + Sync),
) -> (Vec<Span>, Option<Duration>) {
    let cpu_micros = AtomicU64::new(0);
    let unreadable = AtomicBool::new(false);
    let thread_cpu = || cputime::used(cputime::Scope::Thread).ok();
    let (_, spans) = gated(threads, duration, &|_, stop| {
        let before = thread_cpu();
        let mut ops = 0;
        // Relaxed: the flag only ends the loop; the spans are read after the joins.
        while !stop.load(Ordering::Relaxed) {
            work(CHUNK);
            ops += CHUNK;
        }
        match (before, thread_cpu()) {
            (Some(before), Some(after)) => {
                let micros = (after.saturating_sub(before)).as_micros() as u64;
                // Relaxed: a sum read after the joins.
                cpu_micros.fetch_add(micros, Ordering::Relaxed);
            }
            // Relaxed: as above.
            _ => unreadable.store(true, Ordering::Relaxed),
        }
        ops
    });
    let cpu = (!unreadable.into_inner()).then(|| Duration::from_micros(cpu_micros.into_inner()));
    (spans, cpu)
}

/// The least share of the CPUs a window's threads may have had: below it, other work on the
/// machine kept them off the CPUs for most of the window, and a contention figure (a shared
/// atomic's, say) measures time slices taken in turn, not threads running at once.
const LEAST_CPU_SHARE: f64 = 0.5;

/// Refuses a window whose threads had less than [`LEAST_CPU_SHARE`] of the CPUs they could
/// use: `min(threads, cpus)` CPUs for the whole window.
fn had_the_cpus(spans: &[Span], cpu: Option<Duration>) -> Result<(), String> {
    let Some(cpu) = cpu else {
        return Ok(());
    };
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let usable = spans.len().min(cpus).max(1) as f64 * spanned(spans).0.as_secs_f64();
    let share = cpu.as_secs_f64() / usable.max(f64::MIN_POSITIVE);
    if share >= LEAST_CPU_SHARE {
        return Ok(());
    }
    Err(format!(
        "the {} threads had {:.0}% of the {} CPUs they could use ({:?} of CPU time in a \
         {:?} window): {STARVED}, so the cell is not reported",
        spans.len(),
        share * 100.0,
        spans.len().min(cpus),
        cpu,
        spanned(spans).0
    ))
}

/// Whether `reason` is [`had_the_cpus`]'s refusal: the machine was busy, not the work wrong.
#[cfg(test)]
pub(crate) fn starved(reason: &str) -> bool {
    reason.contains(STARVED)
}

/// The words that mark [`had_the_cpus`]'s refusal.
const STARVED: &str = "other work kept them off the CPUs";

/// For tests of brief runs: the run's value, or `None` if it was refused because its threads
/// did not all run at once or were kept off the CPUs (what a busy test machine does to a run of
/// a few milliseconds); any other error is a failure.
#[cfg(test)]
pub(crate) fn unless_not_at_once<T>(result: Result<T, String>) -> Option<T> {
    match result {
        Err(error) if starved(&error) || error.contains("did not all run at once") => {
            eprintln!("not measured on this busy machine: {error}");
            None
        }
        result => Some(result.unwrap_or_else(|e| panic!("{e}"))),
    }
}

/// [`together`], then [`had_the_cpus`].
fn checked(spans: &[Span], cpu: Option<Duration>) -> Result<(), String> {
    together(spans)?;
    had_the_cpus(spans, cpu)
}

/// The time from the first span's start to the last one's end, and their operations.
fn spanned(spans: &[Span]) -> (Duration, u64) {
    let first = spans.iter().map(|s| s.start).min();
    let last = spans.iter().map(|s| s.end).max();
    let elapsed = match (first, last) {
        (Some(first), Some(last)) => last - first,
        _ => Duration::ZERO,
    };
    (elapsed, spans.iter().map(|s| s.ops).sum())
}

/// How long a cell of `threads` threads runs: `base`, plus time for every thread of an
/// oversubscribed run to get its turns on the CPUs (2 ms each: a few of the scheduler's time
/// slices spread over the CPUs).
pub(crate) fn cell_window(base: Duration, threads: usize) -> Duration {
    base + Duration::from_millis(2) * threads as u32
}

/// What [`window_or_longer`] measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Windowed {
    /// The reported run's time, from the first thread's start to the last one's end.
    pub(crate) elapsed: Duration,
    /// The reported run's operations.
    pub(crate) ops: u64,
    /// The operations of every run made, the refused one included: what a structure the runs
    /// shared has seen (a counter's exact total).
    pub(crate) made: u64,
}

/// Runs `work(CHUNK)` over and over on `threads` threads that start together until `duration`
/// has passed; the time from the first thread's start to the last one's end, with the
/// operations made. Refused as [`timed`] is unless the threads all ran at once, and also if
/// they had less than half the CPUs they could use ([`had_the_cpus`]: the work is CPU-bound,
/// so that is other work's doing, not theirs); run again once
/// with a window four times as long first (a busy machine can keep an oversubscribed cell's
/// last threads off the CPUs).
pub(crate) fn window_or_longer(
    threads: usize,
    duration: Duration,
    work: &(dyn Fn(u64) + Sync),
) -> Result<Windowed, String> {
    let (first, cpu) = window_spans(threads, duration, work);
    let (earlier, (spans, cpu)) = match checked(&first, cpu) {
        Ok(()) => (0, (first, cpu)),
        Err(_) => (spanned(&first).1, window_spans(threads, duration * 4, work)),
    };
    checked(&spans, cpu)?;
    let (elapsed, ops) = spanned(&spans);
    Ok(Windowed {
        elapsed,
        ops,
        made: earlier + ops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_are_per_candidate_and_named() {
        let mut progress = Progress::new("test");
        let mut notes = Vec::new();
        let mut call = 0.0;
        let result = medians(
            &["a", "b", "broken"],
            3,
            &mut progress,
            "label",
            &mut notes,
            |c| {
                call += 1.0;
                match *c {
                    "a" => Ok(vec![call, f64::NAN]),
                    "b" => Ok(vec![10.0, 20.0]),
                    _ => Err("refused".into()),
                }
            },
        );
        // "a" ran at calls 1, 4 and 7 (interleaved with the others).
        assert_eq!(result.metric(0).cells(), &[Some(4.0), Some(10.0), None]);
        assert_eq!(result.metric(1).get("a"), None, "not a number is no value");
        assert_eq!(result.metric(1).get("b"), Some(20.0));
        assert_eq!(notes, vec!["*label, broken:* refused".to_string()]);
    }

    #[test]
    fn ratios_are_over_a_named_column() {
        let values = Values::new(
            vec!["x".into(), "y".into(), "z".into()],
            vec![Some(2.0), Some(4.0), None],
        );
        assert_eq!(values.over("y"), vec![Some(0.5), Some(1.0), None]);
        assert_eq!(values.over("z"), vec![None, None, None]);
        assert_eq!(values.only(&["z", "x"]).cells(), &[None, Some(2.0)]);
        assert_eq!(values.map(|v| 1.0 / v).get("x"), Some(0.5));
    }

    fn span(start_ms: u64, end_ms: u64, ops: u64) -> Span {
        let zero = Instant::now();
        Span {
            start: zero + Duration::from_millis(start_ms),
            end: zero + Duration::from_millis(end_ms),
            ops,
        }
    }

    #[test]
    fn runs_whose_threads_did_not_overlap_are_refused() {
        assert!(together(&[span(0, 10, 5), span(2, 12, 5)]).is_ok());
        let idle = together(&[span(0, 10, 5), span(2, 12, 0)]).unwrap_err();
        assert!(idle.contains("thread 1 of 2 made no operation"), "{idle}");
        let serial = together(&[span(0, 10, 5), span(11, 20, 5)]).unwrap_err();
        assert!(serial.contains("did not all run at once"), "{serial}");
    }

    #[test]
    fn a_window_counts_every_thread_and_spans_them_all() {
        let made = AtomicU64::new(0);
        let (spans, cpu) = window_spans(2, Duration::from_millis(100), &|n| {
            made.fetch_add(n, Ordering::Relaxed);
        });
        together(&spans).unwrap();
        let (elapsed, ops) = spanned(&spans);
        assert_eq!(ops, made.load(Ordering::Relaxed));
        assert!(ops >= 2 * CHUNK, "every thread made at least one chunk");
        assert!(elapsed >= Duration::from_millis(50), "{elapsed:?}");
        assert!(cpu.is_some_and(|cpu| cpu > Duration::ZERO), "{cpu:?}");
    }

    #[test]
    fn a_window_starved_of_cpu_is_refused() {
        let spans = [span(0, 100, 5), span(0, 100, 5)];
        // Two threads on at least one CPU for 100 ms: 10 ms of CPU between them is starved.
        let starved = had_the_cpus(&spans, Some(Duration::from_millis(10))).unwrap_err();
        assert!(
            starved.contains("other work kept them off the CPUs"),
            "{starved}"
        );
        assert!(had_the_cpus(&spans, Some(Duration::from_millis(200))).is_ok());
        assert!(had_the_cpus(&spans, None).is_ok(), "no reading, no verdict");
    }

    #[test]
    fn a_longer_window_reports_its_own_operations_and_all_that_were_made() {
        let made = AtomicU64::new(0);
        match window_or_longer(2, Duration::from_millis(30), &|n| {
            made.fetch_add(n, Ordering::Relaxed);
        }) {
            Ok(run) => {
                assert_eq!(run.made, made.load(Ordering::Relaxed));
                assert!(run.ops <= run.made && run.ops >= 2 * CHUNK);
            }
            Err(error) => assert!(starved(&error), "{error}"),
        }
    }

    #[test]
    fn a_timed_worker_that_made_nothing_refuses_the_run() {
        let refused = timed(2, Duration::from_millis(20), &|worker, stop| {
            while !stop.load(Ordering::Relaxed) {
                thread::yield_now();
            }
            worker as u64
        })
        .unwrap_err();
        assert!(
            refused.contains("thread 0 of 2 made no operation"),
            "{refused}"
        );
        let (_, ops) = timed(2, Duration::from_millis(20), &|_, stop| {
            let mut ops = 0;
            while !stop.load(Ordering::Relaxed) {
                ops += 1;
                thread::yield_now();
            }
            ops.max(1)
        })
        .unwrap();
        assert!(ops >= 2);
    }
}
