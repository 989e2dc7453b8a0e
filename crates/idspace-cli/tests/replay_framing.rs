//! The framing every replay family shares: how lines are read, how bad ones are answered, the
//! exit status and the per-family help.

mod common;

use std::io::{BufRead, BufReader, Write};

use serde_json::{json, Value};

const TABLE: &[&str] = &["table", "--design", "scaled"];

/// One MiB: the longest line the replayer reads.
const LIMIT: usize = 1 << 20;

fn assert_bad(answer: &Value, line: usize, detail_has: &str) {
    assert_eq!(answer["error"], "bad_input", "line {line}: {answer}");
    assert_eq!(answer["line"], line, "{answer}");
    let detail = answer["detail"].as_str().expect("a detail");
    assert!(detail.contains(detail_has), "line {line}: {detail}");
}

#[test]
fn invalid_utf8_is_bad_input_and_processing_goes_on() {
    let input = b"{\"op\":\"create\",\"owner\":1}\n\
        {\"op\":\"create\",\"owner\":1,\"name\":\"\xff\"}\n\
        \xc3\n\
        {\"op\":\"create\",\"owner\":1}\n";
    let (answers, status) = common::replay_bytes(TABLE, input);
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert_eq!(answers[0], json!({"id": 0}));
    assert_bad(&answers[1], 2, "UTF-8");
    assert_bad(&answers[2], 3, "UTF-8");
    assert_eq!(answers[3], json!({"id": 1}), "the stream goes on");
    assert_eq!(status, 1);
}

/// A create line padded with an ignored field to exactly `len` bytes.
fn padded_create(len: usize) -> String {
    let head = "{\"op\":\"create\",\"owner\":1,\"pad\":\"";
    let tail = "\"}";
    format!("{head}{}{tail}", "x".repeat(len - head.len() - tail.len()))
}

#[test]
fn a_line_over_one_mib_is_bad_input_and_the_next_line_is_answered() {
    let mut input = padded_create(LIMIT);
    input += "\n";
    input += &padded_create(LIMIT + 1);
    input += "\n";
    // Far over the limit, and not even JSON: the reader skips it to the newline.
    input += &"[".repeat(5 * LIMIT);
    input += "\n{\"op\":\"create\",\"owner\":1}\n";
    let (answers, status) = common::replay_bytes(TABLE, input.as_bytes());
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert_eq!(answers[0], json!({"id": 0}), "exactly 1 MiB is read");
    assert_bad(&answers[1], 2, "1 MiB");
    assert_bad(&answers[2], 3, "1 MiB");
    assert_eq!(answers[3], json!({"id": 1}));
    assert_eq!(status, 1);
}

#[test]
fn an_over_long_last_line_without_newline_is_answered() {
    let input = padded_create(LIMIT + 10);
    let (answers, status) = common::replay_bytes(TABLE, input.as_bytes());
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_bad(&answers[0], 1, "1 MiB");
    assert_eq!(status, 1);
}

#[test]
fn duplicate_keys_are_bad_input() {
    let input = "{\"op\":\"create\",\"owner\":1,\"owner\":2}\n\
        {\"op\":\"create\",\"op\":\"memory\",\"owner\":1}\n\
        {\"op\":\"memory\",\"extra\":{\"a\":1,\"a\":2}}\n\
        {\"op\":\"create\",\"owner\":1,\"own\\u0065r\":2}\n\
        {\"op\":\"create\",\"owner\":1}\n";
    let (answers, status) = common::replay_bytes(TABLE, input.as_bytes());
    assert_eq!(answers.len(), 5, "{answers:?}");
    assert_bad(&answers[0], 1, "duplicate key \"owner\"");
    assert_bad(&answers[1], 2, "duplicate key \"op\"");
    assert_bad(&answers[2], 3, "duplicate key \"a\"");
    assert_bad(&answers[3], 4, "duplicate key \"owner\"");
    assert_eq!(answers[4], json!({"id": 0}));
    assert_eq!(status, 1);
}

#[test]
fn details_name_the_field_and_what_was_wrong() {
    let input = "{\"owner\":1}\n\
        {\"op\":7}\n\
        {\"op\":\"fly\"}\n\
        {\"op\":\"create\"}\n\
        {\"op\":\"create\",\"owner\":-1}\n\
        {\"op\":\"create\",\"owner\":18446744073709551616}\n\
        {\"op\":\"get\",\"owner\":1,\"id\":1.5}\n\
        {\"op\":\"get\",\"owner\":1,\"id\":1e3}\n\
        {\"op\":\"restore\",\"owner\":1,\"on\":1}\n\
        [1]\n\
        {\"op\":\"create\",\"owner\":1}}\n";
    let (answers, _) = common::replay_bytes(TABLE, input.as_bytes());
    let details: Vec<&str> = answers
        .iter()
        .map(|answer| answer["detail"].as_str().unwrap())
        .collect();
    assert_eq!(details[0], "missing field \"op\"");
    assert_eq!(details[1], "field \"op\" must be a string, got 7");
    assert_eq!(
        details[2],
        "unknown op \"fly\" (expected one of: create, create_at, restore, get, remove, ids, \
         remove_owner, memory)"
    );
    assert_eq!(details[3], "missing field \"owner\"");
    assert_eq!(
        details[4],
        "field \"owner\" must be a non-negative integer below 2^64, got -1"
    );
    assert_eq!(
        details[5],
        "field \"owner\" must be a non-negative integer below 2^64, got 18446744073709551616"
    );
    assert_eq!(details[6], "field \"id\" must be an integer, got 1.5");
    assert_eq!(details[7], "field \"id\" must be an integer, got 1e3");
    assert_eq!(details[8], "field \"on\" must be true or false, got 1");
    assert_eq!(details[9], "expected a JSON object");
    assert!(
        details[10].starts_with("not valid JSON: "),
        "{}",
        details[10]
    );
}

/// Feeds the replayer `first` and `second`, reads their two answers, closes the replayer's
/// stdout, then feeds one more good line so that its answer meets the closed pipe. Returns the
/// exit status.
fn status_after_stdout_closes(args: &[&str], first: &str, second: &str) -> i32 {
    let mut child = common::spawn_replay(args);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, "{first}\n{second}").unwrap();
    stdin.flush().unwrap();
    for _ in 0..2 {
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        assert!(answer.ends_with('\n'), "an answer per line: {answer:?}");
    }
    drop(stdout);
    // The replayer answers this line into a pipe nobody reads: its write fails.
    writeln!(stdin, "{{\"op\":\"memory\"}}").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    status
        .code()
        .expect("the replayer exits, not killed by SIGPIPE")
}

#[test]
fn closed_stdout_keeps_the_exit_status_of_the_lines_read() {
    let good = "{\"op\":\"create\",\"owner\":1}";
    assert_eq!(
        status_after_stdout_closes(TABLE, good, "not json"),
        1,
        "a bad line was read before stdout closed"
    );
    assert_eq!(status_after_stdout_closes(TABLE, good, good), 0);
}

#[test]
fn help_prints_each_protocol_table() {
    let families: [(&str, &[&str]); 3] = [
        (
            "table",
            &[
                "create",
                "create_at",
                "restore",
                "get",
                "remove",
                "ids",
                "remove_owner",
                "memory",
            ],
        ),
        (
            "pid",
            &["ns_new", "pid_max", "alloc", "free", "lookup", "memory"],
        ),
        (
            "cid",
            &["fork", "exit", "switch", "affinity", "compact", "state"],
        ),
    ];
    for (family, ops) in families {
        let output = common::idspace(&["replay", family, "--help"]);
        assert_eq!(output.status.code(), Some(0), "{family}");
        let help = String::from_utf8(output.stdout).unwrap();
        for op in ops {
            assert!(
                help.contains(&format!("{{\"op\":\"{op}\"")),
                "{family} --help shows {op}:\n{help}"
            );
        }
        assert!(help.contains("bad_input"), "{family}:\n{help}");
        assert!(help.contains("exit status"), "{family}:\n{help}");
    }
}
