//! A run state's or a step delta's JSON text, written with the bytes of its trace
//! counted as they are written (ADR 0049): the snapshot rule weighs what a load replays
//! without the trace, which is append-only and read once whether it comes from a
//! snapshot or from the deltas after it.
//!
//! Complexity: one serialization, O(1) more per JSON token.

use std::cell::Cell;
use std::io;

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};

/// The member of the top-level object whose value is weighed apart.
const TRACE: &str = "trace";

/// `value`'s JSON text (the bytes `serde_json::to_string` writes) and how many of its
/// bytes are the value of its top-level `trace` member (0 without one).
pub(crate) fn to_json_and_trace_bytes<T: Serialize>(value: &T) -> (String, usize) {
    let written = Cell::new(0);
    let trace = Cell::new(0);
    let mut out = Counted {
        out: Vec::new(),
        written: &written,
    };
    let formatter = TraceFormatter {
        written: &written,
        depth: 0,
        key: None,
        start: None,
        trace: &trace,
    };
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    value
        .serialize(&mut ser)
        .expect("a run state or a delta is plain data");
    let text = String::from_utf8(out.out).expect("serde_json writes UTF-8");
    (text, trace.get())
}

/// A buffer that counts the bytes written to it where the formatter can read them.
struct Counted<'a> {
    out: Vec<u8>,
    written: &'a Cell<usize>,
}

impl io::Write for Counted<'_> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out.extend_from_slice(buf);
        self.written.set(self.out.len());
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// serde_json's compact output, noting where the top-level `trace` member's value starts
/// and ends.
struct TraceFormatter<'a> {
    written: &'a Cell<usize>,
    /// Objects and arrays open around the token being written.
    depth: usize,
    /// The top-level key being written (`Some` between its start and its end).
    key: Option<String>,
    /// Where the top-level `trace` member's value started, while it is written.
    start: Option<usize>,
    /// The bytes of that value, once written.
    trace: &'a Cell<usize>,
}

/// Every byte goes straight to the [`Counted`] writer (serde_json does not buffer), so
/// its count is current at each call.
impl Formatter for TraceFormatter<'_> {
    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth += 1;
        CompactFormatter.begin_array(writer)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth = self.depth.saturating_sub(1);
        CompactFormatter.end_array(writer)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth += 1;
        CompactFormatter.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth = self.depth.saturating_sub(1);
        CompactFormatter.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if self.depth == 1 {
            self.key = Some(String::new());
        }
        CompactFormatter.begin_object_key(writer, first)
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if let Some(key) = &mut self.key {
            key.push_str(fragment);
        }
        CompactFormatter.write_string_fragment(writer, fragment)
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        CompactFormatter.end_object_key(writer)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        CompactFormatter.begin_object_value(writer)?;
        if self.key.take().is_some_and(|k| k == TRACE) {
            self.start = Some(self.written.get());
        }
        Ok(())
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        CompactFormatter.end_object_value(writer)?;
        if self.depth == 1
            && let Some(start) = self.start.take()
        {
            self.trace
                .set(self.trace.get() + self.written.get().saturating_sub(start));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Proves the text is serde_json's own, and that only the top-level `trace` member's
    /// value is counted (not a nested `trace`, not a string "trace", not its key).
    #[test]
    fn counts_the_top_level_trace_value_only() {
        let v = json!({
            "a": {"trace": [1, 2, 3]},
            "s": "trace",
            "trace": [{"k": "x\"y"}, {"trace": 1}],
            "z": 1
        });
        let (text, trace) = to_json_and_trace_bytes(&v);
        assert_eq!(text, serde_json::to_string(&v).unwrap());
        let value = serde_json::to_string(&v["trace"]).unwrap();
        assert_eq!(trace, value.len());
        let (_, none) = to_json_and_trace_bytes(&json!({"a": [1], "b": {"trace": [2]}}));
        assert_eq!(none, 0);
        let (_, empty) = to_json_and_trace_bytes(&json!({"trace": []}));
        assert_eq!(empty, 2);
    }
}
