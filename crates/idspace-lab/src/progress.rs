//! Progress reporting: an indicatif bar on a terminal, plain lines otherwise (CI logs).

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

/// Progress through one experiment's steps.
pub struct Progress {
    bar: Option<ProgressBar>,
    name: String,
    total: u64,
    done: u64,
    started: Instant,
}

impl Progress {
    /// Starts showing progress through experiment `name`; its number of steps comes with
    /// [`Progress::set_total`].
    pub fn new(name: &str) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            let style = ProgressStyle::with_template(
                "{prefix:>8} [{elapsed_precise}] [{bar:32.cyan/blue}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(name.to_string());
            bar
        });
        Progress {
            bar,
            name: name.to_string(),
            total: 0,
            done: 0,
            started: Instant::now(),
        }
    }

    /// Sets the number of steps the experiment will announce.
    pub fn set_total(&mut self, total: u64) {
        self.total = total;
        if let Some(bar) = &self.bar {
            bar.set_length(total);
        }
    }

    /// Announces the step about to run.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        match &self.bar {
            Some(bar) => {
                bar.set_message(what.to_string());
                bar.set_position(self.done - 1);
            }
            None => eprintln!(
                "[{} {:>3}/{} {:>6.1}s] {what}",
                self.name,
                self.done,
                self.total,
                self.started.elapsed().as_secs_f64()
            ),
        }
    }

    /// Ends the experiment's progress display.
    pub fn finish(&self) {
        match &self.bar {
            Some(bar) => bar.finish_with_message("done"),
            None => eprintln!(
                "[{}] done in {:.1}s",
                self.name,
                self.started.elapsed().as_secs_f64()
            ),
        }
    }
}
