//! Input lines as bytes, each at most [`MAX_LINE`] long.
//!
//! The replayer reads bytes, not text, so that a line which is not UTF-8 is one bad line rather
//! than the end of the stream. A longer line is skipped to its newline chunk by chunk, so a
//! runaway producer cannot make the replayer hold more than [`MAX_LINE`] bytes of it.

use std::io::{self, BufRead};

/// The longest line the replayer reads: 1 MiB, not counting the `\n` that ends it.
pub const MAX_LINE: usize = 1 << 20;

/// One input line.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// The line's bytes, without the `\n` or `\r\n` that ended it.
    Bytes(&'a [u8]),
    /// The line was longer than the limit; its bytes were discarded.
    TooLong,
}

/// Reads lines of at most `limit` bytes from a [`BufRead`].
pub struct Lines<R> {
    input: R,
    line: Vec<u8>,
    limit: usize,
}

impl<R: BufRead> Lines<R> {
    /// Lines of `input`, each at most [`MAX_LINE`] bytes.
    pub fn new(input: R) -> Self {
        Lines::with_limit(input, MAX_LINE)
    }

    fn with_limit(input: R, limit: usize) -> Self {
        Lines {
            input,
            line: Vec::new(),
            limit,
        }
    }

    /// The next line, or `None` at the end of the input. A last line without a newline counts.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.line.clear();
        let mut read_any = false;
        let mut too_long = false;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(chunk) => chunk,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            if chunk.is_empty() {
                break;
            }
            read_any = true;
            let newline = chunk.iter().position(|&byte| byte == b'\n');
            let part = &chunk[..newline.unwrap_or(chunk.len())];
            if !too_long {
                too_long = !append_within(&mut self.line, part, self.limit);
            }
            let used = newline.map_or(chunk.len(), |at| at + 1);
            self.input.consume(used);
            if newline.is_some() {
                break;
            }
        }
        if !read_any {
            return Ok(None);
        }
        if too_long {
            self.line.clear();
            return Ok(Some(Line::TooLong));
        }
        let bytes = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        Ok(Some(Line::Bytes(bytes)))
    }
}

/// Appends `part` to `line` if the result stays within `limit` bytes, growing `line`'s buffer to
/// at most `limit`; returns whether it did.
fn append_within(line: &mut Vec<u8>, part: &[u8], limit: usize) -> bool {
    let needed = line.len() + part.len();
    if needed > limit {
        return false;
    }
    if needed > line.capacity() {
        // Doubling, as `Vec` would, but never past the limit.
        let capacity = needed.max(line.capacity() * 2).min(limit);
        line.reserve_exact(capacity - line.len());
    }
    line.extend_from_slice(part);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    fn all_lines(input: &[u8], limit: usize, chunk: usize) -> Vec<Option<Vec<u8>>> {
        let mut lines = Lines::with_limit(BufReader::with_capacity(chunk, input), limit);
        let mut all = Vec::new();
        while let Some(line) = lines.next_line().unwrap() {
            all.push(match line {
                Line::Bytes(bytes) => Some(bytes.to_vec()),
                Line::TooLong => None,
            });
        }
        all
    }

    #[test]
    fn lines_end_at_newlines_and_at_the_end_of_input() {
        for chunk in [1, 2, 3, 64] {
            let lines = all_lines(b"ab\r\n\ncd\n\xffe", 8, chunk);
            let want = [&b"ab"[..], b"", b"cd", b"\xffe"];
            assert_eq!(lines.len(), want.len(), "chunks of {chunk}");
            for (line, want) in lines.iter().zip(want) {
                assert_eq!(line.as_deref(), Some(want), "chunks of {chunk}");
            }
        }
        assert!(all_lines(b"", 8, 4).is_empty());
    }

    #[test]
    fn lines_over_the_limit_are_too_long_and_skipped_to_their_newline() {
        for chunk in [1, 3, 64] {
            let lines = all_lines(b"1234\n12345\n123456789\n12\n123456", 4, chunk);
            assert_eq!(
                lines,
                [
                    Some(b"1234".to_vec()),
                    None,
                    None,
                    Some(b"12".to_vec()),
                    None
                ],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn a_long_line_never_grows_the_buffer_past_the_limit() {
        let mut input = vec![b'x'; 3 * MAX_LINE + 5];
        input.extend_from_slice(b"\nok\n");
        let mut lines = Lines::new(BufReader::with_capacity(8192, &input[..]));
        assert_eq!(lines.next_line().unwrap(), Some(Line::TooLong));
        assert!(
            lines.line.capacity() <= MAX_LINE,
            "{}",
            lines.line.capacity()
        );
        assert_eq!(lines.next_line().unwrap(), Some(Line::Bytes(b"ok")));
        assert_eq!(lines.next_line().unwrap(), None);
    }
}
