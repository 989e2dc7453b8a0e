//! Experiment `io`: the wakelist patch's own benchmarks over real file descriptors ("sched:
//! Remove the limitation of WF_ON_CPU on wakelist if wakee cpu is idle", Linux 6.0, measured
//! hackbench and UnixBench's pipe-based context switching), and an HTTP server on top.
//!
//! Every wakeup these workloads measure comes from a file descriptor becoming readable or
//! writable, so here they run through each runtime's reactor: ours (each wakeup policy) and
//! tokio's multi-thread runtime with its own `net` types, on the same worker count and the same
//! futures ([`channel`] gives each runtime its channel type); beside them the kernel, as OS
//! threads of the lab blocking in `read`/`write`, and the kernel's own `hackbench` from
//! `rt-tests` as a process. HTTP puts one hyper hello-world service on our runtime and on tokio,
//! and a bare mio loop as the practical limit, and drives each with `wrk`.
//!
//! Where we differ from the patch's runs: a user-space runtime's "CPU" is a worker, and the
//! machine has 2 of them, not 104; the placement that makes the wakelist matter, a wakee queued
//! on another, idle CPU, is forced (`Placement::Remote`) for the messaging workloads, so that
//! the policies are compared on the path the patch changed.

mod channel;
pub(crate) mod http;
mod kernel;
mod messaging;
mod ours;
mod runner;
mod summary;
pub(crate) mod tools;
mod workloads;

use std::cell::RefCell;

use idspace::sched::{Policy, Poller, Stats, DEFAULT_POLLER};

use crate::declare::{self, custom, Declared};
use crate::measure::Values;
use crate::model::Section;
use crate::sys::thread::CpuSet;
use crate::{Context, Experiment, Scale};
use summary::Goals;
use tools::Mode;

/// The experiment.
pub struct Io;

/// A column of the experiment's tables.
#[derive(Clone, Copy)]
pub(crate) enum Subject {
    /// Our runtime under a wakeup policy (for the messaging workloads with the placement that
    /// sends every wakeup to another worker, for HTTP with the kernel's).
    Ours(Policy),
    /// Our runtime as built by default: the `wakelist` policy and the kernel's placement (the
    /// wakee of a running task runs next on the waker's worker), beside the forced-remote
    /// columns of the messaging workloads.
    OursDefault,
    /// The default build with the other poller shape ([`other_poller`]): the column that
    /// compares the two.
    OursPoller(Poller),
    /// tokio's multi-thread runtime.
    Tokio,
    /// OS threads of the lab blocking in system calls.
    Kernel,
    /// The real `hackbench` from `rt-tests`.
    Hackbench(Mode),
    /// The single-thread mio loop (HTTP only).
    Mio,
}

/// The reference columns of the ratio rows.
pub(crate) const LOCKED: &str = "locked";
pub(crate) const TOKIO: &str = "tokio";
pub(crate) const KERNEL: &str = "kernel";
pub(crate) const HACKBENCH_T: &str = "hackbench -T";
pub(crate) const MIO: &str = "mio loop";
pub(crate) const OURS_DEFAULT: &str = "wakelist, kernel placement";
pub(crate) const OURS_SHARED: &str = "wakelist, kernel placement, shared poller";
pub(crate) const OURS_PER_WORKER: &str = "wakelist, kernel placement, per-worker pollers";

/// The poller shape that is not the default: its column is the default build with it.
pub(crate) fn other_poller() -> Poller {
    Poller::ALL
        .into_iter()
        .find(|poller| *poller != DEFAULT_POLLER)
        .unwrap_or(DEFAULT_POLLER)
}

/// The name of the column that runs the default build with `poller`.
pub(crate) fn poller_column(poller: Poller) -> &'static str {
    if poller == Poller::Shared {
        OURS_SHARED
    } else {
        OURS_PER_WORKER
    }
}

impl crate::measure::Candidate for Subject {
    fn name(&self) -> &str {
        match self {
            Subject::Ours(policy) => policy.name(),
            Subject::OursDefault => OURS_DEFAULT,
            Subject::OursPoller(poller) => poller_column(*poller),
            Subject::Tokio => TOKIO,
            Subject::Kernel => KERNEL,
            Subject::Hackbench(Mode::Threads) => HACKBENCH_T,
            Subject::Hackbench(Mode::Processes) => "hackbench -P",
            Subject::Mio => MIO,
        }
    }
}

/// Our runtime under every policy (forced-remote) and as built by default, then tokio.
fn runtimes() -> Vec<Subject> {
    let mut all: Vec<Subject> = Policy::ALL.into_iter().map(Subject::Ours).collect();
    all.extend([
        Subject::OursDefault,
        Subject::OursPoller(other_poller()),
        Subject::Tokio,
    ]);
    all
}

/// How big each part is.
struct Plan {
    /// hackbench's (groups, loops) points.
    hackbench: Vec<(usize, usize)>,
    /// Repetitions of a hackbench run when not the scale's (the patch series' own size,
    /// `-g 1 -l 100000`, runs long).
    hackbench_repetitions: Option<usize>,
    /// Round trips of one context-switching run.
    switches: u64,
    /// The HTTP runs.
    http: http::Plan,
}

impl Plan {
    fn new(scale: Scale) -> Plan {
        match scale {
            // Cells of a few hundred ms: this machine loses its CPUs for milliseconds at a
            // time (the report's stall paragraph), and cells of 10-50 ms moved by half
            // between runs.
            Scale::Quick => Plan {
                hackbench: vec![(1, 400), (4, 100)],
                hackbench_repetitions: None,
                switches: 20_000,
                http: http::Plan::quick(),
            },
            Scale::Full => Plan {
                hackbench: vec![(1, 100_000), (4, 25_000)],
                hackbench_repetitions: Some(1),
                switches: 500_000,
                http: http::Plan::full(),
            },
        }
    }
}

/// The share (%) of our runtime's wakeups that went through a wakelist.
pub(crate) fn wakelist_share(stats: Option<&Stats>) -> f64 {
    stats.map_or(f64::NAN, |s| {
        let wakeups = s.affine + s.local + s.locked + s.wakelist;
        100.0 * s.wakelist as f64 / wakeups.max(1) as f64
    })
}

/// `1 / v` for each value: a time or a cost turned into a speed, so that ratios over a peer
/// read above 1 when ours is better. A value that is not positive (nothing measured) has no
/// reciprocal: its cell, and every ratio over it, shows n/a.
pub(crate) fn reciprocals(values: &Values) -> Values {
    let cells = values
        .cells()
        .iter()
        .map(|v| v.filter(|v| *v > 0.0 && v.is_finite()).map(|v| 1.0 / v))
        .collect();
    Values::new(values.names().to_vec(), cells)
}

/// Runs `f` with the calling thread pinned to `cpu` (threads and processes it starts inherit
/// that), then restores its affinity; `None` runs it unpinned. An error if the pinning did not
/// take.
pub(crate) fn on_cpu<T>(cpu: Option<usize>, f: impl FnOnce() -> T) -> Result<T, String> {
    let Some(cpu) = cpu else {
        return Ok(f());
    };
    let before = CpuSet::current().ok_or("cannot read the lab's CPU affinity")?;
    CpuSet::only(cpu).apply();
    if CpuSet::current().map(|set| set.cpus()) != Some(vec![cpu]) {
        before.apply();
        return Err(format!("cannot pin to CPU {cpu}"));
    }
    let result = f();
    before.apply();
    Ok(result)
}

impl Experiment for Io {
    fn name(&self) -> &'static str {
        "io"
    }

    fn about(&self) -> &'static str {
        "runtime I/O: hackbench and pipe context switching over real fds, and HTTP under wrk, ours vs tokio vs the kernel"
    }

    fn run(&self, cx: &mut Context) -> Result<Section, String> {
        let plan = Plan::new(cx.scale);
        let workers = cx.cpus();
        let goals = RefCell::new(Goals::default());
        let hackbench_tool = tools::locate("hackbench", "rt-tests");
        let wrk_tool = tools::locate("wrk", "wrk");
        let mut notes = Vec::new();
        if let Err(reason) = &hackbench_tool {
            notes.push(format!("*hackbench -T / -P:* n/a: {reason}."));
        }
        let mut measurements =
            messaging::measurements(&plan, workers, hackbench_tool.as_ref().ok(), &goals);
        measurements.push(http::measurement(
            plan.http, cx, wrk_tool, &goals, &mut notes,
        ));
        measurements.push(custom(0, |_| goals.take().table().into()));
        let declared = Declared {
            name: self.name(),
            title:
                "Runtime I/O: hackbench, pipe context switching and HTTP over real file descriptors"
                    .into(),
            intro: intro(cx, workers),
            measurements,
            notes,
        };
        Ok(declare::run(cx, declared))
    }
}

/// A poller shape as the report describes it.
fn poller_shape(poller: Poller) -> &'static str {
    if poller == Poller::Shared {
        "one shared poller"
    } else {
        "a poller per worker"
    }
}

fn intro(cx: &Context, workers: usize) -> Vec<String> {
    vec![
        format!(
            "Every workload runs in one process, interleaved: on our runtime under each wakeup policy (`locked`, `wakelist`, `wakelist-always`) and on tokio's multi-thread runtime, each with {workers} workers and its own reactor and file-descriptor types (tokio's `net`), running the same futures; on the kernel, as OS threads of the lab blocking in `read`/`write`; and, for hackbench, the kernel's own `hackbench` from `rt-tests` in threads (`-T`) and processes (`-P`) mode. The machine has {} CPUs. Scale: {}; {} repetitions, medians shown, unless a table says otherwise.",
            cx.cpus(),
            cx.scale.name(),
            cx.repetitions()
        ),
        "**hackbench** is the wakelist patch's shape exactly: a group is 20 senders and 20 receivers; each receiver owns one socketpair (`AF_UNIX`, `SOCK_STREAM`) or, in the second table, one pipe, and all 20 senders write into it; each sender writes `-l` 100-byte messages to every receiver of its group, round-robin, and each receiver reads 100 bytes at a time until it has them all. The time runs from the first spawn (hackbench: its start signal) until every task has finished. **Context switching** is UnixBench's pipe-based test: two tasks bounce a counter through two pipes, each checking it. In both, our runtime uses the placement that sends every wakeup to another worker (`Placement::Remote`: the kernel's wakee on an idle CPU), where the wakeup policies differ; the column `wakelist, kernel placement` is the runtime as built by default (a wakee of a running task runs next on its waker's worker, as tokio's LIFO slot does). The share of wakeups that went through a wakelist is reported for every row.".into(),
        format!(
            "**Poller shapes.** Our columns run with the default shape, {}; the column `{}` is the default build with the other shape, {}, so that the two are compared on every workload (the summary's `poller` lines). Per-worker: every worker sleeps in its own epoll and polls the resources registered with it. Shared (tokio's driver): one epoll for the runtime, held by at most one parked worker while the other idle workers sleep on their futexes. Either way, readiness for a task homed on another worker travels through that worker's wakelist.",
            poller_shape(DEFAULT_POLLER),
            poller_column(other_poller()),
            poller_shape(other_poller()),
        ),
        "**HTTP** serves the same hyper service (`GET /` answers `hello`, HTTP/1.1 keep-alive, `pipeline_flush`) on our runtime (hyper's runtime traits from idspace's `hyper` feature, the kernel's placement, the default) and on tokio (hyper-util's `TokioIo` over tokio's `TcpStream`), and a hand-rolled single-thread mio loop that parses requests with `httparse` and writes the same bytes (no runtime, no tasks: the practical limit). `wrk` (one thread, `--latency`) drives each; **pinned** rows put the server on one CPU (1 worker) and wrk on another, **unpinned** rows run the server on every CPU and wrk wherever the kernel puts it; the **pipelined** row (pinned) sends 16 requests at a time per connection with a Lua script, as TechEmpower runs wrk. Server CPU is `getrusage(RUSAGE_SELF)` of the lab process over the wrk run (the server runs inside it; wrk is another process), per million answered requests.".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_not_measured_has_no_reciprocal_and_no_ratio() {
        let names = vec!["ours".to_string(), TOKIO.to_string(), MIO.to_string()];
        let latency = Values::new(names, vec![Some(500.0), Some(0.0), None]);
        let speed = reciprocals(&latency);
        assert_eq!(speed.cells(), [Some(1.0 / 500.0), None, None]);
        // No `NaNx` or `0.00x` over a missing peer: every ratio over it is n/a.
        assert_eq!(speed.over(TOKIO), [None, None, None]);
    }
}
