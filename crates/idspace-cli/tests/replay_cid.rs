//! `idspace replay cid`: the protocol, line by line, for every design.

mod common;

use serde_json::{json, Value};

fn replay(design: &str, cpus: &str, input: &str) -> (Vec<Value>, i32) {
    common::replay(&["cid", "--design", design, "--cpus", cpus], input)
}

const SCRIPT: &str = r#"{"op":"fork","task":7}
{"op":"fork","task":9}
{"op":"fork","task":7}
{"op":"switch","cpu":0,"task":7}
{"op":"switch","cpu":1,"task":7}
{"op":"switch","cpu":4,"task":9}
{"op":"switch","cpu":1,"task":42}
{"op":"affinity","task":9,"cpus":[0,2]}
{"op":"switch","cpu":1,"task":9}
{"op":"affinity","task":9,"cpus":[]}
{"op":"affinity","task":9,"cpus":[0,1,2,3,9]}
{"op":"affinity","task":42,"cpus":[0]}
{"op":"switch","cpu":2,"task":9}
{"op":"switch","cpu":2,"task":null}
{"op":"exit","task":7}
{"op":"exit","task":7}
{"op":"compact"}
{"op":"fork","task":7}
"#;

#[test]
fn the_protocol_for_every_design() {
    for design in ["rework", "bitmap", "lazy"] {
        let (answers, status) = replay(design, "4", SCRIPT);
        let expected = [
            json!({"ok": true}),
            json!({"ok": true}),
            json!({"error": "task_exists"}),
            json!({"cid": 0}),
            json!({"error": "running_elsewhere"}),
            json!({"error": "bad_cpu"}),
            json!({"error": "unknown_task"}),
            json!({"ok": true}),
            json!({"error": "not_allowed"}),
            json!({"error": "bad_cpu"}),
            json!({"error": "bad_cpu"}),
            json!({"error": "unknown_task"}),
        ];
        for (line, want) in expected.iter().enumerate() {
            assert_eq!(&answers[line], want, "{design}, line {}", line + 1);
        }
        let cid = answers[12]["cid"].as_u64().expect("a CID");
        assert!(
            cid < 4 && cid != 0,
            "{design}: task 9 runs beside task 7 (CID 0), got {cid}"
        );
        for (line, answer) in answers.iter().enumerate().skip(13) {
            let want = if line == 15 {
                json!({"error": "unknown_task"})
            } else {
                json!({"ok": true})
            };
            assert_eq!(answer, &want, "{design}, line {}", line + 1);
        }
        assert_eq!(status, 0, "{design}");
    }
}

#[test]
fn state_reports_mode_users_budget_and_running_tasks() {
    let mut script = String::new();
    for task in 0..6 {
        script += &format!("{{\"op\":\"fork\",\"task\":{}}}\n", task + 100);
    }
    script += "{\"op\":\"switch\",\"cpu\":0,\"task\":100}\n{\"op\":\"switch\",\"cpu\":3,\"task\":105}\n{\"op\":\"state\"}\n";
    let (answers, _) = replay("rework", "4", &script);
    let state = &answers[8];
    assert_eq!(state["mode"], "cpu", "6 users > max_cids 4: {state}");
    assert_eq!(state["users"], 6);
    assert_eq!(state["max_cids"], 4);
    let running = state["running"].as_object().unwrap();
    assert_eq!(running.len(), 2);
    assert_ne!(running["100"], running["105"]);
    for design in ["bitmap", "lazy"] {
        let (answers, _) = replay(design, "4", &script);
        assert_eq!(answers[8]["mode"], "none", "{design}");
    }
}

#[test]
fn bad_lines_and_cli_errors() {
    let input = "{\"op\":\"fork\"}\n\
        {\"op\":\"fork\",\"task\":-1}\n\
        {\"op\":\"switch\",\"cpu\":-1,\"task\":1}\n\
        {\"op\":\"switch\",\"cpu\":0}\n\
        {\"op\":\"switch\",\"cpu\":0,\"task\":\"a\"}\n\
        {\"op\":\"affinity\",\"task\":1,\"cpus\":3}\n\
        {\"op\":\"rebalance\"}\n\
        {\"op\":\"fork\",\"task\":1}\n";
    let (answers, status) = replay("lazy", "2", input);
    for (index, answer) in answers[..7].iter().enumerate() {
        assert_eq!(answer["error"], "bad_input", "line {}: {answer}", index + 1);
    }
    assert_eq!(answers[7], json!({"ok": true}));
    assert_eq!(status, 1);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args(["replay", "cid", "--design", "rework", "--cpus", "65"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("65"));
}
