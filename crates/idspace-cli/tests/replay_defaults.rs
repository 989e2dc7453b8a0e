//! `idspace replay` without design flags: each family drives the kernel's current design, and
//! `--help` says which and why.

mod common;

/// Each family, its flags set to the defaults by hand, and a script that exercises it.
const FAMILIES: [(&str, &[&str], &str); 4] = [
    (
        "table",
        &["--design", "scaled"],
        r#"{"op":"create","owner":1}
{"op":"create","owner":1}
{"op":"remove","owner":1,"id":0}
{"op":"memory"}
"#,
    ),
    (
        "pid",
        &["--design", "idr-once"],
        r#"{"op":"alloc","ns":0}
{"op":"ns_new","parent":0}
{"op":"alloc","ns":1,"set_tid":[5]}
{"op":"memory"}
"#,
    ),
    (
        "cid",
        &["--design", "rework"],
        r#"{"op":"fork","task":7}
{"op":"fork","task":9}
{"op":"switch","cpu":0,"task":7}
{"op":"switch","cpu":0,"task":9}
{"op":"exit","task":7}
"#,
    ),
    (
        "process",
        &["--pid-design", "idr-once", "--table-design", "scaled"],
        r#"{"op":"fork","ns":0}
{"op":"clone","pid":1}
{"op":"timer_create","pid":1}
{"op":"timers","pid":1}
{"op":"checkpoint","pid":1}
{"op":"memory"}
"#,
    ),
];

/// A bare `replay FAMILY` runs, and answers every line as the default designs named by hand do.
#[test]
fn a_bare_replay_drives_the_default_designs() {
    for (family, defaults, script) in FAMILIES {
        let (bare, status) = common::replay(&[family], script);
        assert_eq!(status, 0, "replay {family}");
        assert_eq!(
            bare.len(),
            script.lines().count(),
            "replay {family}: {bare:?}"
        );
        let explicit: Vec<&str> = [family]
            .into_iter()
            .chain(defaults.iter().copied())
            .collect();
        let (named, status) = common::replay(&explicit, script);
        assert_eq!(status, 0, "replay {explicit:?}");
        assert_eq!(bare, named, "replay {family} and replay {explicit:?}");
    }
}

/// `replay process` with no flags at all forks the kernel's first PID.
#[test]
fn a_bare_replay_process_forks_pid_one() {
    let (answers, status) = common::replay(&["process"], "{\"op\":\"fork\",\"ns\":0}\n");
    assert_eq!(status, 0);
    assert_eq!(answers, [serde_json::json!({"pid": 1, "ids": [1]})]);
}

/// Every design flag's help shows its default and says why it is the default.
#[test]
fn help_shows_each_default_and_why() {
    for (family, defaults, _) in FAMILIES {
        let output = common::idspace(&["replay", family, "--help"]);
        assert!(output.status.success(), "replay {family} --help");
        let help = String::from_utf8_lossy(&output.stdout);
        for pair in defaults.chunks(2) {
            let (flag, design) = (pair[0], pair[1]);
            let line = flag_help(&help, flag)
                .unwrap_or_else(|| panic!("replay {family}: no {flag} in:\n{help}"));
            assert!(line.contains(&format!("[default: {design}]")), "{line}");
            assert!(line.contains("the kernel's current design"), "{line}");
        }
    }
}

/// The help of `flag`: its line and those below it, up to the next option.
fn flag_help(help: &str, flag: &str) -> Option<String> {
    let is_option = |line: &str| {
        let text = line.trim_start();
        text.starts_with('-') && line.len() - text.len() <= 6
    };
    let mut lines = help
        .lines()
        .skip_while(|line| !line.trim_start().starts_with(flag));
    let first = lines.next()?;
    let rest = lines.take_while(|line| !is_option(line));
    Some(
        std::iter::once(first)
            .chain(rest)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}
