//! [`Metrics`]: the node's counters, rendered in Prometheus' text format by `GET /metrics`.
//!
//! Every request writes its route's count, its latency bucket and the latency sum. As shared
//! atomics those lines would bounce between the workers at every request; they are per-CID
//! counters instead ([`PerCidCounter`], one slot per concurrency ID of the kernel's, added to
//! with an rseq section, no atomic read-modify-write), summed only when `/metrics` is read.
//! The numbers are read for display only, never to decide anything, so no ordering between
//! them is needed.

use idspace::percid::PerCidCounter;
use std::fmt::Write;
use std::sync::Mutex;

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
    requests: [PerCidCounter; ROUTES.len()],
    errors: Mutex<Vec<(&'static str, u64)>>,
    /// Requests at or under each bucket's bound (not cumulative; summed when rendered), and
    /// above the last.
    buckets: [PerCidCounter; BUCKETS_US.len() + 1],
    latency_ns: PerCidCounter,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            requests: std::array::from_fn(|_| PerCidCounter::new()),
            errors: Mutex::new(Vec::new()),
            buckets: std::array::from_fn(|_| PerCidCounter::new()),
            latency_ns: PerCidCounter::new(),
        }
    }

    /// Counts one request of `route` answered after `nanos` nanoseconds, and its error code if
    /// it failed.
    pub fn record(&self, route: Route, nanos: u64, error: Option<&'static str>) {
        // `ROUTES` lists the routes in their declaration order (checked by a test).
        self.requests[route as usize].add(1);
        let micros = nanos / 1_000;
        let bucket = BUCKETS_US
            .iter()
            .position(|bound| micros <= *bound)
            .unwrap_or(BUCKETS_US.len());
        self.buckets[bucket].add(1);
        self.latency_ns.add(nanos);
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
            let count = self.requests[index].sum();
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
            cumulative += self.buckets[index].sum();
            let le = *bound as f64 / 1e6;
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        cumulative += self.buckets[BUCKETS_US.len()].sum();
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let sum = self.latency_ns.sum() as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock `Instant` reads, as one integer, so that a
/// request's latency is a subtraction (`Instant::elapsed` reads the clock through a checked
/// seconds-and-nanoseconds difference and a 128-bit conversion, twice per request).
pub(crate) fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a live, writable timespec for the whole call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    if rc != 0 {
        // It cannot fail on Linux for this clock and a valid pointer; 0 would only make one
        // latency wrong, never a decision.
        return 0;
    }
    (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward() {
        let before = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let after = monotonic_ns();
        assert!(after >= before + 2_000_000, "{before} {after}");
    }

    #[test]
    fn routes_are_listed_in_declaration_order() {
        for (index, (route, _)) in ROUTES.iter().enumerate() {
            assert_eq!(*route as usize, index, "{route:?}");
        }
    }

    #[test]
    fn a_request_counts_in_its_route_and_bucket() {
        let metrics = Metrics::new();
        metrics.record(Route::Ids, 30_000, None);
        metrics.record(Route::Other, 5_000_000_000, Some("not_found"));
        let mut out = String::new();
        metrics.render(&mut out);
        assert!(
            out.contains("idspace_serve_requests_total{route=\"ids\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("idspace_serve_requests_total{route=\"other\"} 1\n"),
            "{out}"
        );
        assert!(out.contains("{le=\"0.000025\"} 0\n"), "{out}");
        assert!(out.contains("{le=\"0.00005\"} 1\n"), "{out}");
        assert!(out.contains("{le=\"1\"} 1\n"), "{out}");
        assert!(out.contains("{le=\"+Inf\"} 2\n"), "{out}");
        assert!(
            out.contains("idspace_serve_errors_total{code=\"not_found\"} 1\n"),
            "{out}"
        );
    }
}
