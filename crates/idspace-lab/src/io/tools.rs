//! The real tools the experiment runs beside its own workloads: `hackbench` from Debian's
//! `rt-tests` and `wrk`. Each is found on `PATH`; when one is missing its cells read "n/a" and
//! the report says why (the lab runs without root, so it never installs them itself).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tool found on `PATH`, or why it cannot be run.
pub(crate) fn locate(name: &str, package: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            format!(
                "`{name}` is not installed here (Debian's package `{package}`: `apt-get install \
                 {package}`, as `.ci/run` does)"
            )
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How the real hackbench runs its tasks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// POSIX threads (`-T`).
    Threads,
    /// Forked processes (`-P`, its default).
    Processes,
}

/// Runs `hackbench -g groups -l loops -f 20 -s 100` (with `-p` over pipes) in `mode` and
/// returns the seconds it printed as `Time:` (from its start signal until every task was
/// reaped).
pub(crate) fn hackbench(
    tool: &Path,
    mode: Mode,
    pipes: bool,
    groups: usize,
    loops: usize,
) -> Result<f64, String> {
    let mut command = Command::new(tool);
    command
        .args(["-g", &groups.to_string(), "-l", &loops.to_string()])
        .args(["-f", "20", "-s", "100"])
        .arg(match mode {
            Mode::Threads => "-T",
            Mode::Processes => "-P",
        });
    if pipes {
        command.arg("-p");
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "hackbench failed ({}): {}",
            output.status,
            stderr.trim()
        ));
    }
    hackbench_time(&stdout)
}

/// The seconds on hackbench's `Time:` line.
fn hackbench_time(stdout: &str) -> Result<f64, String> {
    stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("Time:"))
        .and_then(|time| time.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("hackbench printed no `Time:` line: {}", stdout.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hackbench_output_is_parsed() {
        let out = "Running in threaded mode with 1 groups using 40 file descriptors each \
                   (== 40 tasks)\nEach sender will pass 100 messages of 100 bytes\nTime: 0.096\n";
        assert_eq!(hackbench_time(out), Ok(0.096));
        assert!(hackbench_time("Time: soon\n").is_err());
        assert!(hackbench_time("").is_err());
    }

    #[test]
    fn a_missing_tool_says_which_package_brings_it() {
        let error = locate("idspace-no-such-tool", "no-such-package").unwrap_err();
        assert!(error.contains("apt-get install no-such-package"), "{error}");
        assert!(locate("sh", "dash").is_ok());
    }
}
