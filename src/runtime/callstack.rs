//! The call stack: one frame per open subgraph call, each owning its child state.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One open subgraph call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// The subgraph called.
    pub subgraph_id: Arc<str>,
    /// Its depth (1 for a subgraph the root calls).
    pub depth: u32,
    /// Steps taken when it was entered (the call counts as that step).
    pub entry_step: u32,
    /// The supervisor that called it (decides again on return).
    pub caller: Arc<str>,
    /// Frame-local data: `input` holds the validated input (the boundary's `reads`
    /// slices as an object).
    pub locals: Map<String, Value>,
    /// The child state: the boundary's `reads` and `writes` slices, copied on call. The
    /// parent sees none of its changes until the subgraph returns.
    pub state: Value,
}

/// A frame that was open when the run stopped; its writes were not merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UncommittedFrame {
    /// The subgraph.
    pub subgraph_id: Arc<str>,
    /// Its depth.
    pub depth: u32,
    /// Steps taken when it was entered.
    pub entry_step: u32,
    /// The child state it had built, discarded.
    pub state: Value,
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
pub(crate) fn pick(state: &Value, names: &[String]) -> Map<String, Value> {
    let mut out = Map::with_capacity(names.len());
    if let Value::Object(m) = state {
        for n in names {
            if let Some(v) = m.get(n) {
                out.insert(n.clone(), v.clone());
            }
        }
    }
    out
}

/// Copies the slices `names` present in `child` into `parent` (each replaced whole).
pub(crate) fn commit(parent: &mut Value, child: &Value, names: &[String]) {
    if let (Value::Object(p), Value::Object(c)) = (parent, child) {
        for n in names {
            if let Some(v) = c.get(n) {
                p.insert(n.clone(), v.clone());
            }
        }
    }
}

/// Writes one slice into a state object.
pub(crate) fn put(state: &mut Value, slice: &str, value: Value) {
    if let Value::Object(m) = state {
        m.insert(slice.to_string(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pick_and_commit_touch_only_the_named_slices() {
        let parent_before = json!({"a": 1, "b": 2, "c": 3});
        let names = vec!["a".to_string(), "z".to_string()];
        assert_eq!(Value::Object(pick(&parent_before, &names)), json!({"a": 1}));
        let mut parent = parent_before.clone();
        commit(&mut parent, &json!({"a": 10, "c": 30}), &names);
        assert_eq!(parent, json!({"a": 10, "b": 2, "c": 3}));
    }
}
