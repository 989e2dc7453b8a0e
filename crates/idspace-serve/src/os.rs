//! The process around the service: the descriptor limit, and the stop signals, blocked in
//! every thread and taken by the main thread with `sigwait`, so that no runtime sees them.

use std::io;

/// Raises the soft limit of open descriptors to the hard limit; returns (before, now).
pub(crate) fn raise_fd_limit() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads the struct we own; a soft limit up to the hard one is
        // always allowed.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((before, limit.rlim_cur))
}

/// The stop signals.
fn stop_signals() -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is a valid value to initialise with sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t we own; SIGTERM and SIGINT are valid signals.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
    }
    set
}

/// Blocks SIGTERM and SIGINT in the calling thread and in every thread it starts from now on
/// (call it first, before any thread exists), so that [`wait_for_stop_signal`] takes them.
pub(crate) fn block_stop_signals() -> io::Result<()> {
    let set = stop_signals();
    // SAFETY: `set` is a valid signal set; the old mask is not asked for.
    let status = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(status))
    }
}

/// Waits for SIGTERM or SIGINT (blocked by [`block_stop_signals`]); its name.
pub(crate) fn wait_for_stop_signal() -> io::Result<&'static str> {
    let set = stop_signals();
    let mut signal = 0;
    // SAFETY: `set` is valid and `signal` ours to write; the signals are blocked in every
    // thread, so sigwait takes them.
    let status = unsafe { libc::sigwait(&set, &mut signal) };
    if status != 0 {
        return Err(io::Error::from_raw_os_error(status));
    }
    Ok(if signal == libc::SIGTERM {
        "SIGTERM"
    } else {
        "SIGINT"
    })
}
