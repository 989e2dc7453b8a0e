//! Runtime-agnostic async building blocks for the wake workloads, so that our runtime and tokio
//! run exactly the same futures: a bell (one waiter, many ringers), a bounded byte pipe (the
//! hackbench pipe) and a timer thread (the hardware timer: its wakeups come from outside the
//! runtime, as a timer interrupt's do).

use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

/// A counter one task waits on and others ring: the library's, which runs on any executor.
pub use idspace::sched::Bell;

/// The size of one hackbench message.
pub const MESSAGE: usize = 100;

/// A pipe's capacity in messages: 64 KiB, like a Linux pipe.
const PIPE_MESSAGES: usize = 65_536 / MESSAGE;

/// A bounded pipe of 100-byte messages with one reader and many writers. Writers wait while it
/// is full, the reader while it is empty, as on a Linux pipe.
pub struct Pipe {
    state: Mutex<PipeState>,
}

struct PipeState {
    messages: VecDeque<[u8; MESSAGE]>,
    reader: Option<Waker>,
    writers: Vec<Waker>,
}

impl Pipe {
    /// An empty pipe.
    pub fn new() -> Arc<Pipe> {
        Arc::new(Pipe {
            state: Mutex::new(PipeState {
                messages: VecDeque::with_capacity(PIPE_MESSAGES),
                reader: None,
                writers: Vec::new(),
            }),
        })
    }

    /// Writes one message, waiting while the pipe is full.
    pub fn write(self: &Arc<Self>, message: [u8; MESSAGE]) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.messages.len() >= PIPE_MESSAGES {
                state.writers.push(cx.waker().clone());
                return Poll::Pending;
            }
            state.messages.push_back(message);
            let reader = state.reader.take();
            drop(state);
            if let Some(reader) = reader {
                reader.wake();
            }
            Poll::Ready(())
        })
    }

    /// Reads one message, waiting while the pipe is empty.
    pub fn read(self: &Arc<Self>) -> impl Future<Output = [u8; MESSAGE]> + '_ {
        std::future::poll_fn(move |cx| {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match state.messages.pop_front() {
                Some(message) => {
                    let writers = std::mem::take(&mut state.writers);
                    drop(state);
                    for writer in writers {
                        writer.wake();
                    }
                    Poll::Ready(message)
                }
                None => {
                    state.reader = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }
}

/// A timer thread: sleeps until the earliest deadline and wakes its waker.
pub struct Timer {
    shared: Arc<TimerShared>,
    thread: Option<thread::JoinHandle<()>>,
}

struct TimerShared {
    state: Mutex<TimerState>,
    changed: Condvar,
}

struct TimerState {
    deadlines: BinaryHeap<Deadline>,
    stop: bool,
}

struct Deadline {
    at: Instant,
    waker: Waker,
}

impl PartialEq for Deadline {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl Eq for Deadline {}
impl PartialOrd for Deadline {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Deadline {
    // Reversed: the heap's top is the earliest deadline.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.at.cmp(&self.at)
    }
}

impl Timer {
    /// Starts the timer's thread.
    pub fn start() -> Result<Timer, String> {
        let shared = Arc::new(TimerShared {
            state: Mutex::new(TimerState {
                deadlines: BinaryHeap::new(),
                stop: false,
            }),
            changed: Condvar::new(),
        });
        let worker = Arc::clone(&shared);
        let thread = thread::Builder::new()
            .name("lab-timer".into())
            .spawn(move || timer_loop(&worker))
            .map_err(|e| format!("cannot start the timer thread: {e}"))?;
        Ok(Timer {
            shared,
            thread: Some(thread),
        })
    }

    /// A handle to sleep with.
    pub fn handle(&self) -> TimerHandle {
        TimerHandle(Arc::clone(&self.shared))
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .stop = true;
        self.shared.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn timer_loop(shared: &TimerShared) {
    let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if state.stop {
            return;
        }
        let now = Instant::now();
        let mut due = Vec::new();
        while state.deadlines.peek().is_some_and(|d| d.at <= now) {
            due.extend(state.deadlines.pop().map(|d| d.waker));
        }
        if !due.is_empty() {
            drop(state);
            for waker in due {
                waker.wake();
            }
            state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            continue;
        }
        state = match state.deadlines.peek().map(|d| d.at) {
            Some(at) => {
                shared
                    .changed
                    .wait_timeout(state, at.saturating_duration_since(now))
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => shared
                .changed
                .wait(state)
                .unwrap_or_else(|e| e.into_inner()),
        };
    }
}

/// Sleeps on a [`Timer`].
#[derive(Clone)]
pub struct TimerHandle(Arc<TimerShared>);

impl TimerHandle {
    /// Resolves at `duration` from now.
    pub fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + '_ {
        let at = Instant::now() + duration;
        let mut armed = false;
        std::future::poll_fn(move |cx| {
            if Instant::now() >= at {
                return Poll::Ready(());
            }
            if !armed {
                armed = true;
                let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
                state.deadlines.push(Deadline {
                    at,
                    waker: cx.waker().clone(),
                });
                drop(state);
                self.0.changed.notify_one();
            }
            Poll::Pending
        })
    }
}
