//! `idspace bench` at the command line: the argument checks that come before any experiment
//! runs. (The experiments themselves are the lab's; CI runs the lab once, at its quick scale.)
//! A build without the `bench` feature has no lab: `features.rs` tests that one.
#![cfg(feature = "bench")]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Runs `idspace bench ARGS...`; returns its output and how long it took.
fn bench(args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_idspace"))
        .arg("bench")
        .args(args)
        .output()
        .expect("the binary runs");
    (output, start.elapsed())
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn list_shows_every_experiment() {
    let (output, _) = bench(&["--list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let listed = String::from_utf8_lossy(&output.stdout);
    for name in [
        "timers", "pid", "cid", "wake", "lease", "percid", "mmcid", "process",
    ] {
        assert!(
            listed.lines().any(|l| l.starts_with(name)),
            "{name} in {listed}"
        );
    }
}

#[test]
fn list_with_a_name_shows_that_experiment() {
    let (output, _) = bench(&["cid", "--list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let listed = String::from_utf8_lossy(&output.stdout);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.starts_with("cid"), "{listed}");
}

#[test]
fn an_unknown_experiment_is_an_error_also_with_list() {
    for args in [
        &["nosuch", "--list"][..],
        &["--list", "cid", "nosuch"],
        &["nosuch"],
    ] {
        let (output, _) = bench(args);
        assert!(!output.status.success(), "{args:?} succeeded");
        let message = stderr(&output);
        assert!(message.contains("\"nosuch\""), "{args:?}: {message}");
        assert!(
            message.contains("timers, pid, cid, wake"),
            "{args:?} names the known experiments: {message}"
        );
        assert!(output.stdout.is_empty(), "{args:?} listed something");
    }
}

#[test]
fn an_out_dir_that_cannot_be_written_fails_before_any_experiment() {
    // /proc/self is a directory nobody, root included, can create files in.
    let (output, took) = bench(&["--quick", "--out", "/proc/self", "cid"]);
    let message = stderr(&output);
    assert!(!output.status.success(), "{message}");
    assert!(message.contains("/proc/self"), "{message}");
    assert!(
        !message.contains("== cid"),
        "the experiment ran before the check: {message}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}: {message}");
}

#[test]
fn an_out_dir_below_a_file_fails_before_any_experiment() {
    let file = std::env::temp_dir().join(format!("idspace-bench-cli-{}", std::process::id()));
    std::fs::write(&file, "not a directory").expect("the temp dir is writable");
    let out = file.join("lab");
    let (output, _) = bench(&["--quick", "--out", out.to_str().expect("UTF-8"), "cid"]);
    let _ = std::fs::remove_file(&file);
    let message = stderr(&output);
    assert!(!output.status.success(), "{message}");
    assert!(message.contains("cannot create"), "{message}");
    assert!(!message.contains("== cid"), "{message}");
}

#[test]
fn a_stdout_that_fails_is_named_not_a_panic() {
    let output = Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args(["bench", "--list"])
        .stdout(std::fs::File::create("/dev/full").expect("/dev/full"))
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("idspace bench: stdout: No space left on device"),
        "{}",
        stderr(&output)
    );
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
}

#[test]
fn a_stderr_that_fails_keeps_the_exit_status() {
    let output = Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args(["bench", "nosuchexperiment"])
        .stderr(std::fs::File::create("/dev/full").expect("/dev/full"))
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(2));
}
