//! An experiment's goals, each with the figure measured for it and whether it was met: the
//! summary table that ends a section, filled in by the measurements as their medians come in.

use std::cell::RefCell;

use crate::model::{Row, Table};

/// One goal and the figure measured for it.
pub(crate) struct Goal {
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
    pub(crate) fn at_least(
        label: impl Into<String>,
        value: Option<f64>,
        bound: f64,
        unit: &'static str,
    ) -> Goal {
        Goal::new(label.into(), value, bound, false, unit)
    }

    /// `value` must be at most `bound`.
    pub(crate) fn at_most(
        label: impl Into<String>,
        value: Option<f64>,
        bound: f64,
        unit: &'static str,
    ) -> Goal {
        Goal::new(label.into(), value, bound, true, unit)
    }

    fn new(
        label: String,
        value: Option<f64>,
        bound: f64,
        at_most: bool,
        unit: &'static str,
    ) -> Goal {
        Goal {
            label,
            value,
            bound,
            at_most,
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

    /// `value` as a ratio (two decimals), or with `decimals` decimals and the goal's unit.
    fn show(&self, value: f64, decimals: usize) -> String {
        match self.unit {
            "x" => format!("{value:.2}x"),
            unit => format!("{value:.decimals$} {unit}"),
        }
    }

    fn row(self, decimals: usize) -> Row {
        let met = self.met();
        let sign = if self.at_most { "≤" } else { "≥" };
        Row {
            text: vec![
                self.value
                    .map_or_else(|| "n/a".into(), |v| self.show(v, decimals)),
                format!("{sign} {}", self.show(self.bound, decimals)),
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
pub(crate) struct Goals(RefCell<Vec<Goal>>);

impl Goals {
    /// Adds `goal` to the summary.
    pub(crate) fn push(&self, goal: Goal) {
        self.0.borrow_mut().push(goal);
    }

    /// The summary table of the goals gathered ([`table`]).
    pub(crate) fn table(&self, unit: &str, decimals: usize) -> Table {
        table(self.0.take(), unit, decimals)
    }
}

/// The summary table: each goal, its figure, its bound and whether it was met; figures other
/// than ratios with `decimals` decimals, `unit` naming the units the table holds.
pub(crate) fn table(goals: Vec<Goal>, unit: &str, decimals: usize) -> Table {
    Table {
        id: "goals".into(),
        title: "Goals: measured, goal, met".into(),
        unit: unit.into(),
        columns: vec!["measured".into(), "goal".into(), "met".into()],
        rows: goals.into_iter().map(|goal| goal.row(decimals)).collect(),
    }
}
