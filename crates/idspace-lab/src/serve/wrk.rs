//! `wrk` against one path of a server, through a Lua script of ours: the script builds the
//! request (the batch route's query string rides in the path) and, when the run is done,
//! prints one line the lab parses: requests, duration, every error count, and the latency
//! percentiles wrk's own report leaves out (p99.9).
//!
//! wrk sends as fast as its connections are answered. For a fixed rate, the paced script adds
//! wrk's `delay()` hook: each wrk thread keeps a schedule of one request every `1 / rate`
//! seconds (its share of the rate) on the monotonic clock (LuaJIT's FFI to `clock_gettime`),
//! and every connection ready to send takes the next free slot and waits for it. wrk rounds
//! the wait to whole milliseconds, so requests leave up to half a millisecond off their slot,
//! but the schedule, not the rounding, sets the rate. As with wrk (not wrk2), a request's
//! latency runs from when it was sent, not from its slot.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The script: the path is its first argument.
const STEADY: &str = r#"-- The request of every connection: GET of the path given as the first argument.
init = function(args)
  req = wrk.format("GET", args[1])
end

request = function()
  return req
end

-- One line for the lab: requests, duration (us), errors (connect, read, write, status,
-- timeout), latency p50, p99, p99.9 (us).
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("LAB %d %d %d %d %d %d %d %.1f %.1f %.1f\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
"#;

/// What the paced script adds: the rate of each wrk thread (requests/s) is its second
/// argument.
const PACED: &str = r#"
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long lab_sec; long lab_nsec; } lab_timespec;
int clock_gettime(int clock, lab_timespec *ts);
]]
local now = ffi.new("lab_timespec")

-- Milliseconds on CLOCK_MONOTONIC (1).
local function clock_ms()
  ffi.C.clock_gettime(1, now)
  return tonumber(now.lab_sec) * 1000 + tonumber(now.lab_nsec) / 1e6
end

local steady_init = init
init = function(args)
  steady_init(args)
  interval = 1000 / tonumber(args[2])
end

-- The wait before a connection's next request: until the next free slot of this thread.
delay = function()
  local t = clock_ms()
  slot = (slot or t) + interval
  local wait = slot - t
  if wait < 0 then
    return 0
  end
  return math.floor(wait + 0.5)
end
"#;

/// The scripts, in temporary files for wrk to load; removed on drop.
pub(crate) struct Script {
    steady: PathBuf,
    paced: PathBuf,
}

impl Script {
    pub(crate) fn write() -> Result<Script, String> {
        let file = |name: &str, text: &str| {
            let path = std::env::temp_dir().join(format!(
                "idspace-lab-serve-{name}-{}.lua",
                std::process::id()
            ));
            std::fs::write(&path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok::<_, String>(path)
        };
        Ok(Script {
            steady: file("steady", STEADY)?,
            paced: file("paced", &format!("{STEADY}{PACED}"))?,
        })
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.steady);
        let _ = std::fs::remove_file(&self.paced);
    }
}

/// The load of one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    /// Keep-alive connections.
    pub connections: usize,
    /// wrk's threads.
    pub threads: usize,
    /// The run's length.
    pub seconds: u64,
    /// A fixed rate (requests/s over all threads), or `None`: as fast as answered.
    pub rate: Option<f64>,
}

/// What one wrk run saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Run {
    /// Responses received (any status).
    pub requests: u64,
    /// The run's length.
    pub duration: Duration,
    /// Socket errors and non-2xx/3xx answers.
    pub errors: u64,
    /// Latency percentiles, µs.
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

/// Runs `wrk` with `load` against `http://addr{path}`; killed if it outlives the run by 30 s.
pub(crate) fn run(
    tool: &Path,
    script: &Script,
    addr: SocketAddr,
    path: &str,
    load: Load,
) -> Result<Run, String> {
    let Load {
        connections,
        threads,
        seconds,
        rate,
    } = load;
    let mut command = Command::new("timeout");
    command
        .arg((seconds + 30).to_string())
        .arg(tool)
        .args(["-t", &threads.to_string(), "-c", &connections.to_string()])
        .args(["-d", &format!("{seconds}s"), "--timeout", "5s", "-s"])
        .arg(if rate.is_some() {
            &script.paced
        } else {
            &script.steady
        })
        .arg(format!("http://{addr}{path}"))
        .args(["--", path])
        .stdin(Stdio::null());
    if let Some(rate) = rate {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!("wrk: a fixed rate must be positive, not {rate}"));
        }
        command.arg(format!("{:.3}", rate / threads.max(1) as f64));
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "wrk failed ({}): {} {}",
            output.status,
            stdout.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    parse(&stdout)
}

/// Parses the script's `LAB` line.
pub(crate) fn parse(out: &str) -> Result<Run, String> {
    let line = out
        .lines()
        .find_map(|line| line.strip_prefix("LAB "))
        .ok_or_else(|| format!("wrk printed no LAB line: {}", out.trim()))?;
    let fields: Vec<f64> = line
        .split_whitespace()
        .map(|field| field.parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("unreadable LAB line: {line}"))?;
    let [requests, micros, connect, read, write, status, timeout, p50, p99, p999] = fields[..]
    else {
        return Err(format!("a LAB line of 10 fields expected: {line}"));
    };
    Ok(Run {
        requests: requests as u64,
        duration: Duration::from_micros(micros as u64),
        errors: (connect + read + write + status + timeout) as u64,
        p50,
        p99,
        p999,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lab_line_is_parsed() {
        let out = "Running 1s test\nLAB 1000 1000000 0 1 0 2 0 50.0 200.5 900.0\n";
        let run = parse(out).unwrap();
        assert_eq!(run.requests, 1000);
        assert_eq!(run.duration, Duration::from_secs(1));
        assert_eq!(run.errors, 3);
        assert_eq!((run.p50, run.p99, run.p999), (50.0, 200.5, 900.0));
        assert!(parse("LAB 1 2 3").is_err());
        assert!(parse("nothing").is_err());
    }
}
