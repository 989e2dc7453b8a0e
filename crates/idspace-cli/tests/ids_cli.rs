//! `idspace ids` against a throwaway PostgreSQL: the interface other programs depend on.
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
}
