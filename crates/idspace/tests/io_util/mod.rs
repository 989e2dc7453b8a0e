//! What the I/O tests share: running a task with a deadline, and counting descriptors.

#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant};

use idspace::sched::{Builder, Poller, Runtime};

/// How long any one I/O test's body may take before it counts as hung.
pub const LIMIT: Duration = Duration::from_secs(20);

/// A runtime of `workers` workers with default settings.
pub fn runtime(workers: usize) -> Runtime {
    Builder::new().workers(workers).build().expect("a runtime")
}

/// A runtime of `workers` workers with default settings but `poller`.
pub fn runtime_with(workers: usize, poller: Poller) -> Runtime {
    Builder::new()
        .workers(workers)
        .poller(poller)
        .build()
        .expect("a runtime")
}

/// Runs `body` as a task of `runtime` and returns its output, failing the test (instead of
/// hanging it) if it has not finished within [`LIMIT`]: a lost wakeup shows as a timeout.
pub fn run<F>(runtime: &Runtime, what: &str, body: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = runtime.spawn(body);
    let deadline = Instant::now() + LIMIT;
    while !handle.is_finished() {
        assert!(
            Instant::now() < deadline,
            "{what}: still running after {LIMIT:?} (a lost wakeup or a hang)"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    handle.join().expect("the test's task completed")
}

/// The number of descriptors the process has open now.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}
