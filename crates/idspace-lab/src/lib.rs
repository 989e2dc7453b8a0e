//! The idspace lab: runs experiments against every design of the `idspace` crate, the peers a
//! user would pick instead, and the Linux kernel on this machine, all in one run, and writes
//! `report.md`, `results.json` and SVG plots. The `idspace bench` command is its front end.
//!
//! An experiment is an [`Experiment`]: it receives a [`Context`] (the machine, the [`Scale`],
//! a [`Progress`] display, the notes) and returns a [`Section`] of tables, plots and notes. It
//! does so by declaring what it measures: its subjects (the columns), the points it varies, a
//! closure measuring one subject at one point, and how the medians become rows of numbers and
//! ratios over a named reference column; one runner (the crate's `declare` module) counts the
//! progress steps, measures (repetitions interleaved, medians) and assembles the section.
//! Adding an experiment means adding a module and a line to [`experiments`]. Every call into
//! the C library and the kernel is in the crate's `sys` module, the only one whose soundness
//! rests on `SAFETY` arguments rather than on the compiler.
//!
//! Memory figures come from [`alloc::CountingAlloc`], which the binary running the lab installs
//! as its global allocator.

#![warn(missing_docs)]

pub mod alloc;
mod capi;
mod cid;
mod compare;
mod context;
pub mod cputime;
mod declare;
mod goals;
mod io;
mod lease;
mod machine;
pub mod measure;
mod mmcid;
pub mod model;
mod output;
mod percid;
mod pid;
mod process;
mod progress;
mod report;
mod serve;
mod stalls;
mod stats;
mod svg;
mod sys;
mod time;
mod timers;
mod wake;

/// The `wake` experiment's workloads and runners, and the primitives they are built of, for
/// drivers that run one workload alone under a profiler (`examples/wake_*.rs`); not part of the
/// lab's interface.
#[doc(hidden)]
pub use wake::{driver, primitives, workloads};

/// The `percid` experiment's object-cache loop and object, for `examples/percid_pool.rs`; not
/// part of the lab's interface.
#[doc(hidden)]
pub use percid::workloads::{take_give_bursts, Object as PoolObject, CACHE as POOL_CACHE};

// The lab's own tests measure memory too.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: alloc::CountingAlloc = alloc::CountingAlloc;

use std::path::Path;

use serde::Serialize;

pub use compare::compare;
pub use context::Context;
pub use machine::Machine;
pub use model::Section;
use output::Output;
pub use progress::Progress;
pub use stalls::{CpuTimes, Stalls};

/// How big the experiments are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// A few minutes on 2 cores: reduced sizes, 3 repetitions.
    Quick,
    /// The kernel benchmarks' sizes where the machine allows, 5 repetitions.
    Full,
}

impl Scale {
    /// The name shown in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Quick => "quick",
            Scale::Full => "full",
        }
    }

    /// Repetitions per measurement; the median is reported.
    pub fn repetitions(self) -> usize {
        match self {
            Scale::Quick => 3,
            Scale::Full => 5,
        }
    }
}

/// One experiment of the lab.
pub trait Experiment {
    /// The name used on the command line (`idspace bench NAME`).
    fn name(&self) -> &'static str;
    /// One line saying what it measures.
    fn about(&self) -> &'static str;
    /// Runs the experiment; its notes are taken from `cx.notes` into the section.
    fn run(&self, cx: &mut Context) -> Result<Section, String>;
}

/// Every experiment, in report order.
pub fn experiments() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(timers::Timers),
        Box::new(pid::Pids),
        Box::new(cid::Cids),
        Box::new(wake::Wake),
        Box::new(io::Io),
        Box::new(percid::PerCidData),
        Box::new(mmcid::MmCid),
        Box::new(lease::Lease),
        Box::new(serve::Serve),
        Box::new(process::Process),
        Box::new(time::Time),
        Box::new(capi::CApi),
    ]
}

/// The experiments called `names`, in report order (all of them if `names` is empty); an error
/// naming the known experiments if a name is not one of them.
pub fn select(names: &[String]) -> Result<Vec<Box<dyn Experiment>>, String> {
    let all = experiments();
    if let Some(unknown) = names
        .iter()
        .find(|name| !all.iter().any(|e| e.name() == name.as_str()))
    {
        let known: Vec<&str> = all.iter().map(|e| e.name()).collect();
        return Err(format!(
            "unknown experiment \"{unknown}\" (known: {})",
            known.join(", ")
        ));
    }
    Ok(all
        .into_iter()
        .filter(|e| names.is_empty() || names.iter().any(|n| n == e.name()))
        .collect())
}

/// Runs the named experiments (all if `names` is empty) and writes the report into `out`.
///
/// Everything that can be checked before the experiments run is checked first: the names, and
/// that `out` can be created and written. An experiment that fails does not stop the run: its
/// section in the report (and in `results.json`, with no tables) says why, the others go on,
/// and the run then ends with an error naming every experiment that failed.
pub fn run(names: &[String], scale: Scale, out: &Path) -> Result<(), String> {
    let selected = select(names)?;
    run_selected(&selected, scale, out)
}

/// [`run`] over experiments already selected.
fn run_selected(selected: &[Box<dyn Experiment>], scale: Scale, out: &Path) -> Result<(), String> {
    let output = Output::prepare(out)?;
    let machine = Machine::probe();
    let conditions = stalls::Conditions::probe();
    let mut sections = Vec::new();
    let mut failed = Vec::new();
    for experiment in selected {
        eprintln!("== {}: {}", experiment.name(), experiment.about());
        let mut cx = Context::new(machine.clone(), scale, experiment.name());
        let result = experiment.run(&mut cx);
        cx.progress.finish();
        let section = match result {
            Ok(section) => section,
            Err(error) => {
                eprintln!("experiment {} failed: {error}", experiment.name());
                failed.push(format!("{} ({error})", experiment.name()));
                failed_section(experiment.as_ref(), &error, cx.notes)
            }
        };
        output.write_plots(&section)?;
        sections.push(section);
        // Write after every experiment, so an interrupted run keeps what it measured.
        output.write_results(&machine, &conditions, scale, &sections)?;
    }
    eprintln!("report: {}", output.report_path().display());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} experiments failed: {}",
            failed.len(),
            selected.len(),
            failed.join("; ")
        ))
    }
}

/// The section of an experiment that failed: its name and heading, no tables, and the reason
/// first among its notes (after it, the notes it had left before failing).
fn failed_section(experiment: &dyn Experiment, error: &str, notes: Vec<String>) -> Section {
    let mut all = vec![format!("**This experiment failed:** {error}")];
    all.extend(notes);
    Section {
        name: experiment.name().into(),
        title: experiment.about().into(),
        intro: Vec::new(),
        tables: Vec::new(),
        plots: Vec::new(),
        notes: all,
    }
}

#[cfg(test)]
mod run_tests {
    use super::*;

    /// An experiment that leaves a note and fails, or measures nothing and succeeds.
    struct Scripted {
        name: &'static str,
        fails: bool,
    }

    impl Experiment for Scripted {
        fn name(&self) -> &'static str {
            self.name
        }

        fn about(&self) -> &'static str {
            "a scripted experiment"
        }

        fn run(&self, cx: &mut Context) -> Result<Section, String> {
            cx.notes.push(format!("{} started", self.name));
            if self.fails {
                return Err("the store went away".into());
            }
            Ok(Section {
                name: self.name.into(),
                title: "ran".into(),
                intro: Vec::new(),
                tables: Vec::new(),
                plots: Vec::new(),
                notes: std::mem::take(&mut cx.notes),
            })
        }
    }

    #[test]
    fn a_failed_experiment_is_reported_and_the_others_still_run() {
        let dir = std::env::temp_dir().join(format!("idspace-lab-failed-{}", std::process::id()));
        let selected: Vec<Box<dyn Experiment>> = vec![
            Box::new(Scripted {
                name: "first",
                fails: true,
            }),
            Box::new(Scripted {
                name: "second",
                fails: false,
            }),
        ];
        let error = run_selected(&selected, Scale::Quick, &dir).unwrap_err();
        assert_eq!(
            error,
            "1 of 2 experiments failed: first (the store went away)"
        );
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap())
                .unwrap();
        let experiments = results["experiments"].as_array().unwrap();
        assert_eq!(experiments.len(), 2, "the experiment after the failure ran");
        assert_eq!(experiments[0]["name"], "first");
        assert_eq!(
            experiments[0]["notes"][0],
            "**This experiment failed:** the store went away"
        );
        assert_eq!(experiments[0]["notes"][1], "first started");
        assert_eq!(experiments[1]["title"], "ran");
        let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(
            report.contains("This experiment failed:** the store went away"),
            "{report}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
