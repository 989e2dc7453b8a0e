//! Helpers shared by the CLI's integration tests.

// Each test file uses some of these helpers, none uses all.
#![allow(dead_code)]

use std::io::Write;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// Starts `idspace replay ARGS...` with stdin, stdout and stderr piped.
pub fn spawn_replay(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_idspace"))
        .arg("replay")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts")
}

/// Runs `idspace replay ARGS...` with `input` on stdin; returns the answers, parsed, and the
/// exit status.
pub fn replay(args: &[&str], input: &str) -> (Vec<Value>, i32) {
    replay_bytes(args, input.as_bytes())
}

/// Runs `idspace replay ARGS...` with raw `input` bytes on stdin (which need not be UTF-8);
/// returns the answers, parsed, and the exit status.
pub fn replay_bytes(args: &[&str], input: &[u8]) -> (Vec<Value>, i32) {
    let mut child = spawn_replay(args);
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input = input.to_vec();
    // A separate writer: the replayer answers while it reads, so a large input written from
    // this thread could fill both pipes and stall both processes.
    let writer = std::thread::spawn(move || {
        // The replayer may stop reading early (and the write then fail); its answers say so.
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("the replayer exits");
    writer.join().expect("the writer finishes");
    let answers = String::from_utf8(output.stdout)
        .expect("answers are UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("every answer is JSON"))
        .collect();
    (answers, output.status.code().unwrap_or(-1))
}

/// The output of `idspace ARGS...` with no input.
pub fn idspace(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}
