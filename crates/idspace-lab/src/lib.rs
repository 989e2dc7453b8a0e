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
mod cid;
mod compare;
mod context;
pub mod cputime;
mod declare;
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
mod stats;
mod svg;
mod sys;
mod time;
mod timers;
mod wake;

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
        Box::new(percid::PerCidData),
        Box::new(mmcid::MmCid),
        Box::new(lease::Lease),
        Box::new(process::Process),
        Box::new(time::Time),
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
/// that `out` can be created and written.
pub fn run(names: &[String], scale: Scale, out: &Path) -> Result<(), String> {
    let selected = select(names)?;
    let output = Output::prepare(out)?;
    let machine = Machine::probe();
    let mut sections = Vec::new();
    for experiment in &selected {
        eprintln!("== {}: {}", experiment.name(), experiment.about());
        let mut cx = Context::new(machine.clone(), scale, experiment.name());
        let section = experiment
            .run(&mut cx)
            .map_err(|e| format!("experiment {} failed: {e}", experiment.name()))?;
        cx.progress.finish();
        output.write_plots(&section)?;
        sections.push(section);
        // Write after every experiment, so an interrupted run keeps what it measured.
        output.write_results(&machine, scale, &sections)?;
    }
    eprintln!("report: {}", output.report_path().display());
    Ok(())
}
