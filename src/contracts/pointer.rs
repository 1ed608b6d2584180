//! JSON Pointers into the workflow document and the source map that turns them into
//! lines and columns.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

/// Escapes one reference token (`~` -> `~0`, `/` -> `~1`).
pub fn escape(token: &str) -> String {
    if token.contains(['~', '/']) {
        token.replace('~', "~0").replace('/', "~1")
    } else {
        token.to_string()
    }
}

/// Appends `/token` (escaped) to a pointer being built, without allocating when the
/// token needs no escaping.
pub fn push_key(pointer: &mut String, token: &str) {
    pointer.push('/');
    if token.contains(['~', '/']) {
        pointer.push_str(&escape(token));
    } else {
        pointer.push_str(token);
    }
}

/// Appends `/index` to a pointer being built.
pub fn push_index(pointer: &mut String, index: usize) {
    use std::fmt::Write;
    let _ = write!(pointer, "/{index}");
}

/// Joins reference tokens into a JSON Pointer (`["nodes", "a/b"]` -> `/nodes/a~1b`).
pub fn join<I, S>(tokens: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out = String::new();
    for t in tokens {
        push_key(&mut out, t.as_ref());
    }
    out
}

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

/// How a [`SourceMap`]'s table is filled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Origin {
    /// By `insert` (the table starts empty).
    #[default]
    Recorded,
    /// From the text, which is well-formed JSON, on the first look-up.
    JsonText,
}

impl Origin {
    /// The table a map of this origin starts with, for `text`.
    fn fill(self, text: &str) -> HashMap<String, Span> {
        match self {
            Origin::Recorded => HashMap::new(),
            Origin::JsonText => super::load::json_spans(text),
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

    /// A map over JSON `text` (already parsed without errors) whose table is built from the
    /// text on the first look-up.
    pub(crate) fn lazy_json(text: impl Into<String>) -> Self {
        Self {
            origin: Origin::JsonText,
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

/// One step of a pointer walk: the member `key` of an object, or the element `index` of
/// an array (`index` is `key` read as an array index, when it is one).
fn child<'v>(
    target: &'v serde_json::Value,
    key: &str,
    index: Option<usize>,
) -> Option<&'v serde_json::Value> {
    match target {
        serde_json::Value::Object(map) => map.get(key),
        serde_json::Value::Array(list) => index.and_then(|x| list.get(x)),
        _ => None,
    }
}

/// An array index as JSON Pointer allows it (no sign, no leading zero).
fn parse_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// A JSON Pointer parsed once: its reference tokens unescaped, and each token's array
/// index worked out, so resolving it repeatedly (a trigger on every decision) does no
/// string scanning. Resolves exactly as `serde_json::Value::pointer` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedPointer {
    tokens: Box<[(Box<str>, Option<usize>)]>,
}

impl ParsedPointer {
    /// Parses `pointer`; `None` when it is neither empty nor starts with `/`.
    pub fn parse(pointer: &str) -> Option<Self> {
        let tokens = match pointer.strip_prefix('/') {
            None if pointer.is_empty() => Box::default(),
            None => return None,
            Some(rest) => rest
                .split('/')
                .map(|t| {
                    let t = t.replace("~1", "/").replace("~0", "~");
                    let index = parse_index(&t);
                    (t.into_boxed_str(), index)
                })
                .collect(),
        };
        Some(Self { tokens })
    }

    /// The value the pointer names in `value`, if any.
    ///
    /// Complexity: one map or array look-up per token.
    pub fn resolve<'v>(&self, value: &'v serde_json::Value) -> Option<&'v serde_json::Value> {
        self.tokens
            .iter()
            .try_fold(value, |target, (key, index)| child(target, key, *index))
    }

    /// The value the pointer names in a state (an object of slices), if any: the first
    /// token names a slice. The empty pointer names no value here.
    ///
    /// Complexity: one map or array look-up per token.
    pub fn resolve_in<'v>(
        &self,
        state: &'v serde_json::Map<String, serde_json::Value>,
    ) -> Option<&'v serde_json::Value> {
        let ((first, _), rest) = self.tokens.split_first()?;
        rest.iter()
            .try_fold(state.get(&**first)?, |target, (key, index)| {
                child(target, key, *index)
            })
    }

    /// The first reference token (for a state path: the slice), if any.
    pub fn first(&self) -> Option<&str> {
        self.tokens.first().map(|(k, _)| &**k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_pointers_resolve_like_serde_json() {
        let v = serde_json::json!({"a": {"b/c": [1, {"d~e": 2}], "0": 3, "": 4}});
        for p in [
            "",
            "/a",
            "/a/b~1c/0",
            "/a/b~1c/1/d~0e",
            "/a/0",
            "/a/",
            "/a/b~1c/01",
            "/a/b~1c/+1",
            "x",
            "/zz",
            "/a/b~1c/9",
            "/a/~01",
        ] {
            let parsed = ParsedPointer::parse(p);
            assert_eq!(parsed.is_some(), p.is_empty() || p.starts_with('/'), "{p}");
            assert_eq!(
                parsed.as_ref().and_then(|q| q.resolve(&v)),
                v.pointer(p),
                "{p}"
            );
            if !p.is_empty() {
                let m = v.as_object().expect("an object");
                let got = parsed.and_then(|q| q.resolve_in(m));
                assert_eq!(got, v.pointer(p), "{p} in a state map");
            }
        }
        let w = serde_json::json!({"~1": 5});
        assert_eq!(
            ParsedPointer::parse("/~01").unwrap().resolve(&w),
            Some(&w["~1"])
        );
        assert_eq!(
            ParsedPointer::parse("/a~1b/c").unwrap().first(),
            Some("a/b")
        );
    }

    #[test]
    fn escapes_and_joins() {
        assert_eq!(join(["nodes", "a/b", "c~d"]), "/nodes/a~1b/c~0d");
        assert_eq!(join::<[&str; 0], &str>([]), "");
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
