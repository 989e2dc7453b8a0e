//! The kernel's own concurrency ID: `mm_cid` from the rseq area glibc registers for every
//! thread.
//!
//! glibc (2.35 and later) registers a `struct rseq` per thread at `thread pointer +
//! __rseq_offset` and publishes its size in `__rseq_size`. The kernel writes the thread's
//! `cpu_id` (offset 4) and `mm_cid` (offset 24) there before every return to user space. We
//! read `mm_cid` only when everything says it is real:
//!
//! * the kernel supports the field: `getauxval(AT_RSEQ_FEATURE_SIZE) >= 28`;
//! * glibc registered an area: `__rseq_size` is at least 20, the original fields (found with
//!   `dlsym`, so that a glibc without rseq means `None`, not a link error; 0 means glibc did not
//!   register). glibc registers at least the original 32-byte `struct rseq`, which covers
//!   `mm_cid` at offset 24, and the kernel fills `mm_cid` in every registered area once its
//!   feature size covers it. Newer glibc publishes the usable size (28 or more) here; glibc
//!   2.36 as Debian ships it publishes 20 while the kernel fills `mm_cid` all the same (checked
//!   on this project's machines: Linux 6.18);
//! * registration worked for this thread: `cpu_id` is not negative (the kernel's
//!   `RSEQ_CPU_ID_UNINITIALIZED` / `REGISTRATION_FAILED`);
//! * the architecture's thread pointer is known (x86-64, AArch64).
//!
//! Otherwise the answer is `None`, never garbage.

use std::sync::OnceLock;

const AT_RSEQ_FEATURE_SIZE: libc::c_ulong = 27;
const MM_CID_OFFSET: usize = 24;
const CPU_ID_OFFSET: usize = 4;
const MM_CID_END: libc::c_ulong = 28;
/// The original rseq fields (`cpu_id_start`, `cpu_id`, `rseq_cs`, `flags`).
const ORIGINAL_FIELDS: u32 = 20;

/// The offset of the rseq area from the thread pointer, if the area holds `mm_cid`.
fn area_offset() -> Option<isize> {
    static OFFSET: OnceLock<Option<isize>> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        // SAFETY: getauxval only reads the process's auxiliary vector.
        let feature_size = unsafe { libc::getauxval(AT_RSEQ_FEATURE_SIZE) };
        if feature_size < MM_CID_END {
            return None;
        }
        // A null result means the symbol is absent.
        // SAFETY: dlsym with the default handle and NUL-terminated names.
        let (offset, size) = unsafe {
            (
                libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()),
                libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()),
            )
        };
        if offset.is_null() || size.is_null() {
            return None;
        }
        // glibc defines `__rseq_offset` as a `ptrdiff_t` and `__rseq_size` as an `unsigned
        // int`, both initialised before `main` and never written again.
        // SAFETY: so both pointers are valid for reads of those types.
        let (offset, size) = unsafe { (*(offset as *const isize), *(size as *const u32)) };
        (size >= ORIGINAL_FIELDS).then_some(offset)
    })
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

/// The calling thread's rseq area, if it holds a kernel-maintained `mm_cid`.
fn area() -> Option<*const u8> {
    let offset = area_offset()?;
    let area = thread_pointer()?.wrapping_offset(offset);
    // glibc registered this thread's `struct rseq`, at least the original 32 bytes, at thread
    // pointer + offset (checked in `area_offset`). The kernel writes it: a volatile read.
    // SAFETY: `cpu_id` is an aligned u32 at offset 4 of that area.
    let cpu_id = unsafe { core::ptr::read_volatile(area.add(CPU_ID_OFFSET) as *const i32) };
    (cpu_id >= 0).then_some(area)
}

/// Whether this thread can read the kernel's mm_cid.
pub fn available() -> bool {
    area().is_some()
}

/// The calling thread's concurrency ID as the kernel maintains it, or `None` where the kernel,
/// glibc or this thread's registration does not provide one.
#[inline]
pub fn current_mm_cid() -> Option<u32> {
    let area = area()?;
    // Written by the kernel on return to user space: a volatile read.
    // SAFETY: as in `area`: `mm_cid` is an aligned u32 at offset 24 of the registered area.
    Some(unsafe { core::ptr::read_volatile(area.add(MM_CID_OFFSET) as *const u32) })
}

/// The calling thread's CPU as the kernel maintains it in the same area, or `None`.
#[inline]
pub fn current_cpu() -> Option<u32> {
    let area = area()?;
    // SAFETY: as in `area`.
    Some(unsafe { core::ptr::read_volatile(area.add(CPU_ID_OFFSET) as *const u32) })
}

/// The number of possible CPUs (`/sys/devices/system/cpu/possible`), the bound of rule 2.
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
