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

/// The installed host's slot hint, or the default's (a thread-local's address with `std`, 0
/// without).
#[inline]
pub fn slot_hint() -> usize {
    match INSTALLED.get() {
        Some(host) => host.slot_hint(),
        None => default_slot_hint(),
    }
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
    /// Its address tells threads apart.
    static THREAD_KEY: u8 = const { 0 };
}

#[cfg(feature = "std")]
#[inline]
fn default_slot_hint() -> usize {
    THREAD_KEY.with(|key| core::ptr::from_ref(key).addr())
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
