//! The kernel's own concurrency ID: `mm_cid` from the rseq area glibc registers for every
//! thread.
//!
//! glibc (2.35 and later) registers a `struct rseq` per thread, and the kernel writes the
//! thread's `cpu_id` and `mm_cid` there before every return to user space. This module reads
//! `mm_cid` only when everything says it is real:
//!
//! * the kernel fills the field: its `AT_RSEQ_FEATURE_SIZE` covers `mm_cid` (Linux 6.3 and later);
//! * the thread has an area: glibc registered one (it exports `__rseq_offset`, and `__rseq_size`
//!   covers at least the original 20 bytes of fields; both looked up at run time, so that a C
//!   library without them means `None`, not a link error), or glibc exports the symbols but
//!   registered nothing (`__rseq_size` 0, e.g. `GLIBC_TUNABLES=glibc.pthread.rseq=0`) and the
//!   crate registered an area of its own for the thread, as [`percid`](crate::percid) needs;
//! * registration worked for this thread: its `cpu_id` is not negative;
//! * the architecture's thread pointer is known (x86-64, AArch64).
//!
//! Otherwise the answer is `None`, never garbage. The readers never write to the area: every
//! field they read belongs to the kernel. (Finding the area, and the kernel's and glibc's
//! contract it rests on, is the crate's private platform layer.)
//!
//! ```
//! use idspace::cid::rseq;
//!
//! match rseq::current_mm_cid() {
//!     Some(cid) => {
//!         // Rule 2 of the ABI: below the CPU count.
//!         let cpus = rseq::possible_cpus().expect("a kernel with rseq has /sys");
//!         assert!((cid as usize) < cpus);
//!         assert!(rseq::available());
//!         assert!(rseq::feature_size() >= 28, "the kernel fills mm_cid");
//!         assert!(rseq::current_cpu().is_some());
//!     }
//!     None => assert!(!rseq::available()),
//! }
//! ```

use crate::sys::rseq::Area;

/// Whether this thread can read the kernel's mm_cid.
pub fn available() -> bool {
    Area::current().is_some()
}

/// The calling thread's concurrency ID as the kernel maintains it, or `None` where the kernel,
/// glibc or this thread's registration does not provide one.
///
/// Concurrency IDs are compact: however many threads a process has, the ones that run at the
/// same time share the few IDs below the CPU count.
///
/// ```
/// use idspace::cid::rseq;
///
/// let cids: Vec<Option<u32>> = std::thread::scope(|scope| {
///     let threads: Vec<_> = (0..16).map(|_| scope.spawn(rseq::current_mm_cid)).collect();
///     threads.into_iter().map(|thread| thread.join().unwrap()).collect()
/// });
/// if let Some(cpus) = rseq::possible_cpus() {
///     assert!(cids.iter().flatten().all(|&cid| (cid as usize) < cpus));
/// }
/// ```
#[inline]
pub fn current_mm_cid() -> Option<u32> {
    Area::current().map(Area::mm_cid)
}

/// The calling thread's CPU as the kernel maintains it in the same area, or `None`.
#[inline]
pub fn current_cpu() -> Option<u32> {
    Area::current().map(Area::cpu_id)
}

/// The kernel's `AT_RSEQ_FEATURE_SIZE`: how many bytes of the rseq area it fills (28 covers
/// `mm_cid`; 0 before Linux 6.3, and under Miri).
pub fn feature_size() -> u64 {
    crate::sys::rseq::feature_size()
}

/// The number of possible CPUs (`/sys/devices/system/cpu/possible`), the bound of rule 2.
///
/// ```
/// if let Some(possible) = idspace::cid::rseq::possible_cpus() {
///     // The CPUs this process may use are among the possible ones.
///     let usable = std::thread::available_parallelism().map_or(1, |n| n.get());
///     assert!((1..=possible).contains(&usable));
/// }
/// ```
pub fn possible_cpus() -> Option<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok()?;
    let mut count = 0;
    for part in text.trim().split(',') {
        let (low, high) = part.split_once('-').unwrap_or((part, part));
        let (low, high): (usize, usize) = (low.parse().ok()?, high.parse().ok()?);
        count += high.checked_sub(low)? + 1;
    }
    Some(count)
}
