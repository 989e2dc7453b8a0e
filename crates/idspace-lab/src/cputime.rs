//! CPU time spent by the lab process, read with `getrusage(2)`: the cost of a piece of work in
//! CPU-seconds, beside the wall time it took.
//!
//! Every subject the lab compares on scheduling work runs inside the lab's own process: our
//! runtime's worker threads, tokio's, and the kernel workloads' OS threads (see
//! `wake/kernel.rs`: they are threads, not forked processes). So one counter covers them all:
//! `RUSAGE_SELF`, user plus system time of every thread of the process, those still running and
//! those that already exited. A figure is the difference of two readings taken around the work
//! ([`CpuClock`]), at the same points as its wall time. Threads of the lab that are not part of
//! the work (the progress display, an idle timer thread) add to it too, equally for every
//! subject measured in the same configuration.
//!
//! The kernel keeps each thread's run time in nanoseconds and splits it into user and system
//! time by sampled ticks, so the sum is exact to the microsecond `getrusage` reports while the
//! split is not: only the sum is used here.

use std::time::Duration;

/// Which threads a reading covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every thread of the process, running or exited (`RUSAGE_SELF`).
    Process,
    /// The calling thread only (`RUSAGE_THREAD`).
    Thread,
}

/// User plus system CPU time used so far by the threads of `scope`.
pub fn used(scope: Scope) -> Result<Duration, String> {
    let rusage = match scope {
        Scope::Process => crate::sys::rusage_self(),
        Scope::Thread => crate::sys::rusage_thread(),
    }
    .map_err(|e| format!("getrusage: {e}"))?;
    Ok(timeval(rusage.ru_utime) + timeval(rusage.ru_stime))
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec.max(0) as u64) + Duration::from_micros(tv.tv_usec.max(0) as u64)
}

/// The process's CPU time since a starting reading: start it where the work's wall-clock
/// measurement starts, read it where that ends.
#[derive(Debug, Clone, Copy)]
pub struct CpuClock {
    start: Duration,
}

impl CpuClock {
    /// Takes the starting reading of the whole process (`RUSAGE_SELF`).
    pub fn start() -> Result<CpuClock, String> {
        Ok(CpuClock {
            start: used(Scope::Process)?,
        })
    }

    /// CPU time used by the process since [`CpuClock::start`].
    pub fn elapsed(&self) -> Result<Duration, String> {
        Ok(used(Scope::Process)?.saturating_sub(self.start))
    }
}

/// Microseconds of CPU per unit of work: `cpu` spent on `units` units (`NaN` without units, the
/// lab's "does not apply").
pub fn micros_per_unit(cpu: Duration, units: u64) -> f64 {
    if units == 0 {
        return f64::NAN;
    }
    cpu.as_secs_f64() * 1e6 / units as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Spins until the calling thread's CPU time has moved past `from`.
    fn busy_until_thread_time_passes(from: Duration) -> u64 {
        let started = Instant::now();
        let mut spins = 0u64;
        while used(Scope::Thread).unwrap() <= from {
            spins = std::hint::black_box(spins.wrapping_add(1));
            // A guard against a broken counter: the loop must end either way.
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "thread CPU time never moved"
            );
        }
        spins
    }

    #[test]
    fn readings_are_monotone_and_count_a_busy_loop() {
        for scope in [Scope::Thread, Scope::Process] {
            let mut last = used(scope).unwrap();
            for _ in 0..100 {
                let now = used(scope).unwrap();
                assert!(now >= last, "{scope:?}: {now:?} < {last:?}");
                last = now;
            }
        }
        let thread_before = used(Scope::Thread).unwrap();
        let clock = CpuClock::start().unwrap();
        // Milliseconds, not the first microsecond: the kernel splits a process's time into
        // user and system by scaling, and a reading can lag a thread's own by a few
        // microseconds (a 1 µs spin once left the process's reading unmoved).
        busy_until_thread_time_passes(thread_before + Duration::from_millis(5));
        let thread_spent = used(Scope::Thread).unwrap() - thread_before;
        let process_spent = clock.elapsed().unwrap();
        assert!(thread_spent > Duration::from_millis(5));
        // The process's counter includes this thread's.
        assert!(
            process_spent >= Duration::from_millis(1),
            "{process_spent:?}"
        );
    }

    #[test]
    fn per_unit_figures() {
        assert_eq!(micros_per_unit(Duration::from_millis(3), 1_000), 3.0);
        assert!(micros_per_unit(Duration::from_millis(3), 0).is_nan());
    }
}
