//! `idspace replay FAMILY`: drive a design from JSON lines on stdin, one JSON answer per line on
//! stdout, in order.
//!
//! Every family shares the framing: each input line is one JSON object with an `"op"` field.
//! A line that is not valid JSON, is not an object, or has an unknown op, a missing field, or a
//! value of the wrong type or range is answered `{"error":"bad_input","line":L,"detail":"..."}`
//! (lines count from 1); processing goes on with the next line, and the exit status is 1 if any
//! line was bad, else 0. Answers are flushed line by line, so a program can converse with the
//! replayer through a pipe.

pub mod cid;
pub mod pid;
pub mod table;

use std::io::{self, BufRead, Write};

use serde_json::{json, Map, Value};

/// Why an input line could not be carried out: the `detail` of a `bad_input` answer.
#[derive(Debug)]
pub struct BadInput(pub String);

/// The fields of one input object, with typed accessors that name what is wrong.
pub struct Fields<'a> {
    object: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn field(&self, name: &str) -> Result<&'a Value, BadInput> {
        self.object
            .get(name)
            .ok_or_else(|| BadInput(format!("missing field \"{name}\"")))
    }

    /// The `"op"` string.
    pub fn op(&self) -> Result<&'a str, BadInput> {
        self.field("op")?
            .as_str()
            .ok_or_else(|| BadInput("field \"op\" must be a string".into()))
    }

    /// A non-negative integer field that fits in 64 bits.
    pub fn u64(&self, name: &str) -> Result<u64, BadInput> {
        let value = self.field(name)?;
        value.as_u64().ok_or_else(|| {
            BadInput(format!(
                "field \"{name}\" must be a non-negative integer, got {value}"
            ))
        })
    }

    /// An integer field of either sign.
    pub fn int(&self, name: &str) -> Result<i128, BadInput> {
        let value = self.field(name)?;
        value
            .as_i64()
            .map(i128::from)
            .or_else(|| value.as_u64().map(i128::from))
            .ok_or_else(|| BadInput(format!("field \"{name}\" must be an integer, got {value}")))
    }

    /// An optional non-negative integer field below `limit`: `None` if absent.
    pub fn optional_index(&self, name: &str, limit: u64) -> Result<Option<u64>, BadInput> {
        match self.object.get(name) {
            None => Ok(None),
            Some(value) => match value.as_u64() {
                Some(n) if n < limit => Ok(Some(n)),
                _ => Err(BadInput(format!(
                    "field \"{name}\" must be an integer in 0..{limit}, got {value}"
                ))),
            },
        }
    }

    /// An optional array of integers: `None` if absent.
    pub fn optional_ints(&self, name: &str) -> Result<Option<Vec<i128>>, BadInput> {
        let Some(value) = self.object.get(name) else {
            return Ok(None);
        };
        let items = value.as_array().ok_or_else(|| {
            BadInput(format!(
                "field \"{name}\" must be an array of integers, got {value}"
            ))
        })?;
        items
            .iter()
            .map(|item| {
                item.as_i64()
                    .map(i128::from)
                    .or_else(|| item.as_u64().map(i128::from))
                    .ok_or_else(|| {
                        BadInput(format!(
                            "field \"{name}\" must hold integers only, got {item}"
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The `"task"` field of a switch: a non-negative integer, or `null` for none.
    pub fn optional_task(&self) -> Result<Option<u64>, BadInput> {
        let value = self.field("task")?;
        if value.is_null() {
            return Ok(None);
        }
        value.as_u64().map(Some).ok_or_else(|| {
            BadInput(format!(
                "field \"task\" must be a non-negative integer or null, got {value}"
            ))
        })
    }

    /// An array of non-negative integers.
    pub fn index_list(&self, name: &str) -> Result<Vec<u64>, BadInput> {
        let value = self.field(name)?;
        let items = value.as_array().ok_or_else(|| {
            BadInput(format!(
                "field \"{name}\" must be an array of non-negative integers, got {value}"
            ))
        })?;
        items
            .iter()
            .map(|item| {
                item.as_u64().ok_or_else(|| {
                    BadInput(format!(
                        "field \"{name}\" must hold non-negative integers only, got {item}"
                    ))
                })
            })
            .collect()
    }

    /// A boolean field.
    pub fn bool(&self, name: &str) -> Result<bool, BadInput> {
        let value = self.field(name)?;
        value.as_bool().ok_or_else(|| {
            BadInput(format!(
                "field \"{name}\" must be true or false, got {value}"
            ))
        })
    }
}

/// A design driven by replay lines.
pub trait Replayer {
    /// Carries out one op and returns its answer.
    fn apply(&mut self, fields: &Fields<'_>) -> Result<Value, BadInput>;
}

/// Answers every line of `input` on `output`. Returns whether any line was bad.
pub fn run(
    replayer: &mut dyn Replayer,
    input: impl BufRead,
    mut output: impl Write,
) -> io::Result<bool> {
    let mut any_bad = false;
    for (index, line) in input.lines().enumerate() {
        let line = line?;
        let number = index + 1;
        let answer = match answer_line(replayer, &line) {
            Ok(answer) => answer,
            Err(BadInput(detail)) => {
                any_bad = true;
                json!({"error": "bad_input", "line": number, "detail": detail})
            }
        };
        writeln!(output, "{answer}")?;
        output.flush()?;
    }
    Ok(any_bad)
}

fn answer_line(replayer: &mut dyn Replayer, line: &str) -> Result<Value, BadInput> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| BadInput(format!("not valid JSON: {e}")))?;
    let object = value
        .as_object()
        .ok_or_else(|| BadInput("expected a JSON object".into()))?;
    replayer.apply(&Fields { object })
}

/// An answer `{"error": name}`.
pub fn error(name: &str) -> Value {
    json!({ "error": name })
}

/// The answer `{"ok":true}`.
pub fn ok() -> Value {
    json!({ "ok": true })
}

/// The error for an op this family does not know.
pub fn unknown_op(op: &str, known: &[&str]) -> BadInput {
    BadInput(format!(
        "unknown op \"{op}\" (expected one of: {})",
        known.join(", ")
    ))
}
