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

#[test]
fn integers_beyond_64_bits_get_the_documented_answers() {
    let input = r#"{"op":"fork","task":1}
{"op":"switch","cpu":18446744073709551616,"task":1}
{"op":"affinity","task":1,"cpus":[0,18446744073709551616]}
{"op":"switch","cpu":0,"task":1}
"#;
    for design in ["rework", "bitmap", "lazy"] {
        let (answers, status) = replay(design, "4", input);
        let expected = [
            json!({"ok": true}),
            json!({"error": "bad_cpu"}),
            json!({"error": "bad_cpu"}),
            json!({"cid": 0}),
        ];
        assert_eq!(answers, expected, "{design}");
        assert_eq!(status, 0, "{design}");
    }
    let (answers, status) = replay(
        "rework",
        "4",
        "{\"op\":\"fork\",\"task\":18446744073709551616}\n\
         {\"op\":\"switch\",\"cpu\":-18446744073709551616,\"task\":1}\n",
    );
    assert_eq!(
        answers[0]["detail"],
        "field \"task\" must be a non-negative integer below 2^64, got 18446744073709551616"
    );
    assert_eq!(
        answers[1]["detail"],
        "field \"cpu\" must be a non-negative integer, got -18446744073709551616"
    );
    assert_eq!(status, 1);
}

#[test]
fn cpus_default_to_this_machines_cpu_count() {
    let cpus = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .min(64);
    let input = format!(
        "{{\"op\":\"fork\",\"task\":1}}\n{{\"op\":\"fork\",\"task\":2}}\n\
         {{\"op\":\"switch\",\"cpu\":{},\"task\":1}}\n\
         {{\"op\":\"switch\",\"cpu\":{cpus},\"task\":2}}\n",
        cpus - 1
    );
    let (answers, status) = common::replay(&["cid", "--design", "rework"], &input);
    assert_eq!(
        answers,
        [
            json!({"ok": true}),
            json!({"ok": true}),
            json!({"cid": 0}),
            json!({"error": "bad_cpu"}),
        ],
        "the space has {cpus} CPUs"
    );
    assert_eq!(status, 0);
    let help = common::idspace(&["replay", "cid", "--help"]);
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(
        help.contains("this machine's CPU count") && help.contains("at most 64"),
        "{help}"
    );
}
