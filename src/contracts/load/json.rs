//! Strict JSON to `Value` + `SourceMap` (no comments, no trailing commas).

use jsonc_parser::ast;
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};
use serde_json::{Map, Number, Value};

use super::{LoadError, duplicate_key};
use crate::contracts::pointer::{LineIndex, SourceMap, push_index, push_key};

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

pub(super) fn parse(text: &str) -> Result<(Value, SourceMap), LoadError> {
    let lines = LineIndex::new(text);
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
}
