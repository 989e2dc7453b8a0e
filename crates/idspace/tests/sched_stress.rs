//! Real threads: thousands of tasks waking each other across workers, under every policy, with
//! spurious wakeups from outside threads. Every task must complete exactly once, never be polled
//! by two workers at once, and every wakeup must arrive (a lost one hangs a ring: the test has a
//! watchdog).

#![cfg(not(loom))]

mod sched_util;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use idspace::sched::{Builder, Policy};
use sched_util::{join_within, Bell};

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

fn rings(policy: Policy, workers: usize, tasks: usize, ring: usize, rounds: u64) {
    let runtime = Builder::new()
        .workers(workers)
        .policy(policy)
        .poll(Duration::from_micros(20))
        .build()
        .unwrap();
    let bells: Vec<Arc<Bell>> = (0..tasks).map(|_| Bell::new()).collect();
    let completions: Vec<Arc<AtomicU32>> = (0..tasks).map(|_| Arc::default()).collect();
    let overlaps = Arc::new(AtomicUsize::new(0));
    let wakers: Arc<Mutex<Vec<Waker>>> = Arc::default();
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
            runtime.spawn(Watched {
                future: Box::pin(body),
                in_poll: Arc::default(),
                overlaps: overlaps.clone(),
                completions: completions[index].clone(),
                wakers: wakers.clone(),
                registered: false,
            })
        })
        .collect();
    // Spurious wakeups from outside threads while the rings run.
    let stop = Arc::new(AtomicBool::new(false));
    let noise: Vec<_> = (0..2)
        .map(|seed| {
            let (wakers, stop) = (wakers.clone(), stop.clone());
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
    let what = format!("{policy}, {workers} workers");
    for (index, handle) in handles.into_iter().enumerate() {
        let result = join_within(handle, Duration::from_secs(120), &what);
        assert_eq!(result.unwrap(), index, "{what}");
    }
    stop.store(true, Ordering::Relaxed);
    for thread in noise {
        thread.join().unwrap();
    }
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "{policy}: a task was polled twice at once"
    );
    for (index, count) in completions.iter().enumerate() {
        assert_eq!(count.load(Ordering::SeqCst), 1, "{policy}: task {index}");
    }
    let stats = runtime.stats();
    assert_eq!(stats.spawned, tasks as u64);
    if policy == Policy::Locked {
        assert_eq!(stats.wakelist, 0);
    } else {
        assert!(stats.wakelist > 0, "{policy}: {stats:?}");
    }
}

#[test]
fn rings_of_tasks_complete_exactly_once_on_two_workers() {
    for policy in Policy::ALL {
        rings(policy, 2, 2_000, 10, 20);
    }
}

#[test]
fn rings_of_tasks_complete_exactly_once_on_oversubscribed_workers() {
    for policy in Policy::ALL {
        rings(policy, 8, 2_000, 4, 20);
    }
}

#[test]
fn pairs_ping_ponging_between_workers_never_lose_a_wakeup() {
    // Rings of two with no polling at all: every idle period ends in a futex sleep, the hardest
    // case for the notify/park handshake.
    for policy in Policy::ALL {
        let runtime = Builder::new()
            .workers(2)
            .policy(policy)
            .poll(Duration::ZERO)
            .build()
            .unwrap();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (a, b) = (Bell::new(), Bell::new());
                let first = {
                    let (a, b) = (a.clone(), b.clone());
                    runtime.spawn(async move {
                        for round in 1..=5_000 {
                            b.ring();
                            a.until(round).await;
                        }
                    })
                };
                let second = runtime.spawn(async move {
                    for round in 1..=5_000 {
                        b.until(round).await;
                        a.ring();
                    }
                });
                (first, second)
            })
            .collect();
        for (first, second) in handles {
            join_within(first, Duration::from_secs(120), policy.name()).unwrap();
            join_within(second, Duration::from_secs(120), policy.name()).unwrap();
        }
        assert!(runtime.stats().parks > 0);
    }
}
