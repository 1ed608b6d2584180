//! Run events (docs/spec/events.md): what a run publishes as it goes, as plain data.
//! [`RunEvent`] is one event (`{"seq", "run_id", "event", "at_ms", ...}` in JSON);
//! [`EventKind`] what happened; [`transition_events`] the events one committed
//! transition of a run makes, the one function both the live stream and the store's
//! history are built with (so the two carry the same events under the same `seq`).

use std::sync::Arc;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::changes::{RecordedInput, SliceChange};
use super::run_id::RunId;
use super::run_state::RunState;
use super::status::{RunStatus, TerminationReason};
use super::trace::TraceItem;

/// One event of a run. `seq` rises by one per run, without gaps, over every event but
/// [`EventKind::ModelDelta`], which carries the `seq` of the event before it (and is never
/// kept). Serialized as `{"seq", "run_id", "event", "at_ms", ...the kind's fields}`, with
/// `"dropped": n` when a subscriber's buffer lost `n` events just before this one.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvent {
    /// The event's number in its run (1 for the first).
    pub seq: u64,
    /// The run.
    pub run_id: RunId,
    /// When it was published (milliseconds since the Unix epoch).
    pub at_ms: u64,
    /// What happened.
    pub kind: EventKind,
    /// Events this subscriber's bounded buffer dropped just before this one (0 in the
    /// store's history and whenever nothing was lost).
    pub dropped: u64,
}

/// What an event says happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum EventKind {
    /// The run took its first step (published before that step's events).
    RunStarted {
        /// The workflow's name.
        workflow: String,
        /// The run's input: its root slices before the first step (`system` left out),
        /// when the run was driven by a store or published on a bus from its start.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
        /// True when the run's `step` events carry `changes` (every slice change outside
        /// node outputs) from the start: its steps' inputs can be rebuilt everywhere.
        /// Absent for runs whose events predate it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        changes: bool,
    },
    /// One trace item was committed.
    Step {
        /// The item's index in the run's trace.
        index: usize,
        /// The item, as in the trace.
        item: TraceItem,
        /// For a node run: the object of slices it wrote (each replaced whole), when the
        /// run's events record values (a store's driver, an executor with an event bus).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        writes: Option<Arc<Value>>,
        /// The slice changes outside node outputs that the transition made around this
        /// item (a resume's answer, a subgraph's frame and its return's writes, a join, a
        /// team's summary, a router's `$message`), each with the trace index it is seen
        /// from; absent when there are none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changes: Vec<SliceChange>,
    },
    /// A chunk of a model's streamed answer (text or tool arguments); never kept.
    ModelDelta {
        /// The node whose model streams.
        node: String,
        /// The conversation turn.
        turn: u32,
        /// The chunk.
        text: String,
        /// For a chunk of a tool call's arguments: the call's index in the reply (absent
        /// for the reply's text).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call: Option<usize>,
    },
    /// What is now durable: the store holds the run up to its checkpoint `checkpoint`
    /// (published only for a run driven through a store).
    Checkpoint {
        /// The store's checkpoint number (`RunInfo::seq`).
        checkpoint: u64,
        /// Steps taken, as committed.
        steps: u32,
        /// The trace's length, as committed (every `step` event below it is durable).
        trace_len: usize,
    },
    /// The run paused, awaiting an answer.
    Paused {
        /// The question.
        question: Option<String>,
    },
    /// The run ended.
    RunEnded {
        /// `completed`, `stopped` or `failed`.
        status: RunStatus,
        /// Why it ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        termination_reason: Option<TerminationReason>,
        /// The error or guard message, when there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// Steps taken.
        steps: u32,
    },
}

impl EventKind {
    /// The event's name, as in the `event` field.
    pub fn name(&self) -> &'static str {
        match self {
            Self::RunStarted { .. } => "run_started",
            Self::Step { .. } => "step",
            Self::ModelDelta { .. } => "model_delta",
            Self::Checkpoint { .. } => "checkpoint",
            Self::Paused { .. } => "paused",
            Self::RunEnded { .. } => "run_ended",
        }
    }

    /// True for the kinds kept with the run (all but `model_delta`).
    pub fn is_kept(&self) -> bool {
        !matches!(self, Self::ModelDelta { .. })
    }

    /// True for `run_ended`.
    pub fn is_end(&self) -> bool {
        matches!(self, Self::RunEnded { .. })
    }
}

impl RunEvent {
    /// Its JSON form.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("an event is plain data")
    }

    /// Its JSON text: the same bytes as `serde_json::to_string(self)`, written in one pass
    /// (the kind is serialized once, straight to text, not through a [`Value`]): what the
    /// store keeps of every event, so a `step` event's trace item costs one serialization.
    pub fn to_json_string(&self) -> String {
        let mut out = Vec::new();
        self.write_json(&mut out);
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }
}

impl Serialize for RunEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Object(mut fields) =
            serde_json::to_value(&self.kind).map_err(serde::ser::Error::custom)?
        else {
            return Err(serde::ser::Error::custom("an event kind is an object"));
        };
        let name = fields.shift_remove("event");
        let mut map = serializer.serialize_map(Some(fields.len() + 5))?;
        map.serialize_entry("seq", &self.seq)?;
        map.serialize_entry("run_id", &self.run_id)?;
        map.serialize_entry("event", &name)?;
        map.serialize_entry("at_ms", &self.at_ms)?;
        for (k, v) in &fields {
            map.serialize_entry(k, v)?;
        }
        if self.dropped > 0 {
            map.serialize_entry("dropped", &self.dropped)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RunEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut fields = Map::<String, Value>::deserialize(deserializer)?;
        let mut take = |key: &str| {
            fields
                .remove(key)
                .ok_or_else(|| D::Error::custom(format!("an event needs `{key}`")))
        };
        let seq = serde_json::from_value(take("seq")?).map_err(D::Error::custom)?;
        let run_id = serde_json::from_value(take("run_id")?).map_err(D::Error::custom)?;
        let at_ms = serde_json::from_value(take("at_ms")?).map_err(D::Error::custom)?;
        let dropped = match fields.remove("dropped") {
            Some(v) => serde_json::from_value(v).map_err(D::Error::custom)?,
            None => 0,
        };
        let kind = serde_json::from_value(Value::Object(fields)).map_err(D::Error::custom)?;
        Ok(Self {
            seq,
            run_id,
            at_ms,
            kind,
            dropped,
        })
    }
}

/// Where a transition's events start: the `seq` of its first event and the time they
/// carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventStamp {
    /// The `seq` of the first event (the run's last kept event's plus one).
    pub first_seq: u64,
    /// When (milliseconds since the Unix epoch).
    pub at_ms: u64,
}

/// The events one committed transition of `run` makes, numbered from `stamp.first_seq`:
/// `run_started` when it is the run's first event (`first_seq` 1), a `step` per trace
/// item from index `trace_from`, then `paused` or `run_ended` when the run now waits for
/// an answer or has ended, then, when the transition is durable as store checkpoint
/// `checkpoint`, a `checkpoint` event. The same inputs give the same events: the store
/// writes these (as text, [`write_transition_events`](crate::runtime::write_transition_events), without making them) and the
/// driver publishes them.
pub fn transition_events(
    run: &RunState,
    trace_from: usize,
    checkpoint: Option<u64>,
    stamp: EventStamp,
) -> Vec<RunEvent> {
    let mut events = Vec::with_capacity(run.trace.len().saturating_sub(trace_from) + 3);
    transition_events_into(run, trace_from, checkpoint, stamp, &mut events);
    events
}

/// [`transition_events`], appended to `events`: each event built once, in place (a
/// bus reuses one buffer for every step's events).
pub(crate) fn transition_events_into(
    run: &RunState,
    trace_from: usize,
    checkpoint: Option<u64>,
    stamp: EventStamp,
    events: &mut Vec<RunEvent>,
) {
    events.reserve(run.trace.len().saturating_sub(trace_from) + 3);
    let first = stamp.first_seq.max(1);
    let mut seq = first;
    transition_parts(run, trace_from, checkpoint, first, |part| {
        let kind = match part {
            Part::Started { workflow, input } => EventKind::RunStarted {
                workflow: workflow.to_string(),
                changes: input.is_some(),
                input: input.and_then(RecordedInput::to_value),
            },
            Part::Step {
                index,
                item,
                writes,
                changes,
            } => EventKind::Step {
                index,
                item: item.clone(),
                writes: writes.cloned(),
                changes,
            },
            Part::Other(kind) => kind,
        };
        events.push(RunEvent {
            seq,
            run_id: run.run_id,
            at_ms: stamp.at_ms,
            kind,
            dropped: 0,
        });
        seq += 1;
    });
}

/// One event of a transition as [`transition_parts`] hands it over: what is large or
/// shared borrowed from the run (the input, the trace item, a node's writes), the small
/// kinds made.
pub(super) enum Part<'a> {
    /// `run_started`.
    Started {
        workflow: &'a str,
        input: Option<&'a RecordedInput>,
    },
    /// `step`.
    Step {
        index: usize,
        item: &'a TraceItem,
        writes: Option<&'a Arc<Value>>,
        changes: Vec<SliceChange>,
    },
    /// `paused`, `run_ended` or `checkpoint`.
    Other(EventKind),
}

/// The rule of [`transition_events`], once for both its forms (the events made, and
/// their text written straight from the run): hands `each` the transition's events in
/// order, the first numbered `first_seq`.
pub(super) fn transition_parts<'a>(
    run: &'a RunState,
    trace_from: usize,
    checkpoint: Option<u64>,
    first_seq: u64,
    mut each: impl FnMut(Part<'a>),
) {
    let items = run.trace.iter_from(trace_from);
    let values = run.step_values();
    if first_seq <= 1 {
        each(Part::Started {
            workflow: &run.workflow,
            input: values.and_then(|v| v.input.as_ref()),
        });
    }
    // Node writes by trace index, in index order: walked once beside the items.
    let mut writes = values
        .map(|v| v.writes.as_slice())
        .unwrap_or_default()
        .iter()
        .peekable();
    // Other slice changes, in the order made: each on the event of the item before the
    // one it is seen from (a change not yet stamped is seen from the next item), or on
    // the transition's first item.
    let (changes, stamped) = values.map_or((&[][..], 0), |v| (v.changes.as_slice(), v.stamped));
    let mut changes = changes.iter().enumerate().peekable();
    let last = (trace_from + items.len()).saturating_sub(1);
    let end = run.trace.len();
    for (i, item) in items.enumerate() {
        let index = trace_from + i;
        // `peek` and `next` rather than `Peekable::next_if`, which is not `#[inline]`
        // (called out of line without thin-local LTO, ADR 0066).
        while writes.peek().is_some_and(|(at, _)| *at < index) {
            writes.next();
        }
        let wrote = if writes.peek().is_some_and(|(at, _)| *at == index) {
            writes.next().map(|(_, w)| w)
        } else {
            None
        };
        let mut here = Vec::new();
        while changes.peek().is_some_and(|(n, c)| {
            let at = if *n < stamped { c.at() } else { end };
            at <= index + 1 || index == last
        }) {
            let Some((n, c)) = changes.next() else { break };
            here.push(if n < stamped {
                c.clone()
            } else {
                c.clone().seen_from(end)
            });
        }
        each(Part::Step {
            index,
            item,
            writes: wrote,
            changes: here,
        });
    }
    match run.status() {
        RunStatus::AwaitingInput => each(Part::Other(EventKind::Paused {
            question: run.question().map(str::to_string),
        })),
        status @ (RunStatus::Completed | RunStatus::Stopped | RunStatus::Failed) => {
            each(Part::Other(EventKind::RunEnded {
                status,
                termination_reason: run.termination_reason(),
                message: run.message().map(str::to_string),
                steps: run.steps,
            }));
        }
        _ => {}
    }
    if let Some(checkpoint) = checkpoint {
        each(Part::Other(EventKind::Checkpoint {
            checkpoint,
            steps: run.steps,
            trace_len: run.trace.len(),
        }));
    }
}

/// How many events [`transition_events`] makes for the same inputs, without making them.
pub fn transition_event_count(
    run: &RunState,
    trace_from: usize,
    checkpoint: Option<u64>,
    first_seq: u64,
) -> u64 {
    let items = run.trace.len().saturating_sub(trace_from);
    let status = !matches!(run.status(), RunStatus::Running);
    u64::try_from(items).unwrap_or(u64::MAX)
        + u64::from(first_seq <= 1)
        + u64::from(status)
        + u64::from(checkpoint.is_some())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runtime::{TraceItem, TraceKind};

    /// Proves `write_json` writes exactly `serde_json::to_string`'s bytes (what the store
    /// keeps and the SSE feed sends must read back as the same event), for kinds with no
    /// field after the tag but one, with several, with a trace item and writes carrying
    /// strings to escape, and with `dropped` set; and that the text reads back as the
    /// event.
    #[test]
    fn write_json_is_serde_jsons_text() {
        let run_id = RunId::new();
        let mut item = TraceItem::new(TraceKind::Dispatch, 3, 0);
        item.target = Some("n\u{e9}\"ode".into());
        let kinds = [
            EventKind::Paused { question: None },
            EventKind::Paused {
                question: Some("which\n\"one\"?".into()),
            },
            EventKind::RunStarted {
                workflow: "w".into(),
                input: Some(json!({"task": ["a\tb", 1, null]})),
                changes: true,
            },
            EventKind::Step {
                index: 7,
                item,
                writes: Some(Arc::new(json!({"n": 1, "s": "\u{1F600}"}))),
                changes: Vec::new(),
            },
            EventKind::Checkpoint {
                checkpoint: 2,
                steps: 4,
                trace_len: 9,
            },
        ];
        for (i, kind) in kinds.into_iter().enumerate() {
            for dropped in [0, 5] {
                let event = RunEvent {
                    seq: 10 + i as u64,
                    run_id,
                    at_ms: 1_700_000_000_123,
                    kind: kind.clone(),
                    dropped,
                };
                let mut out = b"prefix".to_vec();
                event.write_json(&mut out);
                let text = serde_json::to_string(&event).expect("serializes");
                assert_eq!(&out[6..], text.as_bytes(), "{text}");
                let back: RunEvent = serde_json::from_slice(&out[6..]).expect("reads back");
                assert_eq!(back, event);
            }
        }
    }
}
