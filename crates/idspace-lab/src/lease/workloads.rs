//! The runs of experiment `lease`: each allocates IDs on threads for a while and reports how
//! many, the 99th percentile of one allocation's latency, and the store round trips made.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idspace_lease::{LeaseError, Node};
use postgres::{Client, NoTls};

use crate::measure::timed;

/// What one run measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    /// IDs allocated.
    pub ids: u64,
    /// The run's wall time.
    pub elapsed: Duration,
    /// 99th percentile of one allocation's latency, in nanoseconds.
    pub p99_ns: u64,
    /// Statements sent to PostgreSQL.
    pub round_trips: u64,
    /// Allocations that failed (the store down, for the baselines).
    pub failures: u64,
}

impl Outcome {
    /// Metrics in the order the tables read them: IDs/s, p99 in µs, round trips per million
    /// IDs.
    pub fn metrics(&self) -> Vec<f64> {
        let ids = self.ids.max(1) as f64;
        vec![
            self.ids as f64 / self.elapsed.as_secs_f64(),
            self.p99_ns as f64 / 1000.0,
            self.round_trips as f64 * 1e6 / ids,
        ]
    }
}

/// The 99th percentile of `samples` (sorted in place).
pub fn p99(samples: &mut [u32]) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    samples.sort_unstable();
    u64::from(samples[(samples.len() * 99 / 100).min(samples.len() - 1)])
}

/// Runs `allocate` on `threads` threads for `duration`, timing each call; a failed call is
/// counted, not timed.
fn run_timed(
    threads: usize,
    duration: Duration,
    allocate: &(dyn Fn(usize) -> bool + Sync),
) -> Result<Outcome, String> {
    let latencies = Mutex::new(Vec::<u32>::new());
    let failures = AtomicU64::new(0);
    let ids = AtomicU64::new(0);
    // A worker's attempts, failed ones included, show that it ran (the store may be down).
    let (elapsed, _attempts) = timed(threads, duration, &|worker, stop: &AtomicBool| {
        let mut mine = Vec::with_capacity(1 << 16);
        let mut failed = 0;
        // Relaxed: the flag only ends the loop.
        while !stop.load(Ordering::Relaxed) {
            let start = Instant::now();
            if allocate(worker) {
                mine.push(start.elapsed().as_nanos().min(u32::MAX as u128) as u32);
            } else {
                failed += 1;
            }
        }
        let count = mine.len() as u64;
        failures.fetch_add(failed, Ordering::Relaxed);
        ids.fetch_add(count, Ordering::Relaxed);
        latencies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(mine);
        count + failed
    })?;
    let mut all = latencies.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(Outcome {
        ids: ids.into_inner(),
        elapsed,
        p99_ns: p99(&mut all),
        round_trips: 0,
        failures: failures.into_inner(),
    })
}

/// One node in this process, `threads` threads allocating through it.
pub fn lease_node(
    url: &str,
    space: &str,
    node_id: &str,
    threads: usize,
    duration: Duration,
) -> Result<Outcome, String> {
    let node = Node::builder(url, space)
        .node_id(node_id)
        .start()
        .map_err(|e| e.to_string())?;
    let before = node.stats().round_trips;
    let error: Mutex<Option<LeaseError>> = Mutex::new(None);
    let mut outcome = run_timed(threads, duration, &|_| match node.next_id() {
        Ok(_) => true,
        Err(e) => {
            *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            false
        }
    })?;
    outcome.round_trips = node.stats().round_trips - before;
    match error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) if outcome.ids == 0 => Err(e.to_string()),
        _ => Ok(outcome),
    }
}

/// The per-session baselines: each thread has its own session and sends `statement` once per
/// ID; a session that fails is replaced (the store restarting).
pub fn per_statement(
    url: &str,
    statement: &str,
    threads: usize,
    duration: Duration,
) -> Result<Outcome, String> {
    let connect = || Client::connect(url, NoTls).map_err(|e| e.to_string());
    let sessions: Vec<Mutex<Option<Client>>> = (0..threads)
        .map(|_| connect().map(|c| Mutex::new(Some(c))))
        .collect::<Result<_, _>>()?;
    let reconnects = AtomicU64::new(0);
    let mut outcome = run_timed(threads, duration, &|worker| {
        let mut session = sessions[worker].lock().unwrap_or_else(|p| p.into_inner());
        if session.is_none() {
            reconnects.fetch_add(1, Ordering::Relaxed);
            match connect() {
                Ok(client) => *session = Some(client),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(5));
                    return false;
                }
            }
        }
        let client = session.as_mut().expect("just connected");
        match client.query_one(statement, &[]) {
            Ok(_) => true,
            Err(_) => {
                *session = None;
                false
            }
        }
    })?;
    outcome.round_trips = outcome.ids + outcome.failures + reconnects.into_inner();
    Ok(outcome)
}

/// Bits of a Snowflake ID: 41 of milliseconds, 10 of machine, 12 of sequence.
const SEQUENCE_BITS: u32 = 12;
const MACHINE_BITS: u32 = 10;

/// A Snowflake-style generator: one atomic word holding (milliseconds, sequence); IDs are
/// `ms << 22 | machine << 12 | sequence`. A sequence used up within a millisecond waits for the
/// next one, and a clock going back waits until it catches up (clock discipline).
pub struct Snowflake {
    state: AtomicU64,
    machine: u64,
    epoch: SystemTime,
}

impl Snowflake {
    /// A generator for machine `machine` (mod 1024).
    pub fn new(machine: u64) -> Snowflake {
        Snowflake {
            state: AtomicU64::new(0),
            machine: machine % (1 << MACHINE_BITS),
            epoch: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        }
    }

    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(self.epoch)
            .map_or(0, |d| d.as_millis() as u64)
    }

    /// The next ID.
    pub fn next(&self) -> u64 {
        // Relaxed: the word is the whole state; uniqueness comes from the CAS on it alone.
        let mut current = self.state.load(Ordering::Relaxed);
        loop {
            let (ms, seq) = (
                current >> SEQUENCE_BITS,
                current & ((1 << SEQUENCE_BITS) - 1),
            );
            let now = self.now_ms();
            let next = if now > ms {
                now << SEQUENCE_BITS
            } else if seq + 1 < (1 << SEQUENCE_BITS) {
                // The same millisecond (or the clock went back: stay on the last one).
                current + 1
            } else {
                // Sequence used up: wait for the next millisecond.
                std::hint::spin_loop();
                current = self.state.load(Ordering::Relaxed);
                continue;
            };
            match self.state.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    let (ms, seq) = (next >> SEQUENCE_BITS, next & ((1 << SEQUENCE_BITS) - 1));
                    return ms << (SEQUENCE_BITS + MACHINE_BITS)
                        | self.machine << SEQUENCE_BITS
                        | seq;
                }
                Err(seen) => current = seen,
            }
        }
    }
}

/// `threads` threads taking IDs from one Snowflake generator.
pub fn snowflake(threads: usize, duration: Duration) -> Result<Outcome, String> {
    let generator = Snowflake::new(1);
    run_timed(threads, duration, &|_| {
        std::hint::black_box(generator.next());
        true
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn snowflake_ids_are_unique_across_threads() {
        let generator = Snowflake::new(7);
        let ids: Vec<u64> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..20_000).map(|_| generator.next()).collect::<Vec<_>>()))
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        });
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
        assert!(ids.iter().all(|id| (id >> SEQUENCE_BITS) & 1023 == 7));
    }

    #[test]
    fn p99_is_the_99th_percentile() {
        let mut samples: Vec<u32> = (1..=100).rev().collect();
        assert_eq!(p99(&mut samples), 100);
        assert_eq!(p99(&mut []), 0);
    }
}
