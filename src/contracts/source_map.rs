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
