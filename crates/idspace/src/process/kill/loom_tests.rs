//! Loom models of the kill's wakeup (`kill` module docs): a task that polls twice, the second
//! time without the link's lock (its waker left at the first), racing a kill from another
//! thread. Whatever the interleaving, either a poll sees the mark or the kill wakes the task
//! (whose next poll then sees it): no kill is lost. Run with `RUSTFLAGS="--cfg loom -C
//! debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p idspace --lib
//! process::kill`.

use std::sync::Arc as StdArc;
use std::task::{Wake, Waker};

use super::TaskLink;
use crate::sync::{thread, Arc, AtomicBool, Ordering};

/// A waker that records that it was woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: StdArc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &StdArc<Self>) {
        // Release pairs with the Acquire load after the join: the woken task's next poll comes
        // after the wakeup, as the runtime's state word orders it.
        self.0.store(true, Ordering::Release);
    }
}

/// The task's polls (`polls` of them, each with the same waker, as in the runtime) race a
/// kill: a poll that misses the mark must leave a wakeup behind.
fn polls_racing_a_kill(polls: usize) {
    let link = Arc::new(TaskLink::default());
    let flag = StdArc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(StdArc::clone(&flag));
    let task = {
        let link = Arc::clone(&link);
        thread::spawn(move || {
            let mut left = None;
            (0..polls)
                .map(|_| link.watch(&mut left, &waker))
                .collect::<Vec<bool>>()
        })
    };
    if link.kill() {
        link.wake();
    }
    let runs = task.join().unwrap();
    let woken = flag.0.load(Ordering::Acquire);
    // Once a poll saw the mark, the task stops: no later poll runs it.
    if let Some(first) = runs.iter().position(|&runs| !runs) {
        assert!(runs[first..].iter().all(|&runs| !runs), "{runs:?}");
    }
    if runs.iter().all(|&runs| runs) {
        assert!(
            woken,
            "every poll missed the kill and nothing woke the task"
        );
    }
    // The poll the wakeup (or the join) leads to sees the mark.
    let mut left = None;
    assert!(!link.watch(&mut left, &Waker::from(flag)));
}

#[test]
fn a_kill_racing_the_first_poll() {
    loom::model(|| polls_racing_a_kill(1));
}

#[test]
fn a_kill_racing_a_poll_without_the_lock() {
    loom::model(|| polls_racing_a_kill(2));
}
