//! `idspace replay pid`: the protocol, line by line, for every design.

mod common;

use serde_json::{json, Value};

fn replay(design: &str, input: &str) -> (Vec<Value>, i32) {
    common::replay(&["pid", "--design", design], input)
}

const SCRIPT: &str = r#"{"op":"alloc","ns":0}
{"op":"ns_new","parent":0}
{"op":"ns_new","parent":9}
{"op":"alloc","ns":1,"set_tid":[5]}
{"op":"alloc","ns":1,"set_tid":[1,1]}
{"op":"alloc","ns":1,"set_tid":[1,2,3]}
{"op":"alloc","ns":1,"set_tid":[1,400],"cpu":5}
{"op":"alloc","ns":1,"set_tid":[-4]}
{"op":"alloc","ns":1,"set_tid":[7,400]}
{"op":"lookup","ns":1,"id":1}
{"op":"lookup","ns":0,"id":400}
{"op":"lookup","ns":0,"id":-1}
{"op":"lookup","ns":4,"id":1}
{"op":"pid_max","ns":1,"max":300}
{"op":"pid_max","ns":1,"max":301}
{"op":"pid_max","ns":6,"max":1000}
{"op":"free","ns":1,"id":1,"cpu":2}
{"op":"free","ns":0,"id":400}
{"op":"free","ns":0,"id":99999999999}
{"op":"alloc","ns":1}
{"op":"alloc","ns":1,"set_tid":[1]}
{"op":"free","ns":3,"id":1}
{"op":"memory"}
"#;

fn expected_common() -> Vec<Value> {
    vec![
        json!({"ids": [1]}),
        json!({"ns": 1}),
        json!({"error": "unknown_ns"}),
        json!({"error": "invalid"}),
        json!({"error": "exists"}),
        json!({"error": "invalid"}),
        json!({"ids": [1, 400]}),
        json!({"error": "invalid"}),
        json!({"error": "exists"}),
        json!({"found": true}),
        json!({"found": true}),
        json!({"found": false}),
        json!({"error": "unknown_ns"}),
        json!({"error": "invalid"}),
        json!({"ok": true}),
        json!({"error": "unknown_ns"}),
        json!({"ok": true}),
        json!({"error": "not_found"}),
        json!({"error": "not_found"}),
        json!({"error": "ns_dead"}),
        json!({"error": "ns_dead"}),
        json!({"error": "unknown_ns"}),
    ]
}

#[test]
fn the_protocol_for_every_design() {
    for design in ["idr-relock", "idr-once", "bitmap-hash", "percpu"] {
        let (answers, status) = replay(design, SCRIPT);
        let expected = expected_common();
        assert_eq!(answers.len(), expected.len() + 1, "{design}");
        for (line, (got, want)) in answers.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "{design}, line {}", line + 1);
        }
        assert!(
            answers.last().unwrap()["bytes"].as_u64().is_some(),
            "{design}"
        );
        assert_eq!(status, 0, "{design}");
    }
}

#[test]
fn sequential_designs_give_the_kernel_ids() {
    let script = "{\"op\":\"pid_max\",\"ns\":0,\"max\":303}\n".to_string()
        + &"{\"op\":\"alloc\",\"ns\":0}\n".repeat(303)
        + "{\"op\":\"free\",\"ns\":0,\"id\":7}\n{\"op\":\"free\",\"ns\":0,\"id\":301}\n{\"op\":\"alloc\",\"ns\":0}\n";
    for design in ["idr-relock", "idr-once", "bitmap-hash"] {
        let (answers, _) = replay(design, &script);
        for (index, answer) in answers[1..303].iter().enumerate() {
            assert_eq!(answer, &json!({"ids": [index + 1]}), "{design}");
        }
        assert_eq!(answers[303], json!({"error": "full"}), "{design}");
        // 7 is below the 300 floor; 301 is the one free ID above it.
        assert_eq!(answers[306], json!({"ids": [301]}), "{design}");
    }
}

/// A space whose first allocation fails is left at its start: its next object is ID 1, its
/// init (the kernel's `alloc_pid` resets the cursor of a namespace with no PID yet). The root is
/// full (IDs 1..300 under a `pid_max` of 301) when space 1's first allocation is tried.
#[test]
fn a_failed_first_allocation_leaves_the_space_at_its_start() {
    let script = "{\"op\":\"pid_max\",\"ns\":0,\"max\":301}\n".to_string()
        + &"{\"op\":\"alloc\",\"ns\":0}\n".repeat(300)
        + "{\"op\":\"ns_new\",\"parent\":0}\n\
           {\"op\":\"alloc\",\"ns\":1}\n\
           {\"op\":\"free\",\"ns\":0,\"id\":300}\n\
           {\"op\":\"alloc\",\"ns\":1}\n\
           {\"op\":\"alloc\",\"ns\":1,\"set_tid\":[2]}\n";
    for design in ["idr-relock", "idr-once", "bitmap-hash", "percpu"] {
        let (answers, status) = replay(design, &script);
        assert_eq!(answers.len(), 306, "{design}");
        assert_eq!(answers[300], json!({"ids": [300]}), "{design}");
        let tail = [
            json!({"ns": 1}),
            json!({"error": "full"}),
            json!({"ok": true}),
            json!({"ids": [1, 300]}),
            // The space has its init, so an exact ID other than 1 may be asked for; the root
            // is full again.
            json!({"error": "full"}),
        ];
        assert_eq!(answers[301..], tail, "{design}");
        assert_eq!(status, 0, "{design}");
    }
}

/// Only the target space is reset: the cursors the failed allocation moved at the outer levels
/// stay moved, and a space that holds an object keeps its cursor.
#[test]
fn the_reset_is_the_target_space_s_alone() {
    let script = "{\"op\":\"pid_max\",\"ns\":0,\"max\":303}\n\
                  {\"op\":\"ns_new\",\"parent\":0}\n\
                  {\"op\":\"alloc\",\"ns\":1}\n"
        .to_string()
        + &"{\"op\":\"alloc\",\"ns\":0}\n".repeat(301)
        + "{\"op\":\"ns_new\",\"parent\":0}\n\
           {\"op\":\"ns_new\",\"parent\":2}\n\
           {\"op\":\"alloc\",\"ns\":3}\n\
           {\"op\":\"alloc\",\"ns\":1}\n\
           {\"op\":\"free\",\"ns\":0,\"id\":301}\n\
           {\"op\":\"free\",\"ns\":0,\"id\":302}\n\
           {\"op\":\"alloc\",\"ns\":3}\n\
           {\"op\":\"alloc\",\"ns\":1}\n";
    for design in ["idr-relock", "idr-once", "bitmap-hash"] {
        let (answers, status) = replay(design, &script);
        assert_eq!(answers[2], json!({"ids": [1, 1]}), "{design}");
        assert_eq!(answers[303], json!({"ids": [302]}), "{design}");
        let tail = [
            json!({"ns": 2}),
            json!({"ns": 3}),
            json!({"error": "full"}),
            json!({"error": "full"}),
            json!({"ok": true}),
            json!({"ok": true}),
            // Space 3 starts again at 1; space 2 goes on from the 2 the failure took.
            json!({"ids": [1, 2, 301]}),
            // Space 1 holds its init: its cursor went past the 2 its failure took.
            json!({"ids": [3, 302]}),
        ];
        assert_eq!(answers[304..], tail, "{design}");
        assert_eq!(status, 0, "{design}");
    }
}

#[test]
fn bad_lines_are_answered_and_processing_goes_on() {
    let input = "{\"op\":\"alloc\"}\n\
        {\"op\":\"alloc\",\"ns\":-1}\n\
        {\"op\":\"alloc\",\"ns\":0,\"set_tid\":5}\n\
        {\"op\":\"alloc\",\"ns\":0,\"set_tid\":[\"a\"]}\n\
        {\"op\":\"alloc\",\"ns\":0,\"cpu\":64}\n\
        {\"op\":\"free\",\"ns\":0}\n\
        {\"op\":\"spawn\"}\n\
        {\"op\":\"alloc\",\"ns\":0}\n";
    for design in ["idr-relock", "percpu"] {
        let (answers, status) = replay(design, input);
        for (index, answer) in answers[..7].iter().enumerate() {
            assert_eq!(
                answer["error"],
                "bad_input",
                "{design}, line {}: {answer}",
                index + 1
            );
            assert_eq!(answer["line"], index + 1);
        }
        assert_eq!(answers[7], json!({"ids": [1]}), "{design}");
        assert_eq!(status, 1, "{design}");
    }
}

#[test]
fn integers_beyond_64_bits_get_the_documented_answers() {
    let input = r#"{"op":"free","ns":0,"id":18446744073709551616}
{"op":"free","ns":0,"id":-18446744073709551616}
{"op":"lookup","ns":0,"id":18446744073709551616}
{"op":"lookup","ns":0,"id":-18446744073709551616}
{"op":"ns_new","parent":18446744073709551616}
{"op":"alloc","ns":99999999999999999999999}
{"op":"free","ns":99999999999999999999999,"id":1}
{"op":"alloc","ns":0,"set_tid":[18446744073709551616]}
{"op":"alloc","ns":0,"set_tid":[-18446744073709551616]}
{"op":"pid_max","ns":0,"max":18446744073709551616}
{"op":"pid_max","ns":0,"max":-18446744073709551616}
{"op":"alloc","ns":0}
"#;
    for design in ["idr-relock", "idr-once", "bitmap-hash", "percpu"] {
        let (answers, status) = replay(design, input);
        let expected = [
            json!({"error": "not_found"}),
            json!({"error": "not_found"}),
            json!({"found": false}),
            json!({"found": false}),
            json!({"error": "unknown_ns"}),
            json!({"error": "unknown_ns"}),
            json!({"error": "unknown_ns"}),
            json!({"error": "invalid"}),
            json!({"error": "invalid"}),
            json!({"error": "invalid"}),
            json!({"error": "invalid"}),
            json!({"ids": [1]}),
        ];
        assert_eq!(answers, expected, "{design}");
        assert_eq!(status, 0, "{design}");
    }
    let (answers, status) = replay(
        "percpu",
        "{\"op\":\"alloc\",\"ns\":0,\"cpu\":18446744073709551616}\n\
         {\"op\":\"free\",\"ns\":0,\"id\":1.5}\n",
    );
    assert_eq!(
        answers[0]["detail"],
        "field \"cpu\" must be an integer in 0..64, got 18446744073709551616"
    );
    assert_eq!(
        answers[1]["detail"],
        "field \"id\" must be an integer, got 1.5"
    );
    assert_eq!(status, 1);
}
