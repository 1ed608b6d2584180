//! Where things stand in a document's text: [`Span`] (line, column, byte range) and the
//! [`SourceMap`] from JSON Pointers to spans that the loaders fill.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

/// A place in the document text: 1-based line and column (in characters), plus the
/// byte range of the token found there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// Byte offset of the token's start.
    pub offset: usize,
    /// Byte length of the token (at least 1 when the text is non-empty).
    pub len: usize,
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Where each JSON Pointer of a loaded document stands in its text. For an object member
/// the span is the member's key; for an array element, the element's first token.
///
/// A JSON document's table is built lazily: loading parses the text once, fast, without
/// spans, and the first look-up here (a diagnostic that needs a line) parses it again with
/// spans. A document that loads and validates cleanly never pays for the table.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    /// The file the text came from, when known.
    pub name: Option<String>,
    /// The document text.
    pub text: String,
    /// Where the table comes from when it is first needed.
    origin: Origin,
    spans: OnceLock<HashMap<String, Span>>,
}

/// Builds the span table of a text that has already parsed (the JSON loader's second,
/// span-recording pass).
pub(crate) type SpanTable = fn(&str) -> HashMap<String, Span>;

/// How a [`SourceMap`]'s table is filled.
#[derive(Debug, Clone, Copy, Default)]
enum Origin {
    /// By `insert` (the table starts empty).
    #[default]
    Recorded,
    /// From the text, which is well-formed, by the loader's function, on the first look-up.
    Text(SpanTable),
}

impl Origin {
    /// The table a map of this origin starts with, for `text`.
    fn fill(self, text: &str) -> HashMap<String, Span> {
        match self {
            Origin::Recorded => HashMap::new(),
            Origin::Text(table) => table(text),
        }
    }
}

impl SourceMap {
    /// An empty map over `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            name: None,
            text: text.into(),
            origin: Origin::Recorded,
            spans: OnceLock::new(),
        }
    }

    /// A map over `text` (already parsed without errors) whose table `table` builds from
    /// the text on the first look-up.
    pub(crate) fn lazy(text: impl Into<String>, table: SpanTable) -> Self {
        Self {
            origin: Origin::Text(table),
            ..Self::new(text)
        }
    }

    /// The table, built now if it is built lazily and not yet built.
    fn spans(&self) -> &HashMap<String, Span> {
        self.spans.get_or_init(|| self.origin.fill(&self.text))
    }

    /// Records where `pointer` stands.
    pub fn insert(&mut self, pointer: String, span: Span) {
        self.spans();
        self.spans
            .get_mut()
            .expect("spans() has just initialized the table")
            .insert(pointer, span);
    }

    /// The exact span of `pointer`, if recorded.
    pub fn get(&self, pointer: &str) -> Option<Span> {
        self.spans().get(pointer).copied()
    }

    /// The span of `pointer`, or of its nearest recorded ancestor.
    pub fn locate(&self, pointer: &str) -> Option<Span> {
        let spans = self.spans();
        let mut p = pointer;
        loop {
            if let Some(s) = spans.get(p) {
                return Some(*s);
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return None,
            }
        }
    }

    /// The span of byte `offset` of the string value of the object member at `pointer`
    /// (a template, say), found in the text after the member's key: inside a JSON or YAML
    /// double-quoted string (escapes counted), a YAML single-quoted string, a YAML block
    /// scalar (`|`; `>` lines are taken as written) or a plain scalar. `None` when the
    /// member is not recorded or its value is not where a string can start.
    pub fn locate_in_string(&self, pointer: &str, offset: usize) -> Option<Span> {
        let key = self.get(pointer)?;
        let text = self.text.as_str();
        let after_key = key.offset + key.len.max(1);
        let mut i = after_key + text.get(after_key..)?.find(':')? + 1;
        i += text.get(i..)?.len() - text.get(i..)?.trim_start().len();
        let raw = match text.as_bytes().get(i)? {
            b'"' => quoted_offset(text, i + 1, offset, true)?,
            b'\'' => quoted_offset(text, i + 1, offset, false)?,
            b'|' | b'>' => block_offset(text, i, offset)?,
            _ => i + offset,
        };
        let raw = raw.min(text.len().saturating_sub(1));
        Some(LineIndex::new(text).span(raw, raw + 1))
    }

    /// Number of recorded pointers.
    pub fn len(&self) -> usize {
        self.spans().len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.spans().is_empty()
    }

    /// The table, built if need be.
    pub(crate) fn into_spans(self) -> HashMap<String, Span> {
        let Self {
            origin,
            text,
            spans,
            ..
        } = self;
        spans.into_inner().unwrap_or_else(|| origin.fill(&text))
    }
}

/// The text offset of decoded byte `offset` of a quoted string whose content starts at
/// `start`: double-quoted (backslash escapes, `\\uXXXX` one character, a surrogate pair
/// two escapes) or single-quoted (`''` one quote).
fn quoted_offset(text: &str, start: usize, offset: usize, double: bool) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut raw, mut decoded) = (start, 0usize);
    while decoded < offset {
        let b = *bytes.get(raw)?;
        if double && b == b'\\' {
            if bytes.get(raw + 1) == Some(&b'u') {
                let code = u32::from_str_radix(text.get(raw + 2..raw + 6)?, 16).ok()?;
                if (0xD800..0xDC00).contains(&code) {
                    raw += 12;
                    decoded += 4;
                } else {
                    raw += 6;
                    decoded += char::from_u32(code).map_or(3, char::len_utf8);
                }
            } else {
                raw += 2;
                decoded += 1;
            }
        } else if !double && b == b'\'' {
            raw += 2;
            decoded += 1;
        } else if b == b'"' && double || b == b'\'' && !double {
            break;
        } else {
            let len = text.get(raw..)?.chars().next()?.len_utf8();
            raw += len;
            decoded += len;
        }
    }
    Some(raw)
}

/// The text offset of decoded byte `offset` of a YAML block scalar whose indicator (`|` or
/// `>`) is at `at`: the content lines follow, each indented as the first.
fn block_offset(text: &str, at: usize, offset: usize) -> Option<usize> {
    let first = at + text.get(at..)?.find('\n')? + 1;
    let indent = text
        .get(first..)?
        .lines()
        .find(|l| !l.trim().is_empty())
        .map_or(0, |l| l.len() - l.trim_start_matches(' ').len());
    let (mut line_start, mut remaining) = (first, offset);
    loop {
        let line = text.get(line_start..)?.split('\n').next()?;
        let content = line.get(indent.min(line.len())..).unwrap_or("");
        if remaining <= content.len() {
            return Some(line_start + indent.min(line.len()) + remaining);
        }
        remaining -= content.len() + 1;
        line_start += line.len() + 1;
        if line_start >= text.len() {
            return None;
        }
    }
}

/// Converts byte offsets of a text into 1-based lines and character columns.
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { text, starts }
    }

    pub(crate) fn span(&self, start: usize, end: usize) -> Span {
        let line = self.starts.partition_point(|s| *s <= start).max(1);
        let line_start = self.starts[line - 1];
        let column = self
            .text
            .get(line_start..start)
            .map_or(1, |s| s.chars().count() + 1);
        Span {
            line,
            column,
            offset: start,
            len: end.saturating_sub(start).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "yaml")]
    #[test]
    fn places_inside_string_values_are_found_in_every_scalar_style() {
        use crate::contracts::DocumentFormat;
        use crate::contracts::load::parse_value;
        let cases = [
            (
                DocumentFormat::Json,
                "{\"a\": {\"p\": \"\\\"q\\\" \\u00e9 {{ x }}\"}}",
            ),
            (
                DocumentFormat::Yaml,
                "a:\n  p: \"\\\"q\\\" \\u00e9 {{ x }}\"\n",
            ),
            (DocumentFormat::Yaml, "a:\n  p: \'\'\'q\'\' é {{ x }}\'\n"),
            (
                DocumentFormat::Yaml,
                "a:\n  p: |\n    first line\n    \"q\" é {{ x }}\n",
            ),
        ];
        for (format, text) in cases {
            let (value, map) = parse_value(text, format).expect("parses");
            let s = value["a"]["p"].as_str().expect("a string");
            let offset = s.find('x').expect("x in the value");
            let span = map.locate_in_string("/a/p", offset).expect("located");
            assert_eq!(&text[span.offset..span.offset + 1], "x", "{text}");
        }
        let (_, map) = parse_value("{\"a\": 1}", DocumentFormat::Json).expect("parses");
        assert_eq!(map.locate_in_string("/b", 0), None);
    }

    #[test]
    fn locates_nearest_ancestor_and_counts_characters() {
        let text = "{\n  \"é\": 1\n}";
        let idx = LineIndex::new(text);
        let off = text.find('1').unwrap();
        let s = idx.span(off, off + 1);
        assert_eq!((s.line, s.column), (2, 8));
        let mut map = SourceMap::new(text);
        map.insert("/nodes".into(), s);
        assert_eq!(map.locate("/nodes/x/reads/0"), Some(s));
        assert_eq!(map.locate("/other"), None);
    }
}
