//! The service's goals, each with the figure measured for it and whether it was met: the
//! section's summary table, filled in by the measurements as their medians come in.

use std::cell::RefCell;

use crate::model::{Row, Table};

/// One goal and the figure measured for it.
pub(super) struct Goal {
    label: String,
    value: Option<f64>,
    bound: f64,
    /// Whether the value must stay at or below the bound (else at or above).
    at_most: bool,
    /// `"x"` for ratios, else the unit shown after the number.
    unit: &'static str,
}

impl Goal {
    /// `value` must be at least `bound`.
    pub(super) fn at_least(
        label: impl Into<String>,
        value: Option<f64>,
        bound: f64,
        unit: &'static str,
    ) -> Goal {
        Goal {
            label: label.into(),
            value,
            bound,
            at_most: false,
            unit,
        }
    }

    /// `value` must be at most `bound`.
    pub(super) fn at_most(
        label: impl Into<String>,
        value: Option<f64>,
        bound: f64,
        unit: &'static str,
    ) -> Goal {
        Goal {
            label: label.into(),
            value,
            bound,
            at_most: true,
            unit,
        }
    }

    fn met(&self) -> Option<bool> {
        self.value.map(|v| {
            if self.at_most {
                v <= self.bound
            } else {
                v >= self.bound
            }
        })
    }

    fn show(&self, value: f64) -> String {
        match self.unit {
            "x" => format!("{value:.2}x"),
            unit => format!("{value:.0} {unit}"),
        }
    }

    fn row(self) -> Row {
        let met = self.met();
        let sign = if self.at_most { "≤" } else { "≥" };
        Row {
            text: vec![
                self.value.map_or_else(|| "n/a".into(), |v| self.show(v)),
                format!("{sign} {}", self.show(self.bound)),
                match met {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "n/a".into(),
                },
            ],
            values: vec![self.value, Some(self.bound), met.map(f64::from)],
            label: self.label,
        }
    }
}

/// The goals gathered so far.
#[derive(Default)]
pub(super) struct Goals(RefCell<Vec<Goal>>);

impl Goals {
    /// Adds `goal` to the summary.
    pub(super) fn push(&self, goal: Goal) {
        self.0.borrow_mut().push(goal);
    }

    /// The summary table: each goal, its figure, its bound and whether it was met.
    pub(super) fn table(&self) -> Table {
        Table {
            id: "goals".into(),
            title: "Goals: measured, goal, met".into(),
            unit: "x / µs / errors".into(),
            columns: vec!["measured".into(), "goal".into(), "met".into()],
            rows: self.0.take().into_iter().map(Goal::row).collect(),
        }
    }
}
