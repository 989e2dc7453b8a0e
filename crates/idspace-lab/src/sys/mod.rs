//! Every call into the C library and the kernel the lab makes, behind safe functions: forking
//! workers, raw threads and CPU affinity, pipes, POSIX timers and their limits, resource usage,
//! and the counting allocator. This is the only module of the lab with `unsafe` code; each
//! block says why it is sound.

pub(crate) mod alloc;
pub(crate) mod forked;
pub(crate) mod pipe;
pub(crate) mod thread;
pub(crate) mod timer;

use std::io;

/// `getrusage(RUSAGE_SELF)`: every thread of the process, running or exited.
pub(crate) fn rusage_self() -> io::Result<libc::rusage> {
    rusage(libc::RUSAGE_SELF)
}

/// `getrusage(RUSAGE_THREAD)`: the calling thread.
pub(crate) fn rusage_thread() -> io::Result<libc::rusage> {
    rusage(libc::RUSAGE_THREAD)
}

fn rusage(who: libc::c_int) -> io::Result<libc::rusage> {
    // SAFETY: `rusage` is plain old data; all-zero bytes are a valid value for getrusage to
    // overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live, writable `rusage` for the call to fill.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usage)
}
