//! The calling thread's resource usage (`getrusage(RUSAGE_THREAD)`).

/// How many times the kernel has taken the CPU from the calling thread while it could still
/// run (`ru_nivcsw`, involuntary context switches), since the thread started; 0 if the call
/// fails, which it cannot on Linux for this thread and a valid pointer.
#[cfg(not(miri))]
pub(crate) fn involuntary_switches() -> u64 {
    // SAFETY: `rusage` is plain data; all zeroes is a valid value of it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live, writable rusage for the whole call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(usage.ru_nivcsw).unwrap_or(0)
}

/// Miri cannot make the call: its threads are never seen preempted, so an idle worker polls
/// as its governor alone says.
#[cfg(miri)]
pub(crate) fn involuntary_switches() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's own count for the calling thread, from `/proc/thread-self/status`.
    fn from_proc() -> u64 {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            .unwrap();
        line.trim().parse().unwrap()
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot call getrusage")]
    fn it_reads_the_threads_involuntary_switches() {
        let before = from_proc();
        let ours = involuntary_switches();
        let after = from_proc();
        assert!(
            (before..=after).contains(&ours),
            "{before} <= {ours} <= {after}"
        );
    }
}
