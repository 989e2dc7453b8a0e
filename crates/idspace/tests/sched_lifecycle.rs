//! The runtime's lifecycle at its edges: timers of a runtime dropped while they are pending
//! elsewhere, settings out of range, blocking on a worker, panicking hooks, a runtime dropped
//! by its own task, and the error type's bounds. Every scenario that could hang runs under a
//! deadline inside the test, so that a regression fails instead of hanging.

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod sched_util;

use std::any::Any;
use std::future::{poll_fn, Future};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use idspace::sched::time::sleep;
use idspace::sched::{
    BuildError, Builder, Exit, Hooks, JoinError, Policy, Runtime, TaskId, MAX_POLL,
};
use sched_util::join_within;

/// How long a scenario may take before the test calls it a hang.
const LIMIT: Duration = Duration::from_secs(10);

/// An hour: a deadline no test waits for.
const HOUR: Duration = Duration::from_secs(3600);

/// Runs `scenario` on a thread of its own and returns its result, or re-raises its panic;
/// fails the test if it takes longer than [`LIMIT`] (the thread is left behind).
fn within<T: Send + 'static>(what: &str, scenario: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(panic::catch_unwind(AssertUnwindSafe(scenario)));
    });
    match result.recv_timeout(LIMIT) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => panic::resume_unwind(payload),
        Err(_) => panic!("{what}: still running after {LIMIT:?}, a hang"),
    }
}

/// The message of a panic payload.
fn message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|message| message.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Polls `future` on this thread, parking between polls: an executor that is not the
/// runtime's. `first_poll` hears when the future has been polled once.
fn park_on<F: Future>(future: F, first_poll: mpsc::Sender<()>) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let mut polled = Some(first_poll);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        if let Some(first_poll) = polled.take() {
            let _ = first_poll.send(());
        }
        std::thread::park();
    }
}

/// Wraps `future` so that `first_poll` hears when it has been polled once.
fn announced<F: Future>(
    future: F,
    first_poll: mpsc::Sender<()>,
) -> impl Future<Output = F::Output> {
    let mut future = Box::pin(future);
    let mut first_poll = Some(first_poll);
    poll_fn(move |cx| {
        let poll = future.as_mut().poll(cx);
        if let Some(first_poll) = first_poll.take() {
            let _ = first_poll.send(());
        }
        poll
    })
}

#[test]
fn a_pending_sleep_on_a_plain_thread_panics_when_its_runtime_is_dropped() {
    within("a sleep outliving its runtime on a plain thread", || {
        let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
        let nap = runtime.handle().sleep(HOUR);
        let (polled, first_poll) = mpsc::channel();
        let sleeper = std::thread::spawn(move || park_on(nap, polled));
        first_poll.recv().unwrap();
        drop(runtime);
        let payload = sleeper
            .join()
            .expect_err("the sleep cannot complete normally");
        let message = message(&*payload);
        assert!(message.contains("after its runtime shut down"), "{message}");
    });
}

#[test]
fn a_pending_interval_tick_on_a_plain_thread_panics_when_its_runtime_is_dropped() {
    within(
        "an interval outliving its runtime on a plain thread",
        || {
            let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
            let mut ticks = runtime.handle().interval(HOUR).unwrap();
            let (polled, first_poll) = mpsc::channel();
            let ticker = std::thread::spawn(move || {
                // The first tick is due at once; the second an hour later.
                park_on(poll_fn(|cx| ticks.poll_tick(cx)), mpsc::channel().0);
                park_on(poll_fn(|cx| ticks.poll_tick(cx)), polled)
            });
            first_poll.recv().unwrap();
            drop(runtime);
            let payload = ticker.join().expect_err("the tick cannot come");
            let message = message(&*payload);
            assert!(message.contains("after its runtime shut down"), "{message}");
        },
    );
}

#[test]
fn a_pending_sleep_inside_another_runtimes_block_on_fails_when_its_runtime_is_dropped() {
    within("a sleep outliving its runtime in another block_on", || {
        let timers = Runtime::new(1, Policy::Wakelist).unwrap();
        let nap = timers.handle().sleep(HOUR);
        let (polled, first_poll) = mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            let other = Runtime::new(1, Policy::Locked).unwrap();
            other.block_on(announced(nap, polled))
        });
        first_poll.recv().unwrap();
        drop(timers);
        let error = sleeper.join().unwrap().expect_err("the sleep panicked");
        let message = error.panic_message().unwrap_or_default();
        assert!(message.contains("after its runtime shut down"), "{message}");
    });
}

#[test]
fn a_pending_timeout_fails_when_its_runtime_is_dropped() {
    within("a timeout outliving its runtime", || {
        let timers = Runtime::new(2, Policy::Wakelist).unwrap();
        // Two of them: one polled by another runtime's block_on, one by a plain thread.
        let guarded = timers.handle().timeout(HOUR, std::future::pending::<()>());
        let (polled, first_poll) = mpsc::channel();
        let in_runtime = std::thread::spawn(move || {
            let other = Runtime::new(1, Policy::Locked).unwrap();
            other.block_on(announced(guarded, polled)).unwrap()
        });
        let guarded = timers.handle().timeout(HOUR, std::future::pending::<()>());
        let (polled, second_poll) = mpsc::channel();
        let on_thread = std::thread::spawn(move || park_on(guarded, polled));
        first_poll.recv().unwrap();
        second_poll.recv().unwrap();
        drop(timers);
        for outcome in [in_runtime.join().unwrap(), on_thread.join().unwrap()] {
            let elapsed = outcome.expect_err("the runtime shut down before the future completed");
            assert!(elapsed.is_shut_down());
            assert!(elapsed.to_string().contains("shut down"), "{elapsed}");
        }
    });
}

#[test]
fn a_timeout_whose_deadline_passes_is_not_a_shutdown() {
    let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
    let never = std::future::pending::<()>();
    let outcome = runtime.block_on(runtime.handle().timeout(Duration::from_millis(1), never));
    let elapsed = outcome.unwrap().unwrap_err();
    assert!(!elapsed.is_shut_down());
}

#[test]
fn every_builder_value_is_range_checked_before_a_worker_starts() {
    let error = Builder::new()
        .workers(1)
        .poll(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(error, BuildError::Poll(Duration::MAX));
    assert!(error.to_string().starts_with("poll: "), "{error}");
    let error = Builder::new()
        .poll(MAX_POLL + Duration::from_nanos(1))
        .build();
    assert!(matches!(error, Err(BuildError::Poll(_))));
    let error = Builder::new().workers(0).build().unwrap_err();
    assert!(error.to_string().starts_with("workers: "), "{error}");
    // The bound itself is accepted, and such a runtime runs and shuts down.
    let runtime = Builder::new().workers(1).poll(MAX_POLL).build().unwrap();
    assert_eq!(runtime.spawn(async { 7 }).join().unwrap(), 7);
    within("a runtime polling for its longest", move || drop(runtime));
}

#[test]
fn block_on_inside_a_task_is_refused_with_a_panic() {
    for workers in [1, 2] {
        let runtime = Arc::new(Runtime::new(workers, Policy::Wakelist).unwrap());
        let inner = Arc::clone(&runtime);
        let task = runtime.spawn(async move {
            let _ = inner.block_on(sleep(Duration::from_millis(1)));
        });
        let error = join_within(task, LIMIT, "block_on in a task").unwrap_err();
        let message = error.panic_message().unwrap_or_default();
        assert!(
            message.contains("Runtime::block_on was called from inside a runtime"),
            "{message}"
        );
        // Another runtime's block_on is refused there too: the worker would still block.
        let task = runtime.spawn(async {
            let other = Runtime::new(1, Policy::Locked).unwrap();
            let _ = other.block_on(async {});
        });
        let error = join_within(task, LIMIT, "another block_on in a task").unwrap_err();
        assert!(error
            .panic_message()
            .unwrap_or_default()
            .contains("block_on"));
    }
}

#[test]
fn a_blocking_join_inside_a_task_is_refused_with_a_panic() {
    let runtime = Runtime::new(2, Policy::Wakelist).unwrap();
    let handle = runtime.handle().clone();
    let task = runtime.spawn(async move {
        let child = handle.spawn(sleep(Duration::from_millis(5)));
        child.join()
    });
    let error = join_within(task, LIMIT, "join in a task").unwrap_err();
    let message = error.panic_message().unwrap_or_default();
    assert!(
        message.contains("JoinHandle::join was called from inside a runtime"),
        "{message}"
    );
    // Awaiting the handle is the way, and it works.
    let handle = runtime.handle().clone();
    let task = runtime.spawn(async move { handle.spawn(async { 3 }).await });
    assert_eq!(
        join_within(task, LIMIT, "await in a task")
            .unwrap()
            .unwrap(),
        3
    );
}

/// Hooks that panic at the switch points of tasks whose data names that point, and record
/// how tasks exited.
#[derive(Default)]
struct Faulty {
    exits: Mutex<Vec<Exit>>,
    stopped: AtomicUsize,
}

impl Hooks for Faulty {
    /// The hook that panics for this task, if any.
    type Data = Option<&'static str>;

    fn created(&self, _task: TaskId, _worker: Option<usize>) -> Option<&'static str> {
        None
    }

    fn switched_in(&self, _task: TaskId, fault: &Option<&'static str>, _worker: usize) {
        if *fault == Some("switched_in") {
            panic!("no CID left for this task");
        }
    }

    fn switched_out(&self, _task: TaskId, fault: &Option<&'static str>, _worker: usize) {
        if *fault == Some("switched_out") {
            panic!("the CID was already dropped");
        }
    }

    fn exited(&self, _: TaskId, fault: &Option<&'static str>, _: Option<usize>, how: Exit) {
        self.exits.lock().unwrap().push(how);
        if *fault == Some("exited") {
            panic!("the exit bookkeeping failed");
        }
    }

    fn worker_stopped(&self, _worker: usize) {
        self.stopped.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_panicking_hook_is_reported_as_the_hooks_panic_and_the_worker_goes_on() {
    let hooks = Arc::new(Faulty::default());
    let runtime = Builder::new()
        .workers(1)
        .hooks(Arc::clone(&hooks))
        .build()
        .unwrap();
    let handle = runtime.handle().clone();
    for (hook, expected) in [
        ("switched_in", "no CID left for this task"),
        ("switched_out", "the CID was already dropped"),
    ] {
        // A task that completes in its first poll, and one that sleeps first.
        let quick = handle.spawn_with(Some(hook), async { 1 });
        let slow = handle.spawn_with(Some(hook), sleep(Duration::from_millis(1)));
        let quick = join_within(quick, LIMIT, hook).unwrap_err();
        let slow = join_within(slow, LIMIT, hook).unwrap_err();
        for error in [quick, slow] {
            match &error {
                JoinError::HookPanicked { hook: name, panic } => {
                    assert_eq!(*name, hook);
                    assert_eq!(panic.message(), Some(expected));
                }
                other => panic!("{hook}: expected a hook panic, got {other}"),
            }
            assert_eq!(error.panic_message(), Some(expected));
            assert!(error.to_string().contains(hook), "{error}");
            assert!(!error.to_string().contains("shut down"), "{error}");
        }
    }
    // A panicking exit hook cannot change an outcome already delivered; the worker survives it.
    let ended = handle.spawn_with(Some("exited"), async { 2 });
    assert_eq!(join_within(ended, LIMIT, "exited").unwrap(), 2);
    // The single worker still runs tasks.
    assert_eq!(
        join_within(runtime.spawn(async { 3 }), LIMIT, "after").unwrap(),
        3
    );
    drop(runtime);
    let exits = hooks.exits.lock().unwrap().clone();
    let panicked = exits.iter().filter(|&&how| how == Exit::Panicked).count();
    assert_eq!(panicked, 4, "{exits:?}");
    assert_eq!(hooks.stopped.load(Ordering::SeqCst), 1);
}

#[test]
fn a_runtime_dropped_by_its_own_task_shuts_down_without_waiting_for_itself() {
    within("a runtime dropped by its own task", || {
        for workers in [1, 2] {
            let hooks = Arc::new(Faulty::default());
            let runtime = Builder::new()
                .workers(workers)
                .hooks(Arc::clone(&hooks))
                .build()
                .unwrap();
            let sleeper = runtime.spawn(sleep(HOUR));
            let owner = Arc::new(Mutex::new(Some(runtime)));
            let taken = Arc::clone(&owner);
            let (dropped, after_drop) = mpsc::channel();
            let handle = owner.lock().unwrap().as_ref().unwrap().handle().clone();
            // The dropping task completes in the same poll; a second one goes on to sleep.
            let dropper = handle.spawn(async move {
                let runtime = taken.lock().unwrap().take();
                drop(runtime);
                dropped.send(()).unwrap();
                "dropped"
            });
            after_drop.recv().unwrap();
            assert_eq!(dropper.join().unwrap(), "dropped");
            assert!(matches!(sleeper.join(), Err(JoinError::Cancelled)));
            // Every worker stops, the detached one included.
            while hooks.stopped.load(Ordering::SeqCst) < workers {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
}

#[test]
fn a_task_that_drops_its_runtime_and_then_waits_is_cancelled() {
    within("a task waiting after dropping its runtime", || {
        let runtime = Runtime::new(2, Policy::Wakelist).unwrap();
        let owner = Arc::new(Mutex::new(Some(runtime)));
        let taken = Arc::clone(&owner);
        let handle = owner.lock().unwrap().as_ref().unwrap().handle().clone();
        let task = handle.spawn(async move {
            drop(taken.lock().unwrap().take());
            // The runtime is gone: nothing will ever wake this task.
            std::future::pending::<()>().await;
        });
        assert!(matches!(task.join(), Err(JoinError::Cancelled)));
        // Spawning on the dead runtime cancels at once.
        assert!(matches!(
            handle.spawn(async {}).join(),
            Err(JoinError::Cancelled)
        ));
    });
}

/// `JoinError` must cross threads and convert into the usual boxed errors with `?`.
const _: fn() = || {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    send_sync_static::<JoinError>();
};

#[test]
fn join_errors_convert_into_boxed_send_sync_errors() {
    fn boxed(runtime: &Runtime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        runtime.spawn(async { panic!("inside") }).join()?;
        Ok(())
    }
    let runtime = Runtime::new(1, Policy::Wakelist).unwrap();
    let error = boxed(&runtime).unwrap_err();
    assert_eq!(error.to_string(), "task panicked: inside");
    let error = error.downcast::<JoinError>().unwrap();
    let payload = error.try_into_panic().unwrap();
    assert_eq!(message(&*payload), "inside");
    let cancelled = runtime
        .spawn(std::future::pending::<()>())
        .join()
        .unwrap_err();
    assert!(matches!(
        cancelled.try_into_panic(),
        Err(JoinError::Cancelled)
    ));
}
