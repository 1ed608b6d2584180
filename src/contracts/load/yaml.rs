//! YAML (1.2, core schema) to `Value` + `SourceMap`, rejecting duplicate keys.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, StrInput};
use serde_json::{Map, Number, Value};

use super::{LoadError, MAX_ALIAS_BYTES, MAX_ALIAS_NODES, MAX_DEPTH, duplicate_key, too_deep};
use crate::contracts::pointer::{push_index, push_key};
use crate::contracts::source_map::{SourceMap, Span};

pub(super) fn parse(text: &str) -> Result<(Value, SourceMap), LoadError> {
    let mut b = Builder {
        events: Parser::new_from_str(text),
        anchors: HashMap::new(),
        copied: Size::default(),
        map: SourceMap::new(text),
        offsets: CharOffsets::new(text),
    };
    let v = b.document()?;
    Ok((v, b.map))
}

/// Maps character indexes (what the YAML scanner counts) to byte offsets.
struct CharOffsets {
    bytes: Option<Vec<usize>>,
    len: usize,
}

impl CharOffsets {
    fn new(text: &str) -> Self {
        let bytes = (!text.is_ascii()).then(|| text.char_indices().map(|(i, _)| i).collect());
        Self {
            bytes,
            len: text.len(),
        }
    }
    fn byte(&self, char_index: usize) -> usize {
        match &self.bytes {
            None => char_index.min(self.len),
            Some(v) => v.get(char_index).copied().unwrap_or(self.len),
        }
    }
}

/// The size of a built value: what an alias to it copies.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    /// Scalars, sequences and mappings.
    nodes: usize,
    /// Bytes of keys and string scalars.
    bytes: usize,
    /// Levels of sequences and mappings (0 for a scalar).
    depth: usize,
}

impl Size {
    fn add(&mut self, child: Size) {
        self.nodes = self.nodes.saturating_add(child.nodes);
        self.bytes = self.bytes.saturating_add(child.bytes);
        self.depth = self.depth.max(child.depth + 1);
    }
}

/// Builds the `Value` from the parser's events, one recursive call per nesting level
/// (at most [`MAX_DEPTH`], checked before going deeper, aliases included).
struct Builder<'a> {
    events: Parser<'a, StrInput<'a>>,
    /// Each anchor's value and its size.
    anchors: HashMap<usize, (Value, Size)>,
    /// What aliases have copied so far, against [`MAX_ALIAS_NODES`] and [`MAX_ALIAS_BYTES`].
    copied: Size,
    map: SourceMap,
    offsets: CharOffsets,
}

type Ev<'a> = (Event<'a>, saphyr_parser::Span);

impl<'a> Builder<'a> {
    fn span(&self, s: saphyr_parser::Span) -> Span {
        let start = self.offsets.byte(s.start.index());
        let end = self.offsets.byte(s.end.index());
        Span {
            line: s.start.line().max(1),
            column: s.start.col() + 1,
            offset: start,
            len: end.saturating_sub(start).max(1),
        }
    }

    fn scan_error(&self, e: ScanError) -> LoadError {
        let m = e.marker();
        let offset = self.offsets.byte(m.index());
        let span = Span {
            line: m.line().max(1),
            column: m.col() + 1,
            offset,
            len: 1,
        };
        // The scanner reads flow collections ahead and gives up at 256 open brackets,
        // which is past our own limit, before their events reach us.
        if e.info() == "recursion limit exceeded" {
            return too_deep(span);
        }
        LoadError::Syntax {
            message: e.info().to_string(),
            span,
        }
    }

    fn next(&mut self) -> Result<Ev<'a>, LoadError> {
        match self.events.next() {
            Some(Ok(ev)) => Ok(ev),
            Some(Err(e)) => Err(self.scan_error(e)),
            None => Err(LoadError::Syntax {
                message: "unexpected end of the document".into(),
                span: Span::default(),
            }),
        }
    }

    fn document(&mut self) -> Result<Value, LoadError> {
        loop {
            let (ev, sp) = self.next()?;
            match ev {
                Event::StreamStart | Event::Nothing => continue,
                Event::DocumentStart(_) => break,
                _ => {
                    return Err(LoadError::Syntax {
                        message: "the document is empty".into(),
                        span: self.span(sp),
                    });
                }
            }
        }
        let first = self.next()?;
        let (v, _) = self.node(first, &mut String::new(), 0)?;
        loop {
            let (ev, sp) = self.next()?;
            match ev {
                Event::DocumentEnd | Event::Nothing => continue,
                Event::StreamEnd => return Ok(v),
                _ => {
                    return Err(LoadError::Syntax {
                        message: "a workflow file holds one YAML document; found a second".into(),
                        span: self.span(sp),
                    });
                }
            }
        }
    }

    /// The value starting with `ev`, inside `depth` sequences and mappings.
    fn node(
        &mut self,
        (ev, sp): Ev<'a>,
        at: &mut String,
        depth: usize,
    ) -> Result<(Value, Size), LoadError> {
        if matches!(ev, Event::SequenceStart(..) | Event::MappingStart(..)) && depth >= MAX_DEPTH {
            return Err(too_deep(self.span(sp)));
        }
        match ev {
            Event::Scalar(text, style, anchor, tag) => {
                let forced_str = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let v = if style != ScalarStyle::Plain || forced_str {
                    Value::String(text.into_owned())
                } else {
                    resolve_plain(&text).map_err(|message| LoadError::Syntax {
                        message,
                        span: self.span(sp),
                    })?
                };
                let size = Size {
                    nodes: 1,
                    bytes: v.as_str().map_or(0, str::len),
                    depth: 0,
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, (v.clone(), size));
                }
                Ok((v, size))
            }
            Event::SequenceStart(anchor, _) => {
                let mut out = Vec::new();
                let mut size = Size {
                    nodes: 1,
                    bytes: 0,
                    depth: 1,
                };
                let len = at.len();
                loop {
                    let item = self.next()?;
                    if matches!(item.0, Event::SequenceEnd) {
                        break;
                    }
                    push_index(at, out.len());
                    let s = self.span(item.1);
                    self.map.insert(at.clone(), s);
                    let (v, s) = self.node(item, at, depth + 1)?;
                    size.add(s);
                    out.push(v);
                    at.truncate(len);
                }
                let v = Value::Array(out);
                if anchor > 0 {
                    self.anchors.insert(anchor, (v.clone(), size));
                }
                Ok((v, size))
            }
            Event::MappingStart(anchor, _) => {
                let mut out = Map::new();
                let mut size = Size {
                    nodes: 1,
                    bytes: 0,
                    depth: 1,
                };
                let len = at.len();
                loop {
                    let (kev, ksp) = self.next()?;
                    let key = match kev {
                        Event::MappingEnd => break,
                        Event::Scalar(k, ..) => k.into_owned(),
                        _ => {
                            return Err(LoadError::Syntax {
                                message: "mapping keys must be plain strings".into(),
                                span: self.span(ksp),
                            });
                        }
                    };
                    let span = self.span(ksp);
                    if out.contains_key(&key) {
                        return Err(duplicate_key(&self.map, at, &key, span));
                    }
                    push_key(at, &key);
                    self.map.insert(at.clone(), span);
                    let val = self.next()?;
                    let (v, s) = self.node(val, at, depth + 1)?;
                    size.add(s);
                    size.bytes = size.bytes.saturating_add(key.len());
                    at.truncate(len);
                    out.insert(key, v);
                }
                let v = Value::Object(out);
                if anchor > 0 {
                    self.anchors.insert(anchor, (v.clone(), size));
                }
                Ok((v, size))
            }
            Event::Alias(id) => self.alias(id, sp, depth),
            _ => Err(LoadError::Syntax {
                message: "unexpected YAML structure".into(),
                span: self.span(sp),
            }),
        }
    }
}

impl Builder<'_> {
    /// A copy of the anchor `id`'s value, once the copy is known to stay within
    /// [`MAX_DEPTH`], [`MAX_ALIAS_NODES`] and [`MAX_ALIAS_BYTES`] (checked before copying,
    /// so a hostile document costs no more than the limits).
    fn alias(
        &mut self,
        id: usize,
        sp: saphyr_parser::Span,
        depth: usize,
    ) -> Result<(Value, Size), LoadError> {
        let span = self.span(sp);
        let Some((value, size)) = self.anchors.get(&id) else {
            return Err(LoadError::Syntax {
                message: "alias to an unknown anchor".into(),
                span,
            });
        };
        if depth + size.depth > MAX_DEPTH {
            return Err(too_deep(span));
        }
        let nodes = self.copied.nodes.saturating_add(size.nodes);
        let bytes = self.copied.bytes.saturating_add(size.bytes);
        if nodes > MAX_ALIAS_NODES {
            return Err(LoadError::Limit {
                message: format!(
                    "aliases expand to more than {MAX_ALIAS_NODES} nodes (this alias copies {} \
                     and brings the total to {nodes}); a workflow needs far fewer, so the \
                     document is refused as an alias bomb",
                    size.nodes
                ),
                span,
            });
        }
        if bytes > MAX_ALIAS_BYTES {
            return Err(LoadError::Limit {
                message: format!(
                    "aliases copy more than {MAX_ALIAS_BYTES} bytes of text (this alias copies \
                     {} and brings the total to {bytes}); the document is refused",
                    size.bytes
                ),
                span,
            });
        }
        self.copied.nodes = nodes;
        self.copied.bytes = bytes;
        Ok((value.clone(), *size))
    }
}

/// Resolves a plain scalar by the YAML 1.2 core schema.
fn resolve_plain(s: &str) -> Result<Value, String> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        _ => {}
    }
    let lower = s.to_ascii_lowercase();
    if matches!(lower.trim_start_matches(['+', '-']), ".inf" | ".nan") {
        return Err(format!(
            "`{s}` has no JSON equivalent; quote it to use it as text"
        ));
    }
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let negative = s.starts_with('-');
    if let Some(hex) = s.strip_prefix("0x")
        && let Ok(n) = u64::from_str_radix(hex, 16)
    {
        return Ok(Value::Number(n.into()));
    }
    if let Some(oct) = s.strip_prefix("0o")
        && let Ok(n) = u64::from_str_radix(oct, 8)
    {
        return Ok(Value::Number(n.into()));
    }
    if !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit()) {
        if negative {
            if let Ok(n) = s.parse::<i64>() {
                return Ok(Value::Number(n.into()));
            }
        } else if let Ok(n) = body.parse::<u64>() {
            return Ok(Value::Number(n.into()));
        }
    }
    if looks_like_float(body)
        && let Some(n) = s.parse::<f64>().ok().and_then(Number::from_f64)
    {
        return Ok(Value::Number(n));
    }
    Ok(Value::String(s.to_string()))
}

fn looks_like_float(b: &str) -> bool {
    let (mantissa, exp) = match b.find(['e', 'E']) {
        Some(i) => (&b[..i], Some(&b[i + 1..])),
        None => (b, None),
    };
    let digits_dot = !mantissa.is_empty()
        && mantissa.bytes().any(|c| c.is_ascii_digit())
        && mantissa.bytes().all(|c| c.is_ascii_digit() || c == b'.')
        && mantissa.bytes().filter(|c| *c == b'.').count() <= 1;
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit())
    });
    digits_dot && exp_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolves_core_schema_and_maps_keys() {
        let text = "a: 1\nb: [x, \"2\", 2.5, true, ~]\nc:\n  d: -3\n  e: 'yes'\n";
        let (v, map) = parse(text).unwrap();
        assert_eq!(
            v,
            json!({"a": 1, "b": ["x", "2", 2.5, true, null], "c": {"d": -3, "e": "yes"}})
        );
        let s = map.get("/c/d").unwrap();
        assert_eq!((s.line, s.column), (4, 3));
    }

    #[test]
    fn rejects_duplicates_with_line_and_column() {
        let e = parse("nodes:\n  a: {}\n  a: {}\n").unwrap_err();
        match e {
            LoadError::DuplicateKey {
                key,
                parent,
                span,
                first,
            } => {
                assert_eq!((key.as_str(), parent.as_str()), ("a", "/nodes"));
                assert_eq!((span.line, span.column, first.line), (3, 3, 2));
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn reports_syntax_errors_and_multiple_documents() {
        assert!(matches!(
            parse("a: [1, 2\n").unwrap_err(),
            LoadError::Syntax { .. }
        ));
        assert!(matches!(
            parse("a: 1\n---\nb: 2\n").unwrap_err(),
            LoadError::Syntax { .. }
        ));
        assert!(matches!(
            parse("a: .inf\n").unwrap_err(),
            LoadError::Syntax { .. }
        ));
        assert!(matches!(parse("").unwrap_err(), LoadError::Syntax { .. }));
    }

    /// The document: each of 30 anchors is a sequence of ten aliases to the one
    /// before, 10^30 nodes in all.
    fn alias_bomb(lines: usize) -> String {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..lines {
            let items = vec![format!("*a{}", i - 1); 10].join(", ");
            text.push_str(&format!("a{i}: &a{i} [{items}]\n"));
        }
        text
    }

    fn limit(text: &str) -> (String, Span) {
        match parse(text).unwrap_err() {
            LoadError::Limit { message, span } => (message, span),
            e => panic!("expected a limit error, got {e}"),
        }
    }

    #[test]
    fn an_alias_bomb_stops_at_the_alias_that_crosses_the_limit() {
        let (message, span) = limit(&alias_bomb(30));
        assert!(
            message.contains(&format!("more than {MAX_ALIAS_NODES} nodes")),
            "{message}"
        );
        // Lines 2-5 copy 110 + 1,110 + 11,110 + 111,110 = 123,440 nodes; each alias on
        // line 6 copies 111,111 (`a4` and all under it), so the 8th crosses a million.
        assert_eq!(span.line, 6, "{message}");
        assert_eq!(span.column, 10 + 7 * 5, "{message}");
        assert!(message.contains("total to 1012328"), "{message}");
        let shown = LoadError::Limit { message, span }.to_string();
        assert!(
            shown.starts_with("line 6, column 45: aliases expand"),
            "{shown}"
        );
    }

    #[test]
    fn aliases_under_the_limit_load_and_count_every_copy() {
        let mut b = alias_bomb(5);
        b.push_str("last: *a4\n");
        let (v, _) = parse(&b).expect("123,440 + 111,111 copied nodes are allowed");
        assert_eq!(v["last"].as_array().map(Vec::len), Some(10));
        assert_eq!(v["last"][9][9][9][9][9], "x");
    }

    #[test]
    fn aliases_copying_too_much_text_are_refused() {
        // 64 aliases to a 1 MiB string copy exactly the limit; the 65th is one too many.
        let big = "y".repeat(MAX_ALIAS_BYTES / 64);
        let text = format!("s: &s {big}\nl: [{}\n  *s]\n", "*s, ".repeat(64));
        let (message, span) = limit(&text);
        assert!(
            message.contains(&format!("more than {MAX_ALIAS_BYTES} bytes")),
            "{message}"
        );
        assert_eq!((span.line, span.column), (3, 3));
    }

    #[test]
    fn nesting_is_bounded_in_block_and_flow_style() {
        let block = |levels: usize| -> String {
            (0..levels)
                .map(|i| format!("{}- \n", "  ".repeat(i)))
                .collect()
        };
        let flow = |levels: usize| format!("{}{}\n", "[".repeat(levels), "]".repeat(levels));
        // Block style: the last `- ` opens a sequence but holds a null, so n lines nest n.
        assert!(parse(&block(MAX_DEPTH)).is_ok());
        assert!(parse(&flow(MAX_DEPTH)).is_ok());
        for levels in [MAX_DEPTH + 1, 1_000] {
            let (message, span) = limit(&block(levels));
            assert!(
                message.contains(&format!("deeper than {MAX_DEPTH} levels")),
                "{message}"
            );
            assert_eq!((span.line, span.column), (MAX_DEPTH + 1, 2 * MAX_DEPTH + 1));
        }
        // Our own check meets the first bracket too many; the scanner, which reads flow
        // collections ahead, stops at its 256th and says the same.
        for (levels, column) in [(MAX_DEPTH + 1, MAX_DEPTH + 1), (100_000, 256)] {
            let (message, span) = limit(&flow(levels));
            assert!(
                message.contains(&format!("deeper than {MAX_DEPTH} levels")),
                "{message}"
            );
            assert_eq!((span.line, span.column), (1, column));
        }
    }

    #[test]
    fn nesting_through_aliases_is_bounded_too() {
        // Each anchor wraps the one before in one more sequence: no line nests deeply, but
        // the value does.
        let mut text = String::from("a0: &a0 [x]\n");
        for i in 1..MAX_DEPTH + 5 {
            text.push_str(&format!("a{i}: &a{i} [*a{}]\n", i - 1));
        }
        let (message, span) = limit(&text);
        assert!(message.contains("deeper than"), "{message}");
        // `a{i}` (on line i + 1) holds i + 1 levels under the root mapping: `a{MAX_DEPTH - 1}`
        // is the first too deep.
        assert_eq!(span.line, MAX_DEPTH, "{message}");
    }

    #[test]
    fn anchors_and_aliases_copy_values() {
        let (v, _) = parse("a: &x {k: 1}\nb: *x\n").unwrap();
        assert_eq!(v["b"], json!({"k": 1}));
    }
}
