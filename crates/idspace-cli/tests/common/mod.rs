//! Helpers shared by the CLI's integration tests.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Runs `idspace replay ARGS...` with `input` on stdin; returns the answers, parsed, and the
/// exit status.
pub fn replay(args: &[&str], input: &str) -> (Vec<Value>, i32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_idspace"))
        .arg("replay")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(input.as_bytes())
        .expect("the replayer reads its input");
    let output = child.wait_with_output().expect("the replayer exits");
    let answers = String::from_utf8(output.stdout)
        .expect("answers are UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("every answer is JSON"))
        .collect();
    (answers, output.status.code().unwrap_or(-1))
}
