//! Trigger conditions: small predicates over the state, evaluated by rule-based
//! supervisors.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A predicate over the state. Paths are JSON Pointers whose first segment is a slice.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `true` / `false`: always or never holds.
    Const(bool),
    /// `{"path": P, "exists": b}`: P resolves to a non-null value (or not, when `b` is false).
    Exists {
        /// JSON Pointer into the state.
        path: String,
        /// Whether the value must exist.
        exists: bool,
    },
    /// `{"path": P, "equals": V}`: the value at P equals V (numbers compare by value).
    Equals {
        /// JSON Pointer into the state.
        path: String,
        /// The expected value.
        value: Value,
    },
    /// `{"path": P, "in": [V...]}`: the value at P equals one of the values.
    In {
        /// JSON Pointer into the state.
        path: String,
        /// The accepted values.
        values: Vec<Value>,
    },
    /// `{"all": [C...]}`: every condition holds (true when empty).
    All(Vec<Condition>),
    /// `{"any": [C...]}`: at least one condition holds (false when empty).
    Any(Vec<Condition>),
    /// `{"not": C}`: the condition does not hold.
    Not(Box<Condition>),
}

impl Default for Condition {
    fn default() -> Self {
        Condition::Const(true)
    }
}

impl Condition {
    /// `{"path": P, "exists": true}`.
    pub fn exists(path: impl Into<String>) -> Self {
        Condition::Exists {
            path: path.into(),
            exists: true,
        }
    }
    /// `{"path": P, "exists": false}`.
    pub fn missing(path: impl Into<String>) -> Self {
        Condition::Exists {
            path: path.into(),
            exists: false,
        }
    }
    /// `{"path": P, "equals": V}`.
    pub fn equals(path: impl Into<String>, value: Value) -> Self {
        Condition::Equals {
            path: path.into(),
            value,
        }
    }
    /// `{"path": P, "in": [V...]}`.
    pub fn one_of(path: impl Into<String>, values: Vec<Value>) -> Self {
        Condition::In {
            path: path.into(),
            values,
        }
    }

    /// Evaluates the condition against a state object. Compiles the condition on every
    /// call (the executor compiles each trigger once and keeps it); both evaluate through
    /// the same code.
    ///
    /// Complexity: O(size of the condition) pointer look-ups, plus compiling it.
    pub fn eval(&self, state: &Value) -> bool {
        super::compiled_condition::CompiledCondition::new(self).eval(state)
    }

    /// Every path the condition reads, with the JSON Pointer (relative to the condition)
    /// where it is written. Used by the validator.
    pub fn paths(&self) -> Vec<(&str, String)> {
        let mut out = Vec::new();
        self.collect_paths(String::new(), &mut out);
        out
    }

    fn collect_paths<'a>(&'a self, at: String, out: &mut Vec<(&'a str, String)>) {
        match self {
            Condition::Const(_) => {}
            Condition::Exists { path, .. }
            | Condition::Equals { path, .. }
            | Condition::In { path, .. } => out.push((path.as_str(), format!("{at}/path"))),
            Condition::All(cs) => {
                for (i, c) in cs.iter().enumerate() {
                    c.collect_paths(format!("{at}/all/{i}"), out);
                }
            }
            Condition::Any(cs) => {
                for (i, c) in cs.iter().enumerate() {
                    c.collect_paths(format!("{at}/any/{i}"), out);
                }
            }
            Condition::Not(c) => c.collect_paths(format!("{at}/not"), out),
        }
    }
}

/// The slice a state path starts with (`/request/topic` -> `request`, `/a~1b` -> `a/b`);
/// `None` when the path is not a pointer or its first segment is empty. Borrows unless the
/// segment needs unescaping.
pub fn slice_of_path(path: &str) -> Option<Cow<'_, str>> {
    let rest = path.strip_prefix('/')?;
    let seg = rest.split('/').next().unwrap_or(rest);
    if seg.is_empty() {
        return None;
    }
    Some(if seg.contains('~') {
        Cow::Owned(seg.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(seg)
    })
}

impl Condition {
    /// Calls `f` with every path the condition reads, in order, without allocating (the
    /// hot-path form of [`Condition::paths`]).
    pub fn visit_paths<'c>(&'c self, f: &mut impl FnMut(&'c str)) {
        match self {
            Condition::Const(_) => {}
            Condition::Exists { path, .. }
            | Condition::Equals { path, .. }
            | Condition::In { path, .. } => f(path),
            Condition::All(cs) | Condition::Any(cs) => {
                for c in cs {
                    c.visit_paths(f);
                }
            }
            Condition::Not(c) => c.visit_paths(f),
        }
    }

    /// The slices this condition reads (first segment of each path).
    pub fn slices(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.visit_paths(&mut |p| out.extend(slice_of_path(p).map(Cow::into_owned)));
        out
    }
}

/// `exists`: the value found at the path is there and not null (or, with `exists: false`,
/// it is absent or null).
pub(crate) fn exists_holds(found: Option<&Value>, exists: bool) -> bool {
    found.is_some_and(|v| !v.is_null()) == exists
}

/// `equals`: the value found at the path equals `value` ([`json_equal`]).
pub(crate) fn equals_holds(found: Option<&Value>, value: &Value) -> bool {
    found.is_some_and(|v| json_equal(v, value))
}

/// `in`: the value found at the path equals one of `values` ([`json_equal`]).
pub(crate) fn in_holds(found: Option<&Value>, values: &[Value]) -> bool {
    found.is_some_and(|v| values.iter().any(|c| json_equal(v, c)))
}

/// JSON equality where numbers compare by numeric value (`1 == 1.0`).
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        // The common leaves of a trigger compared here, without a call to `Value`'s `==`.
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        _ => a == b,
    }
}

impl Serialize for Condition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl Condition {
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        match self {
            Condition::Const(b) => return Value::Bool(*b),
            Condition::Exists { path, exists } => {
                m.insert("path".into(), Value::String(path.clone()));
                m.insert("exists".into(), Value::Bool(*exists));
            }
            Condition::Equals { path, value } => {
                m.insert("path".into(), Value::String(path.clone()));
                m.insert("equals".into(), value.clone());
            }
            Condition::In { path, values } => {
                m.insert("path".into(), Value::String(path.clone()));
                m.insert("in".into(), Value::Array(values.clone()));
            }
            Condition::All(cs) => {
                m.insert("all".into(), cs.iter().map(Self::to_value).collect());
            }
            Condition::Any(cs) => {
                m.insert("any".into(), cs.iter().map(Self::to_value).collect());
            }
            Condition::Not(c) => {
                m.insert("not".into(), c.to_value());
            }
        }
        Value::Object(m)
    }
}

/// The object form of a condition as written, before its shape is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCondition {
    path: Option<String>,
    exists: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    equals: Option<Value>,
    #[serde(rename = "in")]
    in_: Option<Vec<Value>>,
    all: Option<Vec<Condition>>,
    any: Option<Vec<Condition>>,
    not: Option<Box<Condition>>,
}

/// Keeps `"equals": null` distinct from an absent `equals`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Buffer as a JSON value first so a malformed object reports its own problem
        // rather than "did not match any variant".
        let v = Value::deserialize(d)?;
        match v {
            Value::Bool(b) => Ok(Condition::Const(b)),
            Value::Object(_) => {
                let raw: RawCondition = serde_json::from_value(v).map_err(D::Error::custom)?;
                raw.into_condition().map_err(D::Error::custom)
            }
            other => Err(D::Error::custom(format!(
                "a condition must be true, false or an object, found {}",
                json_kind(&other)
            ))),
        }
    }
}

/// "a string", "an object"...: what kind of JSON value `v` is, for error messages.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl RawCondition {
    fn into_condition(self) -> Result<Condition, String> {
        let tests = [
            self.exists.is_some(),
            self.equals.is_some(),
            self.in_.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        let combinators = [self.all.is_some(), self.any.is_some(), self.not.is_some()]
            .iter()
            .filter(|b| **b)
            .count();
        match (self.path, tests, combinators) {
            (Some(path), 1, 0) => {
                if !path.starts_with('/') {
                    return Err(format!(
                        "condition path `{path}` must be a JSON Pointer starting with `/`"
                    ));
                }
                Ok(if let Some(exists) = self.exists {
                    Condition::Exists { path, exists }
                } else if let Some(value) = self.equals {
                    Condition::Equals { path, value }
                } else {
                    Condition::In {
                        path,
                        values: self.in_.unwrap_or_default(),
                    }
                })
            }
            (None, 0, 1) => Ok(if let Some(all) = self.all {
                Condition::All(all)
            } else if let Some(any) = self.any {
                Condition::Any(any)
            } else {
                Condition::Not(self.not.expect("exactly one combinator is present"))
            }),
            (Some(_), 0, _) => {
                Err("a condition with `path` needs one of `exists`, `equals`, `in`".into())
            }
            (None, 1.., _) => Err("`exists`, `equals` and `in` need a `path`".into()),
            _ => Err(
                "a condition takes exactly one of: {path, exists}, {path, equals}, \
                 {path, in}, all, any, not"
                    .into(),
            ),
        }
    }
}

impl JsonSchema for Condition {
    fn schema_name() -> Cow<'static, str> {
        "Condition".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let me = generator.subschema_for::<Condition>();
        json_schema!({
            "description": "A predicate over the state. Paths are JSON Pointers whose first segment is a declared slice.",
            "anyOf": [
                {"type": "boolean"},
                {"type": "object", "additionalProperties": false, "required": ["path", "exists"],
                 "properties": {"path": {"type": "string", "pattern": "^/"}, "exists": {"type": "boolean"}}},
                {"type": "object", "additionalProperties": false, "required": ["path", "equals"],
                 "properties": {"path": {"type": "string", "pattern": "^/"}, "equals": true}},
                {"type": "object", "additionalProperties": false, "required": ["path", "in"],
                 "properties": {"path": {"type": "string", "pattern": "^/"}, "in": {"type": "array"}}},
                {"type": "object", "additionalProperties": false, "required": ["all"],
                 "properties": {"all": {"type": "array", "items": me.clone()}}},
                {"type": "object", "additionalProperties": false, "required": ["any"],
                 "properties": {"any": {"type": "array", "items": me.clone()}}},
                {"type": "object", "additionalProperties": false, "required": ["not"],
                 "properties": {"not": me}}
            ]
        })
    }
}

/// One rule under which a node or subgraph wants to run: when `when` holds, it is a
/// candidate with `priority` (higher wins; ties go to the earlier `allow` entry).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// Higher wins.
    #[serde(default)]
    pub priority: i64,
    /// The condition (default: `true`).
    #[serde(default)]
    pub when: Condition,
}

impl Trigger {
    /// A trigger with a priority and a condition.
    pub fn new(priority: i64, when: Condition) -> Self {
        Self { priority, when }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn evaluates_every_form() {
        let s = json!({"request": {"topic": "fashion", "n": 1}, "empty": null});
        assert!(Condition::exists("/request/topic").eval(&s));
        assert!(Condition::missing("/empty").eval(&s));
        assert!(Condition::missing("/nope").eval(&s));
        assert!(Condition::equals("/request/n", json!(1.0)).eval(&s));
        assert!(!Condition::equals("/request/topic", json!("food")).eval(&s));
        assert!(Condition::one_of("/request/topic", vec![json!("a"), json!("fashion")]).eval(&s));
        assert!(Condition::All(vec![]).eval(&s));
        assert!(!Condition::Any(vec![]).eval(&s));
        assert!(Condition::Not(Box::new(Condition::Const(false))).eval(&s));
    }

    #[test]
    fn round_trips_and_rejects_bad_shapes() {
        for text in [
            r#"true"#,
            r#"{"path":"/a","exists":false}"#,
            r#"{"path":"/a","equals":null}"#,
            r#"{"path":"/a","in":[1,"x"]}"#,
            r#"{"all":[{"any":[true]},{"not":{"path":"/b","exists":true}}]}"#,
        ] {
            let c: Condition = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&c).unwrap(), text);
        }
        for bad in [
            r#"{"path":"/a"}"#,
            r#"{"path":"a","exists":true}"#,
            r#"{"path":"/a","exists":true,"equals":1}"#,
            r#"{"all":[],"any":[]}"#,
            r#"{"exists":true}"#,
            r#"{"path":"/a","exist":true}"#,
            r#"3"#,
        ] {
            assert!(serde_json::from_str::<Condition>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lists_paths_with_locations() {
        let c: Condition = serde_json::from_str(
            r#"{"all":[{"path":"/a/x","exists":true},{"not":{"path":"/b","in":[]}}]}"#,
        )
        .unwrap();
        assert_eq!(
            c.paths(),
            vec![
                ("/a/x", "/all/0/path".to_string()),
                ("/b", "/all/1/not/path".to_string())
            ]
        );
        assert_eq!(c.slices(), vec!["a", "b"]);
    }

    #[test]
    fn slice_of_path_unescapes() {
        assert_eq!(slice_of_path("/a~1b/c").as_deref(), Some("a/b"));
        assert_eq!(slice_of_path("//x"), None);
        assert_eq!(slice_of_path(""), None);
    }
}
