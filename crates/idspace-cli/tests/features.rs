//! The CLI's cargo features: `replay` works in every build, and a subcommand whose feature a
//! build lacks says which feature it needs instead of running.
//!
//! The default build runs the first half; `cargo test -p idspace-cli --no-default-features`
//! runs the second.

use std::process::{Command, Output};

fn idspace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_idspace"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Asserts that `idspace ARGS` refused with status 2, naming `feature`.
#[cfg(not(all(feature = "bench", feature = "ids", feature = "serve")))]
fn assert_needs(args: &[&str], feature: &str) {
    let output = idspace(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(
        stderr.contains(&format!("`{feature}` feature")) && stderr.contains("--features"),
        "{stderr}"
    );
}

/// Every subcommand is in `--help` whatever the build, so that a missing feature is told
/// apart from a typo.
#[test]
fn help_lists_every_subcommand() {
    let output = idspace(&["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for command in ["bench", "replay", "ids", "serve"] {
        assert!(help.contains(command), "{command} missing from:\n{help}");
    }
}

/// With the lab in the build, `bench --list` runs (where without it, it would refuse).
#[cfg(feature = "bench")]
#[test]
fn bench_runs_with_its_feature() {
    let output = idspace(&["bench", "--list"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[cfg(not(feature = "bench"))]
#[test]
fn bench_without_its_feature_names_it() {
    assert_needs(&["bench", "--list"], "bench");
}

#[cfg(not(feature = "ids"))]
#[test]
fn ids_without_its_feature_names_it() {
    assert_needs(
        &[
            "ids",
            "--url",
            "host=/nowhere",
            "--create-space",
            "s",
            "--min",
            "1",
            "--max",
            "9",
        ],
        "ids",
    );
}

/// With the service in the build, `serve --help` documents its HTTP API.
#[cfg(feature = "serve")]
#[test]
fn serve_help_documents_the_api() {
    let output = idspace(&["serve", "--help"]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for text in [
        "/api/segment/get/{space}",
        "--node-id",
        "store_unreachable (503",
    ] {
        assert!(help.contains(text), "{text} missing from:\n{help}");
    }
}

#[cfg(not(feature = "serve"))]
#[test]
fn serve_without_its_feature_names_it() {
    assert_needs(
        &["serve", "--url", "host=/nowhere", "--listen", "127.0.0.1:0"],
        "serve",
    );
}
