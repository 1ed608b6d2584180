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
    let mut next = 0;
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
                if *index < next {
                    // The trace was rewound (a reopened run tries its failed step again):
                    // what the items from `index` on wrote is gone with them.
                    writes.retain(|at, _| at < index);
                    changes.retain(|ch| ch.at() <= *index);
                }
                next = index + 1;
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
                        .get(node)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{RunId, SliceChange};

    fn doc() -> WorkflowDocument {
        WorkflowDocument::from_value(json!({
            "workflow": "w", "slices": {"clarification": {}, "a": {}}, "entry": "root",
            "supervisors": {"root": {"allow": ["n"], "default": {"stop_global": {}}}},
            "nodes": {"n": {"supervisor": "root", "reads": ["a", "clarification"],
                            "writes": ["a"], "run": {"set": {"a": 1}}}}
        }))
        .expect("a document")
    }

    fn item(kind: TraceKind) -> TraceItem {
        let mut it = TraceItem::new(kind, 0, 0);
        it.target = Some("n".into());
        it
    }

    fn event(seq: u64, kind: EventKind) -> RunEvent {
        RunEvent {
            seq,
            run_id: RunId::new(),
            at_ms: 0,
            kind,
            dropped: 0,
        }
    }

    /// Items: dispatch `n` (writes a=1), resume (the answer seen from item 2), dispatch
    /// `n` again. `changes` says whether `run_started` has `changes: true`.
    fn run(changes: bool) -> (Vec<TraceItem>, Vec<RunEvent>) {
        let items = vec![
            item(TraceKind::Dispatch),
            item(TraceKind::Resume),
            item(TraceKind::Dispatch),
        ];
        let answer = SliceChange::Set {
            at: 2,
            level: 0,
            slice: "clarification".into(),
            value: json!({"answer": "yes"}),
        };
        let events = vec![
            event(
                1,
                EventKind::RunStarted {
                    workflow: "w".into(),
                    input: Some(json!({"a": 0})),
                    changes,
                },
            ),
            event(
                2,
                EventKind::Step {
                    index: 0,
                    item: items[0].clone(),
                    writes: Some(std::sync::Arc::new(json!({"a": 1}))),
                    changes: vec![],
                },
            ),
            event(
                3,
                EventKind::Step {
                    index: 1,
                    item: items[1].clone(),
                    writes: None,
                    changes: if changes { vec![answer] } else { vec![] },
                },
            ),
            event(
                4,
                EventKind::Step {
                    index: 2,
                    item: items[2].clone(),
                    writes: Some(std::sync::Arc::new(json!({"a": 2}))),
                    changes: vec![],
                },
            ),
        ];
        (items, events)
    }

    /// Proves the answer a resume wrote is in the next node run's input when the events
    /// carry changes, and that a run whose events predate them says `input_unknown`
    /// after the resume instead of showing an input without the answer.
    #[test]
    fn an_answer_is_seen_after_the_resume_and_old_runs_say_unknown() {
        let (items, events) = run(true);
        let out = trace_with_values(&items, &events, &doc());
        assert_eq!(out[0]["values"]["input"], json!({"a": 0}));
        assert_eq!(
            out[2]["values"],
            json!({"input": {"a": 1, "clarification": {"answer": "yes"}}, "writes": {"a": 2}})
        );
        let (items, events) = run(false);
        let out = trace_with_values(&items, &events, &doc());
        assert_eq!(out[0]["values"]["input"], json!({"a": 0}));
        assert_eq!(out[2]["values"]["input_unknown"], json!(NO_INPUT_AFTER));
    }

    /// Proves a rewound trace (a reopened run's retried step, its index kept again)
    /// forgets what the discarded items wrote: the retried node's input is the state
    /// before the failed attempt.
    #[test]
    fn a_rewound_trace_forgets_the_discarded_writes() {
        let (items, mut events) = run(true);
        // Item 2 first failed after writing (a=9, and a change seen from 3), then the
        // run was reopened before it and the step was tried again.
        let failed = SliceChange::Set {
            at: 3,
            level: 0,
            slice: "a".into(),
            value: json!(8),
        };
        events.insert(
            3,
            event(
                4,
                EventKind::Step {
                    index: 2,
                    item: items[2].clone(),
                    writes: Some(std::sync::Arc::new(json!({"a": 9}))),
                    changes: vec![failed],
                },
            ),
        );
        let out = trace_with_values(&items, &events, &doc());
        assert_eq!(
            out[2]["values"],
            json!({"input": {"a": 1, "clarification": {"answer": "yes"}}, "writes": {"a": 2}})
        );
    }
}
