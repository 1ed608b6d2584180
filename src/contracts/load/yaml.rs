//! YAML (1.2, core schema) to `Value` + `SourceMap`, rejecting duplicate keys.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, StrInput};
use serde_json::{Map, Number, Value};

use super::{LoadError, duplicate_key};
use crate::contracts::pointer::{SourceMap, Span, push_index, push_key};

pub(super) fn parse(text: &str) -> Result<(Value, SourceMap), LoadError> {
    let mut b = Builder {
        events: Parser::new_from_str(text),
        anchors: HashMap::new(),
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

struct Builder<'a> {
    events: Parser<'a, StrInput<'a>>,
    anchors: HashMap<usize, Value>,
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
        LoadError::Syntax {
            message: e.info().to_string(),
            span: Span {
                line: m.line().max(1),
                column: m.col() + 1,
                offset,
                len: 1,
            },
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
        let v = self.node(first, &mut String::new())?;
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

    fn node(&mut self, (ev, sp): Ev<'a>, at: &mut String) -> Result<Value, LoadError> {
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
                if anchor > 0 {
                    self.anchors.insert(anchor, v.clone());
                }
                Ok(v)
            }
            Event::SequenceStart(anchor, _) => {
                let mut out = Vec::new();
                let len = at.len();
                loop {
                    let item = self.next()?;
                    if matches!(item.0, Event::SequenceEnd) {
                        break;
                    }
                    push_index(at, out.len());
                    let s = self.span(item.1);
                    self.map.insert(at.clone(), s);
                    out.push(self.node(item, at)?);
                    at.truncate(len);
                }
                let v = Value::Array(out);
                if anchor > 0 {
                    self.anchors.insert(anchor, v.clone());
                }
                Ok(v)
            }
            Event::MappingStart(anchor, _) => {
                let mut out = Map::new();
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
                    let v = self.node(val, at)?;
                    at.truncate(len);
                    out.insert(key, v);
                }
                let v = Value::Object(out);
                if anchor > 0 {
                    self.anchors.insert(anchor, v.clone());
                }
                Ok(v)
            }
            Event::Alias(id) => self
                .anchors
                .get(&id)
                .cloned()
                .ok_or_else(|| LoadError::Syntax {
                    message: "alias to an unknown anchor".into(),
                    span: self.span(sp),
                }),
            _ => Err(LoadError::Syntax {
                message: "unexpected YAML structure".into(),
                span: self.span(sp),
            }),
        }
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

    #[test]
    fn anchors_and_aliases_copy_values() {
        let (v, _) = parse("a: &x {k: 1}\nb: *x\n").unwrap();
        assert_eq!(v["b"], json!({"k": 1}));
    }
}
