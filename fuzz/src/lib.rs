//! What the fuzz targets share: driving a replay protocol over bytes as `idspace replay FAMILY`
//! does, and the checks on its answers.

#![warn(missing_docs)]

use idspace_cli::replay::{self, Replayer};
use serde_json::Value;

/// The lines the replayer reads from `input`: one per `\n`, and a last one without it.
pub fn input_lines(input: &[u8]) -> usize {
    let newlines = input.iter().filter(|&&byte| byte == b'\n').count();
    newlines + usize::from(input.last().is_some_and(|&byte| byte != b'\n'))
}

/// Runs `replayer` over `input` as `idspace replay` runs over stdin, and returns its answers
/// after checking the framing: one answer per input line, each a JSON object on a line of its
/// own, and a run marked bad exactly when some answer is `bad_input`.
pub fn replay<R: Replayer>(replayer: &mut R, input: &[u8]) -> Vec<Value> {
    let mut output = Vec::new();
    let ended = replay::run(replayer, input, &mut output);
    assert!(
        ended.error.is_none(),
        "reading a slice and writing a Vec cannot fail"
    );
    let text = std::str::from_utf8(&output).expect("answers are UTF-8");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "an unterminated answer"
    );
    let answers: Vec<Value> = text
        .lines()
        .map(|line| {
            let answer: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("answer {line:?} is not JSON: {e}"));
            assert!(answer.is_object(), "answer {line} is not an object");
            answer
        })
        .collect();
    assert_eq!(answers.len(), input_lines(input), "one answer per line");
    let bad = answers.iter().any(|answer| answer["error"] == "bad_input");
    assert_eq!(
        ended.any_bad, bad,
        "the exit status follows the bad_input answers"
    );
    answers
}

/// Checks that two designs whose answers must agree gave the same, line for line, but for
/// `memory`'s byte counts, which differ by design.
pub fn agree(first: (&str, &[Value]), second: (&str, &[Value])) {
    let ((a, first), (b, second)) = (first, second);
    assert_eq!(first.len(), second.len());
    for (line, (x, y)) in first.iter().zip(second).enumerate() {
        let memory = x.get("bytes").is_some() && y.get("bytes").is_some();
        assert!(
            memory || x == y,
            "line {}: {a} answers {x}, {b} answers {y}",
            line + 1
        );
    }
}

#[cfg(test)]
mod tests {
    use super::input_lines;

    #[test]
    fn lines_count_as_the_replayer_reads_them() {
        assert_eq!(input_lines(b""), 0);
        assert_eq!(input_lines(b"\n"), 1);
        assert_eq!(input_lines(b"a"), 1);
        assert_eq!(input_lines(b"a\nb"), 2);
        assert_eq!(input_lines(b"a\nb\n"), 2);
        assert_eq!(input_lines(b"\n\n\r\n"), 3);
    }
}
