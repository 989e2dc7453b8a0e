//! `idspace replay table`: the protocol, line by line, for every design.

mod common;

use std::process::Command;

use serde_json::{json, Value};

fn replay(design: &str, input: &str) -> (Vec<Value>, i32) {
    common::replay(&["table", "--design", design], input)
}

const DESIGNS: [&str; 3] = ["global", "scaled", "radix"];

#[test]
fn the_protocol_for_every_design() {
    let input = r#"{"op":"create","owner":1}
{"op":"create","owner":1}
{"op":"create_at","owner":1,"id":9}
{"op":"restore","owner":1,"on":true}
{"op":"create_at","owner":1,"id":2147483646}
{"op":"create_at","owner":1,"id":2147483646}
{"op":"create_at","owner":1,"id":2147483648}
{"op":"create_at","owner":1,"id":-1}
{"op":"create","owner":1}
{"op":"create","owner":1}
{"op":"restore","owner":1,"on":false}
{"op":"get","owner":1,"id":1}
{"op":"get","owner":1,"id":7}
{"op":"get","owner":1,"id":-3}
{"op":"remove","owner":1,"id":0}
{"op":"remove","owner":1,"id":0}
{"op":"ids","owner":1}
{"op":"ids","owner":5}
{"op":"remove_owner","owner":1}
{"op":"ids","owner":1}
{"op":"create","owner":1}
{"op":"memory"}
"#;
    for design in DESIGNS {
        let (answers, status) = replay(design, input);
        let expected = [
            json!({"id": 0}),
            json!({"id": 1}),
            json!({"error": "not_restoring"}),
            json!({"ok": true}),
            json!({"id": 2147483646}),
            json!({"error": "busy"}),
            json!({"error": "invalid"}),
            json!({"error": "invalid"}),
            json!({"id": 2147483647}),
            json!({"id": 2}),
            json!({"ok": true}),
            json!({"found": true}),
            json!({"found": false}),
            json!({"found": false}),
            json!({"ok": true}),
            json!({"error": "not_found"}),
            json!({"ids": [1, 2, 2147483646, 2147483647]}),
            json!({"ids": []}),
            json!({"removed": 4}),
            json!({"ids": []}),
            json!({"id": 0}),
        ];
        assert_eq!(
            answers.len(),
            expected.len() + 1,
            "{design}: one answer per line"
        );
        for (line, (got, want)) in answers.iter().zip(expected.iter()).enumerate() {
            assert_eq!(got, want, "{design}, line {}", line + 1);
        }
        assert!(
            answers.last().unwrap()["bytes"].as_u64().unwrap() > 0,
            "{design}"
        );
        assert_eq!(status, 0, "{design}: no bad line, exit 0");
    }
}

#[test]
fn bad_lines_are_answered_and_processing_goes_on() {
    let input = r#"not json
[1,2]
{"owner":1}
{"op":"fly","owner":1}
{"op":"create"}
{"op":"create","owner":-1}
{"op":"create","owner":"x"}
{"op":"get","owner":1,"id":1.5}
{"op":"restore","owner":1,"on":1}
{"op":7}

{"op":"create","owner":1}
"#;
    for design in DESIGNS {
        let (answers, status) = replay(design, input);
        assert_eq!(answers.len(), 12, "{design}");
        for (index, answer) in answers[..11].iter().enumerate() {
            assert_eq!(
                answer["error"],
                "bad_input",
                "{design}, line {}: {answer}",
                index + 1
            );
            assert_eq!(answer["line"], index + 1, "{design}");
            assert!(!answer["detail"].as_str().unwrap().is_empty(), "{design}");
        }
        assert_eq!(
            answers[11],
            json!({"id": 0}),
            "{design}: state survived bad lines"
        );
        assert_eq!(status, 1, "{design}: a bad line makes the exit status 1");
    }
    let (answers, _) = replay("scaled", "{\"op\":\"fly\"}\n{\"op\":\"create\"}\n");
    let detail = answers[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("fly") && detail.contains("create_at"),
        "{detail}"
    );
    assert!(answers[1]["detail"].as_str().unwrap().contains("owner"));
}

#[test]
fn answers_keep_the_protocol_key_order() {
    let (answers, _) = replay("global", "oops\n");
    let text = serde_json::to_string(&answers[0]).unwrap();
    assert!(
        text.starts_with(r#"{"error":"bad_input","line":1,"detail":"#),
        "{text}"
    );
}

#[test]
fn unknown_design_is_a_clear_cli_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args(["replay", "table", "--design", "btree"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("btree") && stderr.contains("scaled"),
        "{stderr}"
    );
}

#[test]
fn bench_rejects_unknown_experiments() {
    let output = Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args(["bench", "nosuch", "--out", "/nonexistent/never-created"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nosuch") && stderr.contains("timers"),
        "{stderr}"
    );
}

#[test]
fn integers_beyond_64_bits_get_the_documented_answers() {
    let input = r#"{"op":"restore","owner":1,"on":true}
{"op":"create_at","owner":1,"id":18446744073709551616}
{"op":"create_at","owner":1,"id":-99999999999999999999999}
{"op":"get","owner":1,"id":340282366920938463463374607431768211456}
{"op":"remove","owner":1,"id":-18446744073709551617}
{"op":"create","owner":18446744073709551615}
{"op":"ids","owner":18446744073709551615}
"#;
    for design in DESIGNS {
        let (answers, status) = replay(design, input);
        let expected = [
            json!({"ok": true}),
            json!({"error": "invalid"}),
            json!({"error": "invalid"}),
            json!({"found": false}),
            json!({"error": "not_found"}),
            json!({"id": 0}),
            json!({"ids": [0]}),
        ];
        assert_eq!(answers, expected, "{design}");
        assert_eq!(status, 0, "{design}");
    }
    // Beyond even f64's range.
    let huge = "9".repeat(400);
    let (answers, status) = replay(
        "radix",
        &format!("{{\"op\":\"get\",\"owner\":1,\"id\":{huge}}}\n{{\"op\":\"remove\",\"owner\":1,\"id\":-{huge}}}\n"),
    );
    assert_eq!(
        answers,
        [json!({"found": false}), json!({"error": "not_found"})]
    );
    assert_eq!(status, 0);
}
