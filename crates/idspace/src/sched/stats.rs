//! Counters of how wakeups travelled, for the lab and for tests. Each waker counts into its own
//! worker's (cache-padded) slot, so counting adds no shared cache line to the wake path.

use crate::sync::{AtomicU64, Ordering};

/// How the wakeups and idle periods of a runtime went, summed over its workers.
///
/// ```
/// use idspace::sched::{Policy, Runtime, Stats};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::new(2, Policy::Wakelist)?;
/// assert_eq!(runtime.stats(), Stats::default());
/// for n in 0..5u32 {
///     assert_eq!(runtime.spawn(async move { n }).join()?, n);
/// }
/// let stats = runtime.stats();
/// assert_eq!(stats.spawned, 5);
/// assert_eq!(stats.cancelled, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Tasks spawned.
    pub spawned: u64,
    /// Wakeups that put the wakee into the waker's worker's next slot (sync wakeups).
    pub affine: u64,
    /// Wakeups queued on the waker's own worker's run queue, and tasks a sync wakeup displaced
    /// there from the next slot (no remote queue touched).
    pub local: u64,
    /// Wakeups that locked a remote worker's run queue.
    pub locked: u64,
    /// Wakeups pushed onto a remote worker's wakelist.
    pub wakelist: u64,
    /// Notifications that found the target polling and only set its flag (no system call).
    pub notify_polling: u64,
    /// Notifications that had to wake a sleeping worker with a futex wake.
    pub notify_futex: u64,
    /// Notifications that had to wake a worker asleep in its poller with an eventfd write.
    pub notify_poller: u64,
    /// I/O readiness events the workers' pollers delivered.
    pub io_events: u64,
    /// Times a worker went to sleep.
    pub parks: u64,
    /// Wakelist batches a worker moved to its run queue.
    pub batches: u64,
    /// Times a worker's next slot hit the starvation cap and its task went behind the queue.
    pub capped: u64,
    /// Tasks moved by steals of idle workers (newidle balance).
    pub stolen: u64,
    /// Wakeups an idle worker took from the wakelist of a worker that had left them there too
    /// long (most likely a worker the host had taken off its CPU).
    pub rescued: u64,
    /// Notifications of an idle worker by an overloaded one (periodic balance).
    pub kicks: u64,
    /// Tasks cancelled at shutdown.
    pub cancelled: u64,
}

/// Field by field: the counts of two runs (or two runtimes) together.
///
/// ```
/// use idspace::sched::Stats;
///
/// let one = Stats { spawned: 2, wakelist: 5, ..Stats::default() };
/// let two = Stats { spawned: 3, locked: 1, ..Stats::default() };
/// let both = one + two;
/// assert_eq!((both.spawned, both.wakelist, both.locked), (5, 5, 1));
/// ```
impl std::ops::Add for Stats {
    type Output = Stats;

    fn add(self, other: Stats) -> Stats {
        Stats {
            spawned: self.spawned + other.spawned,
            affine: self.affine + other.affine,
            local: self.local + other.local,
            locked: self.locked + other.locked,
            wakelist: self.wakelist + other.wakelist,
            notify_polling: self.notify_polling + other.notify_polling,
            notify_futex: self.notify_futex + other.notify_futex,
            notify_poller: self.notify_poller + other.notify_poller,
            io_events: self.io_events + other.io_events,
            parks: self.parks + other.parks,
            batches: self.batches + other.batches,
            capped: self.capped + other.capped,
            stolen: self.stolen + other.stolen,
            rescued: self.rescued + other.rescued,
            kicks: self.kicks + other.kicks,
            cancelled: self.cancelled + other.cancelled,
        }
    }
}

/// One slot of counters, written Relaxed: they are statistics, read after the fact.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) spawned: Counter,
    pub(crate) affine: Counter,
    pub(crate) local: Counter,
    pub(crate) locked: Counter,
    pub(crate) wakelist: Counter,
    pub(crate) notify_polling: Counter,
    pub(crate) notify_futex: Counter,
    pub(crate) notify_poller: Counter,
    pub(crate) io_events: Counter,
    pub(crate) parks: Counter,
    pub(crate) batches: Counter,
    pub(crate) capped: Counter,
    pub(crate) stolen: Counter,
    pub(crate) rescued: Counter,
    pub(crate) kicks: Counter,
    pub(crate) cancelled: Counter,
}

/// A statistics counter.
pub(crate) struct Counter(AtomicU64);

impl Default for Counter {
    fn default() -> Self {
        Counter(AtomicU64::new(0))
    }
}

impl Counter {
    pub(crate) fn add(&self, n: u64) {
        // Relaxed: a statistic, ordered with nothing.
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Counters {
    pub(crate) fn add_to(&self, total: &mut Stats) {
        total.spawned += self.spawned.get();
        total.affine += self.affine.get();
        total.local += self.local.get();
        total.locked += self.locked.get();
        total.wakelist += self.wakelist.get();
        total.notify_polling += self.notify_polling.get();
        total.notify_futex += self.notify_futex.get();
        total.notify_poller += self.notify_poller.get();
        total.io_events += self.io_events.get();
        total.parks += self.parks.get();
        total.batches += self.batches.get();
        total.capped += self.capped.get();
        total.stolen += self.stolen.get();
        total.rescued += self.rescued.get();
        total.kicks += self.kicks.get();
        total.cancelled += self.cancelled.get();
    }
}
