//! The runtime's clock through its public API: the futures (sleep, timeout, interval), the
//! low-level arming API (`Handle::arm`, `Fire`, `Armed`), arming from outside the workers, and
//! behaviour outside a runtime and after shutdown. No timing upper bounds: only "not before the
//! deadline" and "eventually".

#![cfg(feature = "std")]
#![cfg(not(loom))]

use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use idspace::sched::time::{self, Elapsed, Fire, ZeroPeriod, RESOLUTION};
use idspace::sched::{Builder, Policy, Runtime};

/// How long "eventually" may take before a test gives up (a hang guard, not a timing check).
const PATIENCE: Duration = Duration::from_secs(30);

fn runtime(workers: usize) -> Runtime {
    Runtime::new(workers, Policy::Wakelist).expect("runtime")
}

/// Waits until `done` holds, failing after [`PATIENCE`].
fn eventually(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < PATIENCE, "never happened: {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Counts its expirations, re-arming itself `rearm` times `period` later.
struct Counter {
    fired: AtomicUsize,
    rearm: usize,
    period: Duration,
    at: Mutex<Vec<Instant>>,
}

impl Counter {
    fn new(rearm: usize, period: Duration) -> Arc<Counter> {
        Arc::new(Counter {
            fired: AtomicUsize::new(0),
            rearm,
            period,
            at: Mutex::new(Vec::new()),
        })
    }

    fn fired(&self) -> usize {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Fire for Counter {
    fn fire(&self, now: Instant) -> Option<Instant> {
        self.at.lock().unwrap().push(now);
        let n = self.fired.fetch_add(1, Ordering::SeqCst) + 1;
        (n <= self.rearm).then(|| now + self.period)
    }
}

#[test]
fn sleep_completes_and_never_before_its_deadline() {
    let runtime = runtime(2);
    for millis in [0, 1, 3, 10] {
        let duration = Duration::from_millis(millis);
        let (started, woke) = runtime
            .block_on(async move {
                let started = Instant::now();
                time::sleep(duration).await;
                (started, Instant::now())
            })
            .unwrap();
        assert!(woke - started >= duration, "{millis} ms: woke early");
    }
    // From tasks on the workers, several at once.
    let handles: Vec<_> = (0..20u64)
        .map(|n| {
            runtime.spawn(async move {
                let deadline = Instant::now() + Duration::from_micros(300 * n);
                time::sleep_until(deadline).await;
                Instant::now() >= deadline
            })
        })
        .collect();
    for handle in handles {
        assert!(handle.join().unwrap());
    }
}

#[test]
fn timeout_returns_the_output_or_elapsed() {
    let runtime = runtime(2);
    let ok = runtime
        .block_on(time::timeout(Duration::from_secs(60), async { 7 }))
        .unwrap();
    assert_eq!(ok, Ok(7));
    let handle = runtime.handle().clone();
    let late = runtime
        .block_on(async move {
            // Completes after the timeout's deadline: the deadline wins.
            time::timeout(
                Duration::from_millis(2),
                handle.sleep(Duration::from_secs(60)),
            )
            .await
        })
        .unwrap();
    let elapsed: Elapsed = late.unwrap_err();
    // A deadline already passed elapses too, and Elapsed is an error with a message.
    let passed = runtime
        .block_on(time::timeout_at(
            Instant::now() - Duration::from_millis(1),
            std::future::pending::<()>(),
        ))
        .unwrap();
    assert_eq!(passed, Err(elapsed));
    let error: Box<dyn std::error::Error> = Box::new(elapsed);
    assert!(error.to_string().contains("deadline"));
}

#[test]
fn dropping_a_timeout_cancels_its_timer_at_once() {
    let runtime = runtime(1);
    let handle = runtime.handle().clone();
    // A task that times out a future that will complete: its timeout is armed (the future was
    // pending once), then cancelled when the future wins. Thousands of them leave nothing armed
    // that could fire into a finished task.
    let done = runtime
        .block_on(async move {
            let mut done = 0;
            for _ in 0..2_000 {
                let yielded = YieldOnce(false);
                if handle
                    .timeout(Duration::from_secs(60), yielded)
                    .await
                    .is_ok()
                {
                    done += 1;
                }
            }
            done
        })
        .unwrap();
    assert_eq!(done, 2_000);
}

/// Pending once (waking itself), then ready: makes a timeout arm its timer.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn interval_ticks_on_its_schedule_and_skips_missed_ticks() {
    let runtime = runtime(1);
    let period = Duration::from_millis(2);
    let (ticks, late_tick, after_late, missed) = runtime
        .block_on(async move {
            let mut interval = time::interval(period).unwrap();
            let mut ticks = Vec::new();
            for _ in 0..4 {
                ticks.push((interval.tick().await, Instant::now()));
            }
            // Late by more than three periods: the next tick comes at once, the ones in
            // between are skipped, and the one after is back on the schedule.
            thread::sleep(period * 4);
            let late_tick = interval.tick().await;
            let after_late = interval.tick().await;
            (ticks, late_tick, after_late, interval.missed())
        })
        .unwrap();
    // Every tick lies on the grid `start + k × period`, and every tick returned or skipped uses
    // up one grid point. On a busy machine any tick may come late enough to skip some: the
    // checks hold wherever the skips fall.
    let start = ticks[0].0;
    let index = |at: Instant| {
        let offset = at.duration_since(start);
        assert_eq!(
            offset.as_nanos() % period.as_nanos(),
            0,
            "off the schedule: {offset:?}"
        );
        offset.as_nanos() / period.as_nanos()
    };
    let mut previous = None;
    for (n, &(scheduled, seen)) in ticks.iter().enumerate() {
        let k = index(scheduled);
        assert!(
            previous.is_none_or(|p| k > p),
            "tick {n} not after the one before"
        );
        previous = Some(k);
        assert!(seen >= scheduled, "tick {n} came early");
    }
    // The late tick comes at once (the next grid point ahead when the last tick returned), and
    // at least two after it are skipped.
    assert!(index(late_tick) > previous.unwrap());
    assert!(missed >= 2, "missed {missed}");
    // Five ticks returned before it, and `missed` skipped: the sixth returned is grid point
    // 5 + missed.
    assert_eq!(after_late, start + period * (5 + missed as u32));
    assert_eq!(
        time::interval(Duration::ZERO).unwrap_err(),
        ZeroPeriod,
        "a zero period is refused"
    );
}

#[test]
fn armed_targets_fire_once_after_their_deadline_and_rearm_when_asked() {
    let runtime = runtime(2);
    let counter = Counter::new(0, Duration::ZERO);
    let deadline = Instant::now() + Duration::from_millis(2);
    let armed = runtime.handle().arm(deadline, counter.clone());
    assert_eq!(armed.deadline(), Some(deadline));
    assert!(armed.is_pending());
    eventually("the timer fired", || counter.fired() == 1);
    assert!(counter.at.lock().unwrap()[0] >= deadline, "fired early");
    assert!(!armed.cancel(), "a fired timer is no longer pending");
    assert_eq!(armed.deadline(), None);

    // An interval timer: fires, re-arms itself three times, then stops.
    let ticker = Counter::new(3, Duration::from_millis(1));
    let armed = runtime
        .handle()
        .arm(Instant::now() + Duration::from_millis(1), ticker.clone());
    eventually("the interval timer fired four times", || {
        ticker.fired() == 4
    });
    let at = ticker.at.lock().unwrap().clone();
    for pair in at.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(1),
            "re-armed early"
        );
    }
    thread::sleep(Duration::from_millis(5));
    assert_eq!(ticker.fired(), 4, "fired again after returning None");
    assert!(!armed.cancel());
}

#[test]
fn a_cancelled_timer_never_fires_and_dropping_cancels() {
    let runtime = runtime(2);
    let counter = Counter::new(0, Duration::ZERO);
    let far = Instant::now() + Duration::from_millis(20);
    let armed = runtime.handle().arm(far, counter.clone());
    assert!(armed.cancel(), "a pending timer is cancelled");
    assert!(!armed.cancel(), "cancelling twice reports false");
    assert_eq!(armed.deadline(), None);
    drop(runtime.handle().arm(far, counter.clone()));
    // Every arm shares the counter: the one left in the wheel would have fired by now.
    eventually("past the deadline", || {
        Instant::now() > far + RESOLUTION * 10
    });
    thread::sleep(Duration::from_millis(5));
    assert_eq!(counter.fired(), 0);
    // The counter is no longer held by the wheel: both entries were freed at once.
    assert_eq!(Arc::strong_count(&counter), 1);
}

/// A timer that cancels another one, and itself, from inside `fire`: no lock of the wheel is
/// held during the callback.
#[test]
fn fire_may_arm_and_cancel_timers_itself() {
    struct Canceller {
        victim: Mutex<Option<idspace::sched::time::Armed>>,
        own: Mutex<Option<idspace::sched::time::Armed>>,
        handle: idspace::sched::Handle,
        armed_new: Mutex<Option<idspace::sched::time::Armed>>,
        result: Mutex<Option<(bool, bool)>>,
    }
    impl Fire for Canceller {
        fn fire(&self, now: Instant) -> Option<Instant> {
            let victim = self.victim.lock().unwrap().take().unwrap().cancel();
            // Its own entry is firing: cancelling it reports false (and stops any re-arm).
            let own = self.own.lock().unwrap().take().unwrap().cancel();
            *self.armed_new.lock().unwrap() = Some(self.handle.arm(
                now + Duration::from_secs(60),
                Counter::new(0, Duration::ZERO),
            ));
            *self.result.lock().unwrap() = Some((victim, own));
            // Asks for a re-arm that the cancel above must refuse.
            Some(now)
        }
    }
    let runtime = runtime(1);
    let victim_counter = Counter::new(0, Duration::ZERO);
    let canceller = Arc::new(Canceller {
        victim: Mutex::new(Some(runtime.handle().arm(
            Instant::now() + Duration::from_secs(60),
            victim_counter.clone(),
        ))),
        own: Mutex::new(None),
        handle: runtime.handle().clone(),
        armed_new: Mutex::new(None),
        result: Mutex::new(None),
    });
    // The canceller gets its own Armed under its lock, which `fire` waits for if it comes
    // first.
    {
        let mut own = canceller.own.lock().unwrap();
        *own = Some(
            runtime
                .handle()
                .arm(Instant::now() + Duration::from_millis(1), canceller.clone()),
        );
    }
    eventually("the canceller fired", || {
        canceller.result.lock().unwrap().is_some()
    });
    assert_eq!(*canceller.result.lock().unwrap(), Some((true, false)));
    assert_eq!(victim_counter.fired(), 0);
    assert!(canceller
        .armed_new
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .is_pending());
}

/// Wakes a parked thread: a minimal executor that is not the runtime.
struct Unpark(thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on the calling thread, outside any runtime.
fn foreign_block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

#[test]
fn handle_futures_work_from_any_thread_and_wake_a_sleeping_worker() {
    // Idle workers park at once: the arm from outside must kick the one it lands on.
    let runtime = Builder::new()
        .workers(2)
        .poll(Duration::ZERO)
        .build()
        .unwrap();
    let handle = runtime.handle().clone();
    thread::sleep(Duration::from_millis(5));
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let handle = handle.clone();
            thread::spawn(move || {
                let duration = Duration::from_millis(1 + n);
                let started = Instant::now();
                foreign_block_on(handle.sleep(duration));
                let late = foreign_block_on(
                    handle.timeout(Duration::from_millis(1), std::future::pending::<()>()),
                );
                assert!(late.is_err());
                let mut interval = handle.interval(Duration::from_millis(1)).unwrap();
                for _ in 0..3 {
                    foreign_block_on(interval.tick());
                }
                started.elapsed() >= duration
            })
        })
        .collect();
    for thread in threads {
        assert!(thread.join().unwrap(), "woke early");
    }
}

#[test]
fn the_free_functions_panic_clearly_outside_a_runtime() {
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    let mut sleep = time::sleep(Duration::from_secs(1));
    let panic = panic::catch_unwind(AssertUnwindSafe(|| {
        let _ = pin!(&mut sleep).poll(&mut cx);
    }))
    .unwrap_err();
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("outside an idspace runtime"), "{message}");
}

#[test]
fn after_shutdown_nothing_is_armed() {
    let mut runtime = runtime(1);
    let handle = runtime.handle().clone();
    let counter = Counter::new(0, Duration::ZERO);
    let before = handle.arm(Instant::now() + Duration::from_secs(60), counter.clone());
    runtime.shutdown();
    // The pending timer was dropped by the shutdown (its target freed), and is not pending.
    assert!(!before.cancel());
    assert_eq!(Arc::strong_count(&counter), 1);
    let after = handle.arm(Instant::now(), counter.clone());
    assert!(!after.is_pending());
    assert!(!after.cancel());
    assert_eq!(counter.fired(), 0);
}

/// Regression: a worker woken by its own timer fires it while it still counts as idle, so the
/// task it wakes (which last ran there) is queued locally, with no notification of another
/// worker. It used to fire after leaving idle, find itself busy, and send the task to the other
/// (parked) worker with a futex wake each time: milliseconds of lateness under load.
#[test]
fn a_timer_wakeup_stays_on_its_idle_worker() {
    let runtime = Builder::new()
        .workers(2)
        .poll(Duration::ZERO)
        .build()
        .unwrap();
    let before = runtime.stats();
    let task = runtime.spawn(async {
        for _ in 0..20 {
            time::sleep(Duration::from_millis(1)).await;
        }
    });
    task.join().unwrap();
    let after = runtime.stats();
    assert!(
        after.local - before.local >= 20,
        "timer wakeups were not local: {before:?} -> {after:?}"
    );
    // The spawn itself may wake a parked worker; the timers' wakeups never do.
    assert!(
        after.notify_futex - before.notify_futex <= 1,
        "timer wakeups woke another worker: {before:?} -> {after:?}"
    );
}

#[test]
fn the_handles_and_futures_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send_sync_unpin<T: Send + Sync + Unpin>() {}
    send_sync::<idspace::sched::time::Armed>();
    send_sync_unpin::<time::Sleep>();
    send_sync_unpin::<time::Interval>();
    send_sync_unpin::<time::Timeout<std::future::Ready<()>>>();
}
