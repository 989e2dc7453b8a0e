//! The process around the service: the descriptor limit, and the stop signals taken by a
//! thread of their own so that any runtime sees them the same way.

use std::io;

use tokio::sync::watch;

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
/// (call it first, before any thread exists), and starts the thread that waits for them:
/// the first one sets `stop`.
pub(crate) fn watch_stop_signals(stop: watch::Sender<bool>) -> io::Result<()> {
    let set = stop_signals();
    // SAFETY: `set` is a valid signal set; the old mask is not asked for.
    let status = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if status != 0 {
        return Err(io::Error::from_raw_os_error(status));
    }
    std::thread::Builder::new()
        .name("idspace-serve-signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: `set` is valid and `signal` ours to write; the signals are blocked in
            // every thread, so sigwait takes them.
            if unsafe { libc::sigwait(&set, &mut signal) } == 0 {
                let name = if signal == libc::SIGTERM {
                    "SIGTERM"
                } else {
                    "SIGINT"
                };
                crate::log(&format!("{name}: stopping gracefully"));
                let _ = stop.send(true);
            }
        })?;
    Ok(())
}
