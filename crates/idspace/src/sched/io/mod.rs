//! The runtime's reactor: readiness from edge-triggered epoll (through `mio`), one poller per
//! worker.
//!
//! # Design
//!
//! Each worker owns a `mio::Poll` ([`Reactor`]). A resource is registered with the poller of
//! the worker that creates it (or, from a `block_on` thread, of a worker chosen round-robin).
//! The owning worker polls it:
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
//! An event sets the resource's readiness word ([`readiness`]) and wakes its reader or writer
//! through the runtime's ordinary wakeup path: a task whose last worker is another one travels
//! there through that worker's wakelist, like the kernel's network softirq waking a task on
//! another CPU.
//!
//! # Where we differ from tokio
//!
//! tokio shares one driver among its workers, held by whichever parked worker takes it first;
//! the others sleep on a condition variable. Per-worker pollers (thread-per-core style) need
//! no lock around the poller and keep a resource's events on one CPU, and they keep the wakelist
//! series' path for cross-worker wakeups. Their cost: a resource's events are delivered
//! only by its worker, so a worker stuck in a long poll delays them (the busy poll bounds it),
//! and resources stay with the worker that registered them.

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
