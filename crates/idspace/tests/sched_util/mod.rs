//! What the scheduler tests share: the library's bell, a yield, a join with a deadline and a
//! ping-pong pair of tasks.

#![allow(dead_code)]

use std::future::Future;
use std::task::Poll;

/// The bell the scheduler tests wait on: the library's, so that the tests exercise the one the
/// lab measures.
pub use idspace::sched::Bell;

/// Yields once: wakes itself and returns Pending the first time.
pub fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}

/// Joins `handle`, failing the test (instead of hanging it) if the task does not finish within
/// `limit`: a lost wakeup shows up as a timeout.
pub fn join_within<T>(
    handle: idspace::sched::JoinHandle<T>,
    limit: std::time::Duration,
    what: &str,
) -> Result<T, idspace::sched::JoinError> {
    let deadline = std::time::Instant::now() + limit;
    while !handle.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {} never finished (a lost wakeup?)",
            handle.id()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    handle.join()
}

/// Spawns a pair of tasks that wake each other `rounds` times: the first rings, then waits for
/// the answer; the second waits, then answers. Every round is two wakeups, one each way.
pub fn spawn_ping_pong<H: idspace::sched::Hooks>(
    runtime: &idspace::sched::Runtime<H>,
    rounds: u64,
) -> (
    idspace::sched::JoinHandle<()>,
    idspace::sched::JoinHandle<()>,
) {
    let (ping, pong) = (Bell::new(), Bell::new());
    let first = {
        let (ping, pong) = (ping.clone(), pong.clone());
        runtime.spawn(async move {
            for round in 1..=rounds {
                pong.ring();
                ping.until(round).await;
            }
        })
    };
    let second = runtime.spawn(async move {
        for round in 1..=rounds {
            pong.until(round).await;
            ping.ring();
        }
    });
    (first, second)
}
