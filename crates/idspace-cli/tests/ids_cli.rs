//! `idspace ids` against a throwaway PostgreSQL: the interface other programs depend on (IDs on
//! stdout; every error named on stderr, with exit status 1).
//! A build without the `ids` feature has no lease client: `features.rs` tests that one.
#![cfg(feature = "ids")]

use std::collections::HashSet;
use std::process::{Command, Output};

use idspace_lease::server::{Durability, Throwaway};

fn ids(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_idspace"))
        .arg("ids")
        .args(args)
        .output()
        .expect("the binary runs")
}

fn lines(output: &Output) -> Vec<u64> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.parse().expect("one ID per line"))
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn creates_a_space_and_writes_unique_ids_one_per_line() {
    let server = Throwaway::start(Durability { fsync: false }).expect("PostgreSQL starts");
    let url = server.url();
    let created = ids(&[
        "--url",
        &url,
        "--create-space",
        "orders",
        "--min",
        "1000",
        "--max",
        "9999999",
    ]);
    assert!(created.status.success(), "{}", stderr(&created));
    let again = ids(&[
        "--url",
        &url,
        "--create-space",
        "orders",
        "--min",
        "1",
        "--max",
        "2",
    ]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("exists already"),
        "{}",
        stderr(&again)
    );

    let output = ids(&[
        "--url",
        &url,
        "--space",
        "orders",
        "--count",
        "20000",
        "--threads",
        "4",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let got = lines(&output);
    assert_eq!(got.len(), 20000);
    assert_eq!(
        got.iter().collect::<HashSet<_>>().len(),
        20000,
        "duplicates"
    );
    assert!(got.iter().all(|&id| (1000..=9999999).contains(&id)));
    // A second run never repeats the first one's IDs.
    let second = lines(&ids(&[
        "--url", &url, "--space", "orders", "--count", "5000",
    ]));
    assert_eq!(second.len(), 5000);
    let first: HashSet<u64> = got.into_iter().collect();
    assert!(second.iter().all(|id| !first.contains(id)));
}

#[test]
fn named_errors_for_bad_urls_unknown_and_exhausted_spaces() {
    let bad = ids(&["--url", "postgresql://[::1", "--space", "x", "--count", "1"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("bad connection URL"),
        "{}",
        stderr(&bad)
    );

    // The error cannot be told where stderr fails, but the status still says it.
    let untold = Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args([
            "ids",
            "--url",
            "postgresql://[::1",
            "--space",
            "x",
            "--count",
            "1",
        ])
        .stderr(std::fs::File::create("/dev/full").expect("/dev/full"))
        .output()
        .expect("the binary runs");
    assert_eq!(untold.status.code(), Some(1));

    let server = Throwaway::start(Durability { fsync: false }).expect("PostgreSQL starts");
    let url = server.url();
    let unknown = ids(&["--url", &url, "--space", "nope", "--count", "1"]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("unknown space \"nope\""),
        "{}",
        stderr(&unknown)
    );

    let inverted = ids(&[
        "--url",
        &url,
        "--create-space",
        "bad",
        "--min",
        "5",
        "--max",
        "1",
    ]);
    assert!(
        stderr(&inverted).contains("invalid space"),
        "{}",
        stderr(&inverted)
    );

    assert!(ids(&[
        "--url",
        &url,
        "--create-space",
        "tiny",
        "--min",
        "1",
        "--max",
        "100"
    ])
    .status
    .success());
    let output = ids(&[
        "--url", &url, "--space", "tiny", "--count", "150", "--step", "30",
    ]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("exhausted"), "{}", stderr(&output));
    let got = lines(&output);
    assert_eq!(
        got.iter().collect::<HashSet<_>>().len(),
        got.len(),
        "duplicates"
    );
    // Every ID of the space, then the error (fewer if the thread moved between CPUs and left
    // part of a sub-range behind on the other one).
    assert!(!got.is_empty() && got.len() <= 100, "{}", got.len());
    assert!(got.iter().all(|&id| (1..=100).contains(&id)));

    // Stdout that cannot be written (a full disk) is an error, not IDs written.
    let created = ids(&[
        "--url",
        &url,
        "--create-space",
        "full",
        "--min",
        "1",
        "--max",
        "1000",
    ]);
    assert!(created.status.success(), "{}", stderr(&created));
    let full = Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args(["ids", "--url", &url, "--space", "full", "--count", "5"])
        .stdout(std::fs::File::create("/dev/full").expect("/dev/full"))
        .output()
        .expect("the binary runs");
    assert_eq!(full.status.code(), Some(1), "{}", stderr(&full));
    assert!(
        stderr(&full).contains("stdout: No space left on device"),
        "{}",
        stderr(&full)
    );
}

/// The server's URL as `role`, with `password` if any.
fn as_role(url: &str, role: &str, password: Option<&str>) -> String {
    let login = match password {
        Some(password) => format!("user={role} password={password}"),
        None => format!("user={role}"),
    };
    url.replace("user=postgres", &login)
}

#[test]
fn authentication_and_connection_failures_are_told_apart_from_a_lost_store() {
    let server = Throwaway::start(Durability { fsync: false }).expect("PostgreSQL starts");
    server
        .add_role("app", "secret", "scram-sha-256")
        .expect("a role with a password");
    server
        .add_role("elsewhere", "unused", "peer")
        .expect("a role under peer authentication");
    let url = server.url();
    let created = ids(&[
        "--url",
        &url,
        "--create-space",
        "s",
        "--min",
        "1",
        "--max",
        "9",
    ]);
    assert!(created.status.success(), "{}", stderr(&created));
    // The right password, but no rights on the schema: named as such, not as a lost store.
    let good = as_role(&url, "app", Some("secret"));
    let output = ids(&["--url", &good, "--space", "s", "--count", "1"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("idspace ids: permission denied: ")
            && stderr(&output).contains("42501"),
        "{}",
        stderr(&output)
    );

    let wrong = as_role(&url, "app", Some("wrong"));
    let missing = as_role(&url, "app", None);
    let peer = as_role(&url, "elsewhere", None);
    for (url, code) in [(&wrong, "28P01"), (&missing, ""), (&peer, "28000")] {
        for args in [
            &["--space", "s", "--count", "1"][..],
            &["--create-space", "t", "--min", "1", "--max", "9"][..],
        ] {
            let output = ids(&[&["--url", url.as_str()][..], args].concat());
            let message = stderr(&output);
            assert_eq!(output.status.code(), Some(1), "{url}: {message}");
            assert!(
                message.starts_with("idspace ids: authentication failed: ")
                    && message.contains(code),
                "{url}: {message}"
            );
            assert!(output.stdout.is_empty());
        }
    }

    // No server at all: a connection error, not a store lost with no ID left.
    let nowhere = "host=/nonexistent-idspace-dir port=5432 user=postgres dbname=postgres";
    let output = ids(&["--url", nowhere, "--space", "s", "--count", "1"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("idspace ids: cannot connect to the store: "),
        "{}",
        stderr(&output)
    );
    // A database that does not exist is a connection error too, with the server's words.
    let no_db = url.replace("dbname=postgres", "dbname=nope");
    let output = ids(&["--url", &no_db, "--space", "s", "--count", "1"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("cannot connect to the store") && stderr(&output).contains("nope"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn usage_errors_and_out_of_range_values_exit_1_as_every_error_does() {
    let url = "host=/nonexistent-idspace-dir user=postgres";
    let cases: [&[&str]; 7] = [
        &["--space", "s", "--count", "1"],
        &["--url", url, "--space", "s", "--count", "1", "--step", "0"],
        &[
            "--url", url, "--space", "s", "--count", "1", "--ttl-ms", "0",
        ],
        &[
            "--url", url, "--space", "s", "--count", "1", "--ttl-ms", "99",
        ],
        &[
            "--url", url, "--space", "s", "--count", "1", "--ttl-ms", "86400001",
        ],
        &[
            "--url",
            url,
            "--space",
            "s",
            "--count",
            "1",
            "--step",
            "9223372036854775808",
        ],
        &["--url", url, "--create-space", "s", "--min", "1"],
    ];
    for args in cases {
        let output = ids(args);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("error"),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(output.stdout.is_empty());
    }
    let zero_step = ids(cases[1]);
    assert!(
        stderr(&zero_step).contains("--step"),
        "{}",
        stderr(&zero_step)
    );
    let zero_ttl = ids(cases[2]);
    assert!(
        stderr(&zero_ttl).contains("--ttl-ms"),
        "{}",
        stderr(&zero_ttl)
    );
    // Asking for help is no error.
    assert_eq!(ids(&["--help"]).status.code(), Some(0));
}
