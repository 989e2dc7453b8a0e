//! The fixed-rate row: p99 when the load is held at half of our service's peak (its median
//! requests/s at 64 connections, one ID a request, from the steady runs), by wrk's paced
//! script (see [`super::wrk`]). Every server gets the same rate, so their columns compare
//! latencies under one load; the naive services are left out, their peak is below it. The
//! `io` experiment's single-thread mio loop joins this row only: HTTP with no runtime, no
//! tasks and no IDs, its p99 is what this machine allows any server at that rate.

use crate::declare::{Measurement, Sweep};
use crate::model::Row;

use super::{inverse, subjects, Kind, Rig, Subject, MIO, OURS, STEAL_ROW, TOKIO};
use crate::goals::Goal;

/// The fraction of the peak the rate holds.
const SHARE: f64 = 0.5;

/// Connections of the paced runs: enough that a burst of one millisecond's slots finds a
/// connection idle.
const CONNECTIONS: usize = 64;

/// The p99 goal at that rate, µs.
const P99_GOAL_US: f64 = 1000.0;

/// The fixed-rate measurement; it reads the peak `rig` recorded in the steady runs.
pub(super) fn fixed<'a>(rig: &'a Rig<'a>) -> Box<dyn Measurement + 'a> {
    let mut paced: Vec<_> = subjects()
        .into_iter()
        .filter(|s| {
            matches!(
                s.kind,
                Kind::Ours | Kind::Tokio | Kind::Hello | Kind::HelloOurs
            )
        })
        .collect();
    paced.push(Subject {
        name: MIO,
        kind: Kind::Mio,
    });
    Sweep::new(
        paced,
        vec![()],
        |_| "fixed rate".into(),
        move |subject, _| {
            let peak = rig
                .peak
                .get()
                .ok_or("no peak of ours was measured to set the rate from")?;
            let load = rig.load(CONNECTIONS, rig.plan.paced_seconds, Some(peak * SHARE));
            rig.measure(subject, load, 1)
        },
    )
    .tables(move |swept, _| {
        let result = swept.only();
        let rate = rig.peak.get().map_or(0.0, |peak| peak * SHARE);
        rig.goals.push(Goal::at_most(
            format!("p99 at a fixed {rate:.0} requests/s (half the peak), ours (µs)"),
            result.metric(3).get(OURS),
            P99_GOAL_US,
            "µs",
        ));
        let rows = vec![
            Row::numbers("requests/s", result.metric(0), 0),
            Row::numbers("p50 (µs)", result.metric(2), 0),
            Row::numbers("p99 (µs)", result.metric(3), 0),
            Row::ratios("p99 vs tokio", inverse(&result.metric(3), TOKIO)),
            Row::numbers("p99.9 (µs)", result.metric(4), 0),
            Row::numbers("server CPU per request (µs)", result.metric(5), 2),
            Row::numbers("errors", result.metric(7), 0),
            Row::numbers(STEAL_ROW, result.metric(8), 1),
        ];
        swept
            .table(
                "fixed",
                format!(
                    "At a fixed rate of {rate:.0} requests/s (half of ours' peak), \
                     {CONNECTIONS} connections, one ID a request, runs of {} s",
                    rig.plan.paced_seconds
                ),
                "requests/s, µs",
                rows,
            )
            .into()
    })
}
