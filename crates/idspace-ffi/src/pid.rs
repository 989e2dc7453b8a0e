//! `idspace_pid*`: namespaced PID allocation, with the kernel's `set_tid` restore.
//!
//! The caller's thread picks the worker slot the per-CPU design allocates on: the CPU it runs
//! on (`sched_getcpu`), modulo the slots, so that threads on different CPUs take different
//! locks without the caller naming a CPU.

use core::ffi::c_int;

use idspace::pid::{
    BitmapHash, IdrOnce, IdrRelock, NsId, PerCpu, PidAllocator, MAX_LEVEL, PID_MAX_LIMIT,
    PID_MAX_MIN,
};

use crate::boundary::{self, need, write_out};
use crate::errno;
use crate::object::{IdspacePids, Pids};

/// `IdrRelock`: a radix tree per namespace under one global lock, taken per level and once
/// more to publish (Linux before 7.0).
pub const IDSPACE_PIDS_IDR_RELOCK: u32 = 0;
/// `IdrOnce`: the same, one hold of the lock for all levels (Linux 7.0): the kernel's exact
/// numbers. The recommended design when numbers must match the kernel's.
pub const IDSPACE_PIDS_IDR_ONCE: u32 = 1;
/// `BitmapHash`: flat bitmaps under one lock, lookups through a striped hash (FreeBSD).
pub const IDSPACE_PIDS_BITMAP_HASH: u32 = 2;
/// `PerCpu`: per-CPU ranges of 256 IDs under per-CPU locks, lock-free lookups. The
/// recommended design for throughput.
pub const IDSPACE_PIDS_PERCPU: u32 = 3;
/// The root namespace, which every allocator has.
pub const IDSPACE_PID_NS_ROOT: u32 = 0;
/// The deepest a namespace nests below the root (`MAX_PID_NS_LEVEL`).
pub const IDSPACE_PID_MAX_LEVEL: u32 = 32;
const _: () = assert!(IDSPACE_PID_MAX_LEVEL == MAX_LEVEL);
/// The default `pid_max` of a namespace (`PID_MAX_DEFAULT`).
pub const IDSPACE_PID_MAX_DEFAULT: u32 = 32768;
const _: () = assert!(IDSPACE_PID_MAX_DEFAULT == idspace::pid::PID_MAX_DEFAULT);

/// The worker slot of the calling thread for an allocator with `slots` slots.
fn cpu_slot(slots: usize) -> usize {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).unwrap_or(0) % slots.max(1)
}

/// Slots of a `PerCpu` allocator: the CPUs this process may use, within its bounds.
fn percpu_slots() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(PerCpu::MAX_CPUS)
}

/// Creates a PID allocator of the given design (`IDSPACE_PIDS_*`), with its root namespace
/// (`IDSPACE_PID_NS_ROOT`, `pid_max` 32768), and stores its handle in `*out`.
///
/// Returns 0, `-EINVAL` for an unknown design or a null `out`, `-ENOMEM` if the handle
/// registry is full.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_pids_new(design: u32, out: *mut IdspacePids) -> c_int {
    boundary::query(|| {
        need(out)?;
        let (alloc, slots): (Box<dyn PidAllocator>, usize) = match design {
            IDSPACE_PIDS_IDR_RELOCK => (Box::new(IdrRelock::new()), 1),
            IDSPACE_PIDS_IDR_ONCE => (Box::new(IdrOnce::new()), 1),
            IDSPACE_PIDS_BITMAP_HASH => (Box::new(BitmapHash::new()), 1),
            IDSPACE_PIDS_PERCPU => {
                let slots = percpu_slots();
                (Box::new(PerCpu::new(slots).map_err(errno::pid)?), slots)
            }
            _ => return Err(libc::EINVAL),
        };
        write_out(out, IdspacePids::insert(Pids { alloc, slots })?)
    })
}

/// Destroys an allocator with all its namespaces and IDs, after the calls in flight on it
/// have returned.
///
/// Returns 0 or `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_pids_destroy(pids: IdspacePids) -> c_int {
    boundary::mutate(|| pids.destroy().map(drop))
}

/// Creates a namespace below `parent` with the given `pid_max` (0 for the default, 32768;
/// else 301 to 4194304) and stores its number in `*ns` (`clone(CLONE_NEWPID)`). Its first
/// allocation takes ID 1 and becomes its init.
///
/// Returns 0; `-EINVAL` for an unknown or destroyed parent, a `pid_max` out of range or a
/// null `ns`; `-ENOSPC` past 32 levels or when the allocator holds no more namespaces;
/// `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_pid_ns_new(
    pids: IdspacePids,
    parent: u32,
    pid_max: u32,
    ns: *mut u32,
) -> c_int {
    boundary::mutate(|| {
        need(ns)?;
        if pid_max != 0 && !(PID_MAX_MIN..=PID_MAX_LIMIT).contains(&pid_max) {
            return Err(libc::EINVAL);
        }
        let created = pids.with(|p| {
            let created: NsId = p.alloc.new_ns(parent).map_err(errno::pid)?;
            if pid_max != 0 {
                if let Err(error) = p.alloc.set_pid_max(created, pid_max) {
                    // Fresh and empty: freeing it cannot fail in a way we could report better.
                    let _ = p.alloc.free_ns(created);
                    return Err(errno::pid(error));
                }
            }
            Ok(created)
        })?;
        write_out(ns, created)
    })
}

/// Destroys namespace `ns`, which must hold no IDs and no child namespaces. Its number is
/// never handed out again.
///
/// Returns 0; `-EBUSY` while it holds IDs or children; `-EINVAL` for the root, an unknown or
/// an already destroyed namespace; `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_pid_ns_destroy(pids: IdspacePids, ns: u32) -> c_int {
    boundary::mutate(|| pids.with(|p| p.alloc.free_ns(ns).map_err(errno::pid)))
}

/// Allocates a process in namespace `ns`, with an ID there and in every ancestor, and stores
/// its ID in `ns` in `*pid` (`alloc_pid`).
///
/// `set_tid` (may be null when `set_tid_len` is 0) requests exact IDs for the innermost
/// levels, `set_tid[0]` in `ns` itself, as `clone3`'s `set_tid` does; `set_tid_len` is at most
/// the number of levels (the depth of `ns` plus 1).
///
/// Returns 0; `-EAGAIN` if a level has no free ID; `-EEXIST` if a requested ID is taken;
/// `-EINVAL` for a `set_tid` entry out of range or other than 1 in a namespace without init,
/// a `set_tid` longer than the levels, a null `set_tid` with a non-zero length, a null `pid`,
/// an unknown or destroyed namespace; `-ENOMEM` for a namespace whose init has exited;
/// `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_pid_alloc(
    pids: IdspacePids,
    ns: u32,
    set_tid: *const u32,
    set_tid_len: usize,
    pid: *mut u32,
) -> c_int {
    boundary::mutate(|| {
        need(pid)?;
        if set_tid_len > MAX_LEVEL as usize + 1 || (set_tid.is_null() && set_tid_len != 0) {
            return Err(libc::EINVAL);
        }
        let requested: &[u32] = if set_tid_len == 0 {
            &[]
        } else {
            // SAFETY: non-null (checked above), and the caller promises `set_tid_len` readable
            // entries; the length is at most 33, so the slice cannot overflow.
            unsafe { core::slice::from_raw_parts(set_tid, set_tid_len) }
        };
        let allocated = pids.with(|p| {
            let object = p
                .alloc
                .alloc(ns, requested, cpu_slot(p.slots))
                .map_err(errno::pid)?;
            Ok(object.levels()[0].1)
        })?;
        write_out(pid, allocated)
    })
}

/// Frees the process that has ID `nr` in namespace `ns`, releasing its IDs at every level.
///
/// Returns 0, `-ESRCH` if no process has that ID there, `-EINVAL` for an unknown namespace,
/// `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_pid_free(pids: IdspacePids, ns: u32, nr: u32) -> c_int {
    boundary::mutate(|| pids.with(|p| p.alloc.free(ns, nr, cpu_slot(p.slots)).map_err(errno::pid)))
}

/// Finds the process that has ID `nr` in namespace `ns` (`find_pid_ns`) and stores its ID in
/// namespace `in_ns` in `*nr_in` (`pid_nr_ns`): 0 if `in_ns` does not see it, as the kernel
/// answers. Pass `in_ns == ns` to check that `nr` is allocated.
///
/// Returns 0, `-ESRCH` if no process has `nr` in `ns`, `-EINVAL` for an unknown namespace or a
/// null `nr_in`, `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_pid_lookup(
    pids: IdspacePids,
    ns: u32,
    nr: u32,
    in_ns: u32,
    nr_in: *mut u32,
) -> c_int {
    boundary::query(|| {
        need(nr_in)?;
        let found = pids.with(|p| {
            let object = p
                .alloc
                .lookup(ns, nr)
                .map_err(errno::pid)?
                .ok_or(libc::ESRCH)?;
            Ok(object.id_in(in_ns).unwrap_or(0))
        })?;
        write_out(nr_in, found)
    })
}
