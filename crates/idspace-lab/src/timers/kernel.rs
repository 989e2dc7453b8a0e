//! The kernel's POSIX timers through the raw syscalls. (An owner of kernel timers is a process:
//! the tests with an owner per worker fork, with [`crate::forked`].)
//!
//! Raw syscalls rather than glibc's wrappers: the kernel's `timer_t` is the plain integer ID,
//! which is what the tables compare against, and restore mode
//! (`prctl(PR_TIMER_CREATE_RESTORE_IDS)`) passes the wanted ID in through the same pointer.

use std::io;

use super::subjects::Subject;

/// `PR_TIMER_CREATE_RESTORE_IDS` and its arguments (include/uapi/linux/prctl.h, Linux 6.15).
const PR_TIMER_CREATE_RESTORE_IDS: libc::c_int = 77;
const PR_TIMER_CREATE_RESTORE_IDS_OFF: libc::c_ulong = 0;
const PR_TIMER_CREATE_RESTORE_IDS_ON: libc::c_ulong = 1;

/// The calling process's POSIX timers.
pub struct KernelTimers;

/// One `timer_create(CLOCK_MONOTONIC, SIGEV_NONE)` through the raw syscall; `wanted` is the ID
/// a process in restore mode asks for (ignored otherwise).
pub(crate) fn timer_create(wanted: libc::c_int) -> io::Result<libc::c_int> {
    // SAFETY: an all-zero `sigevent` is a valid value of this plain C struct.
    let mut event: libc::sigevent = unsafe { core::mem::zeroed() };
    event.sigev_notify = libc::SIGEV_NONE;
    let mut id: libc::c_int = wanted;
    // The raw syscall takes a `struct sigevent *` and a `timer_t *` (an `int *`).
    // SAFETY: both pointers point at live locals of exactly those types.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_timer_create,
            libc::CLOCK_MONOTONIC,
            &mut event as *mut libc::sigevent,
            &mut id as *mut libc::c_int,
        )
    };
    if rc == 0 {
        Ok(id)
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Subject for KernelTimers {
    #[inline]
    fn create(&self, _owner: u64) -> Option<u32> {
        timer_create(0).ok().map(|id| id as u32)
    }
    #[inline]
    fn lookup(&self, _owner: u64, id: u32) -> bool {
        // SAFETY: a plain syscall with an integer argument; no memory is passed.
        unsafe { libc::syscall(libc::SYS_timer_getoverrun, id as libc::c_long) >= 0 }
    }
    #[inline]
    fn delete(&self, _owner: u64, id: u32) -> bool {
        // SAFETY: a plain syscall with an integer argument; no memory is passed.
        unsafe { libc::syscall(libc::SYS_timer_delete, id as libc::c_long) == 0 }
    }
    fn create_exact(&self, _owner: u64, id: u32) -> bool {
        timer_create(id as libc::c_int).is_ok_and(|got| got as u32 == id)
    }
}

/// Switches the kernel's timer restore mode for this process; false if the kernel refuses
/// (older than 6.15).
pub fn set_restore_mode(on: bool) -> bool {
    let arg = if on {
        PR_TIMER_CREATE_RESTORE_IDS_ON
    } else {
        PR_TIMER_CREATE_RESTORE_IDS_OFF
    };
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(PR_TIMER_CREATE_RESTORE_IDS, arg, 0, 0, 0) == 0 }
}

/// Makes room for `wanted` pending signals (each POSIX timer is charged one against
/// RLIMIT_SIGPENDING, per user). Returns the limit now in force.
pub fn raise_sigpending(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_SIGPENDING, &mut limit) } != 0 {
        return 0;
    }
    if limit.rlim_cur >= wanted {
        return limit.rlim_cur;
    }
    let raised = libc::rlimit {
        rlim_cur: wanted,
        rlim_max: limit.rlim_max.max(wanted),
    };
    // SAFETY: `raised` is a live rlimit. Raising the hard limit needs CAP_SYS_RESOURCE.
    if unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, &raised) } == 0 {
        return wanted;
    }
    let soft_only = libc::rlimit {
        rlim_cur: limit.rlim_max.min(wanted),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: as above; raising the soft limit up to the hard limit needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, &soft_only) } == 0 {
        soft_only.rlim_cur
    } else {
        limit.rlim_cur
    }
}
