//! What every experiment works with: the machine, the scale, the progress display and the
//! notes, and the one way to measure candidates.

use crate::machine::Machine;
use crate::measure::{medians, Candidate, Medians};
use crate::progress::Progress;
use crate::Scale;

/// One experiment's context: facts about the machine (its CPU count among them: experiments
/// size their worker pools from it instead of probing again), the scale, the progress display
/// and the notes that end up below the experiment's tables.
pub struct Context {
    /// The machine the lab runs on.
    pub machine: Machine,
    /// How big the experiments are.
    pub scale: Scale,
    /// The experiment's progress display.
    pub progress: Progress,
    /// Markdown paragraphs for the report, after the tables: failures, caveats, limits met.
    pub notes: Vec<String>,
}

impl Context {
    /// A context for experiment `name`.
    pub fn new(machine: Machine, scale: Scale, name: &str) -> Context {
        Context {
            machine,
            scale,
            progress: Progress::new(name),
            notes: Vec::new(),
        }
    }

    /// CPUs available to the lab.
    pub fn cpus(&self) -> usize {
        self.machine.cpus
    }

    /// Repetitions per measurement; the median is reported.
    pub fn repetitions(&self) -> usize {
        self.scale.repetitions()
    }

    /// `", oversubscribed"` when `threads` outnumber the machine's CPUs, else `""`: every
    /// table whose runs use more threads than cores says so.
    pub fn oversubscribed(&self, threads: usize) -> &'static str {
        if threads > self.cpus() {
            ", oversubscribed"
        } else {
            ""
        }
    }

    /// Measures every candidate with `run` ([`Context::repetitions`] times, interleaved) and
    /// returns the medians of each metric `run` returns. Each run is one progress step, labelled
    /// `label` and the candidate's name; a candidate whose run fails gets no values from then
    /// on, and a note saying why.
    pub fn measure<C: Candidate>(
        &mut self,
        candidates: &[C],
        label: &str,
        run: impl FnMut(&C) -> Result<Vec<f64>, String>,
    ) -> Medians {
        medians(
            candidates,
            self.scale.repetitions(),
            &mut self.progress,
            label,
            &mut self.notes,
            run,
        )
    }
}
