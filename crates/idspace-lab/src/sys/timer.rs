//! The kernel's POSIX timers through the raw syscalls, and the limits they are charged to.
//!
//! Raw syscalls rather than glibc's wrappers: the kernel's `timer_t` is the plain integer ID,
//! which is what the lab's tables compare against, and restore mode
//! (`prctl(PR_TIMER_CREATE_RESTORE_IDS)`) passes the wanted ID in through the same pointer.

use std::io;
use std::time::Duration;

/// `PR_TIMER_CREATE_RESTORE_IDS` and its arguments (include/uapi/linux/prctl.h, Linux 6.15).
const PR_TIMER_CREATE_RESTORE_IDS: libc::c_int = 77;
const PR_TIMER_CREATE_RESTORE_IDS_OFF: libc::c_ulong = 0;
const PR_TIMER_CREATE_RESTORE_IDS_ON: libc::c_ulong = 1;

/// One `timer_create(CLOCK_MONOTONIC, SIGEV_NONE)` through the raw syscall; `wanted` is the ID
/// a process in restore mode asks for (ignored otherwise).
pub(crate) fn create(wanted: libc::c_int) -> io::Result<libc::c_int> {
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

/// `timer_getoverrun(id)`: whether the process has timer `id` (the kernel looks it up).
#[inline]
pub(crate) fn exists(id: libc::c_int) -> bool {
    // SAFETY: a plain syscall with an integer argument; no memory is passed.
    unsafe { libc::syscall(libc::SYS_timer_getoverrun, id as libc::c_long) >= 0 }
}

/// `timer_delete(id)`.
#[inline]
pub(crate) fn delete(id: libc::c_int) -> io::Result<()> {
    // SAFETY: a plain syscall with an integer argument; no memory is passed.
    if unsafe { libc::syscall(libc::SYS_timer_delete, id as libc::c_long) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Arms timer `id` once, `after` from now (`timer_settime`, relative, no interval).
pub(crate) fn arm(id: libc::c_int, after: Duration) -> io::Result<()> {
    let setting = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: `setting` is a live itimerspec; the old value pointer is null (not wanted).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_timer_settime,
            id as libc::c_long,
            0 as libc::c_long,
            &setting as *const libc::itimerspec,
            std::ptr::null_mut::<libc::itimerspec>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Switches the kernel's timer restore mode for this process; false if the kernel refuses
/// (older than 6.15).
pub(crate) fn set_restore_mode(on: bool) -> bool {
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
pub(crate) fn raise_sigpending(wanted: u64) -> u64 {
    let Some(limit) = get_sigpending() else {
        return 0;
    };
    if limit.rlim_cur >= wanted {
        return limit.rlim_cur;
    }
    // Raising the hard limit needs CAP_SYS_RESOURCE; up to the hard limit needs nothing.
    let raised = libc::rlimit {
        rlim_cur: wanted,
        rlim_max: limit.rlim_max.max(wanted),
    };
    if set_sigpending(&raised) {
        return wanted;
    }
    let soft_only = libc::rlimit {
        rlim_cur: limit.rlim_max.min(wanted),
        rlim_max: limit.rlim_max,
    };
    if set_sigpending(&soft_only) {
        soft_only.rlim_cur
    } else {
        limit.rlim_cur
    }
}

fn get_sigpending() -> Option<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live, writable rlimit.
    (unsafe { libc::getrlimit(libc::RLIMIT_SIGPENDING, &mut limit) } == 0).then_some(limit)
}

fn set_sigpending(limit: &libc::rlimit) -> bool {
    // SAFETY: `limit` is a live rlimit.
    unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, limit) == 0 }
}
