//! The trace with each step's values (`GET /api/runs/{id}/trace?values=true`): what each
//! node run wrote, from its kept `step` event, and what it read, rebuilt from the run's
//! input (its `run_started` event) and the writes before it, seen through the node's
//! `reads`, level by level through subgraph frames. Nothing is stored per step for it but
//! the writes and the slice changes outside node outputs (ADR 0043, ADR 0048).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::contracts::{SYSTEM_SLICE, WorkflowDocument};
use crate::runtime::{EventKind, RunEvent, SliceChange, TraceItem, TraceKind};

/// Why a node run's input is not shown, when it is not.
const NO_INPUT_EVENTS: &str = "the run's events do not hold its input (a run started \
     before events carried values, or one settled by its dependencies first)";
const NO_INPUT_SUBGRAPH: &str = "inside a subgraph of a run whose events predate \
     `changes`: its frame's slices are not rebuilt";
const NO_INPUT_AFTER: &str = "after a call, a resume, a fork, an advisor, a team or a \
     clarify of a run whose events predate `changes`: not rebuilt";
const NO_INPUT_FRAME: &str = "the events do not hold the frame this node ran in";
const NO_WRITES: &str = "the run's events do not hold this node run's writes";

/// The trace of a run (`items`, as stored) with a `values` object on each node run's
/// item (a dispatch, handoff, advisor or team turn): `{"input"}` (the slices of its
/// `reads` at its level as they were when it ran; a team turn's team input, which is not
/// a slice, left out) and, for a dispatch or handoff, `{"writes"}` (the slices its output
/// wrote; advisors and team turns write none themselves: `{}`), or
/// `"input_unknown"`/`"writes_unknown"` saying why one is not known. `events` are the
/// run's kept events, oldest first; `document` gives each node's `reads`.
///
/// The input is rebuilt by replaying the run's slices level by level (the root, then one
/// state per open frame): the input from `run_started`, each node run's `writes` right
/// after its item, and each other change (`changes` of the `step` events: a resume's
/// answer, a frame opened, a return's writes, a join, a team's summary) from the item it
/// is seen from. A run whose `run_started` lacks `changes: true` (stored before changes
/// were recorded) is rebuilt only up to the first item whose changes were not recorded.
pub fn trace_with_values(
    items: &[TraceItem],
    events: &[RunEvent],
    document: &WorkflowDocument,
) -> Value {
    let mut input: Option<Map<String, Value>> = None;
    let mut complete = false;
    let mut writes: HashMap<usize, &Value> = HashMap::new();
    let mut changes: Vec<&SliceChange> = Vec::new();
    for event in events {
        match &event.kind {
            EventKind::RunStarted {
                input: Some(Value::Object(i)),
                changes: c,
                ..
            } => {
                input = Some(i.clone());
                complete = *c;
            }
            EventKind::Step {
                index,
                writes: w,
                changes: c,
                ..
            } => {
                if let Some(w) = w {
                    writes.insert(*index, w);
                }
                changes.extend(c);
            }
            _ => {}
        }
    }
    // Each change in the order made; `at` never falls, but sort (stably) to be sure.
    changes.sort_by_key(|c| c.at());
    let mut changes = changes.into_iter().peekable();
    // The slices of each level as they stand before each item, while they can be
    // rebuilt: the root first, then each open frame's.
    let mut levels = input.map(|i| vec![i]).ok_or(NO_INPUT_EVENTS);
    let out: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let mut value = serde_json::to_value(item).unwrap_or(Value::Null);
            if let Ok(levels) = &mut levels {
                while let Some(c) = changes.next_if(|c| c.at() <= index) {
                    apply(levels, c);
                }
            }
            if !complete && breaks_rebuild(item) && levels.is_ok() {
                levels = Err(if item.depth > 0 {
                    NO_INPUT_SUBGRAPH
                } else {
                    NO_INPUT_AFTER
                });
            }
            let Some(node) = item.ran_node().filter(|_| reads_input(item)) else {
                return value;
            };
            let level = usize::from(item.depth);
            let mut values = Map::new();
            match levels.as_ref().map(|l| l.get(level)) {
                Ok(Some(slices)) => {
                    let reads = document
                        .nodes
                        .get(&**node)
                        .map(|n| n.reads.as_slice())
                        .unwrap_or_default();
                    let team_slice = team_input_slice(item, document);
                    let seen: Map<String, Value> = reads
                        .iter()
                        .filter(|r| r.as_str() != SYSTEM_SLICE && Some(r.as_str()) != team_slice)
                        .filter_map(|r| slices.get(r).map(|v| (r.clone(), v.clone())))
                        .collect();
                    values.insert("input".into(), Value::Object(seen));
                }
                Ok(None) => {
                    values.insert("input_unknown".into(), json!(NO_INPUT_FRAME));
                }
                Err(why) => {
                    values.insert("input_unknown".into(), json!(why));
                }
            }
            if writes_here(item) {
                match writes.get(&index) {
                    Some(w) => {
                        if let (Ok(levels), Value::Object(w)) = (&mut levels, w) {
                            levels.truncate(level + 1);
                            if let Some(slices) = levels.get_mut(level) {
                                for (k, v) in w {
                                    slices.insert(k.clone(), v.clone());
                                }
                            }
                        }
                        values.insert("writes".into(), (*w).clone());
                    }
                    None => {
                        values.insert("writes_unknown".into(), json!(NO_WRITES));
                        // A write not known: the slices after it cannot be rebuilt.
                        if levels.is_ok() {
                            levels = Err(NO_INPUT_EVENTS);
                        }
                    }
                }
            } else {
                values.insert("writes".into(), Value::Object(Map::new()));
            }
            if let Value::Object(fields) = &mut value {
                fields.insert("values".into(), Value::Object(values));
            }
            value
        })
        .collect();
    Value::Array(out)
}

/// Applies one recorded change to the levels: a slice replaced at its level, or a frame
/// opened (the levels deeper than its own closed first).
fn apply(levels: &mut Vec<Map<String, Value>>, change: &SliceChange) {
    match change {
        SliceChange::Set {
            level,
            slice,
            value,
            ..
        } => {
            levels.truncate(level + 1);
            if let Some(slices) = levels.get_mut(*level) {
                slices.insert(slice.clone(), value.clone());
            }
        }
        SliceChange::Frame { level, state, .. } => {
            levels.truncate(*level);
            if levels.len() == *level {
                levels.push(state.clone());
            }
        }
    }
}

/// True for an item that records a node run reading its input: a dispatch, a handoff,
/// an advisor or a team turn (ends and guard stops name a node that did not run).
fn reads_input(item: &TraceItem) -> bool {
    matches!(
        item.kind,
        TraceKind::Dispatch | TraceKind::Handoff | TraceKind::Advisor | TraceKind::TeamTurn
    )
}

/// True for a node run whose writes go through the node's output (a dispatch or a
/// handoff); advisors and team turns write no slice themselves.
fn writes_here(item: &TraceItem) -> bool {
    matches!(item.kind, TraceKind::Dispatch | TraceKind::Handoff)
}

/// The team slice of a team turn's team (`source`): its members and lead read their team
/// input there, which is given to each turn, not read from the slices.
fn team_input_slice<'d>(item: &TraceItem, document: &'d WorkflowDocument) -> Option<&'d str> {
    if item.kind != TraceKind::TeamTurn {
        return None;
    }
    let team = document
        .nodes
        .get(&**item.source.as_ref()?)?
        .team
        .as_ref()?;
    Some(team.slice.as_str())
}

/// True for an item after which, in a run whose events predate `changes`, the root
/// slices are no longer the input plus the node writes seen so far: anything inside a
/// subgraph, and the transitions that write slices outside a node's output.
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
