//! The trace with each step's values (`GET /api/runs/{id}/trace?values=true`): what each
//! node run wrote, from its kept `step` event, and what it read, rebuilt from the run's
//! input (its `run_started` event) and the writes before it, seen through the node's
//! `reads`. Nothing is stored per step for it but the writes (ADR 0043).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::contracts::{SYSTEM_SLICE, WorkflowDocument};
use crate::runtime::{EventKind, RunEvent, TraceItem, TraceKind};

/// Why a node run's input is not shown, when it is not.
const NO_INPUT_EVENTS: &str = "the run's events do not hold its input (a run started \
     before events carried values, or one settled by its dependencies first)";
const NO_INPUT_SUBGRAPH: &str = "inside a subgraph: its frame's slices are not rebuilt";
const NO_INPUT_AFTER: &str = "after a call, a resume, a fork, an advisor, a team or a \
     clarify, whose writes are not in the events: not rebuilt";
const NO_WRITES: &str = "the run's events do not hold this node run's writes";

/// The trace of a run (`items`, as stored) with a `values` object on each node run's
/// item: `{"writes"}` (the slices it wrote) and `{"input"}` (the slices of its `reads` as
/// they were before it ran), or `"input_unknown"`/`"writes_unknown"` saying why one is
/// not known. `events` are the run's kept events, oldest first; `document` gives each
/// node's `reads`.
pub fn trace_with_values(
    items: &[TraceItem],
    events: &[RunEvent],
    document: &WorkflowDocument,
) -> Value {
    let mut input: Option<Map<String, Value>> = None;
    let mut writes: HashMap<usize, &Value> = HashMap::new();
    for event in events {
        match &event.kind {
            EventKind::RunStarted {
                input: Some(Value::Object(i)),
                ..
            } => input = Some(i.clone()),
            EventKind::Step {
                index,
                writes: Some(w),
                ..
            } => {
                writes.insert(*index, w);
            }
            _ => {}
        }
    }
    // The root slices as they stand before each item, while they can be rebuilt.
    let mut state = input.ok_or(NO_INPUT_EVENTS);
    let out: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let mut value = serde_json::to_value(item).unwrap_or(Value::Null);
            if breaks_rebuild(item) && state.is_ok() {
                state = Err(if item.depth > 0 {
                    NO_INPUT_SUBGRAPH
                } else {
                    NO_INPUT_AFTER
                });
            }
            let Some(node) = item.ran_node().filter(|_| ran_here(item)) else {
                return value;
            };
            let mut values = Map::new();
            match &state {
                Ok(slices) => {
                    let reads = document
                        .nodes
                        .get(&**node)
                        .map(|n| n.reads.as_slice())
                        .unwrap_or_default();
                    let seen: Map<String, Value> = reads
                        .iter()
                        .filter(|r| r.as_str() != SYSTEM_SLICE)
                        .filter_map(|r| slices.get(r).map(|v| (r.clone(), v.clone())))
                        .collect();
                    values.insert("input".into(), Value::Object(seen));
                }
                Err(why) => {
                    values.insert("input_unknown".into(), json!(why));
                }
            }
            match writes.get(&index) {
                Some(w) => {
                    if let (Ok(slices), Value::Object(w)) = (&mut state, w) {
                        for (k, v) in w {
                            slices.insert(k.clone(), v.clone());
                        }
                    }
                    values.insert("writes".into(), (*w).clone());
                }
                None => {
                    values.insert("writes_unknown".into(), json!(NO_WRITES));
                    // A write not known: the slices after it cannot be rebuilt.
                    if state.is_ok() {
                        state = Err(NO_INPUT_EVENTS);
                    }
                }
            }
            if let Value::Object(fields) = &mut value {
                fields.insert("values".into(), Value::Object(values));
            }
            value
        })
        .collect();
    Value::Array(out)
}

/// True for a node run whose writes go through the node's output (a dispatch or a
/// handoff); advisors and team turns write elsewhere, ends and guard stops name a node
/// that did not write.
fn ran_here(item: &TraceItem) -> bool {
    matches!(item.kind, TraceKind::Dispatch | TraceKind::Handoff)
}

/// True for an item after which the root slices are no longer the input plus the node
/// writes seen so far: anything inside a subgraph, and the transitions that write slices
/// outside a node's output.
fn breaks_rebuild(item: &TraceItem) -> bool {
    item.depth > 0
        || matches!(
            item.kind,
            TraceKind::Call
                | TraceKind::Resume
                | TraceKind::Fork
                | TraceKind::Advisor
                | TraceKind::Join
                | TraceKind::Clarify
                | TraceKind::TeamCycle
                | TraceKind::TeamTurn
        )
}
