//! The periodic scan over CPUs that takes back CIDs no task uses (`task_mm_cid_work`), where it
//! runs ([`ScanPlacement`]), and what it cost ([`ScanStats`]).

use core::time::Duration;

use super::SpaceState;
use crate::lock::Locks;
use crate::sync::{AtomicU64, Ordering};

/// Where the periodic CID scan of a [`LazyCids`](super::LazyCids) space runs.
///
/// ```
/// use std::time::Duration;
/// use idspace::cid::{CidAllocator, CidError, LazyCids, ScanPlacement, KERNEL_SCAN_PERIOD};
///
/// assert_eq!(ScanPlacement::OnDemand.period(), None);
/// let kernel = ScanPlacement::Tick { period: KERNEL_SCAN_PERIOD };
/// assert_eq!(kernel.period(), Some(Duration::from_millis(100)));
/// let never = ScanPlacement::Tick { period: Duration::ZERO };
/// assert_eq!(LazyCids::with_scan(2, never).err(), Some(CidError::BadScanPeriod));
/// # #[cfg(feature = "std")] { // a worker thread needs `std`
/// let absurd = ScanPlacement::Worker { period: Duration::MAX };
/// assert_eq!(LazyCids::with_scan(2, absurd).err(), Some(CidError::BadScanPeriod));
///
/// // A worker thread of the space scans every millisecond, whatever the switches do.
/// let every_ms = ScanPlacement::Worker { period: Duration::from_millis(1) };
/// let space = LazyCids::with_scan(2, every_ms)?;
/// let task = space.fork(0b11)?;
/// space.switch(0, Some(&task))?;
/// while space.scan_stats().invocations < 2 {
///     std::thread::sleep(Duration::from_millis(1));
/// }
/// # }
/// # Ok::<(), CidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScanPlacement {
    /// Only when [`CidAllocator::run_deferred`](crate::cid::CidAllocator::run_deferred) asks:
    /// each call is one scan, one period after the previous one. Deterministic, for tests and
    /// replays.
    OnDemand,
    /// Linux 6.4 to 6.18: every [`TICK_SWITCHES`] switch-ins a CPU takes a tick; a tick that
    /// finds the scan due (a period after the last one) makes the switching task run it before
    /// its switch returns (the kernel's `task_work`, run on the way back to user space). The
    /// scan's time lands on that switch.
    Tick {
        /// Time between scans (the kernel's `MM_CID_SCAN_DELAY`, 100 ms).
        period: Duration,
    },
    /// Gabriele Monaco's "sched: Move task_mm_cid_work to mm delayed work": a worker thread of
    /// the space runs the scan every period (the `delayed_work`), and returns at once when no
    /// CID is taken. Switches never run it.
    #[cfg(all(feature = "std", not(loom)))]
    Worker {
        /// Time between scans.
        period: Duration,
    },
}

/// A CPU takes a tick every this many switch-ins ([`ScanPlacement::Tick`]): the simulator's
/// stand-in for the timer interrupt, which has no user-space equivalent on the switch path.
///
/// ```
/// use std::time::Duration;
/// use idspace::cid::{CidAllocator, CidError, LazyCids, ScanPlacement, TICK_SWITCHES};
///
/// # #[cfg(not(feature = "std"))]
/// # {
/// #     // Without `std` the clock is the host's: here one that moves a microsecond a read.
/// #     use core::sync::atomic::{AtomicU64, Ordering};
/// #     struct Ticking(AtomicU64);
/// #     impl idspace::host::Host for Ticking {
/// #         fn cpus(&self) -> usize { 1 }
/// #         fn slot_hint(&self) -> usize { 0 }
/// #         fn now_ns(&self) -> u64 { self.0.fetch_add(1_000, Ordering::Relaxed) }
/// #     }
/// #     static CLOCK: Ticking = Ticking(AtomicU64::new(0));
/// #     idspace::host::install(&CLOCK).expect("the first install");
/// # }
/// let due_at_every_tick = ScanPlacement::Tick { period: Duration::from_nanos(1) };
/// let space = LazyCids::with_scan(1, due_at_every_tick)?;
/// let (a, b) = (space.fork(0b1)?, space.fork(0b1)?);
/// // Two ticks' worth of switch-ins on CPU 0.
/// for n in 0..2 * TICK_SWITCHES {
///     space.switch(0, Some(if n % 2 == 0 { &a } else { &b }))?;
/// }
/// assert!(space.scan_stats().invocations >= 1);
/// # Ok::<(), CidError>(())
/// ```
pub const TICK_SWITCHES: u32 = 64;

/// The kernel's scan period (`MM_CID_SCAN_DELAY` and `SCHED_MM_CID_PERIOD_NS`).
pub const KERNEL_SCAN_PERIOD: Duration = Duration::from_millis(100);

/// The longest scan period a space accepts: a day. A period is added to the clock to find the
/// next scan, so a bound keeps that sum in range; a longer one is
/// [`CidError::BadScanPeriod`](crate::cid::CidError::BadScanPeriod).
pub const MAX_SCAN_PERIOD: Duration = Duration::from_secs(86_400);

impl ScanPlacement {
    /// The period, if the scan is periodic.
    pub fn period(self) -> Option<Duration> {
        match self {
            ScanPlacement::OnDemand => None,
            ScanPlacement::Tick { period } => Some(period),
            #[cfg(all(feature = "std", not(loom)))]
            ScanPlacement::Worker { period } => Some(period),
        }
    }
}

/// What the scans of a space cost: the delayed-work series' probe (duration avg/max/sum,
/// invocations).
///
/// ```
/// use idspace::cid::{CidAllocator, CidError, LazyCids, ScanPlacement, ScanStats};
///
/// let space = LazyCids::with_scan(4, ScanPlacement::OnDemand)?;
/// assert_eq!(space.scan_stats(), ScanStats::default());
/// assert_eq!(space.scan_stats().mean(), std::time::Duration::ZERO);
/// for _ in 0..3 {
///     space.run_deferred(); // one scan each
/// }
/// let stats = space.scan_stats();
/// assert_eq!(stats.invocations, 3);
/// assert!(stats.max <= stats.total && stats.mean() <= stats.max);
/// # Ok::<(), CidError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Scans that ran (a worker's scan that found no CID taken counts, as in the series).
    pub invocations: u64,
    /// Their summed duration.
    pub total: Duration,
    /// The longest one.
    pub max: Duration,
}

impl ScanStats {
    /// The mean duration, or zero without scans.
    pub fn mean(&self) -> Duration {
        if self.invocations == 0 {
            Duration::ZERO
        } else {
            self.total / u32::try_from(self.invocations).unwrap_or(u32::MAX)
        }
    }
}

/// The scan's clock and probe.
pub(super) struct ScanState {
    pub(super) placement: ScanPlacement,
    /// When the space was made, on the host's clock ([`host::now_ns`](crate::host::now_ns)):
    /// the tick's clock counts from here.
    started: u64,
    /// Nanoseconds since `started` at which the next scan is due (`mm_cid_next_scan`).
    next_scan: AtomicU64,
    invocations: AtomicU64,
    total_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl ScanState {
    pub(super) fn new(placement: ScanPlacement) -> ScanState {
        let period = placement.period().map_or(0, nanos);
        ScanState {
            placement,
            started: crate::host::now_ns(),
            next_scan: AtomicU64::new(period),
            invocations: AtomicU64::new(0),
            total_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
        }
    }

    pub(super) fn stats(&self) -> ScanStats {
        // Relaxed: statistics.
        ScanStats {
            invocations: self.invocations.load(Ordering::Relaxed),
            total: Duration::from_nanos(self.total_ns.load(Ordering::Relaxed)),
            max: Duration::from_nanos(self.max_ns.load(Ordering::Relaxed)),
        }
    }

    fn record(&self, took: Duration) {
        let ns = nanos(took);
        // Relaxed: statistics.
        self.invocations.fetch_add(1, Ordering::Relaxed);
        self.total_ns.fetch_add(ns, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A scan is due when a CPU was unused since before the previous scan: "unused for a
/// period" (`SCHED_MM_CID_PERIOD_NS`), counted in scans, which are a period apart.
const UNUSED_SCANS: u64 = 2;

impl<L: Locks> SpaceState<L> {
    /// Counts a switch-in on `cpu` (its runqueue held); true if it is a tick that finds the
    /// scan due and wins it (`task_tick_mm_cid`, then the `task_work`'s check): the caller runs
    /// [`SpaceState::scan`] once it released the runqueue.
    pub(super) fn tick(&self, cpu: usize) -> bool {
        let ScanPlacement::Tick { period } = self.scan.placement else {
            return false;
        };
        let switches = &self.pcpus[cpu].switches;
        // Relaxed: only this CPU's switch path, under its runqueue lock, touches the counter.
        let count = switches.load(Ordering::Relaxed) + 1;
        if count < TICK_SWITCHES {
            switches.store(count, Ordering::Relaxed);
            return false;
        }
        switches.store(0, Ordering::Relaxed);
        let now = crate::host::now_ns().saturating_sub(self.scan.started);
        // Relaxed: the compare-and-swap below decides which tick wins a period.
        let due = self.scan.next_scan.load(Ordering::Relaxed);
        now >= due
            && self
                .scan
                .next_scan
                .compare_exchange(
                    due,
                    now.saturating_add(nanos(period)),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// One scan (`task_mm_cid_work`): CIDs of CPUs unused for a period go back, then CIDs at or
    /// above the number of CIDs taken (the bitmap's weight), so that the survivors' CIDs move
    /// down at their next switch-in. No runqueue lock is taken: each CPU's word goes through the
    /// lock-free remote transitions of [`pcpu`](super::pcpu).
    pub(super) fn scan(&self) {
        let started = crate::host::now_ns();
        // Relaxed: the epoch is a clock for the "unused" heuristic.
        let now = self.hot.epoch.fetch_add(1, Ordering::Relaxed) + 1;
        for pcpu in self.pcpus.iter() {
            if pcpu.curr.load(Ordering::Relaxed) {
                // A task of the space runs there: its CID is in use now
                // (`sched_mm_cid_remote_clear_old`).
                pcpu.time.store(now, Ordering::Relaxed);
                continue;
            }
            if now < pcpu.time.load(Ordering::Relaxed) + UNUSED_SCANS {
                continue;
            }
            pcpu.remote_clear(&self.cids);
        }
        let weight = self.cids.count();
        for pcpu in self.pcpus.iter() {
            // Acquire pairs with the Release stores of CIDs (`…_remote_clear_weight`).
            let word = pcpu.cid.load(Ordering::Acquire);
            if super::pcpu::is_valid(word) && word >= weight {
                pcpu.remote_clear(&self.cids);
            }
        }
        self.scan.record(Duration::from_nanos(
            crate::host::now_ns().saturating_sub(started),
        ));
    }

    /// The worker's scan: none at all when no CID is taken (the delayed-work series, patch 2).
    #[cfg(all(feature = "std", not(loom)))]
    pub(super) fn worker_scan(&self) {
        if self.cids.count() == 0 {
            self.scan.record(Duration::ZERO);
        } else {
            self.scan();
        }
    }
}

#[cfg(all(feature = "std", not(loom)))]
pub(super) use worker::Worker;

/// The series' `delayed_work`: a thread of the space's own.
#[cfg(all(feature = "std", not(loom)))]
mod worker {
    use std::thread::{self, JoinHandle};
    use std::time::{Duration, Instant};

    use super::SpaceState;
    use crate::lock::Locks;
    use crate::sync::{Arc, AtomicBool, Ordering};

    /// A thread that scans every period until dropped.
    pub(in crate::cid::lazy) struct Worker {
        stop: Arc<AtomicBool>,
        thread: Option<JoinHandle<()>>,
    }

    impl Worker {
        pub(in crate::cid::lazy) fn start<L: Locks>(
            shared: Arc<SpaceState<L>>,
            period: Duration,
        ) -> std::io::Result<Worker> {
            let stop = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&stop);
            let thread = thread::Builder::new()
                .name("cid-scan".into())
                .spawn(move || {
                    let mut next = Instant::now() + period;
                    // Acquire pairs with the Release store in `drop`.
                    while !flag.load(Ordering::Acquire) {
                        let now = Instant::now();
                        if now < next {
                            thread::park_timeout(next - now);
                            continue;
                        }
                        shared.worker_scan();
                        // Re-armed at each invocation (v2 of the delayed-work series).
                        next = Instant::now() + period;
                    }
                })?;
            Ok(Worker {
                stop,
                thread: Some(thread),
            })
        }
    }

    impl Drop for Worker {
        fn drop(&mut self) {
            // Release pairs with the Acquire load in the thread's loop.
            self.stop.store(true, Ordering::Release);
            if let Some(thread) = self.thread.take() {
                thread.thread().unpark();
                let _ = thread.join();
            }
        }
    }
}
