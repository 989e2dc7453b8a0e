//! The runtime's clock: sleeps, timeouts, intervals, and timers that are not futures.
//!
//! Tasks sleep and time out on their worker's timer wheel ([`sleep`], [`timeout`],
//! [`interval`]); a thread that is not a worker does the same through the runtime's
//! [`Handle`](idspace::sched::Handle) (`Handle::sleep` under any executor); and
//! [`Handle::arm`](idspace::sched::Handle::arm) fires a [`Fire`] target at a deadline, the
//! building block of the process layer's POSIX timers: here a watchdog that re-arms itself
//! until it has barked three times, and one cancelled before its deadline.
//!
//! Run with `cargo run -p idspace --example time`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use idspace::sched::time::{interval, sleep, timeout, Fire, RESOLUTION};
use idspace::sched::{spawn, Policy, Runtime};

/// Barks every 2 ms, three times, then stops re-arming itself.
struct Watchdog {
    barks: AtomicU32,
    done: mpsc::Sender<Instant>,
}

impl Fire for Watchdog {
    fn fire(&self, now: Instant) -> Option<Instant> {
        let barks = self.barks.fetch_add(1, Ordering::SeqCst) + 1;
        if barks < 3 {
            return Some(now + Duration::from_millis(2));
        }
        // The receiver outlives the runtime's timers in this program.
        let _ = self.done.send(now);
        None
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("timer resolution: {RESOLUTION:?}");
    let runtime = Runtime::new(2, Policy::Wakelist)?;

    // Inside the runtime: a task that sleeps, a timeout that holds and one that elapses.
    runtime.block_on(async {
        let started = Instant::now();
        let slow = spawn(async {
            sleep(Duration::from_millis(5)).await;
            "slept 5 ms"
        })
        .expect("inside the runtime's block_on");
        let answer = timeout(Duration::from_secs(10), slow)
            .await
            .expect("well within 10 s")
            .expect("the task completed");
        println!("{answer} ({:?} later)", started.elapsed());
        let never = timeout(Duration::from_millis(3), std::future::pending::<()>()).await;
        println!("a pending future with a 3 ms timeout: {never:?}");
        assert!(never.is_err());

        // Ticks a period apart, on the schedule set at the start.
        let mut ticks = interval(Duration::from_millis(2)).expect("a period above zero");
        let first = ticks.tick().await;
        for _ in 0..4 {
            ticks.tick().await;
        }
        let fifth = ticks.tick().await;
        println!(
            "5 periods of {:?} took {:?} ({} missed)",
            ticks.period(),
            fifth - first,
            ticks.missed()
        );
        assert!(fifth - first >= Duration::from_millis(10));
    })?;

    // Outside any task: the handle's timers work from a plain thread.
    let handle = runtime.handle().clone();
    let woke = std::thread::spawn(move || {
        let started = Instant::now();
        wait_here(handle.sleep(Duration::from_millis(3)));
        started.elapsed()
    })
    .join()
    .expect("the thread ran");
    println!("a plain thread slept 3 ms on the runtime's wheel: {woke:?}");
    assert!(woke >= Duration::from_millis(3));

    // Timers that are not futures: a self-re-arming target, and one cancelled in time.
    let (done, barked) = mpsc::channel();
    let dog = Arc::new(Watchdog {
        barks: AtomicU32::new(0),
        done,
    });
    let started = Instant::now();
    let _armed = runtime
        .handle()
        .arm(started + Duration::from_millis(2), dog.clone());
    let last = barked.recv_timeout(Duration::from_secs(10))?;
    println!(
        "the watchdog barked {} times, the last {:?} after arming",
        dog.barks.load(Ordering::SeqCst),
        last - started
    );
    let (quiet, _never) = mpsc::channel();
    let silent = Arc::new(Watchdog {
        barks: AtomicU32::new(0),
        done: quiet,
    });
    let armed = runtime
        .handle()
        .arm(Instant::now() + Duration::from_secs(60), silent.clone());
    println!(
        "pending until {:?} from now",
        armed.deadline().map(|at| at - Instant::now())
    );
    assert!(armed.cancel(), "cancelled before its deadline");
    assert_eq!(silent.barks.load(Ordering::SeqCst), 0);
    Ok(())
}

/// Drives one future to completion on this thread (a minimal executor: the handle's timers
/// wake it from the runtime's workers).
fn wait_here<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};

    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}
