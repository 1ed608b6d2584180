//! Each trace item stored once (format 8, ADR 0053): a checkpoint's delta is written
//! without the trace items it appends, which its `step` events (kept in the same
//! statement, one chunk) carry anyway; a load takes them back from those events.
//!
//! The delta's text is [`StoredDelta`]'s: the delta's fields as they are, but for `trace`,
//! left out, and `trace_in_events`, the number of items left to the events. A delta
//! written before format 8 carries its items and no `trace_in_events`: read as it is.

use serde::{Deserialize, Serialize};

use super::delta::{ControlDelta, FrameDelta, SessionDelta, StepDelta};
use super::map_delta::MapDelta;
use crate::runtime::{Frame, KeptChild, TraceItem, UncommittedFrame, Usage};

/// A [`StepDelta`] as the store writes it: every field borrowed and written as the
/// delta's own serialization writes it, but its trace items, counted in
/// `trace_in_events` instead (no copy of the delta is made). Read back, it is the delta
/// with an empty `trace` and `trace_in_events` set, which [`put_back_trace`] completes.
#[derive(Serialize)]
pub(crate) struct StoredDelta<'a> {
    #[serde(skip_serializing_if = "MapDelta::is_empty")]
    root: &'a MapDelta<serde_json::Value>,
    frames_kept: usize,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    frames: &'a [FrameDelta],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pushed: &'a [Frame],
    steps: u32,
    #[serde(skip_serializing_if = "MapDelta::is_empty")]
    visits: &'a MapDelta<u32>,
    #[serde(skip_serializing_if = "MapDelta::is_empty")]
    entries: &'a MapDelta<u32>,
    trace_from: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_in_events: Option<usize>,
    control: &'a ControlDelta,
    #[serde(skip_serializing_if = "Option::is_none")]
    uncommitted: Option<&'a Vec<UncommittedFrame>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage_total: Option<&'a Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kept: Option<&'a Vec<KeptChild>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    sessions: &'a [SessionDelta],
}

impl<'a> StoredDelta<'a> {
    /// `delta` as stored, its trace items left to the checkpoint's `step` events.
    pub(crate) fn of(delta: &'a StepDelta) -> Self {
        // Every field named: a field added to `StepDelta` fails to compile here.
        let StepDelta {
            root,
            frames_kept,
            frames,
            pushed,
            steps,
            visits,
            entries,
            trace_from,
            trace: _,
            trace_in_events: _,
            control,
            uncommitted,
            started_at_ms,
            usage_total,
            kept,
            sessions,
        } = delta;
        Self {
            root,
            frames_kept: *frames_kept,
            frames,
            pushed,
            steps: *steps,
            visits,
            entries,
            trace_from: *trace_from,
            trace_in_events: Some(delta.trace_appended()),
            control,
            uncommitted: uncommitted.as_ref(),
            started_at_ms: *started_at_ms,
            usage_total: usage_total.as_ref(),
            kept: kept.as_ref(),
            sessions,
        }
    }
}

/// What a load reads of a `step` event: its trace index and item (the rest skipped).
#[derive(Deserialize)]
struct StepItem {
    index: usize,
    item: TraceItem,
}

/// Puts back the trace items of `delta` (checkpoint `seq`, stored without them) from
/// `chunk`, the text of the events that checkpoint kept (one JSON text a line): its
/// `step` events, in order, at the delta's `trace_from` on. A delta that carries its
/// items (written before format 8) is left as it is. Refused, saying why, when the
/// chunk is missing or its `step` events are not the items the delta counts.
pub(crate) fn put_back_trace(delta: &mut StepDelta, chunk: Option<&str>) -> Result<(), String> {
    let Some(count) = delta.trace_in_events.take() else {
        return Ok(());
    };
    if count == 0 {
        return Ok(());
    }
    let chunk = chunk.ok_or_else(|| {
        format!("its {count} trace items are kept in its events, which are missing")
    })?;
    delta.trace.reserve(count);
    for line in chunk.split('\n') {
        if !is_step(line) {
            continue;
        }
        let step: StepItem =
            serde_json::from_str(line).map_err(|e| format!("a step event: {e}"))?;
        let expected = delta.trace_from + delta.trace.len();
        if step.index != expected {
            return Err(format!(
                "its events carry trace item {}, the delta's next is {expected}",
                step.index
            ));
        }
        delta.trace.push(step.item);
    }
    if delta.trace.len() != count {
        return Err(format!(
            "its events carry {} trace items, the delta counts {count}",
            delta.trace.len()
        ));
    }
    Ok(())
}

/// Whether an event's text is a `step` event's: every event's text starts with
/// `{"seq":N,"run_id":"...","event":"NAME"` (`RunEvent::write_json`), so the first
/// `"event"` member is its kind (a `"` inside a string is escaped, never bare).
fn is_step(line: &str) -> bool {
    const KEY: &[u8] = br#","event":""#;
    let bytes = line.as_bytes();
    bytes
        .windows(KEY.len())
        .position(|w| w == KEY)
        .is_some_and(|at| bytes[at + KEY.len()..].starts_with(br#"step""#))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{EventKind, RunEvent, RunId, TraceKind};

    /// A delta of a running run appending `items` trace items at 4.
    fn delta(items: u32) -> StepDelta {
        let trace: Vec<TraceItem> = (0..items)
            .map(|i| {
                let mut item = TraceItem::new(TraceKind::Dispatch, 5 + i, 0);
                item.target = Some(format!("node-{i}").into());
                item
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "root": {"set": {"n": 1}},
            "frames_kept": 0,
            "steps": 5 + items,
            "trace_from": 4,
            "trace": trace,
            "control": {"status": "running"}
        }))
        .expect("a delta")
    }

    /// The chunk a checkpoint keeps for `delta`: its `step` events then a `checkpoint`.
    fn chunk(delta: &StepDelta) -> String {
        let run_id = RunId::new();
        let mut kinds: Vec<EventKind> = delta
            .trace
            .iter()
            .enumerate()
            .map(|(i, item)| EventKind::Step {
                index: delta.trace_from + i,
                item: item.clone(),
                writes: Some(std::sync::Arc::new(serde_json::json!({"n": 1}))),
                changes: Vec::new(),
            })
            .collect();
        kinds.push(EventKind::Checkpoint {
            checkpoint: 3,
            steps: delta.steps,
            trace_len: delta.trace_from + delta.trace.len(),
        });
        let lines: Vec<String> = kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| {
                RunEvent {
                    seq: 20 + i as u64,
                    run_id,
                    at_ms: 1,
                    kind,
                    dropped: 0,
                }
                .to_json_string()
            })
            .collect();
        lines.join("\n")
    }

    /// Proves a delta is stored without its trace items (as `StepDelta`'s own
    /// serialization of the delta with an empty trace and the count writes it), and that
    /// its checkpoint's `step` events give them back exactly.
    #[test]
    fn a_delta_stored_without_its_trace_gets_it_back_from_its_events() {
        let original = delta(3);
        let text = serde_json::to_string(&StoredDelta::of(&original)).expect("serializes");
        let mut stored: StepDelta = serde_json::from_str(&text).expect("reads back");
        assert!(stored.trace.is_empty(), "{text}");
        assert_eq!(stored.trace_in_events, Some(3));
        assert_eq!(text, serde_json::to_string(&stored).expect("serializes"));
        put_back_trace(&mut stored, Some(&chunk(&original))).expect("puts back");
        assert_eq!(stored, original);
        // A delta written before format 8 carries its items: left as it is.
        let mut old = original.clone();
        put_back_trace(&mut old, None).expect("nothing to put back");
        assert_eq!(old, original);
    }

    /// Proves a stored delta whose events are missing, or do not carry the items it counts
    /// (fewer, or at other indexes), is refused, saying why.
    #[test]
    fn missing_or_mismatched_events_are_refused() {
        let original = delta(2);
        let text = serde_json::to_string(&StoredDelta::of(&original)).expect("serializes");
        let stored: StepDelta = serde_json::from_str(&text).expect("reads back");
        let err = put_back_trace(&mut stored.clone(), None).unwrap_err();
        assert!(err.contains("missing"), "{err}");
        let fewer = chunk(&delta(1));
        let err = put_back_trace(&mut stored.clone(), Some(&fewer)).unwrap_err();
        assert!(err.contains("carry 1 trace items"), "{err}");
        let mut shifted = original.clone();
        shifted.trace_from = 9;
        let err = put_back_trace(&mut stored.clone(), Some(&chunk(&shifted))).unwrap_err();
        assert!(err.contains("trace item 9"), "{err}");
    }
}
