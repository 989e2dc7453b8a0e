//! Stress of the runtime's timers under real threads: thousands of sleeping tasks across
//! workers, and thousands of `Fire` targets armed from tasks and from outside threads while
//! other threads cancel them, many right at their deadlines. Invariants: every timer fires at
//! most once per arming and never before its deadline; a timer whose cancel returned true never
//! fires; one whose cancel returned false fired exactly once; a cancelled interval timer fires
//! at most once more (the fire already running) and never again.

#![cfg(feature = "std")]
#![cfg(not(loom))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use idspace::sched::time::{self, Armed, Fire};
use idspace::sched::{Builder, Handle, Policy};

/// A small deterministic generator (xorshift), so that runs are reproducible.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Records each expiry: how many, and whether any came before its deadline.
struct Probe {
    deadline: Mutex<Instant>,
    fired: AtomicUsize,
    early: AtomicUsize,
    /// Re-arm this many times, 200 µs apart.
    rearm: usize,
}

impl Probe {
    fn new(deadline: Instant, rearm: usize) -> Arc<Probe> {
        Arc::new(Probe {
            deadline: Mutex::new(deadline),
            fired: AtomicUsize::new(0),
            early: AtomicUsize::new(0),
            rearm,
        })
    }

    fn fired(&self) -> usize {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Fire for Probe {
    fn fire(&self, now: Instant) -> Option<Instant> {
        let mut deadline = self.deadline.lock().unwrap();
        if Instant::now() < *deadline || now < *deadline {
            self.early.fetch_add(1, Ordering::SeqCst);
        }
        let n = self.fired.fetch_add(1, Ordering::SeqCst) + 1;
        (n <= self.rearm).then(|| {
            *deadline = now + Duration::from_micros(200);
            *deadline
        })
    }
}

fn handle(workers: usize) -> (idspace::sched::Runtime, Handle) {
    let runtime = Builder::new()
        .workers(workers)
        .policy(Policy::Wakelist)
        .build()
        .unwrap();
    let handle = runtime.handle().clone();
    (runtime, handle)
}

#[test]
fn thousands_of_sleeps_across_workers_wake_once_and_never_early() {
    let (runtime, _) = handle(3);
    let mut random = Random(0x5eed);
    let tasks: Vec<_> = (0..4_000)
        .map(|n| {
            let micros = random.below(20_000);
            let abandon = n % 5 == 0;
            runtime.spawn(async move {
                let deadline = Instant::now() + Duration::from_micros(micros);
                if abandon {
                    // A timeout that wins over a longer sleep drops that sleep's entry.
                    let long = time::sleep(Duration::from_secs(3_600));
                    let outcome = time::timeout_at(deadline, long).await;
                    return outcome.is_err() && Instant::now() >= deadline;
                }
                time::sleep_until(deadline).await;
                Instant::now() >= deadline
            })
        })
        .collect();
    for task in tasks {
        assert!(
            task.join().unwrap(),
            "a sleep ended early or a timeout did not elapse"
        );
    }
}

#[test]
fn cancels_racing_expiry_from_many_threads_are_decided_once() {
    let (runtime, handle) = handle(3);
    let per_thread = 1_000;
    // Arming threads: outside threads, and tasks of the runtime. Each hands its timers to a
    // cancelling thread, which cancels every other one, some before and some right at their
    // deadlines (0–2 ms away). Every fourth timer is due 1–2 s away, so that some cancels win
    // however slowly the canceller runs (a sanitizer's build takes longer than 2 ms to hand a
    // timer over, and then every near one has fired before its cancel).
    let (sender, receiver) = std::sync::mpsc::channel::<(Armed, Arc<Probe>, bool)>();
    let mut arming = Vec::new();
    for source in 0..4u64 {
        let handle = handle.clone();
        let sender = sender.clone();
        let arm = move || {
            let mut random = Random(source + 1);
            for n in 0..per_thread {
                let after = if n % 4 == 0 {
                    Duration::from_millis(1_000 + random.below(1_000))
                } else {
                    Duration::from_micros(random.below(2_000))
                };
                let deadline = Instant::now() + after;
                let probe = Probe::new(deadline, 0);
                let armed = handle.arm(deadline, probe.clone());
                sender.send((armed, probe, n % 2 == 0)).unwrap();
            }
        };
        if source % 2 == 0 {
            arming.push(thread::spawn(arm));
        } else {
            let task = runtime.spawn(async move { arm() });
            arming.push(thread::spawn(move || task.join().unwrap()));
        }
    }
    drop(sender);
    let canceller = thread::spawn(move || {
        let mut outcomes = Vec::new();
        for (armed, probe, cancel) in receiver {
            let cancelled = cancel && armed.cancel();
            // Kept armed (not dropped) until the end when not cancelled: dropping would cancel.
            outcomes.push((armed, probe, cancelled));
        }
        outcomes
    });
    for thread in arming {
        thread.join().unwrap();
    }
    let outcomes = canceller.join().unwrap();
    // Everything not cancelled fires eventually.
    let started = Instant::now();
    for (_, probe, cancelled) in &outcomes {
        if !cancelled {
            while probe.fired() == 0 {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "a timer never fired"
                );
                thread::sleep(Duration::from_millis(1));
            }
        }
    }
    drop(runtime);
    let mut cancelled_count = 0;
    for (_, probe, cancelled) in &outcomes {
        assert_eq!(
            probe.early.load(Ordering::SeqCst),
            0,
            "fired before its deadline"
        );
        if *cancelled {
            cancelled_count += 1;
            assert_eq!(probe.fired(), 0, "fired although its cancel returned true");
        } else {
            assert_eq!(probe.fired(), 1, "fired more than once");
        }
    }
    assert_eq!(outcomes.len(), 4 * per_thread);
    // Some cancels must have won, or the test checked nothing of the race.
    assert!(cancelled_count > 0);
}

#[test]
fn cancelled_interval_timers_stop() {
    let (runtime, handle) = handle(2);
    let mut random = Random(7);
    let timers: Vec<(Armed, Arc<Probe>)> = (0..500)
        .map(|_| {
            let deadline = Instant::now() + Duration::from_micros(random.below(1_000));
            let probe = Probe::new(deadline, usize::MAX);
            (handle.arm(deadline, probe.clone()), probe)
        })
        .collect();
    thread::sleep(Duration::from_millis(3));
    let seen: Vec<usize> = timers
        .iter()
        .map(|(armed, probe)| {
            armed.cancel();
            probe.fired()
        })
        .collect();
    // Let any fire that was running finish, and give the wheel time to misbehave.
    thread::sleep(Duration::from_millis(5));
    drop(runtime);
    for ((_, probe), seen) in timers.iter().zip(seen) {
        let fired = probe.fired();
        assert!(
            fired <= seen + 1,
            "fired {fired} times, {seen} when cancelled"
        );
        assert_eq!(
            probe.early.load(Ordering::SeqCst),
            0,
            "fired before its deadline"
        );
    }
}
