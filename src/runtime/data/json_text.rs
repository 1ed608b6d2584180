//! JSON text written by hand, byte for byte as `serde_json` writes it: strings (escaped as
//! its compact formatter escapes them) and unsigned integers. What the hot writers of
//! event texts (`event_text.rs`) are made of (ADR 0056): a `step` event's trace item is
//! ids, kinds and numbers, which `serde_json` escaped one byte at a time.

use serde::Serialize;
use serde_json::Value;

use super::text_buf::{Text, short_word};

/// Appends `s` as a JSON string: quoted, and escaped exactly as `serde_json` escapes it
/// (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, and `\u00XX` in lowercase hex for the other
/// control characters below U+0020; nothing else, not even U+007F or non-ASCII text).
///
/// The text is scanned eight bytes at a time for a byte that needs escaping, and copied
/// in runs between such bytes: an id (a node's name, a rule's reason) is copied whole.
#[inline]
pub(crate) fn write_str(out: &mut Text<'_>, s: &str) {
    let bytes = s.as_bytes();
    out.push(b'"');
    // An id or a word: copied and tested eight bytes at a time in one pass (ADR 0070).
    if bytes.len() <= SHORT && out.put_words(bytes, |w| !word_needs_escape(w)) {
        out.push(b'"');
        return;
    }
    let mut copied = 0;
    let mut at = 0;
    while let Some(found) = next_escape(bytes, at) {
        out.put(&bytes[copied..found]);
        write_escape(out, bytes[found]);
        copied = found + 1;
        at = found + 1;
    }
    out.put(&bytes[copied..]);
    out.push(b'"');
}

/// The longest string [`write_str`] copies a word at a time; a longer one is scanned, then
/// copied in runs.
const SHORT: usize = 64;

/// Appends `s` as a JSON string, or `null`.
#[inline]
pub(crate) fn write_opt_str(out: &mut Text<'_>, s: Option<&str>) {
    match s {
        Some(s) => write_str(out, s),
        None => out.put(b"null"),
    }
}

/// Appends `n` as a JSON number (as `serde_json` writes an integer).
#[inline]
pub(crate) fn write_u64(out: &mut Text<'_>, n: u64) {
    // Up to four digits (a step, an index, a depth, a duration of microseconds, most
    // `seq`s): moved as a piece of constant length, no formatter (ADR 0070).
    let digit = |d: u64| b'0' + (d % 10) as u8;
    match n {
        0..=9 => out.push(digit(n)),
        10..=99 => out.put(&[digit(n / 10), digit(n)]),
        100..=999 => out.put(&[digit(n / 100), digit(n / 10), digit(n)]),
        1000..=9999 => out.put(&[digit(n / 1000), digit(n / 100), digit(n / 10), digit(n)]),
        _ => {
            out.put_words(itoa::Buffer::new().format(n).as_bytes(), |_| true);
        }
    }
}

/// Appends `value` as `serde_json` writes it (compact): strings through [`write_str`],
/// integers through `itoa`, floating-point numbers through `serde_json` itself. What a
/// node's writes and a run's input are written with (ADR 0056).
pub(crate) fn write_value(out: &mut Text<'_>, value: &Value) {
    match value {
        Value::Null => out.put(b"null"),
        Value::Bool(true) => out.put(b"true"),
        Value::Bool(false) => out.put(b"false"),
        Value::Number(n) => {
            if let Some(n) = n.as_u64() {
                write_u64(out, n);
            } else if let Some(n) = n.as_i64() {
                out.put(itoa::Buffer::new().format(n).as_bytes());
            } else {
                write_serde(out, n);
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(fields) => write_fields(out, fields.iter()),
    }
}

/// Appends the object of `fields` as [`write_value`] writes an object.
pub(crate) fn write_fields<'a>(
    out: &mut Text<'_>,
    fields: impl Iterator<Item = (&'a String, &'a Value)>,
) {
    out.push(b'{');
    for (i, (key, item)) in fields.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        write_value(out, item);
    }
    out.push(b'}');
}

/// Appends `value` as `serde_json` writes it (for the parts of a text that are rare or
/// not worth writing by hand: a node's writes, a usage record, a chain stage).
pub(crate) fn write_serde(out: &mut Text<'_>, value: &(impl Serialize + ?Sized)) {
    serde_json::to_writer(&mut *out, value).expect("plain data serializes");
}

/// The eight lanes of a word, each holding `b`.
const fn lanes(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// True when some byte of `w` (eight bytes of text) needs escaping: below 0x20, `"` or
/// `\`. Exact (no false positive): the classic "has a byte less than n" and "has a zero
/// byte" word tests, each exact as a yes/no.
#[inline(always)]
fn word_needs_escape(w: u64) -> bool {
    const HIGH: u64 = lanes(0x80);
    let has_less = |x: u64, n: u8| x.wrapping_sub(lanes(n)) & !x & HIGH != 0;
    has_less(w, 0x20) || has_less(w ^ lanes(b'"'), 1) || has_less(w ^ lanes(b'\\'), 1)
}

#[inline(always)]
fn byte_needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The index of the first byte at or after `from` that needs escaping.
#[inline]
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = &bytes[from..];
    let mut words = rest.chunks_exact(8);
    let mut base = from;
    for word in &mut words {
        let w = u64::from_ne_bytes(word.try_into().expect("a chunk of eight bytes"));
        if word_needs_escape(w) {
            let i = word.iter().position(|&b| byte_needs_escape(b));
            return Some(base + i.expect("the word test is exact"));
        }
        base += 8;
    }
    // The last bytes (fewer than eight) as one word padded with spaces (which need no
    // escape): one word test for an id of a few bytes, not a test a byte.
    let tail = words.remainder();
    if tail.is_empty() || !word_needs_escape(short_word(tail)) {
        return None;
    }
    tail.iter()
        .position(|&b| byte_needs_escape(b))
        .map(|i| base + i)
}

/// A number written once and written again as long as it stays the same: the time
/// stamps of a checkpoint's events (`at_ms`, thirteen digits, one for all its events; an
/// item's, the same for many items in a row).
pub(crate) struct SameNumber {
    value: u64,
    digits: [u8; 20],
    len: usize,
}

impl SameNumber {
    /// None written yet.
    pub(crate) fn new() -> Self {
        Self {
            value: 0,
            digits: [0; 20],
            len: 0,
        }
    }

    /// Appends `n` as [`write_u64`] does, formatting it only when it is not the last one.
    #[inline]
    pub(crate) fn write(&mut self, out: &mut Text<'_>, n: u64) {
        if self.len == 0 || self.value != n {
            let mut buf = itoa::Buffer::new();
            let text = buf.format(n).as_bytes();
            // A `u64` has at most 20 digits.
            self.digits[..text.len()].copy_from_slice(text);
            self.len = text.len();
            self.value = n;
        }
        out.put_words(&self.digits[..self.len], |_| true);
    }
}

fn write_escape(out: &mut Text<'_>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => out.put(b"\\\""),
        b'\\' => out.put(b"\\\\"),
        0x08 => out.put(b"\\b"),
        0x0C => out.put(b"\\f"),
        b'\n' => out.put(b"\\n"),
        b'\r' => out.put(b"\\r"),
        b'\t' => out.put(b"\\t"),
        _ => out.put(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xF)],
        ]),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// What `write` writes into an empty buffer.
    fn written(write: impl FnOnce(&mut Text<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut Text::new(&mut out));
        out
    }

    /// Proves `write_u64` writes `serde_json`'s digits for every number up to 100,000
    /// (every branch of few digits and their edges) and for the largest ones.
    #[test]
    fn numbers_are_written_as_serde_json_writes_them() {
        for n in (0..=100_000u64).chain([u64::MAX, u64::MAX - 1, 1 << 40, 10u64.pow(19)]) {
            let out = written(|out| write_u64(out, n));
            assert_eq!(out, serde_json::to_vec(&n).expect("a number"), "{n}");
        }
    }

    /// Proves `write_str` writes `serde_json`'s bytes for every string: quotes,
    /// backslashes, every control character, U+007F and non-ASCII text, at every position
    /// of an eight-byte word (the scan's lanes) and in the remainder after the words.
    #[test]
    fn every_byte_class_is_escaped_as_serde_json_escapes_it() {
        for c in (0u32..0x80).chain([0xE9, 0x2028, 0x1F600]) {
            let c = char::from_u32(c).expect("a char");
            for at in 0..17 {
                let s: String = "a".repeat(at) + &c.to_string() + "bc";
                let out = written(|out| write_str(out, &s));
                let expected = serde_json::to_string(&s).expect("a string");
                assert_eq!(
                    String::from_utf8(out).expect("UTF-8"),
                    expected,
                    "{c:?} at {at}"
                );
            }
        }
    }

    /// Any JSON value: strings that need escaping, integers of both signs, fractions,
    /// arrays and objects nested.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e300..1e300f64).prop_map(Value::from),
            "(\\PC|[\"\\\\\u{0}-\u{1f}])*".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("(\\PC|[\"\u{0}-\u{1f}])*", inner), 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// For all JSON values, `write_value` writes `serde_json`'s compact text.
        #[test]
        fn values_are_serde_jsons_text(v in value()) {
            let out = written(|out| write_value(out, &v));
            prop_assert_eq!(&out, &serde_json::to_vec(&v).expect("a value"));
        }

        /// For all strings (any Unicode, weighted towards what needs escaping), the text
        /// is `serde_json`'s, and so are `write_opt_str`'s and `write_u64`'s.
        #[test]
        fn strings_and_numbers_are_serde_jsons_text(
            s in "(\\PC|[\"\\\\\u{0}-\u{1f}\u{7f}])*",
            n: u64,
            some: bool,
        ) {
            let out = written(|out| write_str(out, &s));
            prop_assert_eq!(&out, &serde_json::to_vec(&s).expect("a string"));
            let opt = some.then_some(s.as_str());
            let out = written(|out| write_opt_str(out, opt));
            prop_assert_eq!(&out, &serde_json::to_vec(&opt).expect("an option"));
            let out = written(|out| write_u64(out, n));
            prop_assert_eq!(&out, &serde_json::to_vec(&n).expect("a number"));
        }
    }
}
