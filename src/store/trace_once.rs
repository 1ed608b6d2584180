//! Each trace item stored once (format 8, ADR 0053): a checkpoint's delta is written
//! without the trace items it appends, which its `step` events (kept in the same
//! statement, one chunk) carry anyway; a load takes them back from those events.
//!
//! The delta's text is [`StoredDelta`]'s: the delta's fields as they are, but for `trace`,
//! left out, and `trace_in_events`, the number of items left to the events. A delta
//! written before format 8 carries its items and no `trace_in_events`: read as it is.

use serde::{Deserialize, Serialize};

use super::delta::{ControlDelta, FrameDelta, MapDelta, SessionDelta, StepDelta};
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
            trace,
            trace_in_events,
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
            trace_in_events: Some(trace.len() + trace_in_events.unwrap_or(0)),
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
