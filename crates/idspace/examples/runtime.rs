//! The task runtime: spawning, joining and hooks.
//!
//! Builds a [`Runtime`] with two workers and the kernel's wakelist policy, with [`Hooks`] that
//! count each task's life-cycle events (the points where a PID, a CID or timers would attach).
//! A parent task spawns children and awaits them; the children yield, so that they are
//! switched in more than once; one child panics, and its handle reports the panic while the
//! runtime goes on.
//!
//! Run with `cargo run -p idspace --example runtime`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use idspace::sched::{Builder, Exit, Hooks, Policy, TaskId};

/// Counts life-cycle events across all tasks.
#[derive(Default)]
struct Counting {
    created: AtomicUsize,
    switched_in: AtomicUsize,
    completed: AtomicUsize,
    panicked: AtomicUsize,
}

impl Hooks for Counting {
    /// Tasks carry nothing of their own here: the counts are runtime-wide.
    type Data = ();

    fn created(&self, _task: TaskId, _worker: Option<usize>) {
        self.created.fetch_add(1, Ordering::Relaxed);
    }

    fn switched_in(&self, _task: TaskId, _data: &(), _worker: usize) {
        self.switched_in.fetch_add(1, Ordering::Relaxed);
    }

    fn exited(&self, _task: TaskId, _data: &(), _worker: Option<usize>, how: Exit) {
        let counter = match how {
            Exit::Completed => &self.completed,
            Exit::Panicked => &self.panicked,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Returns `Pending` once, waking itself: the task goes back to a run queue and is switched
/// in again.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The runtime catches a task's panic and reports it through the task's handle; the
    // default panic hook would still print a backtrace for it, so say it in one line instead.
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("a thread");
        eprintln!("({name} caught a task's panic: {info})");
    }));
    let hooks = Arc::new(Counting::default());
    let runtime = Builder::new()
        .workers(2)
        .policy(Policy::Wakelist)
        .hooks(hooks.clone())
        .build()?;

    let handle = runtime.handle().clone();
    let (sum, panics) = runtime.block_on(async move {
        let children: Vec<_> = (1..=8u64)
            .map(|n| {
                handle.spawn(async move {
                    YieldNow(false).await;
                    YieldNow(false).await;
                    if n == 5 {
                        panic!("child {n} fails");
                    }
                    n * 10
                })
            })
            .collect();
        let mut sum = 0;
        let mut panics = Vec::new();
        for child in children {
            match child.await {
                Ok(value) => sum += value,
                Err(error) => panics.push(error.to_string()),
            }
        }
        (sum, panics)
    })?;

    println!("sum of the children that completed: {sum}");
    println!("failed children: {panics:?}");
    let stats = runtime.stats();
    println!(
        "tasks created {}, switched in {} times, completed {}, panicked {}",
        hooks.created.load(Ordering::Relaxed),
        hooks.switched_in.load(Ordering::Relaxed),
        hooks.completed.load(Ordering::Relaxed),
        hooks.panicked.load(Ordering::Relaxed),
    );
    println!("runtime stats: {stats:?}");
    assert_eq!(
        sum,
        (1..=8).filter(|&n| n != 5).map(|n| n * 10).sum::<u64>()
    );
    assert_eq!(panics.len(), 1);
    // `block_on` runs the parent on this thread: only the children are the runtime's tasks.
    assert_eq!(hooks.created.load(Ordering::Relaxed), 8);
    // Each child is switched in at least three times (two yields).
    let least = 8 * 3;
    assert!(hooks.switched_in.load(Ordering::Relaxed) >= least);
    Ok(())
}
