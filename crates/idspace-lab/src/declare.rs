//! How an experiment declares what it measures, and the one runner that measures it.
//!
//! An experiment states its section's heading and text, and a list of [`Measurement`]s. Most
//! are [`Sweep`]s: the subjects (the table's columns: our designs, the peers, the kernel; adding
//! a subject is one entry in the experiment's list), the points it varies (thread counts,
//! sizes, loads), the measure (a closure returning a run's metrics), and how the medians become
//! tables and plots (rows of numbers, and ratios over a named reference column). The runner
//! counts the progress steps from the declaration, runs every sweep (repetitions, interleaving
//! and medians are [`Context::measure`]'s), and assembles the [`Section`].

use crate::measure::{medians, names, Candidate, Medians, Values};
use crate::model::{Plot, Row, Section, Series, Table};
use crate::Context;

/// One experiment, declared: the section's heading and text, and what it measures, in report
/// order.
pub(crate) struct Declared<'a> {
    /// The experiment's name on the command line.
    pub name: &'static str,
    /// The report heading.
    pub title: String,
    /// Paragraphs before the tables.
    pub intro: Vec<String>,
    /// The measurements, in the order their tables appear.
    pub measurements: Vec<Box<dyn Measurement + 'a>>,
    /// Paragraphs after the tables, after the notes the measurements left (failures, limits).
    pub notes: Vec<String>,
}

/// What a measurement adds to its section.
#[derive(Default)]
pub(crate) struct Produced {
    /// Its tables, in report order.
    pub tables: Vec<Table>,
    /// Its plots.
    pub plots: Vec<Plot>,
}

impl From<Table> for Produced {
    fn from(table: Table) -> Produced {
        Produced {
            tables: vec![table],
            plots: Vec::new(),
        }
    }
}

impl From<Vec<Table>> for Produced {
    fn from(tables: Vec<Table>) -> Produced {
        Produced {
            tables,
            plots: Vec::new(),
        }
    }
}

/// One part of an experiment: it knows how many progress steps it will announce before it
/// runs, so that the runner can show the experiment's total.
pub(crate) trait Measurement {
    /// The progress steps it announces with `repetitions` repetitions.
    fn steps(&self, repetitions: usize) -> usize;
    /// Measures, and turns the results into tables and plots.
    fn run(self: Box<Self>, cx: &mut Context) -> Produced;
}

/// Runs a declared experiment: sets the progress total from the declaration, runs every
/// measurement in order and assembles the section.
pub(crate) fn run(cx: &mut Context, declared: Declared) -> Section {
    let repetitions = cx.repetitions();
    let total: usize = declared
        .measurements
        .iter()
        .map(|m| m.steps(repetitions))
        .sum();
    cx.progress.set_total(total as u64);
    let mut section = Section {
        name: declared.name.into(),
        title: declared.title,
        intro: declared.intro,
        tables: Vec::new(),
        plots: Vec::new(),
        notes: Vec::new(),
    };
    for measurement in declared.measurements {
        let produced = measurement.run(cx);
        section.tables.extend(produced.tables);
        section.plots.extend(produced.plots);
    }
    section.notes = std::mem::take(&mut cx.notes);
    section.notes.extend(declared.notes);
    section
}

/// The measure of a sweep: one run of a subject at a point, returning its metrics (`NaN` for
/// a metric that does not apply to the subject).
type Measure<'a, S, P> = Box<dyn FnMut(&S, &P) -> Result<Vec<f64>, String> + 'a>;

/// How a sweep's medians become tables and plots.
type Tabulate<'a, P> = Box<dyn FnOnce(&Swept<P>, &Context) -> Produced + 'a>;

/// Every subject measured at every point, each run repeated and the medians kept; it becomes a
/// [`Measurement`] once [`Sweep::tables`] says how its results are laid out.
pub(crate) struct Sweep<'a, S, P> {
    subjects: Vec<S>,
    points: Vec<P>,
    label: Box<dyn Fn(&P) -> String + 'a>,
    measure: Measure<'a, S, P>,
    /// Repetitions of every run, when not the scale's.
    repetitions: Option<usize>,
}

impl<'a, S: Candidate + 'a, P: 'a> Sweep<'a, S, P> {
    /// Measures `subjects` at every one of `points` with `measure`; `label` names a point in
    /// the progress display and in failure notes.
    pub fn new(
        subjects: Vec<S>,
        points: Vec<P>,
        label: impl Fn(&P) -> String + 'a,
        measure: impl FnMut(&S, &P) -> Result<Vec<f64>, String> + 'a,
    ) -> Sweep<'a, S, P> {
        Sweep {
            subjects,
            points,
            label: Box::new(label),
            measure: Box::new(measure),
            repetitions: None,
        }
    }

    /// The sweep with every run repeated `repetitions` times instead of the scale's count: for
    /// runs whose length is fixed from outside (a load generator's duration, a kernel
    /// benchmark's own size), where the scale's count would not fit its time.
    pub fn repetitions(mut self, repetitions: usize) -> Sweep<'a, S, P> {
        self.repetitions = Some(repetitions.max(1));
        self
    }

    /// The sweep with its results laid out by `tabulate`, ready for a declaration.
    pub fn tables(
        self,
        tabulate: impl FnOnce(&Swept<P>, &Context) -> Produced + 'a,
    ) -> Box<dyn Measurement + 'a> {
        Box::new(Tabulated {
            sweep: self,
            tabulate: Box::new(tabulate),
        })
    }

    /// Measures every subject at every point.
    fn measure(mut self, cx: &mut Context) -> Swept<P> {
        let mut results = Vec::with_capacity(self.points.len());
        for point in self.points {
            let label = (self.label)(&point);
            let measure = &mut self.measure;
            let run = |s: &S| measure(s, &point);
            let found = match self.repetitions {
                Some(repetitions) => medians(
                    &self.subjects,
                    repetitions,
                    &mut cx.progress,
                    &label,
                    &mut cx.notes,
                    run,
                ),
                None => cx.measure(&self.subjects, &label, run),
            };
            results.push((point, found));
        }
        Swept {
            columns: names(&self.subjects),
            results,
        }
    }
}

/// A sweep and how its results are laid out.
struct Tabulated<'a, S, P> {
    sweep: Sweep<'a, S, P>,
    tabulate: Tabulate<'a, P>,
}

impl<S: Candidate, P> Measurement for Tabulated<'_, S, P> {
    fn steps(&self, repetitions: usize) -> usize {
        let repetitions = self.sweep.repetitions.unwrap_or(repetitions);
        repetitions * self.sweep.subjects.len() * self.sweep.points.len()
    }

    fn run(self: Box<Self>, cx: &mut Context) -> Produced {
        let swept = self.sweep.measure(cx);
        (self.tabulate)(&swept, cx)
    }
}

/// A sweep's results: the subjects' medians at every point.
pub(crate) struct Swept<P> {
    /// The subjects' names, in column order.
    pub columns: Vec<String>,
    /// Each point with its medians, in the declared order.
    pub results: Vec<(P, Medians)>,
}

impl<P> Swept<P> {
    /// The medians at the first point (the one point of a sweep that varies nothing).
    pub fn only(&self) -> &Medians {
        &self.results[0].1
    }

    /// Metric `metric` at every point.
    pub fn values(&self, metric: usize) -> impl Iterator<Item = (&P, Values)> + '_ {
        self.results.iter().map(move |(p, m)| (p, m.metric(metric)))
    }

    /// One row of numbers per point: metric `metric`, labelled `label(point)`.
    pub fn numbers(&self, metric: usize, digits: usize, label: impl Fn(&P) -> String) -> Vec<Row> {
        self.values(metric)
            .map(|(p, v)| Row::numbers(label(p), v, digits))
            .collect()
    }

    /// One ratio row per point: metric `metric` over the column called `reference`.
    pub fn ratios(&self, metric: usize, reference: &str, label: impl Fn(&P) -> String) -> Vec<Row> {
        self.values(metric)
            .map(|(p, v)| Row::ratios(label(p), v.over(reference)))
            .collect()
    }

    /// One plot series per column: metric `metric` against `x(point)`, where it has a value.
    pub fn series(&self, metric: usize, x: impl Fn(&P) -> f64) -> Vec<Series> {
        self.columns
            .iter()
            .map(|name| Series {
                name: name.clone(),
                points: self
                    .values(metric)
                    .filter_map(|(p, v)| v.get(name).map(|y| (x(p), y)))
                    .collect(),
            })
            .collect()
    }

    /// A table of this sweep's columns.
    pub fn table(&self, id: impl Into<String>, title: String, unit: &str, rows: Vec<Row>) -> Table {
        Table {
            id: id.into(),
            title,
            unit: unit.into(),
            columns: self.columns.clone(),
            rows,
        }
    }
}

/// A measurement that is not a sweep (a trace, a probe): `steps` progress steps announced by
/// `run` itself.
pub(crate) struct Custom<'a> {
    steps: usize,
    run: Box<dyn FnOnce(&mut Context) -> Produced + 'a>,
}

/// A measurement that is not a sweep: it announces `steps` progress steps (whatever the
/// repetitions) itself, in `run`.
pub(crate) fn custom<'a>(
    steps: usize,
    run: impl FnOnce(&mut Context) -> Produced + 'a,
) -> Box<dyn Measurement + 'a> {
    Box::new(Custom {
        steps,
        run: Box::new(run),
    })
}

impl Measurement for Custom<'_> {
    fn steps(&self, _repetitions: usize) -> usize {
        self.steps
    }

    fn run(self: Box<Self>, cx: &mut Context) -> Produced {
        (self.run)(cx)
    }
}

/// A plot's frame: its file, title, axes and scales; the series come from the measurement.
pub(crate) struct Axes {
    /// File name of the SVG.
    pub file: String,
    /// Title drawn above the plot.
    pub title: String,
    /// The x axis's label, and whether it is logarithmic.
    pub x: (&'static str, bool),
    /// The y axis's label, and whether it is logarithmic.
    pub y: (String, bool),
}

impl Axes {
    /// The plot of `series` in this frame.
    pub fn plot(self, series: Vec<Series>) -> Plot {
        Plot {
            file: self.file,
            title: self.title,
            x_label: self.x.0.into(),
            y_label: self.y.0,
            log_x: self.x.1,
            log_y: self.y.1,
            series,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Machine;
    use crate::Scale;

    #[test]
    fn the_runner_counts_steps_and_lays_out_sweeps() {
        let machine = Machine::probe();
        let mut cx = Context::new(machine, Scale::Quick, "test");
        let sweep = Sweep::new(
            vec!["a", "b"],
            vec![1usize, 10],
            |p| format!("{p} things"),
            |&s, &p| match s {
                "a" => Ok(vec![p as f64]),
                _ => Ok(vec![2.0 * p as f64]),
            },
        )
        .tables(|swept, _| {
            let mut rows = swept.numbers(0, 0, |p| format!("at {p}"));
            rows.extend(swept.ratios(0, "a", |p| format!("at {p} ÷ a")));
            Produced {
                tables: vec![swept.table("t", "T".into(), "x", rows)],
                plots: vec![Axes {
                    file: "t.svg".into(),
                    title: "T".into(),
                    x: ("things", true),
                    y: ("x".into(), false),
                }
                .plot(swept.series(0, |&p| p as f64))],
            }
        });
        assert_eq!(sweep.steps(3), 12);
        let once = Sweep::new(
            vec!["a"],
            vec![1usize],
            |_| "once".into(),
            |_, _| Ok(vec![1.0]),
        )
        .repetitions(1)
        .tables(|_, _| Produced::default());
        assert_eq!(once.steps(3), 1);
        let section = run(
            &mut cx,
            Declared {
                name: "test",
                title: "Test".into(),
                intro: Vec::new(),
                measurements: vec![sweep, custom(1, |_| Produced::default())],
                notes: vec!["after".into()],
            },
        );
        let table = &section.tables[0];
        assert_eq!(table.columns, vec!["a", "b"]);
        let labels: Vec<&str> = table.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["at 1", "at 10", "at 1 ÷ a", "at 10 ÷ a"]);
        assert_eq!(table.rows[1].values, vec![Some(10.0), Some(20.0)]);
        assert_eq!(table.rows[3].values, vec![Some(1.0), Some(2.0)]);
        assert_eq!(
            section.plots[0].series[1].points,
            vec![(1.0, 2.0), (10.0, 20.0)]
        );
        assert_eq!(section.notes, vec!["after".to_string()]);
    }
}
