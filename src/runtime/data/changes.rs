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
