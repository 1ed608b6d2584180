//! The JSON text of run events, written by hand (ADR 0056): the envelope, a `step` event's
//! fields and its trace item, byte for byte as `serde_json` writes [`RunEvent`] (the
//! tests below and in `events.rs` compare the two). What the store keeps of every event
//! and what the SSE feed sends; `serde_json` is kept for what is rare or not worth
//! writing by hand (a node's writes, slice changes, a usage record it reported, a chain
//! stage, a call's fields, the kinds but `step` and `run_started`).
//!
//! A checkpoint's events are written straight from the run ([`write_transition_events`]),
//! with no [`RunEvent`] made: the trace items read through the trace's name table (no id
//! copied, no count changed), the run id encoded once, the input of `run_started`
//! borrowed.

use std::marker::PhantomData;
use std::sync::Arc;

use serde_json::Value;

use super::changes::{RecordedInput, SliceChange};
use super::events::{EventKind, EventStamp, Part, RunEvent, transition_parts};
use super::json_text::{SameNumber, write_opt_str, write_serde, write_str, write_u64, write_value};
use super::run_state::RunState;
use super::status::TerminationReason;
use super::text_buf::Text;
use super::trace::{ItemOut, TraceKind, UsageOut};

/// The fields of an event after its envelope, and the closing brace: borrowed for `'a`, a
/// `step` event's item for `'i` (the run's trace, borrowed longer than one event's parts).
enum Fields<'a, 'i> {
    /// `run_started`'s, its input borrowed.
    Started {
        workflow: &'a str,
        input: Option<Input<'a>>,
        changes: bool,
    },
    /// A `step` event's, its item borrowed.
    Step {
        index: usize,
        item: ItemOut<'i>,
        writes: Option<&'a Value>,
        changes: &'a [SliceChange],
    },
    /// Any other kind's, through `serde_json`.
    Kind(&'a EventKind),
}

/// A run's input, to write: a value, or the text recorded of one.
#[derive(Clone, Copy)]
enum Input<'a> {
    Value(&'a Value),
    Text(&'a str),
}

impl<'a> From<&'a RecordedInput> for Input<'a> {
    fn from(input: &'a RecordedInput) -> Self {
        match input {
            RecordedInput::Value(v) => Self::Value(v),
            RecordedInput::Text(text) => Self::Text(text),
        }
    }
}

/// Appends `{"seq":SEQ,"run_id":"RUN","event":"NAME","at_ms":AT` (no closing brace).
fn write_head(out: &mut Text<'_>, seq: u64, run_id: &str, name: &str, at_ms: u64) {
    out.put(b"{\"seq\":");
    write_u64(out, seq);
    write_head_after_seq(out, run_id, name, at_ms);
}

/// Appends `,"run_id":"RUN","event":"NAME","at_ms":AT`: a head after its `seq`.
fn write_head_after_seq(out: &mut Text<'_>, run_id: &str, name: &str, at_ms: u64) {
    out.put(b",\"run_id\":\"");
    // A run id is 26 characters of Crockford base32: nothing to escape.
    out.put(run_id.as_bytes());
    out.put(b"\",\"event\":\"");
    out.put(name.as_bytes());
    out.put(b"\",\"at_ms\":");
    write_u64(out, at_ms);
}

impl<'i> Fields<'_, 'i> {
    /// Appends the fields (each preceded by its comma) and the event's closing brace; an
    /// item's time stamp and middle through `seen` (what the texts before it repeat).
    fn write(&self, out: &mut Text<'_>, seen: &mut Seen<'i>) {
        match self {
            Self::Started {
                workflow,
                input,
                changes,
            } => {
                out.put(b",\"workflow\":");
                write_str(out, workflow);
                if let Some(input) = input {
                    out.put(b",\"input\":");
                    match input {
                        Input::Value(v) => write_value(out, v),
                        // Written by `write_fields` when recorded: the same text.
                        Input::Text(text) => out.put(text.as_bytes()),
                    }
                }
                if *changes {
                    out.put(b",\"changes\":true");
                }
                out.push(b'}');
            }
            Self::Step {
                index,
                item,
                writes,
                changes,
            } => {
                out.put(b",\"index\":");
                write_u64(out, *index as u64);
                out.put(b",\"item\":");
                item.write_json(out, seen);
                if let Some(writes) = writes {
                    out.put(b",\"writes\":");
                    write_value(out, writes);
                }
                if !changes.is_empty() {
                    out.put(b",\"changes\":");
                    write_serde(out, changes);
                }
                out.push(b'}');
            }
            Self::Kind(kind) => write_kind_fields(out, kind),
        }
    }
}

/// Appends `kind`'s fields and the closing brace, as `serde_json` writes them: the kind is
/// serialized into `out` and its tag (`{"event":"NAME"`, which an internally tagged enum
/// writes first) cut out after it, leaving `}` or `,` and the fields then `}`.
fn write_kind_fields(out: &mut Text<'_>, kind: &EventKind) {
    let start = out.len();
    write_serde(out, kind);
    let head = br#"{"event":""#.len() + kind.name().len() + 1;
    debug_assert!(
        out.as_bytes()[start..].starts_with(format!(r#"{{"event":"{}""#, kind.name()).as_bytes()),
        "a kind's JSON starts with its tag"
    );
    out.cut(start, head);
}

impl<'a> Fields<'a, 'a> {
    /// The fields of `kind`.
    fn of(kind: &'a EventKind) -> Self {
        match kind {
            EventKind::RunStarted {
                workflow,
                input,
                changes,
            } => Self::Started {
                workflow,
                input: input.as_ref().map(Input::Value),
                changes: *changes,
            },
            EventKind::Step {
                index,
                item,
                writes,
                changes,
            } => Self::Step {
                index: *index,
                item: item.out(),
                writes: writes.as_deref(),
                changes,
            },
            other => Self::Kind(other),
        }
    }
}

/// Appends the texts of the events [`transition_events`](super::transition_events) makes
/// for the same inputs, each ended by a line break but the last (a compact JSON text holds
/// none): the same bytes as their [`RunEvent::write_json`] texts joined by line breaks,
/// written straight from `run` (format 8's chunk, ADR 0053 and 0056). Returns the `seq`
/// of the first and of the last event written (`None` when there is none).
pub fn write_transition_events(
    run: &RunState,
    trace_from: usize,
    checkpoint: Option<u64>,
    stamp: EventStamp,
    out: &mut Vec<u8>,
) -> Option<(u64, u64)> {
    let mut buf = [0; ulid::ULID_LEN];
    let run_id: &str = run.run_id.encode(&mut buf);
    let first = stamp.first_seq.max(1);
    let mut seq = first;
    out.reserve(256 * (run.trace.len().saturating_sub(trace_from) + 2));
    // What follows a `step` event's `seq`, the same for every one of them (one run, one
    // time stamp): written once here, copied into each.
    let mut step_head = Vec::with_capacity(96);
    write_head_after_seq(&mut Text::new(&mut step_head), run_id, "step", stamp.at_ms);
    let mut seen = Seen::chunk();
    let mut out = Text::new(out);
    transition_parts(run, trace_from, checkpoint, first, |part| {
        if seq > first {
            out.push(b'\n');
        }
        let (name, fields) = match &part {
            Part::Started { workflow, input } => (
                "run_started",
                Fields::Started {
                    workflow,
                    input: input.map(Input::from),
                    changes: input.is_some(),
                },
            ),
            Part::Step {
                index,
                item,
                writes,
                changes,
            } => (
                "step",
                Fields::Step {
                    index: *index,
                    item: item.out(),
                    writes: writes.map(Arc::as_ref),
                    changes,
                },
            ),
            Part::Other(kind) => (kind.name(), Fields::Kind(kind)),
        };
        if matches!(fields, Fields::Step { .. }) {
            out.put(b"{\"seq\":");
            write_u64(&mut out, seq);
            out.put(&step_head);
        } else {
            write_head(&mut out, seq, run_id, name, stamp.at_ms);
        }
        fields.write(&mut out, &mut seen);
        seq += 1;
    });
    (seq > first).then(|| (first, seq - 1))
}

impl<'a> ItemOut<'a> {
    /// Appends the item's JSON text: `serde_json`'s bytes for it (its `Serialize`), the ids
    /// copied in runs, numbers through `itoa`.
    pub(super) fn write_json(&self, out: &mut Text<'_>, seen: &mut Seen<'a>) {
        out.put(b"{\"step\":");
        write_u64(out, u64::from(self.step));
        out.put(b",\"depth\":");
        write_u64(out, u64::from(self.depth));
        match &mut seen.middles {
            Some(middles) => middles.write(out, self),
            None => self.write_middle(out),
        }
        out.put(b",\"at_ms\":");
        seen.at.write(out, self.at_ms);
        out.put(b",\"duration_us\":");
        write_u64(out, self.duration_us);
        self.usage.write_field(out);
        if let Some(chain) = self.chain {
            out.put(b",\"chain\":");
            write_serde(out, chain);
        }
        if let Some(call) = self.model_call {
            out.put(b",\"model_call\":");
            write_serde(out, call);
        }
        if let Some(call) = self.tool_call {
            out.put(b",\"tool_call\":");
            write_serde(out, call);
        }
        out.push(b'}');
    }

    /// Appends the item's middle: its fields from `supervisor` to its candidates, the ids
    /// and names a loop's items repeat (ADR 0070).
    fn write_middle(&self, out: &mut Text<'_>) {
        out.put(b",\"supervisor\":");
        write_opt_str(out, self.supervisor);
        out.put(b",\"subgraph\":");
        write_opt_str(out, self.subgraph);
        out.put(b",\"kind\":\"");
        out.put(self.kind.as_str().as_bytes());
        out.push(b'"');
        if let Some(source) = self.source {
            out.put(b",\"source\":");
            write_str(out, source);
        }
        out.put(b",\"target\":");
        write_opt_str(out, self.target);
        out.put(b",\"reason\":");
        write_opt_str(out, self.reason);
        out.put(b",\"termination_reason\":");
        write_opt_str(out, self.termination_reason.map(|r| r.as_str()));
        if !self.candidates.is_empty() {
            out.put(b",\"candidates\":[");
            for (i, c) in self.candidates.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, c);
            }
            out.push(b']');
        }
    }

    /// What decides the item's middle text: its kind, termination reason, and where its
    /// ids and candidates' list are, borrowed.
    fn middle_key(&self) -> MiddleKey<'a> {
        let at = |s: Option<&str>| s.map_or((0, 0), |s| (s.as_ptr() as usize, s.len()));
        MiddleKey {
            kind: self.kind,
            termination_reason: self.termination_reason,
            at: [
                at(self.supervisor),
                at(self.subgraph),
                at(self.source),
                at(self.target),
                at(self.reason),
                (self.candidates.as_ptr() as usize, self.candidates.len()),
            ],
            borrowed: PhantomData,
        }
    }
}

/// See [`ItemOut::middle_key`]: the address and length of each id (supervisor, subgraph,
/// source, target, reason; `(0, 0)` when absent, as no text is at address 0) and of the
/// candidates' list. Two keys are the same when those are: borrowed for `'a`, the same
/// memory holds the same bytes (the trace's name table holds each id once and cannot
/// change while borrowed), so the same middle text.
#[derive(Clone, Copy, PartialEq, Eq)]
struct MiddleKey<'a> {
    kind: TraceKind,
    termination_reason: Option<TerminationReason>,
    at: [(usize, usize); 6],
    borrowed: PhantomData<&'a str>,
}

/// How many distinct middles a chunk's writer keeps: a loop's items cycle through a few
/// (a decision, a dispatch, a return).
const MIDDLES: usize = 4;

/// The last [`MIDDLES`] distinct item middles written into one checkpoint's chunk, by
/// key: a middle seen again is copied, not written again (ADR 0070).
struct Middles<'a> {
    kept: Vec<(MiddleKey<'a>, Vec<u8>)>,
    /// The entry the next new middle replaces once [`MIDDLES`] are kept.
    next: usize,
}

impl<'a> Middles<'a> {
    /// Appends `item`'s middle: copied when kept, else written, then kept.
    fn write(&mut self, out: &mut Text<'_>, item: &ItemOut<'a>) {
        let key = item.middle_key();
        if let Some((_, text)) = self.kept.iter().find(|(k, _)| *k == key) {
            out.put(text);
            return;
        }
        let text = if self.kept.len() < MIDDLES {
            self.kept.push((key, Vec::with_capacity(192)));
            &mut self.kept.last_mut().expect("just pushed").1
        } else {
            let slot = &mut self.kept[self.next];
            self.next = (self.next + 1) % MIDDLES;
            slot.0 = key;
            &mut slot.1
        };
        text.clear();
        item.write_middle(&mut Text::new(text));
        out.put(text);
    }
}

/// What texts written one after the other repeat: the last time stamp written, and, in a
/// checkpoint's chunk, the last items' middles.
pub(super) struct Seen<'a> {
    pub(super) at: SameNumber,
    middles: Option<Middles<'a>>,
}

impl Seen<'_> {
    /// For one event's text: nothing kept but the time stamp.
    pub(super) fn once() -> Self {
        Self {
            at: SameNumber::new(),
            middles: None,
        }
    }

    /// For a checkpoint's chunk: middles kept too.
    pub(super) fn chunk() -> Self {
        Self {
            at: SameNumber::new(),
            middles: Some(Middles {
                kept: Vec::new(),
                next: 0,
            }),
        }
    }
}

impl UsageOut<'_> {
    /// Appends `,"usage":...` when the item has a usage record.
    fn write_field(&self, out: &mut Text<'_>) {
        match (self.reported, self.wall_us) {
            (None, None) => {}
            // A node run that reported none: its record is its wall time alone.
            (None, Some(us)) => {
                out.put(b",\"usage\":{\"wall_ms\":");
                if us.is_multiple_of(1000) {
                    write_u64(out, us / 1000);
                } else {
                    write_serde(out, &super::trace::wall_ms(us));
                }
                out.push(b'}');
            }
            _ => {
                out.put(b",\"usage\":");
                write_serde(out, self);
            }
        }
    }
}

impl RunEvent {
    /// Appends its JSON text ([`RunEvent::to_json_string`]'s bytes) to `out`: a
    /// checkpoint writes all its events into one chunk this way (format 8, ADR 0053).
    /// Written by hand, straight into `out` (ADR 0056): the envelope, then the kind's
    /// fields (a `step` event's trace item field by field, `serde_json` for the rest).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut buf = [0; ulid::ULID_LEN];
        out.reserve(384);
        let out = &mut Text::new(out);
        write_head(
            out,
            self.seq,
            self.run_id.encode(&mut buf),
            self.kind.name(),
            self.at_ms,
        );
        Fields::of(&self.kind).write(out, &mut Seen::once());
        if self.dropped > 0 {
            out.pop();
            out.put(b",\"dropped\":");
            write_u64(out, self.dropped);
            out.push(b'}');
        }
    }
}

#[cfg(test)]
#[path = "event_text_tests.rs"]
mod tests;
