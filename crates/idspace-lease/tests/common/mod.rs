//! What the lease tests share: a throwaway server, node processes, worker threads, duplicate
//! and gap counts.

#![allow(dead_code)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use idspace_lease::server::{Durability, Throwaway};
use idspace_lease::Store;

/// A fresh server (fsync off: the tests measure correctness, not durability).
pub fn server() -> Throwaway {
    Throwaway::start(Durability { fsync: false }).expect("PostgreSQL starts")
}

/// Creates a space on `server`.
pub fn space(server: &Throwaway, name: &str, min: u64, max: u64, cyclic: bool) {
    Store::connect(&server.url())
        .expect("connects")
        .create_space(name, min, max, cyclic)
        .expect("space created");
}

/// IDs seen more than once.
pub fn duplicates(ids: &[u64]) -> usize {
    let mut seen = HashSet::with_capacity(ids.len());
    ids.iter().filter(|id| !seen.insert(**id)).count()
}

/// Runs `work(worker)` on `workers` scoped threads and gathers what they return, in worker
/// order.
pub fn gather<T: Send>(workers: usize, work: impl Fn(usize) -> Vec<T> + Sync) -> Vec<T> {
    std::thread::scope(|scope| {
        let work = &work;
        let threads: Vec<_> = (0..workers)
            .map(|worker| scope.spawn(move || work(worker)))
            .collect();
        threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("no panic"))
            .collect()
    })
}

/// Asserts that no ID of `ids`, issued from space `name`, was issued twice, and reports how
/// many there are (with `note` after the count) and how many the space leased and never issued.
pub fn assert_unique(server: &Throwaway, name: &str, ids: &[u64], note: &str) {
    assert_eq!(duplicates(ids), 0, "{name}: duplicates");
    eprintln!(
        "{name}: {} IDs{note}, 0 duplicates, {} gaps",
        ids.len(),
        gaps(server, name, ids.len())
    );
}

/// IDs leased from `name` and never issued: the gaps.
pub fn gaps(server: &Throwaway, name: &str, issued: usize) -> u64 {
    let info = Store::connect(&server.url())
        .expect("connects")
        .space(name)
        .expect("space");
    let leased = info.leased_through.map_or(0, |last| last + 1 - info.min);
    leased - issued as u64
}

/// What a node process printed, line by line.
pub enum Line {
    Id(u64),
    Ready,
    End(String),
}

/// A node process: the test binary run again as `child_node` (see `faults.rs`).
pub struct NodeProcess {
    pub child: Child,
    pub stdin: ChildStdin,
    pub lines: Receiver<Line>,
}

/// Starts a node process allocating `count` IDs (0: until stopped) from `space` with
/// `threads` threads; `hold` makes it print READY after them and wait for a line on stdin
/// before allocating one more.
pub fn node_process(
    url: &str,
    space: &str,
    count: u64,
    threads: usize,
    ttl_ms: u64,
    step: u64,
    hold: bool,
) -> NodeProcess {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "child_node", "--nocapture", "--test-threads=1"])
        .env("LEASE_CHILD_URL", url)
        .env("LEASE_CHILD_SPACE", space)
        .env("LEASE_CHILD_COUNT", count.to_string())
        .env("LEASE_CHILD_THREADS", threads.to_string())
        .env("LEASE_CHILD_TTL_MS", ttl_ms.to_string())
        .env("LEASE_CHILD_STEP", step.to_string())
        .env("LEASE_CHILD_HOLD", if hold { "1" } else { "0" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node process starts");
    let stdout = child.stdout.take().expect("piped");
    let stdin = child.stdin.take().expect("piped");
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let parsed = if let Some(id) = line.strip_prefix("ID ") {
                id.parse().ok().map(Line::Id)
            } else if line == "READY" {
                Some(Line::Ready)
            } else {
                line.strip_prefix("END ")
                    .map(|end| Line::End(end.to_string()))
            };
            if let Some(parsed) = parsed {
                if sender.send(parsed).is_err() {
                    break;
                }
            }
        }
    });
    NodeProcess {
        child,
        stdin,
        lines,
    }
}

impl NodeProcess {
    /// Collects IDs until `n` were seen, READY, END or `timeout`; returns the IDs and the END
    /// text, if any.
    pub fn take(&self, ids: &mut Vec<u64>, n: usize, timeout: Duration) -> Option<String> {
        let deadline = std::time::Instant::now() + timeout;
        let mut seen = 0;
        while seen < n {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(Line::Id(id)) => {
                    ids.push(id);
                    seen += 1;
                }
                Ok(Line::Ready) => return None,
                Ok(Line::End(end)) => return Some(end),
                Err(_) => return None,
            }
        }
        None
    }

    /// Sends a signal to the process.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill with a child's PID (still ours to reap) and a valid signal number.
        let status = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(status, 0, "kill({signal})");
    }

    /// Lets a holding process allocate once more.
    pub fn go_on(&mut self) {
        writeln!(self.stdin, "go").expect("the process reads");
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
