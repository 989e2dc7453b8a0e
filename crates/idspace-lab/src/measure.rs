//! Measuring every candidate of an experiment, repeatedly, and taking medians; and running
//! timed work on threads that start together.
//!
//! Candidates are the columns of an experiment's tables, and they are known by name: a result
//! is a set of [`Values`], one per candidate, and a ratio row is asked for against a named
//! reference column ([`Values::over`]), never against a column index.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

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

/// Runs `work(worker, stop)` on `workers` threads that start together (at a start gate), lets them
/// run for `duration`, then raises `stop`; returns the elapsed time and the sum of what the
/// workers return (their operation counts).
pub fn timed(
    workers: usize,
    duration: Duration,
    work: &(dyn Fn(usize, &AtomicBool) -> u64 + Sync),
) -> (Duration, u64) {
    let stop = AtomicBool::new(false);
    let gate = StartGate::default();
    let total = AtomicU64::new(0);
    let start = thread::scope(|scope| {
        for worker in 0..workers {
            let (stop, gate, total) = (&stop, &gate, &total);
            scope.spawn(move || {
                gate.arrive_and_wait();
                total.fetch_add(work(worker, stop), Ordering::Relaxed);
            });
        }
        gate.open_when(workers);
        let start = Instant::now();
        thread::sleep(duration);
        // Relaxed: the flag only ends the loops; the counts are read after the joins.
        stop.store(true, Ordering::Relaxed);
        start
    });
    (start.elapsed(), total.load(Ordering::Relaxed))
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
}
