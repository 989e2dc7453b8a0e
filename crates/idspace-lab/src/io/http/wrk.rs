//! Driving a server with `wrk` (Debian's package, a real load generator the lab only starts):
//! one wrk thread, keep-alive connections, `--latency` for the percentiles, and a Lua script
//! for pipelining. Its text output is parsed here.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Lua script that sends `depth` requests at a time on every connection (HTTP/1.1
/// pipelining, as TechEmpower's plaintext test runs wrk); the depth is the script's argument.
const PIPELINE: &str = r#"-- Sends a batch of `depth` requests (the first argument) at a time on every connection.
init = function(args)
  local depth = tonumber(args[1]) or 1
  local batch = {}
  for i = 1, depth do
    batch[i] = wrk.format()
  end
  pipelined = table.concat(batch)
end

request = function()
  return pipelined
end
"#;

/// One wrk run's load.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    /// Keep-alive connections (`-c`).
    pub connections: usize,
    /// Requests in flight per connection: 1 (no pipelining) or the script's depth.
    pub depth: usize,
    /// The run's length (`-d`, whole seconds).
    pub seconds: u64,
}

/// What wrk reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Report {
    /// Responses received.
    pub requests: u64,
    /// Responses per second.
    pub per_second: f64,
    /// Median latency, µs; `None` when wrk's percentiles cannot be trusted ([`PIPELINED`]).
    pub p50: Option<f64>,
    /// 99th-percentile latency, µs; `None` likewise.
    pub p99: Option<f64>,
}

/// Why a pipelined run has no latency percentiles. wrk records one latency sample per batch
/// (when the last of the batch's responses arrives), but its coordinated-omission correction
/// (`stats_correct`) takes the expected interval per *request*: it adds synthetic samples down
/// to that interval, below the smallest recorded one, where its percentile walk (from the
/// recorded minimum up) never looks. High percentiles then find no rank and print `0.00us`,
/// and every percentile counts samples no request had.
pub(crate) const PIPELINED: &str = "wrk's latency percentiles are not measurements under \
     pipelining: it records one sample per batch, and its coordinated-omission correction, \
     computed per request, adds samples below the recorded minimum that its percentile walk \
     never reaches (p99 prints as 0.00us)";

/// The pipelining script, written to a temporary file for wrk to load and removed on drop.
pub(crate) struct Script(PathBuf);

impl Script {
    pub(crate) fn write() -> Result<Script, String> {
        let path =
            std::env::temp_dir().join(format!("idspace-lab-pipeline-{}.lua", std::process::id()));
        std::fs::write(&path, PIPELINE)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(Script(path))
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `wrk` against `http://addr/` with `load` (pipelined through `script` when the depth is
/// above 1) and waits for its report; a run that outlives its length by 30 s is killed.
pub(crate) fn run(
    tool: &Path,
    addr: SocketAddr,
    load: Load,
    script: &Script,
) -> Result<Report, String> {
    let mut command = Command::new(tool);
    command
        .args(["-t", "1", "-c", &load.connections.to_string()])
        .args(["-d", &format!("{}s", load.seconds), "--latency"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if load.depth > 1 {
        command.arg("-s").arg(&script.0);
    }
    command.arg(format!("http://{addr}/"));
    if load.depth > 1 {
        command.args(["--", &load.depth.to_string()]);
    }
    let child = command
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    let deadline = Duration::from_secs(load.seconds + 30);
    let stdout = wait(child, deadline)?;
    if load.depth > 1 {
        parse_pipelined(&stdout)
    } else {
        parse(&stdout)
    }
}

/// [`parse`] for a pipelined run: its requests and rate only, whatever the percentiles say
/// (they are not measurements there, see [`PIPELINED`], and wrk prints impossible ones at
/// times).
fn parse_pipelined(out: &str) -> Result<Report, String> {
    let report = parse_counts(out)?;
    Ok(Report {
        p50: None,
        p99: None,
        ..report
    })
}

/// Waits for `child` at most `deadline`, killing it then; its standard output.
fn wait(mut child: Child, deadline: Duration) -> Result<String, String> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("wrk did not finish within {deadline:?}; killed"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => return Err(format!("waiting for wrk: {error}")),
        }
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("reading wrk's output: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(format!(
            "wrk failed ({}): {} {}",
            output.status,
            stdout.trim(),
            stderr.trim()
        ))
    }
}

/// Parses wrk's report; an error if it saw socket errors or non-2xx answers (the server, not
/// the load, would then be what is measured), or if a percentile is impossible (zero, or below
/// the median: wrk's percentile walk fell off its histogram, see [`PIPELINED`]).
pub(crate) fn parse(out: &str) -> Result<Report, String> {
    let report = parse_counts(out)?;
    let (Some(p50), Some(p99)) = (report.p50, report.p99) else {
        return Err(unreadable(out));
    };
    if p50 <= 0.0 || p99 < p50 {
        return Err(format!(
            "wrk printed impossible latency percentiles (p50 {p50} µs, p99 {p99} µs): {}",
            out.trim()
        ));
    }
    Ok(report)
}

/// The lines of wrk's report, with its percentiles unchecked; an error for socket errors,
/// non-2xx answers, a missing rate, or no response at all.
fn parse_counts(out: &str) -> Result<Report, String> {
    let mut report = Report {
        requests: 0,
        per_second: f64::NAN,
        p50: None,
        p99: None,
    };
    for line in out.lines().map(str::trim) {
        if line.starts_with("Socket errors:") || line.starts_with("Non-2xx") {
            return Err(format!("wrk reported \"{line}\""));
        }
        if let Some(rate) = line.strip_prefix("Requests/sec:") {
            report.per_second = number(rate.trim(), out)?;
        } else if let Some(p50) = line.strip_prefix("50%") {
            report.p50 = Some(micros(p50.trim()).ok_or_else(|| unreadable(out))?);
        } else if let Some(p99) = line.strip_prefix("99%") {
            report.p99 = Some(micros(p99.trim()).ok_or_else(|| unreadable(out))?);
        } else if let Some((count, _)) = line.split_once(" requests in ") {
            report.requests = count.trim().parse().map_err(|_| unreadable(out))?;
        }
    }
    if report.per_second.is_nan() {
        return Err(unreadable(out));
    }
    if report.requests == 0 {
        return Err(format!("wrk got no response: {}", out.trim()));
    }
    Ok(report)
}

fn number(text: &str, out: &str) -> Result<f64, String> {
    text.parse().map_err(|_| unreadable(out))
}

fn unreadable(out: &str) -> String {
    format!("unreadable wrk output: {}", out.trim())
}

/// A wrk duration (`580.00us`, `1.20ms`, `2.01s`, `1.05m`) in µs.
fn micros(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (value, unit) = text.split_at(split);
    let value: f64 = value.parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(value * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "Running 1s test @ http://127.0.0.1:8080/
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   622.11us  101.00us   5.01ms   90.00%
    Req/Sec   103.12k     2.00k  110.00k    80.00%
  Latency Distribution
     50%  580.00us
     75%  650.00us
     90%  700.00us
     99%    1.20ms
  103045 requests in 1.00s, 8.06MB read
Requests/sec: 102874.56
Transfer/sec:      8.05MB
";

    #[test]
    fn a_report_is_parsed() {
        let report = parse(OUTPUT).unwrap();
        assert_eq!(report.requests, 103_045);
        assert_eq!(report.per_second, 102_874.56);
        assert_eq!(report.p50, Some(580.0));
        assert_eq!(report.p99, Some(1200.0));
    }

    #[test]
    fn a_percentile_walk_that_fell_off_the_histogram_is_refused() {
        // What wrk prints for a pipelined run (see `PIPELINED`).
        let fell_off = OUTPUT
            .replace("90%  700.00us", "90%    0.00us")
            .replace("99%    1.20ms", "99%    0.00us");
        assert!(parse(&fell_off).unwrap_err().contains("impossible"));
        // A pipelined run keeps its rate; its percentiles are dropped.
        let pipelined = parse_pipelined(&fell_off).unwrap();
        assert_eq!(pipelined.per_second, 102_874.56);
        assert_eq!((pipelined.p50, pipelined.p99), (None, None));
    }

    #[test]
    fn errors_and_truncated_output_are_refused() {
        let errors = OUTPUT.replace(
            "Requests/sec",
            "  Socket errors: connect 0, read 3, write 0, timeout 0\nRequests/sec",
        );
        assert!(parse(&errors).unwrap_err().contains("Socket errors"));
        let truncated: String = OUTPUT.lines().take(8).collect::<Vec<_>>().join("\n");
        assert!(parse(&truncated).unwrap_err().contains("unreadable"));
        assert!(parse("").is_err());
    }

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(micros("580.00us"), Some(580.0));
        assert_eq!(micros("1.20ms"), Some(1200.0));
        assert_eq!(micros("2.00s"), Some(2e6));
        assert_eq!(micros("1.00m"), Some(60e6));
        assert_eq!(micros("12"), None);
        assert_eq!(micros("3.0xs"), None);
    }
}
