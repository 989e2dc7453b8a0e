//! The per-worker timer bases (the kernel's per-CPU `timer_base`): a wheel under its own lock,
//! the earliest tick it needs attention at (readable without the lock), and the expiry pass a
//! worker runs between polls.

// Timer targets are trait objects (`Handle::arm` takes std's `Arc<dyn Fire>`), which loom's `Arc`
// cannot hold; the bases themselves are counted by the facade's.
use crate::sync::unmodeled::Arc;
use std::task::Waker;
use std::time::Instant;

use super::clock::WheelClock;
use super::wheel::{Cancelled, Key, State, Wheel};
use super::Fire;
use crate::sync::{self, AtomicU64, AtomicUsize, Mutex, Ordering};

/// `next` when the wheel holds nothing.
const NOTHING: u64 = u64::MAX;

/// What an entry does when it expires.
pub(crate) enum Target {
    /// Wake a task (a sleeping future): the entry is freed as it expires.
    Wake(Waker),
    /// Call [`Fire::fire`]; the entry stays detached while it runs and is re-armed if it asks.
    Fire {
        /// The callback.
        target: Arc<dyn Fire>,
        /// The exact deadline, for [`Armed::deadline`](super::Armed::deadline).
        deadline: Instant,
    },
}

/// A wheel and whether it still takes entries (not after shutdown).
struct Locked {
    wheel: Wheel<Target>,
    closed: bool,
}

/// One worker's timers, in an allocation of their own (no line shared with another worker's).
pub(crate) struct Base {
    locked: Mutex<Locked>,
    /// A tick at or before the wheel's [`next_expiry`](Wheel::next_expiry) ([`NOTHING`] if
    /// none): the owning worker reads it without the lock to decide whether to take the lock and
    /// when to wake up. Written under the lock; a cancel leaves it early, which costs at most
    /// one needless look.
    next: AtomicU64,
}

/// What an expiry pass found: values to run outside the lock. Kept by the worker between passes
/// so that a pass allocates nothing once the vectors have grown.
#[derive(Default)]
pub(crate) struct Expired {
    expired: Vec<(Key, Target)>,
    wakers: Vec<Waker>,
    fired: Vec<(Key, Arc<dyn Fire>, Option<Instant>)>,
    /// Fired targets that are not re-armed, dropped after the lock is released.
    done: Vec<Arc<dyn Fire>>,
}

/// Every worker's timer base and the clock they share.
pub(crate) struct Timers {
    clock: WheelClock,
    bases: Box<[sync::Arc<Base>]>,
    /// Round-robin choice of a base for arms from threads that are not workers.
    next_external: AtomicUsize,
}

/// Where a sleeping future's entry stands ([`Slot::still_pending`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// In the wheel: its waker will be woken at the deadline.
    Pending,
    /// It expired (and was freed).
    Expired,
    /// The runtime shut down first: the entry will never expire.
    ShutDown,
}

/// An armed entry: the base that holds it (shared by reference count, so that a future or an
/// [`Armed`](super::Armed) reaches it without the runtime's own count, which every worker would
/// bounce) and its key.
pub(crate) struct Slot {
    base: sync::Arc<Base>,
    key: Key,
}

impl Slot {
    /// Cancels the entry; the value comes back to be dropped by the caller, outside the lock
    /// (dropping a waker may drop a task, whose futures may cancel timers of their own).
    pub(crate) fn cancel(&self) -> Cancelled<Target> {
        let mut locked = sync::lock(&self.base.locked);
        let cancelled = locked.wheel.cancel(self.key);
        if matches!(cancelled, Cancelled::Pending(_)) {
            // The next expiry may now be later (or none): keeping the worker's view exact
            // spares it clock reads and early wakeups for timers that are gone.
            self.base.publish_next(&locked.wheel);
        }
        cancelled
    }

    /// Whether the entry is on base `base` of `timers`.
    #[cfg_attr(any(loom, not(feature = "hyper")), allow(dead_code))] // Only hyper's timer uses it.
    pub(crate) fn is_on(&self, timers: &Timers, base: usize) -> bool {
        timers
            .bases
            .get(base)
            .is_some_and(|at| sync::Arc::ptr_eq(at, &self.base))
    }

    /// Whether a sleeping future's entry is still pending; if so its waker is replaced by
    /// `waker` unless that would wake the same task, and the old one is handed back to be
    /// dropped outside the lock.
    pub(crate) fn still_pending(&self, waker: &Waker) -> (Waiting, Option<Waker>) {
        let mut locked = sync::lock(&self.base.locked);
        if locked.closed {
            return (Waiting::ShutDown, None);
        }
        match locked.wheel.value_mut(self.key) {
            Some(Target::Wake(old)) if old.will_wake(waker) => (Waiting::Pending, None),
            Some(Target::Wake(old)) => (
                Waiting::Pending,
                Some(std::mem::replace(old, waker.clone())),
            ),
            _ => (Waiting::Expired, None),
        }
    }

    /// The deadline of a pending [`Target::Fire`] entry.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let mut locked = sync::lock(&self.base.locked);
        match locked.wheel.state(self.key) {
            Some(State::Pending(_)) => match locked.wheel.value_mut(self.key) {
                Some(Target::Fire { deadline, .. }) => Some(*deadline),
                _ => None,
            },
            _ => None,
        }
    }
}

impl Base {
    /// Stores the wheel's next expiry as the worker's view of it, if it changed. Called under
    /// the lock, which orders all writers. Relaxed: the worker reads it after its SeqCst fence
    /// in `start_polling`; an arm that moves it earlier from another thread then notifies the
    /// worker, whose `Idle::notify` fence pairs with that one.
    fn publish_next(&self, wheel: &Wheel<Target>) {
        let next = wheel.next_expiry().unwrap_or(NOTHING);
        if next != self.next.load(Ordering::Relaxed) {
            self.next.store(next, Ordering::Relaxed);
        }
    }
}

impl Timers {
    /// Timer bases for `workers` workers, with the clock starting now.
    pub(crate) fn new(workers: usize) -> Self {
        Timers {
            clock: WheelClock::new(),
            bases: (0..workers)
                .map(|_| {
                    sync::Arc::new(Base {
                        locked: Mutex::new(Locked {
                            wheel: Wheel::new(),
                            closed: false,
                        }),
                        next: AtomicU64::new(NOTHING),
                    })
                })
                .collect(),
            next_external: AtomicUsize::new(0),
        }
    }

    /// The base an arm from outside the workers goes to.
    pub(crate) fn external_base(&self) -> usize {
        // Relaxed: spreading arms over the workers is a heuristic.
        self.next_external.fetch_add(1, Ordering::Relaxed) % self.bases.len()
    }

    /// Arms `target` due at `deadline` on base `base`. Returns the entry and whether the base's
    /// next expiry moved earlier (then a parked worker must be told, see
    /// [`Driver::kick`](super::Driver::kick)); `Ok(None)` for a [`Target::Wake`] whose deadline
    /// the wheel has already seen pass (the sleeping future completes at once, with no clock
    /// read); `Err(target)` after shutdown.
    pub(crate) fn arm(
        &self,
        base: usize,
        deadline: Instant,
        target: Target,
    ) -> Result<Option<(Slot, bool)>, Target> {
        let tick = self.clock.tick_at_or_after(deadline);
        let at = &self.bases[base];
        let mut locked = sync::lock(&at.locked);
        if locked.closed {
            return Err(target);
        }
        if tick <= locked.wheel.elapsed() && matches!(target, Target::Wake(_)) {
            drop(locked);
            return Ok(None);
        }
        let key = locked.wheel.insert(tick, target);
        let before = at.next.load(Ordering::Relaxed);
        at.publish_next(&locked.wheel);
        let earlier = at.next.load(Ordering::Relaxed) < before;
        drop(locked);
        Ok(Some((
            Slot {
                base: sync::Arc::clone(at),
                key,
            },
            earlier,
        )))
    }

    /// When worker `base` must next look at its wheel, as an instant (`None`: nothing armed, or
    /// beyond what an `Instant` holds). Relaxed: see [`arm`](Self::arm).
    pub(crate) fn next_deadline(&self, base: usize) -> Option<Instant> {
        match self.bases[base].next.load(Ordering::Relaxed) {
            NOTHING => None,
            tick => self.clock.instant(tick),
        }
    }

    /// The worker's expiry pass: if something on base `base` is due, detach it under the lock,
    /// then wake and fire outside it, then re-arm or free the fired entries under the lock
    /// again. Cheap when nothing is due: one relaxed load, and a clock read only when something
    /// is armed. Returns how many entries expired.
    pub(crate) fn expire(&self, base: usize, scratch: &mut Expired) -> usize {
        let at = &self.bases[base];
        let next = at.next.load(Ordering::Relaxed);
        if next == NOTHING {
            return 0;
        }
        let now = Instant::now();
        let passed = self.clock.tick_passed(now);
        if passed < next {
            return 0;
        }
        {
            let mut locked = sync::lock(&at.locked);
            locked.wheel.advance(passed, &mut scratch.expired);
            for (key, target) in scratch.expired.drain(..) {
                match target {
                    Target::Wake(waker) => {
                        locked.wheel.release(key);
                        scratch.wakers.push(waker);
                    }
                    Target::Fire { target, .. } => scratch.fired.push((key, target, None)),
                }
            }
            at.publish_next(&locked.wheel);
        }
        let count = scratch.wakers.len() + scratch.fired.len();
        for waker in scratch.wakers.drain(..) {
            waker.wake();
        }
        if scratch.fired.is_empty() {
            return count;
        }
        for (_, target, again) in scratch.fired.iter_mut() {
            *again = target.fire(now);
        }
        {
            let mut locked = sync::lock(&at.locked);
            for (key, target, again) in scratch.fired.drain(..) {
                match again {
                    Some(deadline) => {
                        let tick = self.clock.tick_at_or_after(deadline);
                        if let Err(Target::Fire { target, .. }) =
                            locked
                                .wheel
                                .rearm(key, tick, Target::Fire { target, deadline })
                        {
                            // Cancelled while it fired: it stays cancelled.
                            scratch.done.push(target);
                        }
                    }
                    None => {
                        locked.wheel.release(key);
                        scratch.done.push(target);
                    }
                }
            }
            at.publish_next(&locked.wheel);
        }
        scratch.done.clear();
        count
    }

    /// Closes every base: arms are refused from now on, and the entries left will never
    /// expire. Each sleeping future's waker is woken, so that a future polled by a thread or an
    /// executor outside the runtime learns at its next poll that its runtime is gone
    /// ([`Waiting::ShutDown`]) instead of waiting forever; [`Fire`] targets are dropped. Both
    /// happen outside the bases' locks: a waker may run anything, a target may hold the runtime.
    pub(crate) fn close(&self) {
        let mut left = Vec::new();
        for base in self.bases.iter() {
            let mut locked = sync::lock(&base.locked);
            locked.closed = true;
            left.extend(locked.wheel.drain());
            base.next.store(NOTHING, Ordering::Relaxed);
        }
        for target in left {
            match target {
                Target::Wake(waker) => waker.wake(),
                Target::Fire { target, .. } => drop(target),
            }
        }
    }
}
