//! Linux `membarrier(2)`, private expedited: one thread makes every running thread of this
//! process pass a full memory barrier, so that the others' fast paths need none of their own.
//!
//! The command needs the process to register for it once; [`available`] does that on its first
//! call and remembers the answer. Where the kernel lacks the command (before 4.14), a seccomp
//! filter refuses it, or under Miri (which cannot run it), [`available`] says no, and callers
//! take a path that needs no barrier from others.

use crate::sync::unmodeled::{AtomicU8, Ordering};

/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` from `<linux/membarrier.h>`.
const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
/// `MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED`.
const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

const UNKNOWN: u8 = 0;
const READY: u8 = 1;
const MISSING: u8 = 2;

/// Whether this process may call [`barrier`]: registered now or before.
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Registers the process for [`barrier`] on the first call; whether it may use it.
pub(crate) fn available() -> bool {
    // Relaxed: the answer is the kernel's, and registering twice is harmless, so racing first
    // callers may both register.
    match STATE.load(Ordering::Relaxed) {
        READY => true,
        MISSING => false,
        _ => {
            let ready = !cfg!(miri) && membarrier(REGISTER_PRIVATE_EXPEDITED);
            STATE.store(if ready { READY } else { MISSING }, Ordering::Relaxed);
            ready
        }
    }
}

/// Makes every thread of this process pass a full memory barrier before it returns: a thread
/// running now is interrupted for it, one not running passed one when it was switched out.
/// Only after [`available`] said yes; returns whether the kernel did it.
pub(crate) fn barrier() -> bool {
    debug_assert_eq!(
        STATE.load(Ordering::Relaxed),
        READY,
        "barrier before registering"
    );
    membarrier(PRIVATE_EXPEDITED)
}

fn membarrier(command: libc::c_int) -> bool {
    if cfg!(miri) {
        return false;
    }
    // SAFETY: membarrier takes no pointer; with flags 0 and cpu_id 0 it only orders memory or
    // records the registration, and reports failure through its result.
    let result = unsafe { libc::syscall(libc::SYS_membarrier, command, 0, 0) };
    result == 0
}
