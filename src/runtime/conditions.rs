//! Trigger conditions compiled for the executor: the same predicates as
//! [`Condition::eval`], with every JSON Pointer parsed once, so a rule-based decision
//! does no string scanning or unescaping.

use serde_json::Value;

use crate::contracts::Condition;
use crate::contracts::SYSTEM_SLICE;
use crate::contracts::condition::{equals_holds, exists_holds, in_holds};
use crate::contracts::pointer::ParsedPointer;

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
/// resolves, as with [`crate::contracts::pointer::lookup`]).
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

    /// Evaluates the condition against a state object, as [`Condition::eval`] does.
    ///
    /// Complexity: O(size of the condition) look-ups, one per path token.
    pub(crate) fn eval(&self, state: &Value) -> bool {
        let find = |p: &Path| p.as_ref().and_then(|p| p.resolve(state));
        match self {
            Self::Const(b) => *b,
            Self::Exists(p, exists) => exists_holds(find(p), *exists),
            Self::Equals(p, value) => equals_holds(find(p), value),
            Self::In(p, values) => in_holds(find(p), values),
            Self::All(cs) => cs.iter().all(|c| c.eval(state)),
            Self::Any(cs) => cs.iter().any(|c| c.eval(state)),
            Self::Not(c) => !c.eval(state),
        }
    }

    /// True when some path of the condition starts in the `system` slice.
    pub(crate) fn reads_system(&self) -> bool {
        match self {
            Self::Const(_) => false,
            Self::Exists(p, _) | Self::Equals(p, _) | Self::In(p, _) => {
                p.as_ref().is_some_and(|p| p.first() == Some(SYSTEM_SLICE))
            }
            Self::All(cs) | Self::Any(cs) => cs.iter().any(Self::reads_system),
            Self::Not(c) => c.reads_system(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn evaluates_as_the_condition_does() {
        let states = [
            json!({"request": {"topic": "fashion", "n": 1}, "empty": null,
                   "odd/key": {"~": true}, "list": ["a", "b"], "system": {"steps": 3}}),
            json!({"request": {"topic": "food", "n": 2}, "list": {"1": "b", "01": 0}}),
            json!({}),
            json!([1, 2]),
        ];
        let mut holds = 0;
        for c in conditions() {
            let compiled = CompiledCondition::new(&c);
            for s in &states {
                assert_eq!(compiled.eval(s), c.eval(s), "{c:?} on {s}");
                holds += usize::from(c.eval(s));
            }
        }
        // Both outcomes occur, so the comparison above is not vacuous.
        assert!(holds > 5 && holds < 60, "{holds}");
    }

    #[test]
    fn knows_which_conditions_read_system() {
        let reads: Vec<bool> = conditions()
            .iter()
            .map(|c| CompiledCondition::new(c).reads_system())
            .collect();
        let want: Vec<bool> = conditions()
            .iter()
            .map(|c| c.slices().iter().any(|s| s == SYSTEM_SLICE))
            .collect();
        assert_eq!(reads, want);
        assert!(reads.iter().any(|r| *r) && reads.iter().any(|r| !*r));
    }
}
