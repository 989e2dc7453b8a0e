//! `idspace replay FAMILY`: drive a design from JSON lines on stdin, one JSON answer per line on
//! stdout, in order.
//!
//! Each family's protocol, its table of operations and answers, is in a text file beside its
//! module (`table.txt`, `pid.txt`, `cid.txt`, `process.txt`), included both in the module's docs and in
//! `idspace replay FAMILY --help`, so the two cannot drift. The framing they share
//! (`framing.txt`, also in every family's `--help`):
//!
//! ```text
#![doc = include_str!("framing.txt")]
//! ```
//!
//! A line goes through three steps: [`lines`] reads its bytes (bounded), [`json`](mod@json) parses it
//! exactly (integers of any size, no repeated keys), and serde reads the family's op enum from
//! that, through the typed [`field`]s.

pub mod cid;
pub mod field;
pub mod json;
pub mod lines;
pub mod pid;
pub mod process;
pub mod table;

use std::fmt;
use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use self::json::Json;
use self::lines::{Line, Lines, MAX_LINE};

/// The framing every family shares, as `--help` prints it.
pub const FRAMING: &str = include_str!("framing.txt");

/// The text `idspace replay FAMILY --help` prints after the options: the family's protocol,
/// then the framing.
pub fn help(protocol: &str) -> String {
    format!("Operations and answers:\n\n{protocol}\nEvery family:\n\n{FRAMING}")
}

/// Why an input line could not be carried out: the `detail` of a `bad_input` answer.
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// A design driven by replay lines.
pub trait Replayer {
    /// One line's operation: an enum tagged by `"op"`.
    type Op: DeserializeOwned;

    /// Carries out `op`, read from input line `line` (counting from 1), and returns its answer.
    fn apply(&mut self, line: u64, op: Self::Op) -> Value;
}

/// How a run ended.
#[derive(Debug)]
pub struct Ended {
    /// Whether any line read was bad.
    pub any_bad: bool,
    /// What stopped the run before the end of its input, if anything did.
    pub error: Option<io::Error>,
}

impl Ended {
    /// The exit status: 1 if a line was bad, else 0, whether or not stdout closed early (the
    /// reader of `… | idspace replay … | head -1` has all it wanted); 2 for other I/O errors,
    /// which are reported on stderr.
    pub fn exit_code(&self) -> ExitCode {
        match &self.error {
            Some(error) if error.kind() != io::ErrorKind::BrokenPipe => {
                // Not eprintln!, which panics when stderr fails: the status still tells.
                let _ = writeln!(io::stderr(), "idspace replay: {error}");
                ExitCode::from(2)
            }
            _ if self.any_bad => ExitCode::from(1),
            _ => ExitCode::SUCCESS,
        }
    }
}

/// Answers every line of `input` on `output`, until the input ends or reading or writing fails.
pub fn run<R: Replayer>(replayer: &mut R, input: impl BufRead, mut output: impl Write) -> Ended {
    let mut lines = Lines::new(input);
    let mut any_bad = false;
    let mut number = 0u64;
    let error = loop {
        let line = match lines.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => break None,
            Err(error) => break Some(error),
        };
        number += 1;
        let answer = match read_op::<R::Op>(line) {
            Ok(op) => replayer.apply(number, op),
            Err(BadInput(detail)) => {
                any_bad = true;
                json!({"error": "bad_input", "line": number, "detail": detail})
            }
        };
        if let Err(error) = writeln!(output, "{answer}").and_then(|()| output.flush()) {
            break Some(error);
        }
    };
    Ended { any_bad, error }
}

/// The op a line spells.
fn read_op<Op: DeserializeOwned>(line: Line<'_>) -> Result<Op, BadInput> {
    let Line::Bytes(bytes) = line else {
        return Err(BadInput(format!(
            "line longer than 1 MiB ({MAX_LINE} bytes)"
        )));
    };
    let text = std::str::from_utf8(bytes).map_err(|e| BadInput(format!("not valid UTF-8: {e}")))?;
    let json = Json::parse(text)?;
    if !matches!(json, Json::Object(_)) {
        return Err(BadInput("expected a JSON object".into()));
    }
    // Serde would take a number for the index of a variant: the op must be its name.
    match json.get("op") {
        Some(Json::String(_)) | None => Op::deserialize(&json),
        Some(op) => Err(BadInput(format!("field \"op\" must be a string, got {op}"))),
    }
}

/// An answer `{"error": name}`.
pub fn error(name: &str) -> Value {
    json!({ "error": name })
}

/// The answer `{"ok":true}`.
pub fn ok() -> Value {
    json!({ "ok": true })
}
