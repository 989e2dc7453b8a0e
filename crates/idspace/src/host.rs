//! What the families ask of the machine besides locks: how many CPUs there are, which CPU (or
//! thread) the caller is, and a monotonic clock.
//!
//! # Design
//!
//! Three answers, each used off the structures' hot paths or only as a hint:
//!
//! * [`Host::cpus`] sizes per-CPU structures when the caller names no size: a
//!   [`ScaledHash`](crate::table::ScaledHash)'s buckets and the tables' reader slots;
//! * [`Host::slot_hint`] spreads read-side sections and hazard pointers over their slots, so
//!   that callers on different CPUs write different cache lines; any value is correct, a
//!   constant one only contends;
//! * [`Host::now_ns`] times a [`LazyCids`](crate::cid::LazyCids) space's periodic scan.
//!
//! With the `std` feature the defaults are `std`'s: `available_parallelism`, the address of a
//! thread-local, and `Instant`. Without it nothing can be asked of an operating system, so a
//! kernel [`install`]s its own [`Host`] once at boot: its CPU count, the current CPU's index
//! (the per-CPU structures' own notion) and its monotonic clock. Until one is installed, a
//! `no_std` build sees one CPU, a slot hint of 0 and a clock that stands at 0 (scans placed on
//! the tick then never come due; [`ScanPlacement::OnDemand`](crate::cid::ScanPlacement) does
//! not read the clock).
//!
//! # Where we differ from the kernel
//!
//! The kernel reads `nr_cpu_ids`, `smp_processor_id()` and `ktime_get()` directly; a library
//! cannot, so it asks through one trait object installed once (a `static`, as the kernel's
//! own are).
//!
//! ```
//! use idspace::host::{self, Host};
//!
//! struct Board;
//! impl Host for Board {
//!     fn cpus(&self) -> usize {
//!         4
//!     }
//!     fn slot_hint(&self) -> usize {
//!         0 // a real kernel returns its current CPU's index
//!     }
//!     fn now_ns(&self) -> u64 {
//!         0 // and its monotonic clock
//!     }
//! }
//!
//! static BOARD: Board = Board;
//! host::install(&BOARD).expect("the first install");
//! assert_eq!(host::cpus(), 4);
//! assert!(host::install(&BOARD).is_err(), "a host is installed once");
//! ```

use core::fmt;

/// The machine's answers (see the [module docs](self)): implemented by a kernel and
/// [`install`]ed once.
///
/// A board with two CPUs whose timer interrupt counts ticks of a millisecond:
///
/// ```
/// use core::sync::atomic::{AtomicU64, Ordering};
/// use idspace::host::{self, Host};
/// use idspace::table::ScaledHash;
///
/// struct Board {
///     ticks: AtomicU64,
/// }
///
/// impl Host for Board {
///     fn cpus(&self) -> usize {
///         2
///     }
///     fn slot_hint(&self) -> usize {
///         0 // the current CPU's index on a real board
///     }
///     fn now_ns(&self) -> u64 {
///         self.ticks.load(Ordering::Relaxed) * 1_000_000
///     }
/// }
///
/// static BOARD: Board = Board { ticks: AtomicU64::new(0) };
/// host::install(&BOARD)?;
/// BOARD.ticks.fetch_add(3, Ordering::Relaxed); // three timer interrupts
/// assert_eq!(host::now_ns(), 3_000_000);
/// // Structures built from now on are sized for the board: the kernel's 512 buckets a CPU.
/// assert_eq!(ScaledHash::<u32>::kernel_sized().buckets(), 1024);
/// # Ok::<(), idspace::host::AlreadyInstalled>(())
/// ```
pub trait Host: Sync {
    /// The number of CPUs that may run the structures' callers, at least 1.
    fn cpus(&self) -> usize;
    /// A number that tells the calling CPU (or thread) apart from the others running now,
    /// such as the CPU's index. Only a hint: any value is correct.
    fn slot_hint(&self) -> usize;
    /// Monotonic nanoseconds since any fixed point.
    fn now_ns(&self) -> u64;
}

/// [`install`] was called after a host was already installed: the first one stays.
///
/// ```
/// use idspace::host::{self, AlreadyInstalled, Host};
///
/// struct Fixed(usize);
/// impl Host for Fixed {
///     fn cpus(&self) -> usize {
///         self.0
///     }
///     fn slot_hint(&self) -> usize {
///         0
///     }
///     fn now_ns(&self) -> u64 {
///         0
///     }
/// }
///
/// static BOOT: Fixed = Fixed(8);
/// static LATE: Fixed = Fixed(1);
/// assert_eq!(host::install(&BOOT), Ok(()));
/// let refused: AlreadyInstalled = host::install(&LATE).unwrap_err();
/// assert_eq!(refused.to_string(), "a host is already installed");
/// assert_eq!(host::cpus(), 8, "the first host stays");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadyInstalled;

impl fmt::Display for AlreadyInstalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a host is already installed")
    }
}

impl core::error::Error for AlreadyInstalled {}

static INSTALLED: spin::Once<&'static dyn Host> = spin::Once::new();

/// Installs `host` for the whole program, in place of the defaults; only the first call
/// installs, later ones are [`AlreadyInstalled`]. Structures built before the call keep the
/// sizes they took.
pub fn install(host: &'static dyn Host) -> Result<(), AlreadyInstalled> {
    let mut fresh = false;
    INSTALLED.call_once(|| {
        fresh = true;
        host
    });
    if fresh {
        Ok(())
    } else {
        Err(AlreadyInstalled)
    }
}

/// The installed host's CPU count, or the default's (`available_parallelism` with `std`, 1
/// without); at least 1.
pub fn cpus() -> usize {
    match INSTALLED.get() {
        Some(host) => host.cpus().max(1),
        None => default_cpus(),
    }
}

/// The installed host's slot hint, or the default's (with `std`, the CPU the thread runs on
/// where the kernel tells it through rseq, else a number handed to each thread in turn; 0
/// without `std`).
#[inline]
pub fn slot_hint() -> usize {
    match INSTALLED.get() {
        Some(host) => host.slot_hint(),
        None => default_slot_hint(),
    }
}

/// The slot of `slots` (a power of two) a structure with per-reader slots has the calling
/// thread try first: slots `2h` and `2h + 1` for a slot hint `h` below `slots / 2` (a CPU's
/// index: threads running on different CPUs at once start on different slots, and a thread
/// preempted in its slot leaves the next one to the thread that takes its CPU), a hash of the
/// hint above it (any other number a host may give).
#[cfg_attr(loom, allow(dead_code))] // Under loom every structure starts at its first slot.
#[inline]
pub(crate) fn first_slot(slots: usize) -> usize {
    slot_of(slot_hint(), slots)
}

/// [`first_slot`] for the slot hint `hint`.
#[inline]
#[cfg_attr(loom, allow(dead_code))]
fn slot_of(hint: usize, slots: usize) -> usize {
    let start = if hint < slots / 2 {
        hint * 2
    } else {
        crate::util::hash::mix(hint as u64, 0) as usize
    };
    start & (slots - 1)
}

/// The installed host's clock, or the default's (nanoseconds since the first call with `std`,
/// always 0 without).
pub fn now_ns() -> u64 {
    match INSTALLED.get() {
        Some(host) => host.now_ns(),
        None => default_now_ns(),
    }
}

#[cfg(feature = "std")]
fn default_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(not(feature = "std"))]
fn default_cpus() -> usize {
    1
}

#[cfg(feature = "std")]
std::thread_local! {
    /// The thread's number, handed out in turn at its first use (0 until then).
    static THREAD_NUMBER: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// The CPU the thread runs on, read from its rseq area (a load), so that threads running at
/// once on different CPUs tell themselves apart, as the kernel's per-CPU structures do; where
/// the kernel does not keep it (no rseq, Miri), a number handed to each thread in turn, so
/// that the first threads at least differ.
#[cfg(feature = "std")]
#[inline]
fn default_slot_hint() -> usize {
    if let Some(cpu) = crate::cid::rseq::current_cpu() {
        return cpu as usize;
    }
    THREAD_NUMBER.with(|number| {
        if number.get() == 0 {
            static NEXT: crate::sync::unmodeled::AtomicUsize =
                crate::sync::unmodeled::AtomicUsize::new(1);
            // Relaxed: the numbers need only differ.
            number.set(NEXT.fetch_add(1, crate::sync::unmodeled::Ordering::Relaxed));
        }
        number.get() - 1
    })
}

#[cfg(not(feature = "std"))]
#[inline]
fn default_slot_hint() -> usize {
    0
}

#[cfg(feature = "std")]
fn default_now_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(std::time::Instant::now);
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(not(feature = "std"))]
fn default_now_ns() -> u64 {
    0
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn cpu_indices_start_on_slot_pairs_of_their_own() {
        for slots in [4, 8, 64] {
            let starts: Vec<usize> = (0..slots / 2).map(|cpu| slot_of(cpu, slots)).collect();
            assert!(starts.iter().all(|&start| start % 2 == 0 && start < slots));
            let mut distinct = starts.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), starts.len(), "{slots} slots: {starts:?}");
        }
        // Other numbers (an address, a large CPU index) are hashed into range.
        for hint in [0x7f00_1234_5678, 1 << 40, 33] {
            assert!(slot_of(hint, 64) < 64);
        }
    }

    #[cfg(feature = "std")]
    #[test]
    fn threads_without_rseq_still_get_different_hints() {
        // With rseq the hint is the CPU, which two threads may share over time; without it,
        // each thread gets a number of its own.
        if crate::cid::rseq::current_cpu().is_some() {
            return;
        }
        let here = slot_hint();
        let there = std::thread::spawn(slot_hint).join().unwrap();
        assert_ne!(here, there);
    }
}
