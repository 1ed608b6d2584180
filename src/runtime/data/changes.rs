//! The change log of a run's slices: which slices of which level a commit wrote, so that
//! a run store can checkpoint what a step changed without copying the whole state before
//! the step (see `store::delta`).
//!
//! The log is off unless a store turns it on ([`RunState::track_changes`]); an in-memory
//! run pays one branch per slice write. Every write to a level's slices goes through a
//! [`SliceWriter`], which records the key when the log is on.
//!
//! [`RunState::track_changes`]: super::RunState::track_changes

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decision_memo::{DecisionMemo, slice_bit};
use super::slices::State;
use crate::contracts::SYSTEM_SLICE;

/// Which slices were written since the log was last taken: `(level, key)`, level 0 being
/// the root state and level `n` the state of the `n`th open frame (outermost first).
/// Bookkeeping, not run data: it is neither serialized nor compared.
#[derive(Debug, Clone, Default)]
pub(crate) struct Changes {
    on: bool,
    written: Vec<(usize, String)>,
    /// The values nodes wrote, per trace item, while a store or an event bus records them
    /// for the run's `step` events (docs/spec/events.md); `None`: not recorded.
    values: Option<Box<StepValues>>,
    /// The run's last rule decision, while it may be taken again (ADR 0072).
    memo: Option<DecisionMemo>,
}

/// What the `run_started` and `step` events of the transitions since the last commit
/// carry: the run's input (when its first step is among them) and each node run's writes.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepValues {
    /// The root slices before the run's first step (`system` left out), when recorded
    /// from it.
    pub(crate) input: Option<RecordedInput>,
    /// `(trace index of the node run's item, the object of slices it wrote)`, in order:
    /// shared with the `step` events made of them, not copied into each (ADR 0053).
    pub(crate) writes: Vec<(usize, Arc<Value>)>,
    /// The slice changes outside node outputs (a resume's answer, a subgraph's frame and
    /// what its return writes, a join's advice, a team's summary, a router's `$message`),
    /// in the order they were made; the first `stamped` carry their `at`.
    pub(crate) changes: Vec<SliceChange>,
    /// How many of `changes` carry their final `at` (see [`Changes::stamp`]).
    pub(crate) stamped: usize,
}

/// A run's input as recorded for its `run_started` event.
#[derive(Debug, Clone)]
pub(crate) enum RecordedInput {
    /// The root slices, copied: what an executor publishing its events hands its
    /// subscribers.
    Value(Value),
    /// Their JSON text, written once instead of copied: all a store's driver writes of
    /// them (ADR 0056); made a value again only for a subscriber.
    Text(Box<str>),
}

impl RecordedInput {
    /// The input as a value: `None` only for a text `serde_json` will not read back, an
    /// input nested deeper than its 128 levels (made in code, not read from JSON; a
    /// store could not load such a run either), which is logged.
    pub(crate) fn to_value(&self) -> Option<Value> {
        match self {
            Self::Value(v) => Some(v.clone()),
            Self::Text(text) => serde_json::from_str(text)
                .inspect_err(|e| {
                    tracing::warn!("a run's input is left out of its live `run_started`: {e}");
                })
                .ok(),
        }
    }
}

/// One change of a run's slices outside a node's output, as a `step` event carries it
/// (docs/spec/events.md): `{"change": "set", "at", "level", "slice", "value"}` (one slice
/// replaced whole) or `{"change": "frame", "at", "level", "state"}` (a subgraph's frame
/// opened at `level` with `state`, its child state). `at` is the trace index of the first
/// item recorded by a later step: the change was made by the step (or resume) before it,
/// after every node run of that step had read its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum SliceChange {
    /// A slice of level `level` (0 the root, `n` the `n`th open frame) replaced whole.
    Set {
        /// The first trace index the change is seen from.
        at: usize,
        /// The level written.
        level: usize,
        /// The slice.
        slice: String,
        /// Its new value.
        value: Value,
    },
    /// A subgraph's frame opened (a call or a clarification) at `level`.
    Frame {
        /// The first trace index the change is seen from.
        at: usize,
        /// The frame's level (its depth).
        level: usize,
        /// Its child state as it opened.
        state: State,
    },
}

impl SliceChange {
    /// The first trace index the change is seen from.
    pub fn at(&self) -> usize {
        match self {
            Self::Set { at, .. } | Self::Frame { at, .. } => *at,
        }
    }

    fn stamp(&mut self, to: usize) {
        match self {
            Self::Set { at, .. } | Self::Frame { at, .. } => *at = to,
        }
    }

    /// The same change, seen from trace index `at`.
    pub(crate) fn seen_from(mut self, at: usize) -> Self {
        self.stamp(at);
        self
    }
}

impl PartialEq for Changes {
    /// Always equal: two runs that differ only in their change log are the same run.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Changes {
    /// Starts a new log (dropping what the last one held).
    #[cfg(feature = "store")]
    pub(crate) fn start(&mut self) {
        self.on = true;
        self.written.clear();
    }

    /// Ends the log, giving what it recorded, in write order.
    #[cfg(feature = "store")]
    pub(crate) fn take(&mut self) -> Vec<(usize, String)> {
        self.on = false;
        std::mem::take(&mut self.written)
    }

    /// Starts recording node writes (and `input`, the run's input when it has not taken
    /// a step yet), unless already recording.
    pub(crate) fn record_values(&mut self, input: impl FnOnce() -> Option<RecordedInput>) {
        if self.values.is_none() {
            self.values = Some(Box::new(StepValues {
                input: input(),
                ..StepValues::default()
            }));
        }
    }

    /// True while node writes are recorded.
    pub(crate) fn recording_values(&self) -> bool {
        self.values.is_some()
    }

    /// Records that the node run whose trace item will be at `index` wrote `writes`.
    pub(crate) fn wrote(&mut self, index: usize, writes: Arc<Value>) {
        if let Some(v) = &mut self.values {
            v.writes.push((index, writes));
        }
    }

    /// What is recorded, if recording.
    pub(crate) fn values(&self) -> Option<&StepValues> {
        self.values.as_deref()
    }

    /// Forgets what was recorded (its events are made), recording on.
    pub(crate) fn clear_values(&mut self) {
        if let Some(v) = &mut self.values {
            v.input = None;
            v.writes.clear();
            v.changes.clear();
            v.stamped = 0;
        }
    }

    /// Gives the changes made since the last stamp their `at`: `trace_len`, the index of
    /// the next item, called before a step commits anything (so every change a step
    /// makes is seen from the items after it). One branch while not recording.
    #[inline(always)]
    pub(crate) fn stamp(&mut self, trace_len: usize) {
        if let Some(v) = &mut self.values
            && v.stamped < v.changes.len()
        {
            for c in &mut v.changes[v.stamped..] {
                c.stamp(trace_len);
            }
            v.stamped = v.changes.len();
        }
    }

    /// Records that a subgraph's frame opened at `level` with `state` (a clone, only
    /// while recording values).
    pub(crate) fn opened_frame(&mut self, level: usize, state: &State) {
        if let Some(v) = &mut self.values {
            v.changes.push(SliceChange::Frame {
                at: 0,
                level,
                state: state.clone(),
            });
        }
    }

    /// Keeps `memo`, the decision a step commits, nothing written since.
    #[inline]
    pub(crate) fn remember(&mut self, memo: DecisionMemo) {
        self.memo = Some(memo);
    }

    /// Forgets the last decision: the frames changed (a level's slices replaced whole),
    /// or the state was changed other than through a [`SliceWriter`].
    #[inline]
    pub(crate) fn forget_decision(&mut self) {
        self.memo = None;
    }

    /// The last decision and what was written since, if kept.
    #[inline]
    pub(crate) fn memo(&self) -> Option<&DecisionMemo> {
        self.memo.as_ref()
    }

    fn record(&mut self, level: usize, key: &str, value: Option<&Value>) {
        if let Some(m) = &mut self.memo
            && m.level == level
        {
            m.written |= slice_bit(key);
        }
        if self.on {
            self.written.push((level, key.to_string()));
        }
        if let (Some(v), Some(value)) = (&mut self.values, value)
            && key != SYSTEM_SLICE
        {
            v.changes.push(SliceChange::Set {
                at: 0,
                level,
                slice: key.to_string(),
                value: value.clone(),
            });
        }
    }
}

/// Writes into one level's slices, recording each written key in the run's change log.
/// Reads go to the level as it stands.
#[derive(Debug)]
pub(crate) struct SliceWriter<'a> {
    pub(super) state: &'a mut State,
    pub(super) changes: &'a mut Changes,
    pub(super) level: usize,
    /// False for a node's output, which its `step` event carries as `writes`: its
    /// values are not recorded again as changes.
    pub(super) values: bool,
}

impl SliceWriter<'_> {
    /// The slice `key` at this level, if present.
    #[inline]
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        crate::contracts::lookup::get(self.state, key)
    }

    /// Replaces slice `key` whole (a new key is appended, an existing one keeps its place).
    pub(crate) fn insert(&mut self, key: String, value: Value) {
        let recorded = self.values.then_some(&value);
        self.changes.record(self.level, &key, recorded);
        self.state.insert(key, value);
    }

    /// The same writer for a node's output: its keys go to the change log, its values
    /// are not recorded as changes (the node's `step` event carries them as `writes`).
    pub(crate) fn node_output(self) -> Self {
        Self {
            values: false,
            ..self
        }
    }
}

// The log's `start` and `take` are the store's.
#[cfg(all(test, feature = "store"))]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_writer_records_keys_only_while_the_log_is_on() {
        let mut state = State::new();
        let mut changes = Changes::default();
        SliceWriter {
            state: &mut state,
            changes: &mut changes,
            level: 0,
            values: true,
        }
        .insert("a".into(), json!(1));
        assert!(changes.take().is_empty(), "off: nothing recorded");
        changes.start();
        let mut w = SliceWriter {
            state: &mut state,
            changes: &mut changes,
            level: 2,
            values: true,
        };
        w.insert("b".into(), json!(2));
        w.insert("a".into(), json!(3));
        assert_eq!(w.get("a"), Some(&json!(3)));
        assert!(changes.on);
        assert_eq!(changes.take(), [(2, "b".to_string()), (2, "a".to_string())]);
        assert!(!changes.on);
        assert_eq!(state.keys().collect::<Vec<_>>(), ["a", "b"]);
    }
}
