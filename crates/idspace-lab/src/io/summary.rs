//! The experiment's summary: every ratio its goals name, measured in this run, beside the goal.
//! Ratios read above 1 when ours is better: speeds over the peer's, and for times, latencies
//! and CPU costs the peer's over ours.

use idspace::sched::{Policy, DEFAULT_POLLER};

use crate::measure::Values;
use crate::model::{Row, Table};

/// What a ratio is held to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Goal {
    /// At least this much.
    AtLeast(f64),
    /// Reported, with no goal.
    Report,
}

/// One summary line.
struct Line {
    label: String,
    measured: Option<f64>,
    goal: Goal,
}

/// The summary's lines, gathered from every measurement as it is laid out.
#[derive(Default)]
pub(crate) struct Goals(Vec<Line>);

impl Goals {
    /// Adds a line.
    pub(crate) fn push(&mut self, label: String, measured: Option<f64>, goal: Goal) {
        self.0.push(Line {
            label,
            measured,
            goal,
        });
    }

    /// The summary table: the measured ratio, the goal, and whether it was met.
    pub(crate) fn table(self) -> Table {
        let rows = self
            .0
            .into_iter()
            .map(|line| {
                let (goal, met) = match (line.goal, line.measured) {
                    (Goal::AtLeast(goal), Some(measured)) => {
                        (format!("≥ {goal:.2}x"), yes_no(measured >= goal))
                    }
                    (Goal::AtLeast(goal), None) => (format!("≥ {goal:.2}x"), "n/a".into()),
                    (Goal::Report, _) => ("reported".into(), "—".into()),
                };
                Row {
                    label: line.label,
                    values: vec![line.measured, None, None],
                    text: vec![
                        line.measured
                            .map_or_else(|| "n/a".into(), |m| format!("{m:.2}x")),
                        goal,
                        met,
                    ],
                }
            })
            .collect();
        Table {
            id: "summary".into(),
            title: "Summary: each ratio against its goal (above 1 is better for ours: speeds \
                    ours ÷ theirs; times, latencies and CPU costs theirs ÷ ours)"
                .into(),
            unit: "x".into(),
            columns: vec!["measured".into(), "goal".into(), "met".into()],
            rows,
        }
    }
}

fn yes_no(met: bool) -> String {
    if met { "yes" } else { "no" }.into()
}

/// Our fastest configuration in `speed` (higher is better: every policy, and the default
/// build with either poller shape where measured) and its speed, if any has one.
pub(crate) fn best_policy(speed: &Values) -> Option<(&'static str, f64)> {
    Policy::ALL
        .iter()
        .map(|p| p.name())
        .chain([
            super::OURS_DEFAULT,
            super::poller_column(super::other_poller()),
        ])
        .filter_map(|name| speed.get(name).map(|s| (name, s)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The summary line comparing the poller shapes at one point: the column `default` (the
/// runtime as built by default) over the same build with the other shape, both speeds (higher
/// is better), so that it reads above 1 when the default shape is the faster.
pub(crate) fn poller_line(goals: &mut Goals, prefix: &str, default: &str, speed: &Values) {
    let other = super::other_poller();
    goals.push(
        format!("{prefix}: {DEFAULT_POLLER} poller (the default) vs {other} poller"),
        crate::stats::ratio(speed.get(default), speed.get(super::poller_column(other))),
        Goal::Report,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_policy_is_the_fastest_and_goals_are_judged() {
        let speed = Values::new(
            vec!["locked".into(), "wakelist".into(), "tokio".into()],
            vec![Some(1.0), Some(2.0), Some(9.0)],
        );
        assert_eq!(best_policy(&speed), Some(("wakelist", 2.0)));
        let mut goals = Goals::default();
        goals.push("a".into(), Some(1.5), Goal::AtLeast(1.3));
        goals.push("b".into(), Some(1.0), Goal::AtLeast(1.3));
        goals.push("c".into(), None, Goal::AtLeast(1.0));
        goals.push("d".into(), Some(0.5), Goal::Report);
        let table = goals.table();
        let texts: Vec<Vec<&str>> = table
            .rows
            .iter()
            .map(|r| r.text.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            texts,
            [
                ["1.50x", "≥ 1.30x", "yes"],
                ["1.00x", "≥ 1.30x", "no"],
                ["n/a", "≥ 1.00x", "n/a"],
                ["0.50x", "reported", "—"],
            ]
        );
    }
}
