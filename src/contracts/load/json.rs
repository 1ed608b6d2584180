//! Strict JSON to `Value` + `SourceMap` (no comments, no trailing commas).
//!
//! Two parsers, one answer. A document is first read by serde_json's parser with
//! duplicate keys refused ([`fast`]), which is all a valid document needs; its
//! [`SourceMap`] is filled from the text only if a diagnostic asks for a line. Anything
//! that parser refuses is parsed again by the span-keeping parser ([`parse_mapped`]),
//! whose error (with line, column and, for a duplicate key, both places) is the one
//! reported; it is also the one that decides, so the two can never disagree on what loads.
//!
//! Both refuse nesting deeper than [`MAX_DEPTH`]: the fast parser as it builds the value,
//! the span-keeping one (which then gives the error) in one pass over the bytes before
//! parsing ([`screen`]), together with raw control characters in strings.

use std::collections::HashMap;
use std::fmt;

use jsonc_parser::ast;
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::{LoadError, MAX_DEPTH, duplicate_key, too_deep};
use crate::contracts::pointer::{push_index, push_key};
use crate::contracts::source_map::{LineIndex, SourceMap, Span};

fn strict() -> ParseOptions {
    ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

/// Parses strict JSON, rejecting duplicate keys; the source map is built lazily.
///
/// Complexity: O(n) in the length of the text (the map, when built, O(n) again).
pub(super) fn parse(text: &str) -> Result<(Value, SourceMap), LoadError> {
    match fast(text) {
        Some(value) => Ok((value, SourceMap::lazy(text, spans))),
        None => parse_mapped(text),
    }
}

/// The span table of a text [`fast`] accepted (empty if the mapped parser refuses it,
/// which it does not: it accepts all that `fast` does).
fn spans(text: &str) -> HashMap<String, Span> {
    parse_mapped(text)
        .map(|(_, map)| map.into_spans())
        .unwrap_or_default()
}

/// serde_json's parser with duplicate keys refused: `None` for anything that is not one
/// strict JSON value without duplicates (and for nesting past serde_json's depth limit).
fn fast(text: &str) -> Option<Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Unique { depth: 0 }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

/// Deserializes a `Value` as serde_json's own does, but fails on a repeated key and on
/// nesting past [`MAX_DEPTH`].
#[derive(Clone, Copy)]
struct Unique {
    /// Arrays and objects around the value.
    depth: usize,
}

impl Unique {
    /// The seed for the elements of an array or object read with this one.
    fn inner<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom("nested too deeply"));
        }
        Ok(Unique {
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Unique {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value without duplicate keys")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        Number::from_f64(n)
            .map(Value::Number)
            .ok_or_else(|| E::custom("not a finite number"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element_seed(inner)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut out = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom("duplicate key"));
            }
            let v = access.next_value_seed(inner)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Parses strict JSON with jsonc-parser, recording every key's and element's span.
fn parse_mapped(text: &str) -> Result<(Value, SourceMap), LoadError> {
    let lines = LineIndex::new(text);
    screen(text, &lines)?;
    let parsed = parse_to_ast(text, &CollectOptions::default(), &strict()).map_err(|e| {
        let r = e.range();
        LoadError::Syntax {
            message: e.kind().to_string(),
            span: lines.span(r.start, r.end),
        }
    })?;
    let Some(root) = parsed.value else {
        return Err(LoadError::Syntax {
            message: "the document is empty".into(),
            span: lines.span(0, 0),
        });
    };
    let mut map = SourceMap::new(text);
    let v = convert(&root, &mut String::new(), &lines, &mut map)?;
    Ok((v, map))
}

/// One pass over the bytes: nesting past [`MAX_DEPTH`] and raw control characters inside
/// strings (which strict JSON forbids and jsonc-parser lets through) are errors at their
/// line and column. Anything else malformed is left to the parser.
///
/// Complexity: O(n) in the length of the text, no allocation.
fn screen(text: &str, lines: &LineIndex<'_>) -> Result<(), LoadError> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &b) in text.as_bytes().iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                0..0x20 => {
                    return Err(LoadError::Syntax {
                        message: format!(
                            "control character U+{b:04X} inside a string; JSON requires it written as \\u{b:04x}"
                        ),
                        span: lines.span(i, i + 1),
                    });
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(too_deep(lines.span(i, i + 1)));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn convert(
    node: &ast::Value<'_>,
    at: &mut String,
    lines: &LineIndex<'_>,
    map: &mut SourceMap,
) -> Result<Value, LoadError> {
    Ok(match node {
        ast::Value::NullKeyword(_) => Value::Null,
        ast::Value::BooleanLit(b) => Value::Bool(b.value),
        ast::Value::StringLit(s) => Value::String(s.value.to_string()),
        ast::Value::NumberLit(n) => {
            let num: Number = n.value.parse().map_err(|_| LoadError::Syntax {
                message: format!("number `{}` is out of range", n.value),
                span: lines.span(n.range.start, n.range.end),
            })?;
            Value::Number(num)
        }
        ast::Value::Array(a) => {
            let mut out = Vec::with_capacity(a.elements.len());
            let len = at.len();
            for (i, el) in a.elements.iter().enumerate() {
                push_index(at, i);
                let r = range_of(el);
                map.insert(at.clone(), lines.span(r.start, r.end.min(r.start + 1)));
                out.push(convert(el, at, lines, map)?);
                at.truncate(len);
            }
            Value::Array(out)
        }
        ast::Value::Object(o) => {
            let mut out = Map::with_capacity(o.properties.len());
            let len = at.len();
            for prop in &o.properties {
                let key = prop.name.as_str();
                let nr = match &prop.name {
                    ast::ObjectPropName::String(s) => s.range,
                    ast::ObjectPropName::Word(w) => w.range,
                };
                let span = lines.span(nr.start, nr.end);
                push_key(at, key);
                if out.contains_key(key) {
                    at.truncate(len);
                    return Err(duplicate_key(map, at, key, span));
                }
                map.insert(at.clone(), span);
                let v = convert(&prop.value, at, lines, map)?;
                at.truncate(len);
                out.insert(key.to_string(), v);
            }
            Value::Object(out)
        }
    })
}

fn range_of(v: &ast::Value<'_>) -> jsonc_parser::common::Range {
    match v {
        ast::Value::StringLit(x) => x.range,
        ast::Value::NumberLit(x) => x.range,
        ast::Value::BooleanLit(x) => x.range,
        ast::Value::Object(x) => x.range,
        ast::Value::Array(x) => x.range,
        ast::Value::NullKeyword(x) => x.range,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_pointers_to_keys() {
        let text = "{\n  \"a\": {\"b/c\": [1, true]},\n  \"d\": null\n}";
        let (v, map) = parse(text).unwrap();
        assert_eq!(v["a"]["b/c"][1], Value::Bool(true));
        let s = map.get("/a/b~1c").unwrap();
        assert_eq!((s.line, s.column), (2, 9));
        let s = map.get("/a/b~1c/1").unwrap();
        assert_eq!((s.line, s.column), (2, 20));
        assert_eq!(map.get("/d").unwrap().line, 3);
    }

    #[test]
    fn rejects_duplicates_anywhere_with_both_places() {
        let text = "{\"x\": {\"set\": {\"a\": 1,\n \"a\": 2}}}";
        match parse(text).unwrap_err() {
            LoadError::DuplicateKey {
                key,
                parent,
                span,
                first,
            } => {
                assert_eq!(key, "a");
                assert_eq!(parent, "/x/set");
                assert_eq!((span.line, span.column), (2, 2));
                assert_eq!((first.line, first.column), (1, 16));
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn is_strict_json() {
        for bad in [
            "{a: 1}",
            "{\"a\": 1,}",
            "// c\n{}",
            "{\"a\": 'x'}",
            "",
            "{\"a\": 1} 2",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(matches!(e, LoadError::Syntax { .. }), "{bad}: {e}");
        }
    }

    /// Both parsers' answers: `Some(value)` when the text loads.
    fn both(text: &str) -> (Option<Value>, Option<Value>) {
        (fast(text), parse_mapped(text).ok().map(|(v, _)| v))
    }

    #[test]
    fn the_fast_parser_agrees_with_the_mapped_one() {
        for text in [
            r#"{"a": [1, -2, 3.5, 1e3, -0, 18446744073709551615, 18446744073709551616]}"#,
            r#"{"s": "\u00e9\ud83d\ude00 \" \\ \/ \b\f\n\r\t", "k\u0041": null}"#,
            r#"{"": {"": []}, "x": [{}, [], [[true, false]]]}"#,
            "  \n{\"a\":1}\n\t ",
            "[]",
            "\"just a string\"",
        ] {
            let (f, m) = both(text);
            assert!(f.is_some(), "fast refused {text}");
            assert_eq!(f, m, "{text}");
        }
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"x": [{"b": 1, "c": {"d": 1, "d": 1}}]}"#,
            r#"{"a": 1,}"#,
            r#"{"a": 1} {"b": 2}"#,
            r#"{"a": 1e400}"#,
            r#"{"a": "\ud800"}"#,
            "{\"a\": \"tab\there\"}",
            "",
            "   ",
            "{\"a\": 01}",
            "\u{feff}{}",
        ] {
            let (f, m) = both(text);
            assert!(f.is_none(), "fast accepted {text:?}");
            // Whatever the fast parser refuses, `parse` answers as the mapped one does.
            assert_eq!(parse(text).ok().map(|(v, _)| v), m, "{text:?}");
        }
    }

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn both_parsers_take_nesting_up_to_the_limit() {
        let text = nested(MAX_DEPTH);
        assert!(
            fast(&text).is_some(),
            "serde_json's own limit is 127 levels"
        );
        let (v, map) = parse_mapped(&text).expect("the mapped parser takes it");
        assert!(v.is_array());
        assert!(map.get(&"/0".repeat(MAX_DEPTH - 1)).is_some());
        let objects = format!("{}1{}", "{\"a\":".repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
        assert!(fast(&objects).is_some());
        assert!(parse_mapped(&objects).is_ok());
        // One level more: serde_json alone would take it, but neither parser does.
        let deeper = nested(MAX_DEPTH + 1);
        assert!(serde_json::from_str::<Value>(&deeper).is_ok());
        assert!(fast(&deeper).is_none());
        assert!(parse_mapped(&deeper).is_err());
    }

    #[test]
    fn nesting_past_the_limit_is_refused_where_it_happens() {
        for depth in [MAX_DEPTH + 1, 300, 600, 100_000] {
            let text = format!(
                "{{\"a\":\n{}{}}}",
                "[".repeat(depth - 1),
                "]".repeat(depth - 1)
            );
            assert!(fast(&text).is_none());
            match parse(&text).unwrap_err() {
                LoadError::Limit { message, span } => {
                    assert!(
                        message.contains(&format!("deeper than {MAX_DEPTH} levels")),
                        "{message}"
                    );
                    // The root `{` is level 1 on line 1; the `[` one level too deep stands
                    // on line 2 after MAX_DEPTH - 1 others.
                    assert_eq!((span.line, span.column), (2, MAX_DEPTH), "{depth}");
                }
                e => panic!("{depth}: {e}"),
            }
        }
    }

    #[test]
    fn brackets_and_escapes_inside_strings_do_not_count_as_nesting() {
        let text = format!(
            r#"{{"a": "{}\"{}", "b": [1]}}"#,
            "[".repeat(500),
            "{".repeat(500)
        );
        let (v, _) = parse_mapped(&text).expect("strings do not nest");
        assert_eq!(v["b"][0], 1);
    }

    #[test]
    fn raw_control_characters_in_strings_are_refused() {
        for c in ['\u{1}', '\u{1f}', '\n'] {
            let text = format!("{{\n  \"a\": \"x{c}y\"}}");
            assert!(fast(&text).is_none());
            match parse(&text).unwrap_err() {
                LoadError::Syntax { message, span } => {
                    assert!(
                        message.contains(&format!("U+{:04X}", c as u32)),
                        "{message}"
                    );
                    assert_eq!((span.line, span.column), (2, 10));
                }
                e => panic!("{e}"),
            }
        }
    }

    #[test]
    fn a_lazy_map_is_the_eager_one() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/workflows/fashion.json"
        ))
        .expect("shipped workflow");
        let (_, lazy) = parse(&text).expect("valid");
        let (_, eager) = parse_mapped(&text).expect("valid");
        assert!(eager.len() > 50, "{}", eager.len());
        assert_eq!(lazy.into_spans(), eager.into_spans());
    }

    mod agree {
        use super::*;
        use proptest::prelude::*;

        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(|n| Value::Number(n.into())),
                any::<u64>().prop_map(|n| Value::Number(n.into())),
                any::<f64>()
                    .prop_filter_map("finite", Number::from_f64)
                    .prop_map(Value::Number),
                "\\PC{0,6}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 48, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::vec(("[a-c~/]{0,2}", inner), 0..6)
                        .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// For all JSON texts, well-formed or cut, with duplicate keys or without: the
            /// fast parser accepts only what the mapped one accepts, and then the same value.
            #[test]
            fn on_any_text(v in value(), pretty in any::<bool>(), edit in 0u8..4, at in any::<prop::sample::Index>()) {
                let mut text = if pretty {
                    serde_json::to_string_pretty(&v).expect("serializes")
                } else {
                    serde_json::to_string(&v).expect("serializes")
                };
                match edit {
                    // Repeat the first member of the first object: a duplicate key.
                    1 => if let Some(i) = text.find("{\"") {
                        let member_end = text[i..].find([',', '}']).map(|e| i + e);
                        if let Some(e) = member_end {
                            let member = text[i + 1..e].to_string();
                            text.insert_str(i + 1, &format!("{member},"));
                        }
                    },
                    // Cut the text at a char boundary.
                    2 => {
                        let cut = at.index(text.len() + 1);
                        let cut = (0..=cut).rev().find(|c| text.is_char_boundary(*c)).unwrap_or(0);
                        text.truncate(cut);
                    }
                    // Trailing comma before the last closer.
                    3 => if let Some(i) = text.rfind([']', '}']) { text.insert(i, ','); },
                    _ => {}
                }
                let (f, m) = both(&text);
                if f.is_some() {
                    prop_assert_eq!(&f, &m, "{}", text);
                }
                prop_assert_eq!(parse(&text).ok().map(|(v, _)| v), m);
                if edit == 0 {
                    prop_assert_eq!(f, Some(v));
                }
            }
        }
    }
}
