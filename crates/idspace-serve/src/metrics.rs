//! [`Metrics`]: the node's counters, rendered in Prometheus' text format by `GET /metrics`.
//!
//! Every counter is a relaxed atomic: the numbers are read for display only, never to decide
//! anything, so no ordering between them is needed.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The routes counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Segment,
    Ids,
    CreateSpace,
    Health,
    Metrics,
    Other,
}

const ROUTES: [(Route, &str); 6] = [
    (Route::Segment, "segment"),
    (Route::Ids, "ids"),
    (Route::CreateSpace, "create_space"),
    (Route::Health, "healthz"),
    (Route::Metrics, "metrics"),
    (Route::Other, "other"),
];

/// Upper bounds of the latency histogram's buckets, in microseconds.
const BUCKETS_US: [u64; 12] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 50_000, 250_000, 1_000_000,
];

/// Request counters and the latency histogram of the whole node.
pub(crate) struct Metrics {
    requests: [AtomicU64; ROUTES.len()],
    errors: Mutex<Vec<(&'static str, u64)>>,
    /// Requests at or under each bucket's bound (not cumulative; summed when rendered), and
    /// above the last.
    buckets: [AtomicU64; BUCKETS_US.len() + 1],
    latency_ns: AtomicU64,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            requests: Default::default(),
            errors: Mutex::new(Vec::new()),
            buckets: Default::default(),
            latency_ns: AtomicU64::new(0),
        }
    }

    /// Counts one request of `route` answered after `took`, and its error code if it failed.
    pub fn record(&self, route: Route, took: Duration, error: Option<&'static str>) {
        let index = ROUTES.iter().position(|(r, _)| *r == route).unwrap_or(5);
        self.requests[index].fetch_add(1, Ordering::Relaxed);
        let micros = took.as_micros().min(u128::from(u64::MAX)) as u64;
        let bucket = BUCKETS_US
            .iter()
            .position(|bound| micros <= *bound)
            .unwrap_or(BUCKETS_US.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = took.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.latency_ns.fetch_add(nanos, Ordering::Relaxed);
        if let Some(code) = error {
            let mut errors = self.errors.lock().unwrap_or_else(|p| p.into_inner());
            match errors.iter_mut().find(|(c, _)| *c == code) {
                Some((_, count)) => *count += 1,
                None => errors.push((code, 1)),
            }
        }
    }

    /// Appends the node-wide series to `out`.
    pub fn render(&self, out: &mut String) {
        metric(
            out,
            "idspace_serve_requests_total",
            "counter",
            "HTTP requests by route.",
        );
        for (index, (_, name)) in ROUTES.iter().enumerate() {
            let count = self.requests[index].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "idspace_serve_requests_total{{route=\"{name}\"}} {count}"
            );
        }
        metric(
            out,
            "idspace_serve_errors_total",
            "counter",
            "Refused requests by error code.",
        );
        let errors = self
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for (code, count) in errors {
            let _ = writeln!(out, "idspace_serve_errors_total{{code=\"{code}\"}} {count}");
        }
        let name = "idspace_serve_request_duration_seconds";
        metric(
            out,
            name,
            "histogram",
            "Time from a request's head to its answer.",
        );
        let mut cumulative = 0;
        for (index, bound) in BUCKETS_US.iter().enumerate() {
            cumulative += self.buckets[index].load(Ordering::Relaxed);
            let le = *bound as f64 / 1e6;
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        cumulative += self.buckets[BUCKETS_US.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let sum = self.latency_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

/// Writes a series' `HELP` and `TYPE` lines.
pub(crate) fn metric(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Escapes a label value (backslash, quote and newline, as the text format asks).
pub(crate) fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
