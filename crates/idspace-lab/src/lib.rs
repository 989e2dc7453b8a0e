//! The idspace lab: runs experiments against every design of the `idspace` crate, the peers a
//! user would pick instead, and the Linux kernel on this machine, all in one run, and writes
//! `report.md`, `results.json` and SVG plots. The `idspace bench` command is its front end.
//!
//! An experiment is an [`Experiment`]: it receives a [`Context`] (the machine, the [`Scale`],
//! a [`Progress`] display, the notes, and [`Context::measure`], the one way to measure its
//! candidates) and returns a [`Section`] of tables, plots and notes. Adding an experiment means
//! adding a module and a line to [`experiments`].
//!
//! Memory figures come from [`alloc::CountingAlloc`], which the binary running the lab installs
//! as its global allocator.

#![warn(missing_docs)]

pub mod alloc;
mod cid;
mod context;
mod machine;
pub mod measure;
pub mod model;
mod pid;
mod progress;
mod report;
mod stats;
mod svg;
mod timers;
mod wake;

// The lab's own tests measure memory too.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: alloc::CountingAlloc = alloc::CountingAlloc;

use std::fs;
use std::path::Path;

use serde::Serialize;

pub use context::Context;
pub use machine::Machine;
pub use model::Section;
pub use progress::Progress;

/// How big the experiments are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// A few minutes on 2 cores: reduced sizes, 3 repetitions.
    Quick,
    /// The seeds' sizes where the machine allows, 5 repetitions.
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
    ]
}

#[derive(Serialize)]
struct Results<'a> {
    machine: &'a Machine,
    scale: Scale,
    experiments: &'a [Section],
}

/// Runs the named experiments (all if `names` is empty) and writes the report into `out`.
pub fn run(names: &[String], scale: Scale, out: &Path) -> Result<(), String> {
    let all = experiments();
    let known: Vec<&str> = all.iter().map(|e| e.name()).collect();
    for name in names {
        if !known.contains(&name.as_str()) {
            return Err(format!(
                "unknown experiment \"{name}\" (known: {})",
                known.join(", ")
            ));
        }
    }
    fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let machine = Machine::probe();
    let mut sections = Vec::new();
    for experiment in all
        .iter()
        .filter(|e| names.is_empty() || names.iter().any(|n| n == e.name()))
    {
        eprintln!("== {}: {}", experiment.name(), experiment.about());
        let mut cx = Context::new(machine.clone(), scale, experiment.name());
        let section = experiment
            .run(&mut cx)
            .map_err(|e| format!("experiment {} failed: {e}", experiment.name()))?;
        cx.progress.finish();
        for plot in &section.plots {
            let path = out.join(&plot.file);
            fs::write(&path, svg::render(plot))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        sections.push(section);
        // Write after every experiment, so an interrupted run keeps what it measured.
        write_outputs(out, &machine, scale, &sections)?;
    }
    eprintln!("report: {}", out.join("report.md").display());
    Ok(())
}

fn write_outputs(
    out: &Path,
    machine: &Machine,
    scale: Scale,
    sections: &[Section],
) -> Result<(), String> {
    let report = report::render(machine, scale.name(), sections);
    let report_path = out.join("report.md");
    fs::write(&report_path, report)
        .map_err(|e| format!("cannot write {}: {e}", report_path.display()))?;
    let results = Results {
        machine,
        scale,
        experiments: sections,
    };
    let json = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
    let json_path = out.join("results.json");
    fs::write(&json_path, json).map_err(|e| format!("cannot write {}: {e}", json_path.display()))
}
