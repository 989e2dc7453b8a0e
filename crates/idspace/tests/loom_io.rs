//! Loom models of the reactor's races (the protocol document, sections 8 and 9): a worker
//! asleep in its poller is woken by a notification, a registration from another thread gets a
//! worker asleep on its futex into its poller, a readiness edge racing a task's `WouldBlock`
//! and waker registration is never lost, and with one poller shared by two workers, its holder
//! is woken by a notification and the poller is always held again while an event waits in it.
//! Each lost wakeup would leave a thread blocked for good, which loom reports as a deadlock.
//!
//! Run with `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test
//! --release --test loom_io`.

#![cfg(feature = "std")]
#![cfg(loom)]

use std::task::{Poll, Wake, Waker};

use idspace::sched::io_model::{IdlePoller, Readiness, SharedPoller};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

mod loom_util;
use loom_util::run_model;

/// A worker with a resource registered sleeps in its poller; a waker publishes work and
/// notifies: the worker must get up (through the eventfd, or by seeing the work first).
#[test]
fn a_worker_asleep_in_its_poller_is_woken_by_a_notification() {
    run_model("park in poller against notify", || {
        let worker = Arc::new(IdlePoller::default());
        worker.register(); // from the worker itself: no one to wake yet
        let work = Arc::new(AtomicBool::new(false));
        let waker = {
            let (worker, work) = (Arc::clone(&worker), Arc::clone(&work));
            thread::spawn(move || {
                // Relaxed: the notification's fence orders it before the idle word's read.
                work.store(true, Ordering::Relaxed);
                worker.notify();
            })
        };
        while !work.load(Ordering::Relaxed) {
            worker.idle_once(|| work.load(Ordering::Relaxed));
        }
        waker.join().unwrap();
    });
}

/// A worker with nothing registered sleeps on its futex; another thread registers a resource
/// with its poller and then an event arrives on it. The registration's notification must get
/// the worker into its poller, or the event would wait forever.
#[test]
fn a_registration_from_another_thread_moves_a_sleeping_worker_into_its_poller() {
    run_model("registration against futex park", || {
        let worker = Arc::new(IdlePoller::default());
        let registrar = {
            let worker = Arc::clone(&worker);
            thread::spawn(move || {
                worker.register();
                worker.event();
            })
        };
        while worker.events_seen() == 0 {
            worker.idle_once(|| false);
        }
        registrar.join().unwrap();
    });
}

/// A waker that sets a flag and signals a condition variable, both loom's.
struct Signal {
    woken: Mutex<bool>,
    wakeup: Condvar,
}

impl Signal {
    /// A signal and the waker that raises it.
    fn with_waker() -> (std::sync::Arc<Signal>, Waker) {
        let signal = std::sync::Arc::new(Signal {
            woken: Mutex::new(false),
            wakeup: Condvar::new(),
        });
        let waker = Waker::from(std::sync::Arc::clone(&signal));
        (signal, waker)
    }

    /// Waits until the waker has been woken, and lowers the flag for the next wait.
    fn wait(&self) {
        let mut woken = self.woken.lock().unwrap();
        while !*woken {
            woken = self.wakeup.wait(woken).unwrap();
        }
        *woken = false;
    }
}

// `Wake` takes std's `Arc`; what the threads race on is loom's.
impl Wake for Signal {
    fn wake(self: std::sync::Arc<Self>) {
        *self.woken.lock().unwrap() = true;
        self.wakeup.notify_one();
    }
}

/// A byte arrives and its readable edge is delivered while the task reads: the task's first
/// try finds nothing (`WouldBlock`, clearing the readiness it assumed), then registers its
/// waker. Whatever the interleaving, the task gets the byte: the clear cannot wipe out the
/// newer edge (the tick), and the edge either finds the waker or is seen by the look under the
/// waiter lock.
#[test]
fn a_readiness_edge_racing_wouldblock_and_registration_is_never_lost() {
    run_model("readiness edge against registration", || {
        let socket = Arc::new(Readiness::default());
        let poller = {
            let socket = Arc::clone(&socket);
            thread::spawn(move || socket.deliver())
        };
        let (signal, waker) = Signal::with_waker();
        while socket.poll_read(&waker) == Poll::Pending {
            signal.wait();
        }
        poller.join().unwrap();
    });
}

/// A byte is queued and its edge delivered; the task's short read takes everything queued and
/// clears the readiness it acted on, while a second byte arrives and its edge is delivered.
/// Whatever the interleaving, the task gets both bytes: a clear cannot wipe out the newer
/// edge (the tick), so a byte the short read did not take keeps the stream readable.
#[test]
fn a_short_read_clearing_readiness_never_loses_a_later_edge() {
    run_model("short read against a later edge", || {
        let socket = Arc::new(Readiness::default());
        socket.deliver();
        let poller = {
            let socket = Arc::clone(&socket);
            thread::spawn(move || socket.deliver())
        };
        let (signal, waker) = Signal::with_waker();
        let mut got = 0;
        while got < 2 {
            match socket.poll_read_short(&waker) {
                Poll::Ready(taken) => got += taken,
                Poll::Pending => signal.wait(),
            }
        }
        assert_eq!(got, 2);
        poller.join().unwrap();
    });
}

/// Two workers share one poller with a resource registered. Worker 1 may hold it or fail to
/// and sleep on its futex; a waker publishes a task for worker 0 (so that, if worker 0 holds
/// the poller, it is woken out of it through the eventfd and lets go of it), and that task
/// writes to a socket, whose event arrives after the hand-off. Whatever the interleaving,
/// worker 0 is woken (the eventfd reaches the holder, the only worker in the wait), and some
/// worker holds the poller again and polls the event: the one that let go idles again before
/// it can sleep on its futex, and a worker fails to take the poller only while another holds
/// it.
#[test]
fn a_shared_poller_is_held_again_after_its_holder_is_woken() {
    run_model("shared poller: holder woken, hand-off", || {
        let runtime = Arc::new(SharedPoller::default());
        runtime.register(0); // before the workers idle: no one to wake
        let other = {
            let runtime = Arc::clone(&runtime);
            thread::spawn(move || runtime.run_worker(1))
        };
        let waker = {
            let runtime = Arc::clone(&runtime);
            thread::spawn(move || runtime.push_work(0))
        };
        runtime.run_worker(0);
        waker.join().unwrap();
        other.join().unwrap();
    });
}

/// Two workers asleep on their futexes (nothing registered); a thread that is not a worker
/// registers a resource with the shared poller, notifying worker 1, and the resource's event
/// arrives. The notification must get a worker to take the poller, or the event would wait
/// forever.
#[test]
fn a_registration_gets_a_sleeping_worker_to_take_the_shared_poller() {
    run_model("shared poller: registration against futex parks", || {
        let runtime = Arc::new(SharedPoller::default());
        let other = {
            let runtime = Arc::clone(&runtime);
            thread::spawn(move || runtime.run_worker(1))
        };
        let registrar = {
            let runtime = Arc::clone(&runtime);
            thread::spawn(move || {
                runtime.register(1);
                runtime.event();
            })
        };
        runtime.run_worker(0);
        registrar.join().unwrap();
        other.join().unwrap();
    });
}
