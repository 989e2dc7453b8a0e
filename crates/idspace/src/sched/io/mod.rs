//! The runtime's reactor: readiness from edge-triggered epoll (through `mio`), with a poller
//! per worker or one shared by all of them ([`Poller`]).
//!
//! # Design
//!
//! With [`Poller::PerWorker`] each worker owns a `mio::Poll` ([`Reactor`]). A resource is
//! registered with the poller of the worker that creates it (or, from a `block_on` thread, of
//! a worker chosen round-robin); connections a listener accepts go to the workers' pollers in
//! turn, so that the worker running the accept loop does not deliver every connection's
//! events. The owning worker polls it:
//!
//! * **idle**, it sleeps in `epoll_wait` instead of on its futex, as long as resources are
//!   registered with it, bounded by its next timer, so that I/O, timers and wakeups all end
//!   the sleep; a waker gets it out through the poller's eventfd (`mio::Waker`), under the same
//!   idle-word rules as the futex (see the protocol document, section 8);
//! * **spinning** before it parks, it looks at its poller with a zero timeout between looks at
//!   its queues;
//! * **busy**, every [`IO_PASSES`] passes of its loop, with a zero timeout, so that I/O is not
//!   starved by a long run queue.
//!
//! With [`Poller::Shared`] the workers share one `mio::Poll`, behind a try-lock: the idle
//! worker that takes it sleeps in `epoll_wait`, the other idle workers on their futexes, and
//! the busy and spinning looks poll it only when no one holds it (the protocol document,
//! section 9).
//!
//! An event sets the resource's readiness word ([`readiness`]) and wakes its reader or writer
//! through the runtime's ordinary wakeup path: a task whose last worker is another one travels
//! there through that worker's wakelist, like the kernel's network softirq waking a task on
//! another CPU. That holds for both shapes.
//!
//! # Where we differ from tokio
//!
//! tokio shares one driver among its workers, held by whichever parked worker takes it first;
//! the others sleep on a condition variable; ours does the same by default. Per-worker pollers
//! (thread-per-core style), the other shape, need
//! no lock around the poller and keep a resource's events on one CPU, and they keep the wakelist
//! series' path for cross-worker wakeups. Their cost: a resource's events are delivered
//! only by its worker, so a worker stuck in a long poll delays them (the busy poll bounds it),
//! and resources stay with the worker that registered them. The shared shape, tokio's, lets
//! any idle worker deliver any event, at the cost of a worker woken out of the poller leaving
//! it free until another idle worker takes it.
//!
//! # The shape chosen
//!
//! The shared poller is the default ([`DEFAULT_POLLER`](super::DEFAULT_POLLER)): it serves
//! HTTP with a quarter less CPU per request and a fraction of the tail latency when the
//! server shares its CPUs with other threads, and the two shapes tie on the scheduler
//! benchmarks. The lab's `io` experiment runs the default build with each shape; medians of
//! six quiet quick runs on this 2-core machine (nothing else running), as per-worker ÷ shared,
//! above 1 when per-worker is the better:
//!
//! | workload (2 workers) | per-worker ÷ shared |
//! |---|---:|
//! | hackbench over socketpairs, `-g 1 -l 40` / `-g 4 -l 10` | 1.05x / 0.99x |
//! | hackbench over pipes, `-g 1 -l 40` / `-g 4 -l 10` | 0.98x / 1.00x |
//! | pipe context switching | 0.99x |
//! | HTTP under wrk, unpinned, 64 connections: requests/s | 0.83x |
//! | HTTP, same: server CPU per request | 0.75x |
//!
//! In the unpinned HTTP row, the server's two workers and `wrk` are three busy threads on two
//! CPUs, so the kernel keeps taking a worker off its CPU for a few milliseconds. With a poller
//! per worker, the connections registered with that worker wait for it: its p99 latency was
//! 3.5 to 4.3 ms in every run, against 0.75 to 0.9 ms with the shared poller (the locked
//! policy; tokio's 0.7 to 1.2 ms), since any worker that gets to the shared poller delivers
//! every connection's events. An earlier comparison, made while other builds kept the
//! machine loaded (load average 20 to 80), had favoured per-worker pollers by 8 to 20% on
//! hackbench; quiet runs do not show it. The shapes do not differ with one worker (the pinned
//! HTTP rows), and the shared shape's cost (a try-lock per look) showed nowhere.
//!
//! # Where a message's time goes
//!
//! Counted on the lab's `io` workloads with 2 workers (the kernel's syscall tracepoints, the
//! runtime's [`Stats`](super::Stats), a CPU-time profile), beside tokio running the same
//! futures. Counts, unlike times, hold still on a loaded machine.
//!
//! * **hackbench over socketpairs**: one `sendto` and one `recvfrom` per message in both
//!   runtimes, with almost no `EAGAIN` retries. A receiver drains about a hundred messages per
//!   readiness edge (the socket buffers absorb the rest), so a wakeup, and with it the wakeup
//!   policy, concerns about 1% of the messages. `epoll_wait` calls: 0.005 to 0.04 per message
//!   here (nearly all zero-timeout looks of busy or spinning workers), under 0.004 in tokio.
//!   The kernel's socket work is 82–88% of both runtimes' CPU time; the program's own code
//!   (runtime and futures) is 3% of ours and 8% of tokio's. What is left to win is in the kernel (the receiving
//!   socket's lock, taken by senders on both CPUs), not on the wakeup path.
//! * **pipe context switching**, under the default placement: 2 `epoll_wait` calls per round
//!   trip and no context switch, as in tokio: both tasks run on the worker that delivers their
//!   events. Forced across workers (the lab's policy columns): 4 context switches, 1.9 eventfd
//!   writes (notifications of a worker asleep in its poller) and about 9 `epoll_wait` calls per
//!   round trip, the same under every policy. The policies differ only in how the waker hands
//!   the task over (one CAS, or a hold of the target's run-queue lock) and how the target takes
//!   it: about a hundred instructions of a round trip of some 7,000 user-space instructions
//!   and two cross-CPU wakeups.
//! * **An idle worker that spins while the other one sleeps in its poller** (which will
//!   deliver the next event) was tried: it halved the forced-remote round trip's context
//!   switches, but doubled its CPU time without making it faster on this loaded machine, and
//!   under the default placement it added a `getrusage` and a spin to every idle period. The
//!   rule stays: a worker spins only while another one runs (see `idle.rs`).

#[cfg(not(loom))]
mod blocking;
#[cfg(loom)]
pub mod model;
#[cfg(not(loom))]
mod reactor;
pub(crate) mod readiness;
#[cfg(not(loom))]
mod source;

#[cfg(not(loom))]
pub use blocking::spawn_blocking;
#[cfg(not(loom))]
pub(crate) use blocking::BlockingPool;
#[cfg(not(loom))]
pub(crate) use reactor::Reactor;
#[cfg(not(loom))]
pub(crate) use source::IoSource;

/// How a runtime's workers share epoll: a poller each, or one for the whole runtime.
///
/// ```
/// use idspace::sched::{Builder, Poller};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Builder::new().workers(2).poller(Poller::Shared).build()?;
/// assert_eq!(runtime.handle().poller(), Poller::Shared);
/// let names: Vec<&str> = Poller::ALL.iter().map(|poller| poller.name()).collect();
/// assert_eq!(names, ["per-worker", "shared"]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Poller {
    /// Every worker owns a poller and polls it alone; a resource is registered with the poller
    /// of the worker that creates it (thread-per-core style). A readiness event for a task
    /// homed on another worker travels through that worker's wakelist.
    PerWorker,
    /// One poller for the whole runtime, held by at most one parked worker at a time while
    /// the other idle workers sleep on their futexes (tokio's driver). Readiness for a task
    /// homed on another worker travels through that worker's wakelist, as with
    /// [`PerWorker`](Poller::PerWorker).
    Shared,
}

impl Poller {
    /// Both shapes, in the order the lab reports them.
    pub const ALL: [Poller; 2] = [Poller::PerWorker, Poller::Shared];

    /// The shape's name: `per-worker` or `shared`.
    pub fn name(self) -> &'static str {
        match self {
            Poller::PerWorker => "per-worker",
            Poller::Shared => "shared",
        }
    }
}

impl std::fmt::Display for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// Set while this thread's worker delivers its poller's events.
    static DELIVERING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is a worker delivering its poller's events: the wakeups it makes
/// then are the network softirq's, made on a CPU that was idle.
#[cfg(not(loom))]
pub(crate) fn delivering() -> bool {
    DELIVERING.with(std::cell::Cell::get)
}

/// Runs `deliver` with [`delivering`] set.
#[cfg(not(loom))]
pub(crate) fn while_delivering<R>(deliver: impl FnOnce() -> R) -> R {
    /// Clears the flag also if a waker panics.
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            DELIVERING.with(|flag| flag.set(false));
        }
    }
    DELIVERING.with(|flag| flag.set(true));
    let _clear = Clear;
    deliver()
}

/// A busy worker looks at its poller every this many passes of its loop (tokio's
/// `event_interval` is 61 ticks).
#[cfg(not(loom))]
pub(crate) const IO_PASSES: u32 = 61;
