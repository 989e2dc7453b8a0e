//! Real threads: thousands of tasks waking each other across workers, under every policy, with
//! spurious wakeups from outside threads. Every task must complete exactly once, never be polled
//! by two workers at once, and every wakeup must arrive (a lost one hangs a ring: the test has a
//! watchdog).

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod sched_util;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use idspace::sched::{Builder, Placement, Policy};
use sched_util::{join_within, spawn_ping_pong, Bell};

/// Wraps a future and records any overlap of two polls, and every completion.
struct Watched<F> {
    future: Pin<Box<F>>,
    in_poll: Arc<AtomicBool>,
    overlaps: Arc<AtomicUsize>,
    completions: Arc<AtomicU32>,
    wakers: Arc<Mutex<Vec<Waker>>>,
    registered: bool,
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if self.in_poll.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        if !self.registered {
            self.registered = true;
            self.wakers.lock().unwrap().push(cx.waker().clone());
        }
        // Give another worker a chance to (wrongly) poll us at the same time.
        std::hint::spin_loop();
        let result = self.future.as_mut().poll(cx);
        if result.is_ready() {
            self.completions.fetch_add(1, Ordering::SeqCst);
        }
        self.in_poll.store(false, Ordering::SeqCst);
        result
    }
}

/// What one test's watched tasks record: polls that overlapped, each task's completions, and
/// every task's first waker (for noise threads to wake spuriously).
struct Watch {
    overlaps: Arc<AtomicUsize>,
    completions: Vec<Arc<AtomicU32>>,
    wakers: Arc<Mutex<Vec<Waker>>>,
}

impl Watch {
    fn new(tasks: usize) -> Watch {
        Watch {
            overlaps: Arc::default(),
            completions: (0..tasks).map(|_| Arc::default()).collect(),
            wakers: Arc::default(),
        }
    }

    /// Wraps the future of task `index`.
    fn watch<F>(&self, index: usize, future: F) -> Watched<F> {
        Watched {
            future: Box::pin(future),
            in_poll: Arc::default(),
            overlaps: self.overlaps.clone(),
            completions: self.completions[index].clone(),
            wakers: self.wakers.clone(),
            registered: false,
        }
    }

    /// Asserts that no task was polled twice at once and that each completed exactly once.
    fn assert_each_ran_once(&self, what: &str) {
        assert_eq!(
            self.overlaps.load(Ordering::SeqCst),
            0,
            "{what}: a task was polled twice at once"
        );
        for (index, count) in self.completions.iter().enumerate() {
            assert_eq!(count.load(Ordering::SeqCst), 1, "{what}: task {index}");
        }
    }
}

fn rings(
    policy: Policy,
    placement: Placement,
    workers: usize,
    tasks: usize,
    ring: usize,
    rounds: u64,
) {
    let runtime = Builder::new()
        .workers(workers)
        .policy(policy)
        .placement(placement)
        .poll(Duration::from_micros(20))
        .build()
        .unwrap();
    let bells: Vec<Arc<Bell>> = (0..tasks).map(|_| Bell::new()).collect();
    let watch = Watch::new(tasks);
    let handles: Vec<_> = (0..tasks)
        .map(|index| {
            let base = index - index % ring;
            let next = base + (index - base + 1) % ring;
            let (mine, theirs) = (bells[index].clone(), bells[next].clone());
            let starter = index == base;
            let body = async move {
                for round in 1..=rounds {
                    if starter {
                        theirs.ring();
                        mine.until(round).await;
                    } else {
                        mine.until(round).await;
                        theirs.ring();
                    }
                }
                index
            };
            runtime.spawn(watch.watch(index, body))
        })
        .collect();
    // Spurious wakeups from outside threads while the rings run.
    let stop = Arc::new(AtomicBool::new(false));
    let noise: Vec<_> = (0..2)
        .map(|seed| {
            let (wakers, stop) = (watch.wakers.clone(), stop.clone());
            thread::spawn(move || {
                let mut i = seed;
                while !stop.load(Ordering::Relaxed) {
                    let waker = {
                        let wakers = wakers.lock().unwrap();
                        (!wakers.is_empty()).then(|| wakers[i % wakers.len()].clone())
                    };
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                    i = i.wrapping_mul(31).wrapping_add(7);
                    thread::yield_now();
                }
            })
        })
        .collect();
    let what = format!("{policy}, {placement} placement, {workers} workers");
    for (index, handle) in handles.into_iter().enumerate() {
        let result = join_within(handle, Duration::from_secs(120), &what);
        assert_eq!(result.unwrap(), index, "{what}");
    }
    stop.store(true, Ordering::Relaxed);
    for thread in noise {
        thread.join().unwrap();
    }
    watch.assert_each_ran_once(&what);
    let stats = runtime.stats();
    assert_eq!(stats.spawned, tasks as u64);
    if policy == Policy::Locked {
        assert_eq!(stats.wakelist, 0);
    } else if placement == Placement::Remote && policy == Policy::WakelistAlways {
        // Every wakeup made on a worker crossed to another, through its wakelist. (Under
        // `wakelist` only those onto idle workers do, which busy rings may never find.)
        assert!(stats.wakelist > 0, "{what}: {stats:?}");
    }
    if placement == Placement::Remote {
        assert_eq!(stats.affine, 0, "{what}: {stats:?}");
    }
}

#[test]
fn rings_of_tasks_complete_exactly_once_on_two_workers() {
    for placement in Placement::ALL {
        for policy in Policy::ALL {
            rings(policy, placement, 2, 2_000, 10, 20);
        }
    }
}

#[test]
fn rings_of_tasks_complete_exactly_once_on_oversubscribed_workers() {
    for placement in Placement::ALL {
        for policy in Policy::ALL {
            rings(policy, placement, 8, 2_000, 4, 20);
        }
    }
}

#[test]
fn pairs_ping_ponging_between_workers_never_lose_a_wakeup() {
    // Rings of two with no polling at all: every idle period ends in a futex sleep, the hardest
    // case for the notify/park handshake. Placed remotely, so that every wakeup crosses workers.
    for policy in Policy::ALL {
        let runtime = Builder::new()
            .workers(2)
            .policy(policy)
            .placement(Placement::Remote)
            .poll(Duration::ZERO)
            .build()
            .unwrap();
        let handles: Vec<_> = (0..4).map(|_| spawn_ping_pong(&runtime, 5_000)).collect();
        for (first, second) in handles {
            join_within(first, Duration::from_secs(120), policy.name()).unwrap();
            join_within(second, Duration::from_secs(120), policy.name()).unwrap();
        }
        assert!(runtime.stats().parks > 0);
    }
}

/// Two tasks waking each other forever on the only worker, each running next in the worker's
/// next slot, cannot starve a third task: the slot's cap sends the pair behind the queue every
/// few polls. Without the cap the third task never runs (and the watchdog fires).
#[test]
fn a_ping_pong_pair_in_the_next_slot_cannot_starve_a_third_task() {
    let runtime = Builder::new()
        .workers(1)
        .placement(Placement::Kernel)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (ping, pong) = (Bell::new(), Bell::new());
    let pair_started = Bell::new();
    let first = {
        let (ping, pong, stop, started) = (
            ping.clone(),
            pong.clone(),
            stop.clone(),
            pair_started.clone(),
        );
        runtime.spawn(async move {
            started.ring();
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                pong.ring();
                ping.until(round).await;
            }
        })
    };
    let second = {
        let stop = stop.clone();
        runtime.spawn(async move {
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                pong.until(round).await;
                ping.ring();
            }
        })
    };
    // The pair is cycling before the third task arrives on the worker's queue.
    while pair_started.rung() == 0 || runtime.stats().affine < 100 {
        thread::yield_now();
    }
    let third = {
        let stop = stop.clone();
        runtime.spawn(async move {
            for _ in 0..100 {
                sched_util::yield_now().await;
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    join_within(third, Duration::from_secs(60), "the third task").unwrap();
    let stats = runtime.stats();
    assert!(stats.capped > 0, "{stats:?}");
    // The pair stops at its next round (one of them may wait for a ring that never comes and
    // is cancelled when the runtime drops).
    drop(runtime);
    for pair in [first, second] {
        assert!(matches!(
            pair.join(),
            Ok(()) | Err(idspace::sched::JoinError::Cancelled)
        ));
    }
}

/// Fan-outs: one task wakes hundreds of sleepers at once (a wide waker, whose wakees are
/// spread; those that stack up on one worker are stolen by the idle one), round after round,
/// each woken task burning a little CPU. Every task completes exactly once, is never polled by
/// two workers at once, and every round's wakeups all arrive.
#[test]
fn fan_outs_with_stealing_run_every_task_exactly_once() {
    const SLEEPERS: usize = 300;
    const ROUNDS: u64 = 20;
    for workers in [2, 4] {
        let runtime = Builder::new().workers(workers).build().unwrap();
        let bells: Vec<Arc<Bell>> = (0..SLEEPERS).map(|_| Bell::new()).collect();
        let done = Bell::new();
        let watch = Watch::new(SLEEPERS);
        let polls = Arc::new(AtomicUsize::new(0));
        let sleepers: Vec<_> = bells
            .iter()
            .enumerate()
            .map(|(index, bell)| {
                let (bell, done, polls) = (bell.clone(), done.clone(), polls.clone());
                runtime.spawn(watch.watch(index, async move {
                    for round in 1..=ROUNDS {
                        bell.until(round).await;
                        polls.fetch_add(1, Ordering::SeqCst);
                        // A little work, so that queues stay long enough to steal from.
                        for _ in 0..200 {
                            std::hint::spin_loop();
                        }
                        done.ring();
                    }
                    index
                }))
            })
            .collect();
        let fan = {
            let (bells, done) = (bells.clone(), done.clone());
            runtime.spawn(async move {
                for round in 1..=ROUNDS {
                    for bell in &bells {
                        bell.ring();
                    }
                    done.until(round * SLEEPERS as u64).await;
                }
            })
        };
        let what = format!("fan-out, {workers} workers");
        join_within(fan, Duration::from_secs(120), &what).unwrap();
        for (index, handle) in sleepers.into_iter().enumerate() {
            let result = join_within(handle, Duration::from_secs(120), &what);
            assert_eq!(result.unwrap(), index, "{what}");
        }
        watch.assert_each_ran_once(&what);
        assert_eq!(
            polls.load(Ordering::SeqCst),
            SLEEPERS * ROUNDS as usize,
            "{what}"
        );
        assert_eq!(done.rung(), SLEEPERS as u64 * ROUNDS, "{what}");
        let stats = runtime.stats();
        assert_eq!(stats.spawned, SLEEPERS as u64 + 1, "{what}: {stats:?}");
        // Stealing takes tasks off queues; the tasks still all ran exactly once (above).
        println!("{what}: {stats:?}");
    }
}
