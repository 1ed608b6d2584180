//! The call stack: one frame per open subgraph call, each owning its child state.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::changes::SliceWriter;
use super::slices::State;
use super::trace::Chain;

/// One open subgraph call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Frame {
    /// The subgraph called.
    pub subgraph_id: Arc<str>,
    /// Its depth (1 for a subgraph the root calls).
    pub depth: u32,
    /// Steps taken when it was entered (the call counts as that step).
    pub entry_step: u32,
    /// The supervisor that called it (decides again on return).
    pub caller: Arc<str>,
    /// The child state: the boundary's `reads` and `writes` slices, copied on call. The
    /// parent sees none of its changes until the subgraph returns.
    pub state: State,
    /// A router's destination subgraph whose router (or an outer one) has a `handoff`:
    /// what runs when it returns instead of the caller deciding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owed: Option<Owed>,
}

/// The routers' handoffs owed after a routed subgraph returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Owed {
    /// Where the subgraph stood in its router's chain.
    pub chain: Chain,
    /// Routers whose own `handoff` is owed, innermost last.
    pub routers: Vec<Arc<str>>,
}

/// The final child state of a `chat` subgraph that returned, kept at the level that
/// called it so that level's supervisor may `clarify` it. A later call of the same
/// subgraph from the same level replaces it; it is dropped when that level ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptChild {
    /// The depth of the calling level (0 at the root).
    pub depth: u32,
    /// The subgraph that returned.
    pub subgraph_id: Arc<str>,
    /// Its child state as it returned.
    pub state: State,
    /// The last session of its entrypoint's policy agent (an index in the run's
    /// sessions), which a clarification continues (brief 10.3); `None` when the
    /// entrypoint's policy is not an agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u32>,
}

/// A frame that was open when the run stopped; its writes were not merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UncommittedFrame {
    /// The subgraph.
    pub subgraph_id: Arc<str>,
    /// Its depth.
    pub depth: u32,
    /// Steps taken when it was entered.
    pub entry_step: u32,
    /// The child state it had built, discarded.
    pub state: State,
}

impl From<Frame> for UncommittedFrame {
    fn from(f: Frame) -> Self {
        Self {
            subgraph_id: f.subgraph_id,
            depth: f.depth,
            entry_step: f.entry_step,
            state: f.state,
        }
    }
}

/// The slices `names` present in `state`, as an object (in `names` order).
pub(crate) fn pick(state: &State, names: &[String]) -> State {
    pick_with_room(state, names, 0)
}

/// [`pick`], with room for `extra` more entries.
pub(crate) fn pick_with_room(state: &State, names: &[String], extra: usize) -> State {
    let mut out = State::with_capacity(names.len().saturating_add(extra));
    for n in names {
        if let Some(v) = state.get(n) {
            out.insert(n.clone(), v.clone());
        }
    }
    out
}

/// Copies the slices `names` present in `child` into `parent` (each replaced whole).
pub(crate) fn commit(parent: &mut SliceWriter<'_>, child: &State, names: &[String]) {
    for n in names {
        if let Some(v) = child.get(n) {
            parent.insert(n.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::data::changes::Changes;
    use serde_json::{Value, json};

    fn obj(v: Value) -> State {
        match v {
            Value::Object(m) => m,
            _ => State::new(),
        }
    }

    #[test]
    fn pick_and_commit_touch_only_the_named_slices() {
        let parent_before = obj(json!({"a": 1, "b": 2, "c": 3}));
        let names = vec!["a".to_string(), "z".to_string()];
        assert_eq!(pick(&parent_before, &names), obj(json!({"a": 1})));
        let mut parent = parent_before.clone();
        let mut changes = Changes::default();
        let mut writer = SliceWriter {
            state: &mut parent,
            changes: &mut changes,
            level: 0,
            values: true,
        };
        commit(&mut writer, &obj(json!({"a": 10, "c": 30})), &names);
        assert_eq!(parent, obj(json!({"a": 10, "b": 2, "c": 3})));
    }
}
