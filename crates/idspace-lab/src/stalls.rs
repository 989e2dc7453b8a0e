//! How often this machine takes a CPU away from a thread that wants it: the floor under every
//! latency percentile the lab reports.
//!
//! On a virtual machine the host can deschedule a virtual CPU while a guest thread runs on it.
//! The guest sees nothing but a jump of the clock, and counts the time as *steal* in
//! `/proc/stat`. A request in flight during such a gap waits for it to end, whatever the server
//! does, so a p99 over a run in which more than 1% of the time is lost that way cannot be below
//! the gaps' length. Two figures say how large that floor is:
//!
//! * [`Stalls::probe`]: for a short window, a thread pinned to each CPU spins on the monotonic
//!   clock and records every jump of at least [`Stalls::GAP`], whatever took the CPU: the host,
//!   or this machine's scheduler for another thread. How many jumps came with an involuntary
//!   context switch of the thread is counted too; a host that deschedules a virtual CPU often
//!   leaves the guest's scheduler a tick to catch up on when it returns, so that count does not
//!   split the two causes cleanly, and the steal counter over the same window
//!   ([`Stalls::steal_percent`]) is the host's own account;
//! * [`CpuTimes`]: the machine's steal share between two readings of `/proc/stat`, over a whole
//!   run or one measurement.

use std::time::{Duration, Instant};

use crate::sys::thread::CpuSet;

/// The machine's CPU time counters, in clock ticks, from the first line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Every state's ticks added up (user through steal).
    pub total: u64,
    /// Ticks the hypervisor ran something else while a virtual CPU wanted to run.
    pub steal: u64,
}

impl CpuTimes {
    /// The counters now, or `None` where `/proc/stat` cannot be read or has no steal field
    /// (a kernel before 2.6.11).
    ///
    /// ```
    /// if let Some(now) = idspace_lab::CpuTimes::read() {
    ///     assert!(now.steal <= now.total);
    /// }
    /// ```
    pub fn read() -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        CpuTimes::parse(text.lines().next()?)
    }

    /// Parses the aggregate `cpu` line of `/proc/stat`.
    fn parse(line: &str) -> Option<CpuTimes> {
        let mut fields = line.split_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        // user nice system idle iowait irq softirq steal (guest times are inside user).
        let ticks: Vec<u64> = fields
            .take(8)
            .map(|field| field.parse().ok())
            .collect::<Option<_>>()?;
        let steal = *ticks.get(7)?;
        Some(CpuTimes {
            total: ticks.iter().sum(),
            steal,
        })
    }

    /// The steal share from `start` (an earlier [`CpuTimes::read`]) until now, in percent;
    /// `None` where either reading is missing or no tick passed.
    ///
    /// ```
    /// let start = idspace_lab::CpuTimes::read();
    /// if let Some(share) = idspace_lab::CpuTimes::steal_since(start) {
    ///     assert!((0.0..=100.0).contains(&share));
    /// }
    /// ```
    pub fn steal_since(start: Option<CpuTimes>) -> Option<f64> {
        start
            .zip(CpuTimes::read())
            .and_then(|(start, now)| start.steal_percent(&now))
    }

    /// The share of the machine's CPU time, from `self` to `later`, that was stolen, in
    /// percent; `None` if no tick passed.
    ///
    /// ```
    /// use idspace_lab::CpuTimes;
    /// let before = CpuTimes { total: 1000, steal: 10 };
    /// let after = CpuTimes { total: 1200, steal: 30 };
    /// assert_eq!(before.steal_percent(&after), Some(10.0));
    /// ```
    pub fn steal_percent(&self, later: &CpuTimes) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let steal = later.steal.checked_sub(self.steal)?;
        (total > 0).then(|| steal as f64 * 100.0 / total as f64)
    }
}

/// What [`Stalls::probe`] saw: the gaps of at least [`Stalls::GAP`] in threads spinning on
/// every CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stalls {
    /// CPUs probed.
    pub cpus: usize,
    /// How long each spun.
    pub window: Duration,
    /// Gaps seen, all CPUs together.
    pub gaps: u64,
    /// The longest gap.
    pub longest: Duration,
    /// The gaps' time, all CPUs together.
    pub lost: Duration,
    /// How many of the gaps came with an involuntary context switch of the spinning thread.
    pub preempted: u64,
    /// The host's steal share of the machine's CPU time over the probe, in percent (`None`
    /// where `/proc/stat` has no steal counter).
    pub steal_percent: Option<f64>,
}

impl Stalls {
    /// The shortest jump of the clock counted as a gap: far above a clock read and a timer
    /// interrupt, and the latency goals' own scale.
    pub const GAP: Duration = Duration::from_millis(1);

    /// Spins a thread pinned to each of the caller's CPUs for `window`, all at once, and
    /// collects their gaps. `None` if the threads could not be started.
    ///
    /// ```
    /// use std::time::Duration;
    /// let stalls = idspace_lab::Stalls::probe(Duration::from_millis(20)).unwrap();
    /// assert!(stalls.cpus >= 1 && stalls.lost_percent() <= 100.0);
    /// ```
    pub fn probe(window: Duration) -> Option<Stalls> {
        let cpus = CpuSet::current()?.cpus();
        let before = CpuTimes::read();
        let seen = std::thread::scope(|scope| {
            let spinners: Vec<_> = cpus
                .iter()
                .map(|&cpu| {
                    scope.spawn(move || {
                        CpuSet::only(cpu).apply();
                        spin(window)
                    })
                })
                .collect();
            spinners
                .into_iter()
                .map(|spinner| spinner.join().ok())
                .collect::<Option<Vec<_>>>()
        })?;
        let mut stalls = Stalls {
            cpus: cpus.len(),
            window,
            gaps: 0,
            longest: Duration::ZERO,
            lost: Duration::ZERO,
            preempted: 0,
            steal_percent: CpuTimes::steal_since(before),
        };
        for seen in seen {
            stalls.gaps += seen.gaps;
            stalls.longest = stalls.longest.max(seen.longest);
            stalls.lost += seen.lost;
            stalls.preempted += seen.preempted;
        }
        Some(stalls)
    }

    /// The gaps' share of the probed CPU time, in percent.
    pub fn lost_percent(&self) -> f64 {
        let probed = self.window.as_secs_f64() * self.cpus.max(1) as f64;
        self.lost.as_secs_f64() * 100.0 / probed
    }

    /// Gaps per second on one CPU.
    pub fn per_second(&self) -> f64 {
        self.gaps as f64 / (self.window.as_secs_f64() * self.cpus.max(1) as f64)
    }
}

/// The machine's stalls around a lab run, for the report's opening: a probe before the
/// experiments, and the steal counters from the run's start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Conditions {
    stalls: Option<Stalls>,
    start: Option<CpuTimes>,
}

impl Conditions {
    /// How long the probe before a run spins.
    const PROBE: Duration = Duration::from_secs(1);

    /// Probes the machine and starts counting its steal.
    pub(crate) fn probe() -> Conditions {
        let start = CpuTimes::read();
        Conditions {
            stalls: Stalls::probe(Self::PROBE),
            start,
        }
    }

    /// The report's paragraph: the probe's gaps, and the steal share from the run's start until
    /// now.
    pub(crate) fn paragraph(&self) -> String {
        let probe = match self.stalls {
            Some(s) => format!(
                "Before the experiments, a thread spinning on each of the {} CPUs for {} s lost \
                 its CPU for {} ms or more {:.1} times a second per CPU (the longest gap {:.1} \
                 ms, {:.1}% of the time in all; {} of the {} gaps came with an involuntary \
                 context switch; the host's steal counter read {} over the probe)",
                s.cpus,
                s.window.as_secs_f64(),
                Stalls::GAP.as_millis(),
                s.per_second(),
                s.longest.as_secs_f64() * 1e3,
                s.lost_percent(),
                s.preempted,
                s.gaps,
                s.steal_percent
                    .map_or("n/a (no counter)".into(), |share| format!("{share:.1}%"))
            ),
            None => "The stall probe could not start its threads".into(),
        };
        let steal = match self.start.zip(CpuTimes::read()) {
            Some((start, now)) => match start.steal_percent(&now) {
                Some(share) => format!(
                    "over the run, the host took {share:.1}% of the CPU time as steal \
                     (`/proc/stat`)"
                ),
                None => "no steal was counted over the run".into(),
            },
            None => "`/proc/stat` has no steal counter here".into(),
        };
        format!(
            "**This machine's stalls.** {probe}, and {steal}. A request or a wakeup caught in \
             such a gap waits for it to end, whatever the code under test does: where more \
             than 1% of the time is lost in gaps, no p99 over a run can be below them.\n"
        )
    }
}

/// What one CPU's spin saw: the fields of [`Stalls`] for one thread.
#[derive(Default)]
struct Seen {
    gaps: u64,
    longest: Duration,
    lost: Duration,
    preempted: u64,
}

/// One CPU's spin. The thread's involuntary context switches are read only after a gap (a
/// system call per gap, none in between).
fn spin(window: Duration) -> Seen {
    let mut seen = Seen::default();
    let mut switches = involuntary_switches();
    let start = Instant::now();
    let mut last = start;
    while last - start < window {
        let now = Instant::now();
        let gap = now - last;
        if gap >= Stalls::GAP {
            seen.gaps += 1;
            seen.longest = seen.longest.max(gap);
            seen.lost += gap;
            let after = involuntary_switches();
            if after != switches {
                seen.preempted += 1;
                switches = after;
            }
        }
        last = now;
    }
    seen
}

/// The calling thread's involuntary context switches (0 if `getrusage` refuses).
fn involuntary_switches() -> i64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_THREAD names the calling thread.
    let got = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    if got == 0 {
        usage.ru_nivcsw
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aggregate_line_gives_total_and_steal() {
        let line = "cpu  3600168 0 485000 605904 9614 0 61903 102346 0 0";
        let times = CpuTimes::parse(line).unwrap();
        assert_eq!(times.steal, 102346);
        assert_eq!(
            times.total,
            3600168 + 485000 + 605904 + 9614 + 61903 + 102346
        );
        assert_eq!(
            CpuTimes::parse("cpu0 1 2 3 4 5 6 7 8"),
            None,
            "a CPU's own line"
        );
        assert_eq!(CpuTimes::parse("cpu 1 2 3"), None, "no steal field");
        assert_eq!(CpuTimes::parse("cpu 1 2 x 4 5 6 7 8"), None);
    }

    #[test]
    fn no_tick_has_no_share_and_counters_never_run_back() {
        let at = CpuTimes {
            total: 50,
            steal: 5,
        };
        assert_eq!(at.steal_percent(&at), None);
        let earlier = CpuTimes {
            total: 40,
            steal: 6,
        };
        assert_eq!(at.steal_percent(&earlier), None);
    }

    #[test]
    fn a_probe_spins_its_window_on_every_cpu() {
        let window = Duration::from_millis(30);
        let started = Instant::now();
        let stalls = Stalls::probe(window).unwrap();
        assert!(started.elapsed() >= window);
        assert_eq!(stalls.cpus, CpuSet::current().unwrap().cpus().len());
        assert!(stalls.lost <= window * stalls.cpus as u32 + stalls.longest);
        assert!(stalls.gaps == 0 || stalls.longest >= Stalls::GAP);
    }
}
