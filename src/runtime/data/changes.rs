//! The change log of a run's slices: which slices of which level a commit wrote, so that
//! a run store can checkpoint what a step changed without copying the whole state before
//! the step (see `store::delta`).
//!
//! The log is off unless a store turns it on ([`RunState::track_changes`]); an in-memory
//! run pays one branch per slice write. Every write to a level's slices goes through a
//! [`SliceWriter`], which records the key when the log is on.
//!
//! [`RunState::track_changes`]: super::RunState::track_changes

use serde_json::Value;

use super::slices::State;

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
}

/// What the `run_started` and `step` events of the transitions since the last commit
/// carry: the run's input (when its first step is among them) and each node run's writes.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepValues {
    /// The root slices before the run's first step (`system` left out), when recorded
    /// from it.
    pub(crate) input: Option<Value>,
    /// `(trace index of the node run's item, the object of slices it wrote)`, in order.
    pub(crate) writes: Vec<(usize, Value)>,
}

impl PartialEq for Changes {
    /// Always equal: two runs that differ only in their change log are the same run.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Changes {
    /// Starts a new log (dropping what the last one held).
    pub(crate) fn start(&mut self) {
        self.on = true;
        self.written.clear();
    }

    /// Ends the log, giving what it recorded, in write order.
    pub(crate) fn take(&mut self) -> Vec<(usize, String)> {
        self.on = false;
        std::mem::take(&mut self.written)
    }

    /// Starts recording node writes (and `input`, the run's input when it has not taken
    /// a step yet), unless already recording.
    pub(crate) fn record_values(&mut self, input: impl FnOnce() -> Option<Value>) {
        if self.values.is_none() {
            self.values = Some(Box::new(StepValues {
                input: input(),
                writes: Vec::new(),
            }));
        }
    }

    /// True while node writes are recorded.
    pub(crate) fn recording_values(&self) -> bool {
        self.values.is_some()
    }

    /// Records that the node run whose trace item will be at `index` wrote `writes`.
    pub(crate) fn wrote(&mut self, index: usize, writes: Value) {
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
        }
    }

    fn record(&mut self, level: usize, key: &str) {
        if self.on {
            self.written.push((level, key.to_string()));
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
}

impl SliceWriter<'_> {
    /// The slice `key` at this level, if present.
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        crate::contracts::lookup::get(self.state, key)
    }

    /// Replaces slice `key` whole (a new key is appended, an existing one keeps its place).
    pub(crate) fn insert(&mut self, key: String, value: Value) {
        self.changes.record(self.level, &key);
        self.state.insert(key, value);
    }
}

#[cfg(test)]
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
        }
        .insert("a".into(), json!(1));
        assert!(changes.take().is_empty(), "off: nothing recorded");
        changes.start();
        let mut w = SliceWriter {
            state: &mut state,
            changes: &mut changes,
            level: 2,
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
