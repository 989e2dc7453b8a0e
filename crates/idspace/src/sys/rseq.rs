//! The rseq area glibc registers for every thread: finding it, and reading the fields the
//! kernel keeps there. This is the only code that asks the dynamic linker, the auxiliary vector
//! or the thread pointer anything; `cid::rseq` is the public reader on top of it.
//!
//! # The contract relied on
//!
//! **The kernel** (`include/uapi/linux/rseq.h`). A registered `struct rseq` is 32-byte aligned:
//!
//! | offset | field | owned by |
//! |---|---|---|
//! | 0 | `u32 cpu_id_start` | the kernel |
//! | 4 | `u32 cpu_id` | the kernel |
//! | 8 | `u64 rseq_cs` | user space arms critical sections in it; the kernel clears it |
//! | 16 | `u32 flags` | user space (deprecated) |
//! | 20 | `u32 node_id` | the kernel |
//! | 24 | `u32 mm_cid` | the kernel |
//!
//! The kernel stores its fields before the thread returns to user space whenever they may have
//! changed (after preemption, migration or a signal). `cpu_id` is negative while the thread has
//! no working registration (`RSEQ_CPU_ID_UNINITIALIZED`, `RSEQ_CPU_ID_REGISTRATION_FAILED`).
//! Which fields it fills at all it publishes in the auxiliary vector as
//! `AT_RSEQ_FEATURE_SIZE` (absent, so 0, before Linux 6.3): `mm_cid` ends at byte 28.
//!
//! **glibc** (2.35 and later). It registers one area per thread, at `thread pointer +
//! __rseq_offset`, before `main` runs or a new thread's start routine is called, and publishes
//! the size it registered in `__rseq_size` (0: glibc did not register, e.g. the
//! `glibc.pthread.rseq` tunable is off). Both symbols are `const` objects written during startup
//! and never again; we find them with `dlsym`, so that a C library without them means "no area",
//! not a link error. glibc registers at least the original 32-byte `struct rseq`, which covers
//! `mm_cid`, and the kernel fills `mm_cid` in every registered area once its feature size covers
//! it. Newer glibc publishes the usable size (28 or more) in `__rseq_size`; glibc 2.36 as Debian
//! ships it publishes 20, the original fields, while the kernel fills `mm_cid` all the same
//! (checked on this project's machines: Linux 6.18). So a size of at least 20 is accepted.
//!
//! **The CPU.** On x86-64 Linux `%fs:0` holds the thread control block's own address; on
//! AArch64 `TPIDR_EL0` holds the thread pointer. Elsewhere there is no area.
//!
//! # What this code does with it
//!
//! It only reads, and never writes any field of the area: not even `rseq_cs`, the one field
//! user space may write. Every read is volatile, because the kernel may change the kernel's
//! fields between any two instructions of the thread (as a signal handler could), and every
//! read is made by the thread that owns the area: [`Area`] is neither `Send` nor `Sync`. The
//! kernel's stores happen while that thread is inside the kernel, so they never race with its
//! own reads. Under Miri, which runs no foreign calls and no inline assembly, there is no area.

use std::sync::OnceLock;

/// `AT_RSEQ_FEATURE_SIZE` from `<linux/auxvec.h>` (the `libc` crate lacks it for glibc).
#[cfg(not(miri))]
const AT_RSEQ_FEATURE_SIZE: libc::c_ulong = 27;
/// The end of `mm_cid`: a feature size below this means the kernel does not fill it.
#[cfg(not(miri))]
const MM_CID_END: libc::c_ulong = 28;
/// The original rseq fields (`cpu_id_start`, `cpu_id`, `rseq_cs`, `flags`), the least size
/// glibc publishes for a registered area.
#[cfg(not(miri))]
const ORIGINAL_FIELDS: u32 = 20;
const CPU_ID_OFFSET: usize = 4;
const MM_CID_OFFSET: usize = 24;

/// The calling thread's registered rseq area, in which the kernel maintains `mm_cid`.
///
/// Made only by [`Area::current`], for the calling thread; the raw pointer keeps it on that
/// thread (neither `Send` nor `Sync`), where the area lives as long as the thread.
#[derive(Clone, Copy)]
pub(crate) struct Area(*const u8);

impl Area {
    /// This thread's area, or `None` unless the kernel fills `mm_cid`, glibc registered an area
    /// and the registration worked for this thread.
    pub(crate) fn current() -> Option<Self> {
        let offset = area_offset()?;
        let area = Self(thread_pointer()?.wrapping_offset(offset));
        (area.read_u32(CPU_ID_OFFSET) as i32 >= 0).then_some(area)
    }

    /// The CPU the thread is running on (the kernel's `cpu_id`).
    #[inline]
    pub(crate) fn cpu_id(self) -> u32 {
        self.read_u32(CPU_ID_OFFSET)
    }

    /// The thread's concurrency ID (the kernel's `mm_cid`).
    #[inline]
    pub(crate) fn mm_cid(self) -> u32 {
        self.read_u32(MM_CID_OFFSET)
    }

    /// Reads the kernel-owned `u32` field at `offset`.
    #[inline]
    fn read_u32(self, offset: usize) -> u32 {
        debug_assert!(offset == CPU_ID_OFFSET || offset == MM_CID_OFFSET);
        // `current` found this thread's registered area (at least 32 bytes, 32-byte aligned),
        // and `Area` never leaves the thread, which is alive while it runs this code.
        // SAFETY: both offsets name aligned u32 fields inside the area; the read is volatile
        // because the kernel stores them whenever the thread enters and leaves the kernel.
        unsafe { self.0.add(offset).cast::<u32>().read_volatile() }
    }
}

/// The offset of the rseq area from the thread pointer, if the area holds `mm_cid`; looked up
/// once, as glibc never changes it after startup.
fn area_offset() -> Option<isize> {
    static OFFSET: OnceLock<Option<isize>> = OnceLock::new();
    *OFFSET.get_or_init(find_area_offset)
}

#[cfg(miri)]
fn find_area_offset() -> Option<isize> {
    None
}

#[cfg(not(miri))]
fn find_area_offset() -> Option<isize> {
    // SAFETY: getauxval only reads the process's auxiliary vector (0 for an absent entry).
    let feature_size = unsafe { libc::getauxval(AT_RSEQ_FEATURE_SIZE) };
    if feature_size < MM_CID_END {
        return None;
    }
    // SAFETY: dlsym with the default handle and NUL-terminated names; null means absent.
    let (offset, size) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()),
        )
    };
    if offset.is_null() || size.is_null() {
        return None;
    }
    // glibc defines `__rseq_offset` as a `const ptrdiff_t` and `__rseq_size` as a `const
    // unsigned int`, both written during startup and never again.
    // SAFETY: so both non-null pointers are valid, aligned, unchanging objects of those types.
    let (offset, size) = unsafe { (offset.cast::<isize>().read(), size.cast::<u32>().read()) };
    (size >= ORIGINAL_FIELDS).then_some(offset)
}

#[cfg(target_arch = "x86_64")]
fn thread_pointer() -> Option<*const u8> {
    let tp: *const u8;
    // On x86-64 Linux, %fs:0 holds the thread control block's own address (the TLS ABI).
    // SAFETY: reading it has no side effects.
    unsafe {
        core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    Some(tp)
}

#[cfg(target_arch = "aarch64")]
fn thread_pointer() -> Option<*const u8> {
    let tp: *const u8;
    // TPIDR_EL0 holds the thread pointer on AArch64 Linux.
    // SAFETY: reading it has no side effects.
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags))
    };
    Some(tp)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn thread_pointer() -> Option<*const u8> {
    None
}

#[cfg(all(test, not(loom), not(miri)))]
mod tests {
    use super::*;

    /// Pins the calling thread to `cpu`.
    fn pin(cpu: usize) {
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
        // SAFETY: `cpu` is below CPU_SETSIZE (the caller found it in a cpu_set_t).
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: a valid set of the size passed, for the calling thread.
        let done = unsafe { libc::sched_setaffinity(0, core::mem::size_of_val(&set), &set) };
        assert_eq!(done, 0, "cannot pin to CPU {cpu}");
    }

    /// Pinned to each CPU it may use in turn, a thread finds that CPU in its area's `cpu_id`:
    /// the thread pointer, the published offset and the field offset are right. (A wrong
    /// offset reads a constant, or another thread's area, and misses the CPU it was moved to.)
    #[test]
    fn the_area_names_the_cpu_the_thread_is_pinned_to() {
        std::thread::spawn(|| {
            let Some(area) = Area::current() else {
                eprintln!("skipped: this kernel, glibc or thread provides no rseq mm_cid");
                return;
            };
            // SAFETY: an all-zero cpu_set_t is a valid empty set.
            let mut allowed: libc::cpu_set_t = unsafe { core::mem::zeroed() };
            // SAFETY: a valid set of the size passed, for the calling thread.
            let got = unsafe {
                libc::sched_getaffinity(0, core::mem::size_of_val(&allowed), &mut allowed)
            };
            assert_eq!(got, 0, "sched_getaffinity failed");
            let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                // SAFETY: `cpu` is below CPU_SETSIZE.
                .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &allowed) })
                .take(16)
                .collect();
            for &cpu in cpus.iter().chain(cpus.iter().rev()) {
                pin(cpu);
                assert_eq!(
                    area.cpu_id() as usize,
                    cpu,
                    "cpu_id after pinning to CPU {cpu}"
                );
            }
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    }
}
