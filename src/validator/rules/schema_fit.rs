//! Does one JSON Schema accept every value another allows? The hop-fit proof of handoff
//! chains: the upstream stage's `output_schema` (what it may write) against the downstream
//! stage's `input_schema` (what it accepts). Sound for the keywords it understands
//! (`type`, `required`, `properties` recursively, `additionalProperties`, `items`, `enum`,
//! `const`); anything else is "cannot decide", never a false error.
//!
//! Complexity: O(size of the two schemas), plus one schema compilation per `enum`/`const`
//! the upstream lists.

use serde_json::{Map, Value};

/// Why the upstream schema is not known to fit: a value it allows that the downstream
/// refuses, or a place the proof cannot decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Misfit {
    /// `at`: the upstream may write `upstream`, the downstream requires `downstream`.
    Counterexample {
        at: String,
        upstream: String,
        downstream: String,
    },
    /// `at`: the downstream's `keyword` is not one the proof understands.
    Undecided { at: String, keyword: String },
}

/// Keywords that say nothing about which values are valid.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];

/// Keywords the proof understands.
const UNDERSTOOD: &[&str] = &[
    "type",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "enum",
    "const",
];

const ALL_TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// Every misfit of `up` (allowed values) against `down` (accepted values) at `at`, the
/// place's JSON Pointer (as the downstream input sees it).
pub(crate) fn fit(up: &Value, down: &Value, at: &str, out: &mut Vec<Misfit>) {
    if down == &Value::Bool(false) {
        if up != &Value::Bool(false) {
            out.push(Misfit::Counterexample {
                at: at.to_string(),
                upstream: "write a value".into(),
                downstream: "nothing there (its schema is `false`)".into(),
            });
        }
        return;
    }
    let Some(down) = constraints(down) else {
        return; // `true` or `{}`: accepts everything.
    };
    let up = match up {
        Value::Bool(false) => return, // allows nothing
        Value::Object(m) => Some(m),
        _ => None, // `true` or anything else: allows every value
    };
    // An upstream that lists its values is decided exactly: each must validate downstream.
    if let Some(values) = up.and_then(listed_values) {
        let Ok(validator) = jsonschema::validator_for(&Value::Object(down.clone())) else {
            return; // an invalid schema is reported by the schema rule
        };
        for v in values {
            if !validator.is_valid(&v) {
                out.push(Misfit::Counterexample {
                    at: at.to_string(),
                    upstream: format!("write the value {v}"),
                    downstream: describe(down),
                });
                return;
            }
        }
        return;
    }
    for key in down.keys() {
        if !UNDERSTOOD.contains(&key.as_str())
            && !ANNOTATIONS.contains(&key.as_str())
            && up.and_then(|u| u.get(key)) != down.get(key)
        {
            out.push(Misfit::Undecided {
                at: at.to_string(),
                keyword: key.clone(),
            });
        }
    }
    let up_types = up.map_or_else(|| ALL_TYPES.to_vec(), types_of);
    if let Some(down_types) = down.get("type").map(|_| types_of(down)) {
        let fits =
            |t: &str| down_types.contains(&t) || (t == "integer" && down_types.contains(&"number"));
        if let Some(t) = up_types.iter().find(|t| !fits(t)) {
            out.push(Misfit::Counterexample {
                at: at.to_string(),
                upstream: format!("write {}", with_article(t)),
                downstream: down_types
                    .iter()
                    .map(|t| with_article(t))
                    .collect::<Vec<_>>()
                    .join(" or "),
            });
            return;
        }
    }
    if down.contains_key("enum") || down.contains_key("const") {
        out.push(Misfit::Counterexample {
            at: at.to_string(),
            upstream: "write values it does not list".into(),
            downstream: describe(down),
        });
        return;
    }
    let empty = Map::new();
    let up_map = up.unwrap_or(&empty);
    if up_types.contains(&"object") {
        fit_object(up_map, down, at, out);
    }
    if up_types.contains(&"array")
        && let Some(items) = down.get("items")
    {
        let up_items = up_map.get("items").unwrap_or(&Value::Bool(true));
        fit(up_items, items, &format!("{at}/0"), out);
    }
}

fn fit_object(up: &Map<String, Value>, down: &Map<String, Value>, at: &str, out: &mut Vec<Misfit>) {
    let up_required = strings(up.get("required"));
    for r in strings(down.get("required")) {
        if !up_required.contains(&r) {
            out.push(Misfit::Counterexample {
                at: format!("{at}/{}", escape(r)),
                upstream: "leave it out".into(),
                downstream: "it".into(),
            });
        }
    }
    let up_props = up.get("properties").and_then(Value::as_object);
    let up_closed = up.get("additionalProperties") == Some(&Value::Bool(false));
    let up_extra = up.get("additionalProperties").unwrap_or(&Value::Bool(true));
    if let Some(props) = down.get("properties").and_then(Value::as_object) {
        for (name, d) in props {
            let u = match up_props.and_then(|p| p.get(name)) {
                Some(u) => u,
                None if up_closed => continue, // the upstream never writes it
                None => up_extra,
            };
            fit(u, d, &format!("{at}/{}", escape(name)), out);
        }
    }
    if down.get("additionalProperties") == Some(&Value::Bool(false)) {
        let allowed = down.get("properties").and_then(Value::as_object);
        let known = |k: &String| allowed.is_some_and(|a| a.contains_key(k));
        if !up_closed {
            out.push(Misfit::Counterexample {
                at: at.to_string(),
                upstream: "write properties it does not declare".into(),
                downstream: "no properties beyond its own (additionalProperties: false)".into(),
            });
        } else if let Some(extra) = up_props.and_then(|p| p.keys().find(|k| !known(k))) {
            out.push(Misfit::Counterexample {
                at: format!("{at}/{}", escape(extra)),
                upstream: "write it".into(),
                downstream: "no such property (additionalProperties: false)".into(),
            });
        }
    }
}

/// The schema as a map of constraints, or `None` when it accepts everything.
fn constraints(schema: &Value) -> Option<&Map<String, Value>> {
    match schema {
        Value::Object(m) if m.keys().any(|k| !ANNOTATIONS.contains(&k.as_str())) => Some(m),
        _ => None,
    }
}

/// The values an `enum` or `const` lists, if the schema lists them.
fn listed_values(schema: &Map<String, Value>) -> Option<Vec<Value>> {
    match (schema.get("const"), schema.get("enum")) {
        (Some(c), _) => Some(vec![c.clone()]),
        (None, Some(Value::Array(values))) => Some(values.clone()),
        _ => None,
    }
}

/// The types a schema allows (all of them without `type`).
fn types_of(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => ALL_TYPES.to_vec(),
    }
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn with_article(t: &str) -> String {
    match t {
        "integer" | "object" | "array" => format!("an {t}"),
        "null" => "null".into(),
        _ => format!("a {t}"),
    }
}

fn describe(down: &Map<String, Value>) -> String {
    match (down.get("const"), down.get("enum")) {
        (Some(c), _) => format!("the value {c}"),
        (None, Some(e)) => format!("one of {e}"),
        _ => "values its input_schema accepts".into(),
    }
}

fn escape(token: &str) -> String {
    crate::contracts::pointer::escape(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn misfits(up: Value, down: Value) -> Vec<Misfit> {
        let mut out = Vec::new();
        fit(&up, &down, "/s", &mut out);
        out
    }

    fn counter(at: &str, up: &str, down: &str) -> Misfit {
        Misfit::Counterexample {
            at: at.into(),
            upstream: up.into(),
            downstream: down.into(),
        }
    }

    #[test]
    fn types_fit_when_every_upstream_type_is_accepted() {
        assert!(misfits(json!({"type": "integer"}), json!({"type": "number"})).is_empty());
        assert!(
            misfits(
                json!({"type": ["string", "null"]}),
                json!({"type": ["null", "string"]})
            )
            .is_empty()
        );
        assert_eq!(
            misfits(
                json!({"type": ["string", "number"]}),
                json!({"type": "string"})
            ),
            vec![counter("/s", "write a number", "a string")]
        );
        // No schema upstream: any value may come.
        assert_eq!(
            misfits(json!(true), json!({"type": "object"})),
            vec![counter("/s", "write null", "an object")]
        );
        assert!(misfits(json!({"type": "string"}), json!({})).is_empty());
        assert!(misfits(json!(false), json!({"type": "string"})).is_empty());
    }

    #[test]
    fn objects_recurse_through_required_and_properties() {
        let up = json!({"type": "object", "required": ["trend"],
                        "properties": {"trend": {"type": "number"}}});
        let down = json!({"type": "object", "required": ["trend", "season"],
                          "properties": {"trend": {"type": "string"}}});
        assert_eq!(
            misfits(up, down),
            vec![
                counter("/s/season", "leave it out", "it"),
                counter("/s/trend", "write a number", "a string"),
            ]
        );
        // A property the upstream closes off never arrives: nothing to check.
        let up = json!({"type": "object", "additionalProperties": false, "properties": {}});
        assert!(misfits(up, json!({"properties": {"x": {"type": "string"}}})).is_empty());
    }

    #[test]
    fn additional_properties_false_downstream_needs_a_closed_upstream() {
        let down = json!({"type": "object", "additionalProperties": false,
                          "properties": {"a": {}}});
        assert_eq!(
            misfits(json!({"type": "object"}), down.clone()),
            vec![counter(
                "/s",
                "write properties it does not declare",
                "no properties beyond its own (additionalProperties: false)"
            )]
        );
        let closed = json!({"type": "object", "additionalProperties": false,
                            "properties": {"a": {}, "b": {}}});
        assert_eq!(misfits(closed, down.clone()).len(), 1);
        let fits =
            json!({"type": "object", "additionalProperties": false, "properties": {"a": {}}});
        assert!(misfits(fits, down).is_empty());
    }

    #[test]
    fn items_enum_and_const() {
        assert_eq!(
            misfits(
                json!({"type": "array", "items": {"type": "integer"}}),
                json!({"type": "array", "items": {"type": "string"}})
            ),
            vec![counter("/s/0", "write an integer", "a string")]
        );
        assert!(
            misfits(
                json!({"enum": ["a", "b"]}),
                json!({"enum": ["b", "a", "c"]})
            )
            .is_empty()
        );
        assert!(
            misfits(
                json!({"const": 3}),
                json!({"type": "integer", "minimum": 1})
            )
            .is_empty()
        );
        assert_eq!(
            misfits(json!({"enum": ["a", "z"]}), json!({"enum": ["a", "b"]})),
            vec![counter(
                "/s",
                "write the value \"z\"",
                "one of [\"a\",\"b\"]"
            )]
        );
        assert_eq!(
            misfits(json!({"type": "string"}), json!({"enum": ["a"]})),
            vec![counter(
                "/s",
                "write values it does not list",
                "one of [\"a\"]"
            )]
        );
    }

    #[test]
    fn what_it_cannot_decide_is_undecided_never_a_counterexample() {
        assert_eq!(
            misfits(
                json!({"type": "string"}),
                json!({"type": "string", "pattern": "^a"})
            ),
            vec![Misfit::Undecided {
                at: "/s".into(),
                keyword: "pattern".into()
            }]
        );
        // The same constraint on both sides is a fit.
        assert!(
            misfits(
                json!({"type": "string", "pattern": "^a"}),
                json!({"type": "string", "pattern": "^a"})
            )
            .is_empty()
        );
        // Annotations constrain nothing.
        assert!(
            misfits(
                json!({"type": "string"}),
                json!({"type": "string", "description": "d", "title": "t"})
            )
            .is_empty()
        );
    }
}
