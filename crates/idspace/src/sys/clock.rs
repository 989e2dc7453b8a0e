//! The kernel's monotonic clock, read directly: `std::time::Instant` reads the same clock but
//! does not give its value, which POSIX timers' absolute monotonic times are expressed in.

/// `CLOCK_MONOTONIC` now, in nanoseconds (0 if the call fails, which it cannot on Linux for
/// this clock and a valid pointer).
pub(crate) fn monotonic_nanos() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a live, writable timespec for the whole call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    if rc != 0 {
        return 0;
    }
    (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64)
}
