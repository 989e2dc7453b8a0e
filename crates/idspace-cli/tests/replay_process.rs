//! `idspace replay process`: every operation and its errors, for every pair of designs; the
//! sequential PID designs give exactly the kernel's IDs; bad lines are answered and counted.

mod common;

use serde_json::{json, Value};

const PID_DESIGNS: [&str; 4] = ["idr-relock", "idr-once", "bitmap-hash", "percpu"];
const TABLE_DESIGNS: [&str; 3] = ["global", "scaled", "radix"];

fn replay(pid: &str, table: &str, input: &str) -> (Vec<Value>, i32) {
    common::replay(
        &["process", "--pid-design", pid, "--table-design", table],
        input,
    )
}

/// Lines and, for the sequential designs, their exact answers.
fn script() -> Vec<(Value, Value)> {
    [
        processes_and_threads(),
        timers_and_exits(),
        lookups_and_images(),
    ]
    .concat()
}

/// Namespaces, forks and clones.
fn processes_and_threads() -> Vec<(Value, Value)> {
    vec![
        (json!({"op":"fork","ns":0}), json!({"pid":1,"ids":[1]})),
        (json!({"op":"ns_new","parent":0}), json!({"ns":1})),
        (
            json!({"op":"ns_new","parent":7}),
            json!({"error":"unknown_ns"}),
        ),
        (
            json!({"op":"pid_max","ns":1,"max":300}),
            json!({"error":"invalid"}),
        ),
        (
            json!({"op":"pid_max","ns":9,"max":400}),
            json!({"error":"unknown_ns"}),
        ),
        (json!({"op":"pid_max","ns":1,"max":400}), json!({"ok":true})),
        (json!({"op":"fork","ns":1}), json!({"pid":2,"ids":[1,2]})),
        (json!({"op":"fork","ns":5}), json!({"error":"unknown_ns"})),
        (json!({"op":"clone","pid":2}), json!({"tid":3,"ids":[2,3]})),
        (json!({"op":"clone","pid":2}), json!({"tid":4,"ids":[3,4]})),
        (
            json!({"op":"clone","pid":99}),
            json!({"error":"unknown_process"}),
        ),
    ]
}

/// Timers, exits and the threads left.
fn timers_and_exits() -> Vec<(Value, Value)> {
    vec![
        (json!({"op":"timer_create","pid":2}), json!({"timer":0})),
        (json!({"op":"timer_create","pid":2}), json!({"timer":1})),
        (
            json!({"op":"timer_create","pid":99}),
            json!({"error":"unknown_process"}),
        ),
        (
            json!({"op":"timer_delete","pid":2,"timer":0}),
            json!({"ok":true}),
        ),
        (
            json!({"op":"timer_delete","pid":2,"timer":0}),
            json!({"error":"not_found"}),
        ),
        (
            json!({"op":"timer_delete","pid":2,"timer":-1}),
            json!({"error":"not_found"}),
        ),
        (
            json!({"op":"timer_delete","pid":99,"timer":0}),
            json!({"error":"unknown_process"}),
        ),
        (json!({"op":"timer_create","pid":2}), json!({"timer":2})),
        (json!({"op":"timers","pid":2}), json!({"timers":[1,2]})),
        (
            json!({"op":"timers","pid":99}),
            json!({"error":"unknown_process"}),
        ),
        // The leader exits with threads alive: a zombie, still listed, not exitable again.
        (
            json!({"op":"exit","tid":2}),
            json!({"ok":true,"process_exited":false}),
        ),
        (
            json!({"op":"exit","tid":2}),
            json!({"error":"unknown_thread"}),
        ),
        (
            json!({"op":"exit","tid":99}),
            json!({"error":"unknown_thread"}),
        ),
        (json!({"op":"threads","pid":2}), json!({"tids":[2,3,4]})),
        (
            json!({"op":"threads","pid":99}),
            json!({"error":"unknown_process"}),
        ),
    ]
}

/// Lookups, checkpoint and restore, dead namespaces, kills and memory.
fn lookups_and_images() -> Vec<(Value, Value)> {
    vec![
        (
            json!({"op":"lookup","ns":1,"id":1}),
            json!({"found":true,"pid":2,"tid":2}),
        ),
        (
            json!({"op":"lookup","ns":1,"id":3}),
            json!({"found":true,"pid":2,"tid":4}),
        ),
        (json!({"op":"lookup","ns":1,"id":9}), json!({"found":false})),
        (
            json!({"op":"lookup","ns":8,"id":1}),
            json!({"error":"unknown_ns"}),
        ),
        (
            json!({"op":"checkpoint","pid":99}),
            json!({"error":"unknown_process"}),
        ),
        (
            json!({"op":"restore","ns":1,"image":{"nonsense":true}}),
            json!({"error":"bad_image"}),
        ),
        (
            json!({"op":"exit","tid":3}),
            json!({"ok":true,"process_exited":false}),
        ),
        // The last live thread ends the process, and its init ends namespace 1.
        (
            json!({"op":"exit","tid":4}),
            json!({"ok":true,"process_exited":true}),
        ),
        (
            json!({"op":"timers","pid":2}),
            json!({"error":"unknown_process"}),
        ),
        (json!({"op":"fork","ns":1}), json!({"error":"ns_dead"})),
        (
            json!({"op":"ns_new","parent":1}),
            json!({"error":"ns_dead"}),
        ),
        // Namespace 2, 3 levels deep with its own init and a multi-threaded process.
        (json!({"op":"ns_new","parent":0}), json!({"ns":2})),
        (json!({"op":"ns_new","parent":2}), json!({"ns":3})),
        // The refused fork into dead namespace 1 took root ID 5 and gave it back, but the
        // root's cursor stays moved (the kernel's `alloc_pid`).
        (json!({"op":"fork","ns":3}), json!({"pid":6,"ids":[1,1,6]})),
        (json!({"op":"fork","ns":3}), json!({"pid":7,"ids":[2,2,7]})),
        (
            json!({"op":"clone","pid":7}),
            json!({"tid":8,"ids":[3,3,8]}),
        ),
        (json!({"op":"timer_create","pid":7}), json!({"timer":0})),
        (
            json!({"op":"lookup","ns":2,"id":3}),
            json!({"found":true,"pid":7,"tid":8}),
        ),
        // Killing namespace 2's init ends every process with an ID there.
        (json!({"op":"kill","pid":6}), json!({"exited":1})),
        (
            json!({"op":"threads","pid":7}),
            json!({"error":"unknown_process"}),
        ),
        (json!({"op":"fork","ns":3}), json!({"error":"ns_dead"})),
        (
            json!({"op":"kill","pid":99}),
            json!({"error":"unknown_process"}),
        ),
        (json!({"op":"memory"}), Value::Null),
    ]
}

fn lines(script: &[(Value, Value)]) -> String {
    script.iter().map(|(line, _)| format!("{line}\n")).collect()
}

#[test]
fn every_operation_and_error_for_every_pair_of_designs() {
    let script = script();
    for pid in PID_DESIGNS {
        for table in TABLE_DESIGNS {
            let (answers, status) = replay(pid, table, &lines(&script));
            assert_eq!(answers.len(), script.len(), "{pid}/{table}");
            for (n, ((line, want), got)) in script.iter().zip(&answers).enumerate() {
                let at = format!("{pid}/{table} line {}: {line}", n + 1);
                if want.is_null() {
                    assert!(got["bytes"].as_u64().is_some(), "{at}: {got}");
                } else if pid == "percpu" {
                    // Valid IDs, not the kernel's: the same errors and the same shape.
                    assert_eq!(got.get("error"), want.get("error"), "{at}: {got}");
                    let keys =
                        |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
                    assert_eq!(keys(got), keys(want), "{at}: {got}");
                } else {
                    assert_eq!(got, want, "{at}");
                }
            }
            assert_eq!(status, 0, "{pid}/{table}");
        }
    }
}

#[test]
fn checkpoint_restore_round_trips_and_refusals_change_nothing() {
    for pid in PID_DESIGNS {
        let setup = r#"{"op":"fork","ns":0}
{"op":"ns_new","parent":0}
{"op":"fork","ns":1}
{"op":"fork","ns":1}
{"op":"clone","pid":3}
{"op":"clone","pid":3}
{"op":"timer_create","pid":3}
{"op":"timer_create","pid":3}
{"op":"timer_delete","pid":3,"timer":0}
{"op":"exit","tid":3}
{"op":"checkpoint","pid":3}
"#;
        let (answers, _) = replay(pid, "scaled", setup);
        let image = answers[10]["image"].clone();
        assert_eq!(image["threads"][0]["zombie"], json!(true), "{pid}: {image}");
        let leader_ids = answers[3]["ids"].clone();
        let threads = |n: usize| answers[n]["tid"].clone();
        let (t1, t2) = (threads(4), threads(5));
        let tail = format!(
            r#"{{"op":"memory"}}
{{"op":"restore","ns":1,"image":{image}}}
{{"op":"memory"}}
{{"op":"kill","pid":3}}
{{"op":"restore","ns":1,"image":{image}}}
{{"op":"threads","pid":3}}
{{"op":"timers","pid":3}}
{{"op":"timer_create","pid":3}}
{{"op":"exit","tid":3}}
{{"op":"restore","ns":0,"image":{image}}}
"#
        );
        let (answers, status) = replay(pid, "scaled", &(setup.to_string() + &tail));
        let at = |n: usize| &answers[11 + n];
        // Restoring over the live process: its IDs are taken; nothing changes.
        assert_eq!(at(1), &json!({"error":"exists"}), "{pid}");
        assert_eq!(at(0), at(2), "{pid}: a refusal changed memory");
        assert_eq!(at(3), &json!({"exited":2}), "{pid}");
        assert_eq!(at(4), &json!({"pid":3,"ids":leader_ids}), "{pid}");
        let mut tids = vec![json!(3), t1, t2];
        tids.sort_by_key(|v| v.as_u64());
        assert_eq!(at(5), &json!({"tids":tids}), "{pid}");
        assert_eq!(at(6), &json!({"timers":[1]}), "{pid}");
        // The cursor came back: 2, not 0.
        assert_eq!(at(7), &json!({"timer":2}), "{pid}");
        assert_eq!(
            at(8),
            &json!({"error":"unknown_thread"}),
            "{pid}: still a zombie"
        );
        // Into the root, only the innermost ID is asked for: 1 there is taken.
        assert_eq!(at(9), &json!({"error":"exists"}), "{pid}");
        assert_eq!(status, 0, "{pid}");
    }
}

#[test]
fn sequential_designs_give_the_kernel_ids() {
    // Namespace 1 with pid_max 320: IDs 1..=319, then full although 5 is free (below the 300
    // floor once the cursor passed it), then the freed 310.
    let mut input = String::from(
        "{\"op\":\"fork\",\"ns\":0}\n{\"op\":\"ns_new\",\"parent\":0}\n{\"op\":\"pid_max\",\"ns\":1,\"max\":320}\n{\"op\":\"fork\",\"ns\":1}\n",
    );
    input += &"{\"op\":\"clone\",\"pid\":2}\n".repeat(318);
    input += "{\"op\":\"clone\",\"pid\":2}\n";
    // Root-level TIDs are 2 + n; the thread with ID 5 in namespace 1 has root TID 6.
    input += "{\"op\":\"exit\",\"tid\":6}\n{\"op\":\"clone\",\"pid\":2}\n";
    input += "{\"op\":\"exit\",\"tid\":311}\n{\"op\":\"clone\",\"pid\":2}\n";
    for pid in ["idr-relock", "idr-once", "bitmap-hash"] {
        let (answers, status) = replay(pid, "radix", &input);
        assert_eq!(answers[3], json!({"pid":2,"ids":[1,2]}), "{pid}");
        for n in 0..318 {
            let ns_id = n + 2;
            assert_eq!(
                answers[4 + n],
                json!({"tid": ns_id + 1, "ids": [ns_id, ns_id + 1]}),
                "{pid}"
            );
        }
        assert_eq!(answers[322], json!({"error":"full"}), "{pid}");
        assert_eq!(
            answers[324],
            json!({"error":"full"}),
            "{pid}: 5 is below the floor"
        );
        assert_eq!(answers[326], json!({"tid":321,"ids":[310,321]}), "{pid}");
        assert_eq!(status, 0, "{pid}");
    }
}

#[test]
fn bad_lines_are_answered_and_processing_goes_on() {
    let input = "{\"op\":\"fork\"}\n\
        {\"op\":\"fork\",\"ns\":-1}\n\
        {\"op\":\"clone\",\"pid\":\"a\"}\n\
        {\"op\":\"spawn\"}\n\
        not json\n\
        {\"op\":\"restore\",\"ns\":0}\n\
        {\"op\":\"exit\",\"tid\":1.5}\n\
        {\"op\":\"fork\",\"ns\":0}\n";
    let (answers, status) = common::replay_bytes(
        &[
            "process",
            "--pid-design",
            "idr-once",
            "--table-design",
            "global",
        ],
        &[input.as_bytes(), b"\xff\xfe\n"].concat(),
    );
    for (index, answer) in answers[..7].iter().enumerate() {
        assert_eq!(answer["error"], "bad_input", "line {}: {answer}", index + 1);
        assert_eq!(answer["line"], index + 1);
    }
    assert_eq!(answers[7], json!({"pid":1,"ids":[1]}));
    assert_eq!(answers[8]["error"], "bad_input");
    assert_eq!(answers[8]["line"], 9);
    assert_eq!(status, 1);
}

#[test]
fn help_prints_the_protocol() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args(["replay", "process", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("{\"op\":\"restore\",\"ns\":N,\"image\":...}"),
        "{text}"
    );
    assert!(text.contains("--pid-design"), "{text}");
}

// The kernel's `alloc_pid`, line for line: each case below is a sequence of input lines with
// the answers the kernel's rules give. A restore is the leader's `clone3` and then each
// thread's; each goes level by level, innermost first (a `set_tid` entry checked for range and
// init, then taken; other levels from the cursor), tests for a dead namespace after every
// level, and on failure frees what it took, leaving the cursors moved, except that a namespace
// with no process yet gets its cursor back at 0.

/// The image of a process whose threads have `ids` (leader first), with no timers.
fn image(ids: &[&[u32]]) -> Value {
    let threads: Vec<Value> = ids
        .iter()
        .map(|ids| json!({"ids": ids, "zombie": false}))
        .collect();
    json!({"threads": threads, "timers": [], "timer_cursor": 0})
}

fn restore(ns: u32, image: &Value) -> Value {
    json!({"op":"restore","ns":ns,"image":image})
}

/// Replays `script` with every design pair: the sequential PID designs must give every answer;
/// `percpu` must give the same errors and shapes, and every answer when `percpu_exact` (no
/// line depends on which free IDs it picks).
fn kernel_case(name: &str, script: &[(Value, Value)], percpu_exact: bool) {
    for pid in PID_DESIGNS {
        for table in TABLE_DESIGNS {
            let (answers, status) = replay(pid, table, &lines(script));
            assert_eq!(answers.len(), script.len(), "{name}: {pid}/{table}");
            for (n, ((line, want), got)) in script.iter().zip(&answers).enumerate() {
                let at = format!("{name}: {pid}/{table} line {}: {line}", n + 1);
                if pid != "percpu" || percpu_exact {
                    assert_eq!(got, want, "{at}");
                } else {
                    assert_eq!(got.get("error"), want.get("error"), "{at}: {got}");
                    let keys =
                        |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
                    assert_eq!(keys(got), keys(want), "{at}: {got}");
                }
            }
            assert_eq!(status, 0, "{name}: {pid}/{table}");
        }
    }
}

#[test]
fn a_restore_into_a_freed_namespace_is_checked_level_by_level_before_it_is_dead() {
    let img = image(&[&[1, 3]]);
    let script = [
        (json!({"op":"fork","ns":0}), json!({"pid":1,"ids":[1]})),
        (json!({"op":"ns_new","parent":0}), json!({"ns":1})),
        (json!({"op":"ns_new","parent":0}), json!({"ns":2})),
        (json!({"op":"fork","ns":1}), json!({"pid":2,"ids":[1,2]})),
        (json!({"op":"fork","ns":2}), json!({"pid":3,"ids":[1,3]})),
        (json!({"op":"checkpoint","pid":3}), json!({"image":img})),
        (json!({"op":"kill","pid":2}), json!({"exited":1})),
        // Namespace 1 is freed; its level takes ID 1, the root's 3 is taken: exists, before
        // the dead namespace is seen.
        (restore(1, &img), json!({"error":"exists"})),
    ];
    kernel_case("freed, exists first", &script, true);
}

#[test]
fn a_pid_max_set_on_a_freed_namespace_bounds_a_restores_set_tid() {
    let img = image(&[&[302]]);
    let mut script: Vec<(Value, Value)> = (1..=302)
        .map(|pid| (json!({"op":"fork","ns":0}), json!({"pid":pid,"ids":[pid]})))
        .collect();
    script.extend([
        (json!({"op":"checkpoint","pid":302}), json!({"image":img})),
        (json!({"op":"ns_new","parent":0}), json!({"ns":1})),
        (
            json!({"op":"fork","ns":1}),
            json!({"pid":303,"ids":[1,303]}),
        ),
        (json!({"op":"kill","pid":303}), json!({"exited":1})),
        (json!({"op":"pid_max","ns":1,"max":301}), json!({"ok":true})),
        // 302 is not below namespace 1's pid_max: invalid at its level, before anything else.
        (restore(1, &img), json!({"error":"invalid"})),
    ]);
    kernel_case("freed, pid_max", &script, true);
}

#[test]
fn a_restore_answers_an_inner_levels_invalid_set_tid_before_an_outer_taken_one() {
    let img = image(&[&[2, 2]]);
    let script = [
        (json!({"op":"ns_new","parent":0}), json!({"ns":1})),
        (json!({"op":"fork","ns":1}), json!({"pid":1,"ids":[1,1]})),
        (json!({"op":"fork","ns":1}), json!({"pid":2,"ids":[2,2]})),
        (json!({"op":"checkpoint","pid":2}), json!({"image":img})),
        (json!({"op":"ns_new","parent":0}), json!({"ns":2})),
        // Namespace 2 has no init: its 2 is invalid before the root's taken 2 is looked at.
        (restore(2, &img), json!({"error":"invalid"})),
    ];
    kernel_case("invalid before exists", &script, true);
}

#[test]
fn a_restore_answers_the_leaders_dead_namespace_before_a_later_threads_taken_id() {
    let img = image(&[&[1], &[2]]);
    let script = [
        (json!({"op":"fork","ns":0}), json!({"pid":1,"ids":[1]})),
        (json!({"op":"clone","pid":1}), json!({"tid":2,"ids":[2]})),
        (json!({"op":"checkpoint","pid":1}), json!({"image":img})),
        (json!({"op":"ns_new","parent":0}), json!({"ns":1})),
        (json!({"op":"fork","ns":1}), json!({"pid":3,"ids":[1,3]})),
        (json!({"op":"ns_new","parent":1}), json!({"ns":2})),
        (json!({"op":"kill","pid":3}), json!({"exited":1})),
        // Namespace 1 is dead, not freed: a living child namespace still allocates there.
        (json!({"op":"fork","ns":2}), json!({"pid":4,"ids":[1,2,4]})),
        (restore(1, &img), json!({"error":"ns_dead"})),
    ];
    kernel_case("ns_dead before exists", &script, true);
}

#[test]
fn a_refused_restore_into_a_freed_namespace_moves_the_outer_cursors() {
    let img = image(&[&[3]]);
    let script = [
        (json!({"op":"fork","ns":0}), json!({"pid":1,"ids":[1]})),
        (json!({"op":"ns_new","parent":0}), json!({"ns":1})),
        (json!({"op":"fork","ns":1}), json!({"pid":2,"ids":[1,2]})),
        (json!({"op":"fork","ns":0}), json!({"pid":3,"ids":[3]})),
        (json!({"op":"checkpoint","pid":3}), json!({"image":img})),
        (json!({"op":"kill","pid":2}), json!({"exited":1})),
        // The root level took 4 before the dead namespace was seen.
        (restore(1, &img), json!({"error":"ns_dead"})),
        (json!({"op":"fork","ns":0}), json!({"pid":5,"ids":[5]})),
    ];
    kernel_case("freed, cursor", &script, false);
}

#[test]
fn a_restore_refused_for_a_later_thread_keeps_the_leaders_cursor_moves() {
    let img = image(&[&[2], &[3]]);
    let script = [
        (json!({"op":"fork","ns":0}), json!({"pid":1,"ids":[1]})),
        (json!({"op":"ns_new","parent":0}), json!({"ns":1})),
        (json!({"op":"fork","ns":0}), json!({"pid":2,"ids":[2]})),
        (json!({"op":"clone","pid":2}), json!({"tid":3,"ids":[3]})),
        (json!({"op":"checkpoint","pid":2}), json!({"image":img})),
        (json!({"op":"fork","ns":1}), json!({"pid":4,"ids":[1,4]})),
        (json!({"op":"fork","ns":1}), json!({"pid":5,"ids":[2,5]})),
        (json!({"op":"fork","ns":1}), json!({"pid":6,"ids":[3,6]})),
        (json!({"op":"kill","pid":5}), json!({"exited":1})),
        // The leader takes 2 and root 7; the thread's 3 is taken.
        (restore(1, &img), json!({"error":"exists"})),
        (json!({"op":"fork","ns":0}), json!({"pid":8,"ids":[8]})),
    ];
    kernel_case("later thread, cursor", &script, false);
}

#[test]
fn a_namespaces_failed_first_fork_resets_its_cursor_so_the_next_is_its_init() {
    let mut script = vec![(json!({"op":"pid_max","ns":0,"max":301}), json!({"ok":true}))];
    script
        .extend((1..=300).map(|pid| (json!({"op":"fork","ns":0}), json!({"pid":pid,"ids":[pid]}))));
    script.extend([
        (json!({"op":"ns_new","parent":0}), json!({"ns":1})),
        (json!({"op":"fork","ns":1}), json!({"error":"full"})),
        (json!({"op":"kill","pid":300}), json!({"exited":1})),
        (
            json!({"op":"fork","ns":1}),
            json!({"pid":300,"ids":[1,300]}),
        ),
    ]);
    // `percpu` too: the root has one free ID, and a namespace's first process is ID 1.
    kernel_case("first fork reset", &script, true);
}

#[test]
fn a_refused_restore_into_a_dead_namespace_leaves_the_cursor_it_moved() {
    let img = image(&[&[3]]);
    let script = [
        (json!({"op":"fork","ns":0}), json!({"pid":1,"ids":[1]})),
        (json!({"op":"ns_new","parent":0}), json!({"ns":1})),
        (json!({"op":"ns_new","parent":1}), json!({"ns":2})),
        (json!({"op":"fork","ns":1}), json!({"pid":2,"ids":[1,2]})),
        (json!({"op":"fork","ns":0}), json!({"pid":3,"ids":[3]})),
        (json!({"op":"checkpoint","pid":3}), json!({"image":img})),
        (json!({"op":"kill","pid":2}), json!({"exited":1})),
        (restore(1, &img), json!({"error":"ns_dead"})),
        (json!({"op":"fork","ns":0}), json!({"pid":5,"ids":[5]})),
    ];
    kernel_case("dead, cursor", &script, false);
}
