//! The one condition evaluator: a [`Condition`] with every JSON Pointer parsed once, so a
//! rule-based decision does no string scanning or unescaping. [`Condition::eval`] compiles
//! and evaluates through it; the executor compiles each trigger once.

use serde_json::{Map, Value};

use super::Condition;
use super::condition::{equals_holds, exists_holds, in_holds};
use super::pointer::ParsedPointer;

/// What a condition is evaluated against: any JSON value, or a state (an object of
/// slices) without wrapping it in a value.
pub(crate) trait Root {
    /// The value `pointer` names, if any.
    fn find(&self, pointer: &ParsedPointer) -> Option<&Value>;
}

impl Root for Value {
    fn find(&self, pointer: &ParsedPointer) -> Option<&Value> {
        pointer.resolve(self)
    }
}

impl Root for Map<String, Value> {
    /// The empty pointer (the whole state) names no value here: a state path names at
    /// least a slice (the validator's undeclared-slice rule ensures it for triggers).
    fn find(&self, pointer: &ParsedPointer) -> Option<&Value> {
        pointer.resolve_in(self)
    }
}

/// A [`Condition`] with parsed paths. Evaluates exactly as the condition it came from.
#[derive(Debug, Clone)]
pub(crate) enum CompiledCondition {
    /// Always or never holds.
    Const(bool),
    /// `{"path", "exists"}`.
    Exists(Path, bool),
    /// `{"path", "equals"}`.
    Equals(Path, Value),
    /// `{"path", "in"}`.
    In(Path, Vec<Value>),
    /// `{"all": [...]}`.
    All(Vec<CompiledCondition>),
    /// `{"any": [...]}`.
    Any(Vec<CompiledCondition>),
    /// `{"not": ...}`.
    Not(Box<CompiledCondition>),
}

/// A condition path: parsed, or `None` for a path that is not a JSON Pointer (it never
/// resolves).
type Path = Option<ParsedPointer>;

impl CompiledCondition {
    /// Compiles `condition`.
    pub(crate) fn new(condition: &Condition) -> Self {
        let path = |p: &str| ParsedPointer::parse(p);
        let all = |cs: &[Condition]| cs.iter().map(Self::new).collect();
        match condition {
            Condition::Const(b) => Self::Const(*b),
            Condition::Exists { path: p, exists } => Self::Exists(path(p), *exists),
            Condition::Equals { path: p, value } => Self::Equals(path(p), value.clone()),
            Condition::In { path: p, values } => Self::In(path(p), values.clone()),
            Condition::All(cs) => Self::All(all(cs)),
            Condition::Any(cs) => Self::Any(all(cs)),
            Condition::Not(c) => Self::Not(Box::new(Self::new(c))),
        }
    }

    /// Evaluates the condition against `state`.
    ///
    /// Complexity: O(size of the condition) look-ups, one per path token.
    pub(crate) fn eval<R: Root + ?Sized>(&self, state: &R) -> bool {
        let find = |p: &Path| p.as_ref().and_then(|p| state.find(p));
        match self {
            Self::Const(b) => *b,
            Self::Exists(p, exists) => exists_holds(find(p), *exists),
            // A boolean or a string compared in place (the common trigger), not in a
            // call of `json_equal`.
            Self::Equals(p, value) => match (find(p), value) {
                (Some(Value::Bool(x)), Value::Bool(y)) => x == y,
                (Some(Value::String(x)), Value::String(y)) => x == y,
                (found, value) => equals_holds(found, value),
            },
            Self::In(p, values) => in_holds(find(p), values),
            Self::All(cs) => cs.iter().all(|c| c.eval(state)),
            Self::Any(cs) => cs.iter().any(|c| c.eval(state)),
            Self::Not(c) => !c.eval(state),
        }
    }

    /// Calls `slice` with the first token of each of the condition's paths (the slice it
    /// reads), in order; a path that is not a JSON Pointer reads nothing.
    pub(crate) fn slices_read(&self, slice: &mut impl FnMut(&str)) {
        match self {
            Self::Const(_) => {}
            Self::Exists(p, _) | Self::Equals(p, _) | Self::In(p, _) => {
                if let Some(first) = p.as_ref().and_then(ParsedPointer::first) {
                    slice(first);
                }
            }
            Self::All(cs) | Self::Any(cs) => cs.iter().for_each(|c| c.slices_read(slice)),
            Self::Not(c) => c.slices_read(slice),
        }
    }

    /// True when some path of the condition starts in the `system` slice (a rule table
    /// finds it with its other slices, in one walk).
    #[cfg(test)]
    pub(crate) fn reads_system(&self) -> bool {
        let mut system = false;
        self.slices_read(&mut |slice| system |= slice == crate::contracts::SYSTEM_SLICE);
        system
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::json_equal;
    use serde_json::json;

    /// Conditions of every form, over paths plain, escaped, indexed and malformed.
    fn conditions() -> Vec<Condition> {
        let leaves = [
            Condition::exists("/request/topic"),
            Condition::missing("/empty"),
            Condition::missing("/nope/deeper"),
            Condition::equals("/request/n", json!(1.0)),
            Condition::equals("/request/topic", json!("food")),
            Condition::one_of("/request/topic", vec![json!("a"), json!("fashion")]),
            Condition::equals("/odd~1key/~0", json!(true)),
            Condition::equals("/list/1", json!("b")),
            Condition::exists("/list/01"),
            Condition::exists("no-slash"),
            Condition::equals("/system/steps", json!(3)),
        ];
        let mut all: Vec<Condition> = leaves.to_vec();
        all.push(Condition::Const(true));
        all.push(Condition::All(leaves[..3].to_vec()));
        all.push(Condition::Any(leaves[3..6].to_vec()));
        all.push(Condition::All(vec![]));
        all.push(Condition::Any(vec![]));
        all.push(Condition::Not(Box::new(Condition::Any(
            leaves[6..].to_vec(),
        ))));
        all
    }

    /// An evaluation written independently of ours: serde_json's own pointer walk and the
    /// documented predicates (`docs/spec/workflow-document.md`), spelled out.
    fn oracle(c: &Condition, state: &Value) -> bool {
        let at = |p: &str| {
            if p.is_empty() || !p.starts_with('/') {
                None
            } else {
                state.pointer(p)
            }
        };
        match c {
            Condition::Const(b) => *b,
            Condition::Exists { path, exists } => at(path).is_some_and(|v| !v.is_null()) == *exists,
            Condition::Equals { path, value } => at(path).is_some_and(|v| json_equal(v, value)),
            Condition::In { path, values } => {
                at(path).is_some_and(|v| values.iter().any(|x| json_equal(v, x)))
            }
            Condition::All(cs) => cs.iter().all(|c| oracle(c, state)),
            Condition::Any(cs) => cs.iter().any(|c| oracle(c, state)),
            Condition::Not(c) => !oracle(c, state),
        }
    }

    #[test]
    fn evaluates_like_an_independent_walk_on_values_and_on_state_maps() {
        let states = [
            json!({"request": {"topic": "fashion", "n": 1}, "empty": null,
                   "odd/key": {"~": true}, "list": ["a", "b"], "system": {"steps": 3}}),
            json!({"request": {"topic": "food", "n": 2}, "list": {"1": "b", "01": 0}}),
            json!({}),
        ];
        let mut holds = 0;
        for c in conditions() {
            let compiled = CompiledCondition::new(&c);
            for s in &states {
                let want = oracle(&c, s);
                assert_eq!(compiled.eval(s), want, "{c:?} on {s}");
                assert_eq!(c.eval(s), want, "{c:?} on {s}");
                let map = s.as_object().expect("an object");
                assert_eq!(compiled.eval(map), want, "{c:?} on the map {s}");
                holds += usize::from(want);
            }
        }
        // Both outcomes occur, so the comparison above is not vacuous.
        assert!(holds > 5 && holds < 45, "{holds}");
    }

    #[test]
    fn a_value_that_is_not_an_object_only_answers_constants() {
        let c = Condition::exists("/0");
        assert!(CompiledCondition::new(&c).eval(&json!([1])));
        assert!(Condition::Const(true).eval(&json!([1])));
    }

    #[test]
    fn knows_which_conditions_read_system() {
        let reads: Vec<bool> = conditions()
            .iter()
            .map(|c| CompiledCondition::new(c).reads_system())
            .collect();
        let want: Vec<bool> = conditions()
            .iter()
            .map(|c| {
                c.slices()
                    .iter()
                    .any(|s| s == crate::contracts::SYSTEM_SLICE)
            })
            .collect();
        assert_eq!(reads, want);
        assert!(reads.iter().any(|r| *r) && reads.iter().any(|r| !*r));
    }
}
