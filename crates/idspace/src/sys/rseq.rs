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
//! The readers ([`Area::cpu_id`], [`Area::mm_cid`]) only read. Every read is volatile, because
//! the kernel may change the kernel's fields between any two instructions of the thread (as a
//! signal handler could), and every read is made by the thread that owns the area: [`Area`] is
//! neither `Send` nor `Sync`. The kernel's stores happen while that thread is inside the
//! kernel, so they never race with its own reads.
//!
//! The critical sections (`sys::rseq_cs`) write one field: `rseq_cs`, the one user space
//! owns, to arm a section. Nothing here ever writes `cpu_id_start`, `cpu_id`, `node_id` or
//! `mm_cid`: tcmalloc's cache in `cpu_id_start` broke on Linux 6.19, and Linux 7.1 kills a
//! process that writes the kernel's fields.
//!
//! # Registration
//!
//! glibc's area is used whenever glibc registered one. When it did not (its
//! `glibc.pthread.rseq` tunable is off, so `__rseq_size` is 0), each thread registers an area
//! of its own with the `rseq` system call the first time it asks, with the signature glibc
//! would have used; that area lives in the thread's static TLS block, which outlives every
//! return of the thread to user space (the C library frees it only after the kernel reports
//! the thread gone). A registration the kernel refuses is remembered, and the thread then has
//! no area: callers fall back to code without rseq. Under Miri, which runs no foreign calls and
//! no inline assembly, there is never an area.
//!
//! Critical sections find the area with [`Area::this_thread`], which every per-CID op runs: once
//! glibc's offset is known it is published in a plain static, and the area is that offset plus
//! the thread pointer, with the registration checked by one load of `cpu_id`; our own
//! registrations, and threads before the lookup, take the full path.

// Under Miri and loom the critical sections, the only users of the index fields, the
// signature and our own registrations, are compiled out.
#![cfg_attr(any(miri, loom), allow(dead_code))]

use core::sync::atomic::Ordering;

// Statics: loom's primitives cannot be created in one.
use crate::sync::unmodeled::{AtomicIsize, OnceLock};

/// `AT_RSEQ_FEATURE_SIZE` from `<linux/auxvec.h>` (the `libc` crate lacks it for glibc).
#[cfg(not(miri))]
const AT_RSEQ_FEATURE_SIZE: libc::c_ulong = 27;
/// The end of `mm_cid`: a feature size below this means the kernel does not fill it.
const MM_CID_END: u64 = 28;
/// The original rseq fields (`cpu_id_start`, `cpu_id`, `rseq_cs`, `flags`), the least size
/// glibc publishes for a registered area.
#[cfg(not(miri))]
const ORIGINAL_FIELDS: u32 = 20;
/// The size of the original `struct rseq`, the length our own registrations pass.
#[cfg(not(miri))]
const ORIGINAL_SIZE: u32 = 32;
/// The signature that must precede every abort handler, the value glibc registers with
/// (`RSEQ_SIG` of its `<sys/rseq.h>`): the kernel refuses to jump to a handler without it.
#[cfg(target_arch = "x86_64")]
pub(crate) const SIGNATURE: u32 = 0x5305_3053;
/// The signature that must precede every abort handler (`BRK #0x45E0`, glibc's AArch64
/// `RSEQ_SIG`).
#[cfg(target_arch = "aarch64")]
pub(crate) const SIGNATURE: u32 = 0xd428_bc00;
/// Elsewhere no critical sections exist; registrations still need some signature.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const SIGNATURE: u32 = 0x5305_3053;
pub(crate) const CPU_ID_OFFSET: usize = 4;
pub(crate) const RSEQ_CS_OFFSET: usize = 8;
pub(crate) const MM_CID_OFFSET: usize = 24;

/// Which index a thread is known by: the CPU it runs on, or its concurrency ID. Each variant's
/// value is its field's offset, so that a structure holding a `Field` finds the field with no
/// branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Field {
    /// The kernel's `cpu_id`.
    CpuId = CPU_ID_OFFSET,
    /// The kernel's `mm_cid`.
    MmCid = MM_CID_OFFSET,
}

impl Field {
    /// The field's offset in the area.
    #[inline]
    pub(crate) fn offset(self) -> usize {
        self as usize
    }
}

/// Who registered the calling thread's area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Registrar {
    /// glibc, at thread start.
    Glibc,
    /// This crate, because glibc did not.
    Own,
}

/// The calling thread's registered rseq area.
///
/// Made only by [`Area::registered`] (or [`Area::current`]) for the calling thread; the raw
/// pointer keeps it on that thread (neither `Send` nor `Sync`), where the area lives as long
/// as the thread.
#[derive(Clone, Copy)]
pub(crate) struct Area(*mut u8);

impl Area {
    /// This thread's area, or `None` unless the kernel fills `mm_cid`, an area is registered
    /// and the registration worked for this thread. The reader of `cid::rseq` uses this one.
    pub(crate) fn current() -> Option<Self> {
        if !mm_cid_filled() {
            return None;
        }
        Self::registered().map(|(area, _)| area)
    }

    /// This thread's registered area, as [`registered`](Self::registered) finds it, on the
    /// path every critical section takes. Where glibc registered areas (the usual case) this is
    /// a load of the offset it published, the thread pointer, and the check that the
    /// registration worked for this thread: three loads and two branches, all predicted, and
    /// no call. Anything else (our own registrations, no area) goes the slow way.
    #[inline]
    pub(crate) fn this_thread() -> Option<Self> {
        // Relaxed: the offset is a value complete in itself (a constant of glibc's); nothing
        // else is read through it, and a thread that does not see it yet takes the slow path,
        // which looks it up under the `OnceLock`.
        let offset = GLIBC_OFFSET.load(Ordering::Relaxed);
        if offset == NO_GLIBC_OFFSET {
            return Self::this_thread_slowly();
        }
        let area = Self(thread_pointer()?.wrapping_offset(offset));
        // A thread whose registration failed has a negative `cpu_id` for its whole life, and
        // an `mm_cid` nobody maintains: it must not index by either.
        if (area.cpu_id() as i32) < 0 {
            return None;
        }
        Some(area)
    }

    /// [`this_thread`](Self::this_thread) where glibc registered the area and its offset is
    /// published already; `None` otherwise, without the slow way (no call at all), for paths
    /// that keep their own slow path out of line.
    #[inline]
    pub(crate) fn this_thread_quick() -> Option<Self> {
        // Relaxed: as in `this_thread`.
        let offset = GLIBC_OFFSET.load(Ordering::Relaxed);
        if offset == NO_GLIBC_OFFSET {
            return None;
        }
        Self::at_glibc_offset(offset)
    }

    /// The calling thread's area at glibc's `offset` (from [`glibc_offset`], which a structure
    /// may keep, so that its fast path reads it with the structure's other words instead of
    /// through the GOT), if the thread's registration worked.
    #[inline(always)]
    pub(crate) fn at_glibc_offset(offset: isize) -> Option<Self> {
        let area = Self(thread_pointer()?.wrapping_offset(offset));
        // A thread whose registration failed has a negative `cpu_id` for its whole life, and
        // an `mm_cid` nobody maintains: it must not index by either.
        if (area.cpu_id() as i32) < 0 {
            return None;
        }
        Some(area)
    }

    /// [`this_thread`](Self::this_thread) before glibc's offset is published, or where glibc
    /// registered nothing.
    #[cold]
    #[inline(never)]
    fn this_thread_slowly() -> Option<Self> {
        Self::registered().map(|(area, _)| area)
    }

    /// This thread's registered area (glibc's, or one this crate registers now if glibc did
    /// not), with who registered it; `None` if the thread has none and cannot get one.
    #[inline]
    pub(crate) fn registered() -> Option<(Self, Registrar)> {
        match glibc_area_offset() {
            GlibcArea::Registered(offset) => {
                let area = Self(thread_pointer()?.wrapping_offset(offset));
                (area.read_u32(CPU_ID_OFFSET) as i32 >= 0).then_some((area, Registrar::Glibc))
            }
            GlibcArea::NotRegistered => own::area().map(|area| (Self(area), Registrar::Own)),
            GlibcArea::Unknown => None,
        }
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

    /// The index `field` names.
    #[inline]
    pub(crate) fn index(self, field: Field) -> u32 {
        self.read_u32(field.offset())
    }

    /// The area's address, which the critical sections reach `rseq_cs` and the index fields
    /// from by their offsets.
    #[inline]
    pub(crate) fn base(self) -> *mut u8 {
        self.0
    }

    /// Reads the kernel-owned `u32` field at `offset`.
    #[inline]
    fn read_u32(self, offset: usize) -> u32 {
        debug_assert!(offset == CPU_ID_OFFSET || offset == MM_CID_OFFSET);
        // `registered` found this thread's registered area (at least 32 bytes, 32-byte
        // aligned), and `Area` never leaves the thread, which is alive while it runs this code.
        // SAFETY: both offsets name aligned u32 fields inside the area; the read is volatile
        // because the kernel stores them whenever the thread enters and leaves the kernel.
        unsafe { self.0.add(offset).cast::<u32>().read_volatile() }
    }
}

/// Whether the kernel fills `mm_cid` in registered areas: its `AT_RSEQ_FEATURE_SIZE` covers
/// the field (Linux 6.3 and later). Looked up once.
pub(crate) fn mm_cid_filled() -> bool {
    static FILLED: OnceLock<bool> = OnceLock::new();
    *FILLED.get_or_init(|| feature_size() >= MM_CID_END)
}

/// The kernel's `AT_RSEQ_FEATURE_SIZE` (0 where absent, and under Miri).
pub(crate) fn feature_size() -> u64 {
    #[cfg(miri)]
    return 0;
    #[cfg(not(miri))]
    {
        // SAFETY: getauxval only reads the process's auxiliary vector (0 for an absent entry).
        let size = unsafe { libc::getauxval(AT_RSEQ_FEATURE_SIZE) };
        // `c_ulong` is 32 bits wide on 32-bit targets.
        #[allow(clippy::useless_conversion)]
        u64::from(size)
    }
}

/// What glibc says about its own areas.
#[derive(Clone, Copy)]
enum GlibcArea {
    /// Registered for every thread, at this offset from the thread pointer.
    Registered(isize),
    /// glibc exports the symbols but registered nothing (size 0): we may register our own.
    NotRegistered,
    /// No symbols (another C library, a glibc before 2.35), or Miri: we cannot know whether
    /// something else registered an area, so we do not try.
    Unknown,
}

/// glibc's `__rseq_offset` once [`glibc_area_offset`] has found that glibc registers areas;
/// [`NO_GLIBC_OFFSET`] before, and for good where it does not. [`Area::this_thread`] reads this
/// word instead of the `OnceLock` and its enum: one load and one compare.
static GLIBC_OFFSET: AtomicIsize = AtomicIsize::new(NO_GLIBC_OFFSET);
/// No offset published: 0, which glibc's offset never is, since the thread pointer points at
/// the thread control block (x86-64: its self pointer; AArch64: the DTV pointer), not at an
/// area. (Were it ever 0, the slow path would still find the area, only more slowly.)
const NO_GLIBC_OFFSET: isize = 0;

/// glibc's `__rseq_offset` where glibc registers an area for every thread (looked up now if it
/// was not yet), for [`Area::at_glibc_offset`]; `None` where it does not. glibc never changes
/// it after startup, so a structure may keep it.
pub(crate) fn glibc_offset() -> Option<isize> {
    match glibc_area_offset() {
        GlibcArea::Registered(offset) if offset != NO_GLIBC_OFFSET => Some(offset),
        _ => None,
    }
}

/// What glibc says, looked up once: glibc never changes it after startup.
#[inline]
fn glibc_area_offset() -> GlibcArea {
    static AREA: OnceLock<GlibcArea> = OnceLock::new();
    *AREA.get_or_init(|| {
        let found = find_glibc_area();
        if let GlibcArea::Registered(offset @ (..=-1 | 1..)) = found {
            // Relaxed: see `Area::this_thread`; readers need the value only.
            GLIBC_OFFSET.store(offset, Ordering::Relaxed);
        }
        found
    })
}

#[cfg(miri)]
fn find_glibc_area() -> GlibcArea {
    GlibcArea::Unknown
}

#[cfg(not(miri))]
fn find_glibc_area() -> GlibcArea {
    // SAFETY: dlsym with the default handle and NUL-terminated names; null means absent.
    let (offset, size) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()),
        )
    };
    if offset.is_null() || size.is_null() {
        return GlibcArea::Unknown;
    }
    // glibc defines `__rseq_offset` as a `const ptrdiff_t` and `__rseq_size` as a `const
    // unsigned int`, both written during startup and never again.
    // SAFETY: so both non-null pointers are valid, aligned, unchanging objects of those types.
    let (offset, size) = unsafe { (offset.cast::<isize>().read(), size.cast::<u32>().read()) };
    if size == 0 {
        GlibcArea::NotRegistered
    } else if size >= ORIGINAL_FIELDS {
        GlibcArea::Registered(offset)
    } else {
        GlibcArea::Unknown
    }
}

/// Areas this crate registers, one per thread, where glibc did not.
#[cfg(not(miri))]
mod own {
    use std::cell::{Cell, UnsafeCell};

    /// The original 32-byte `struct rseq`, aligned as the kernel requires. `cpu_id` starts
    /// negative (`RSEQ_CPU_ID_UNINITIALIZED`) until the kernel fills it.
    #[repr(C, align(32))]
    struct RawArea(UnsafeCell<[u32; 8]>);

    /// Not yet tried, registered, or refused by the kernel.
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Untried,
        Registered,
        Refused,
    }

    // Both have const initialisers and no destructor, so they live in the thread's static TLS
    // block for the thread's whole life, with no lazy setup and no teardown before exit.
    std::thread_local! {
        static AREA: RawArea = const { RawArea(UnsafeCell::new([0, u32::MAX, 0, 0, 0, 0, 0, 0])) };
        static STATE: Cell<State> = const { Cell::new(State::Untried) };
    }

    /// The calling thread's own area, registering it on first use; `None` if the kernel
    /// refused (no rseq, or an area registered by someone we cannot see).
    pub(super) fn area() -> Option<*mut u8> {
        let state = STATE.with(Cell::get);
        let area = AREA.with(|area| area.0.get().cast::<u8>());
        match state {
            State::Registered => return Some(area),
            State::Refused => return None,
            State::Untried => {}
        }
        // SAFETY: `area` is this thread's 32-byte, 32-byte aligned TLS block, alive until the
        // thread has exited (after which the kernel no longer writes it); flags 0 registers.
        let done = unsafe {
            libc::syscall(
                libc::SYS_rseq,
                area,
                super::ORIGINAL_SIZE,
                0,
                super::SIGNATURE,
            )
        };
        let state = if done == 0 {
            State::Registered
        } else {
            State::Refused
        };
        STATE.with(|cell| cell.set(state));
        (state == State::Registered).then_some(area)
    }
}

#[cfg(miri)]
mod own {
    /// Under Miri no area can be registered.
    pub(super) fn area() -> Option<*mut u8> {
        None
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn thread_pointer() -> Option<*mut u8> {
    let tp: *mut u8;
    // On x86-64 Linux, %fs:0 holds the thread control block's own address (the TLS ABI).
    // SAFETY: reading it has no side effects.
    unsafe {
        core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    Some(tp)
}

#[cfg(target_arch = "aarch64")]
#[inline]
fn thread_pointer() -> Option<*mut u8> {
    let tp: *mut u8;
    // TPIDR_EL0 holds the thread pointer on AArch64 Linux.
    // SAFETY: reading it has no side effects.
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags))
    };
    Some(tp)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn thread_pointer() -> Option<*mut u8> {
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

    /// The path the sections take finds the same area as the full lookup, on the thread that
    /// published glibc's offset and on one that reads it already published; and each field's
    /// discriminant is its offset.
    #[test]
    fn the_fast_lookup_finds_the_registered_area() {
        assert_eq!(Field::CpuId.offset(), CPU_ID_OFFSET);
        assert_eq!(Field::MmCid.offset(), MM_CID_OFFSET);
        let both = || {
            let fast = Area::this_thread().map(|area| area.0);
            let full = Area::registered().map(|(area, _)| area.0);
            assert_eq!(fast, full);
            // Once the lookup ran, the fast path reads the published offset where glibc
            // registered, and agrees again.
            assert_eq!(Area::this_thread().map(|area| area.0), full);
            full.is_some()
        };
        let here = both();
        let there = std::thread::spawn(both)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        assert_eq!(here, there, "glibc registers for every thread or for none");
        if let GlibcArea::Registered(offset) = glibc_area_offset() {
            assert_ne!(offset, NO_GLIBC_OFFSET);
            assert_eq!(GLIBC_OFFSET.load(Ordering::Relaxed), offset);
        }
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
