//! The trace projected into `state.system.decision_trace`: how a root state is shown
//! without holding the trace twice.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::decision_trace::DecisionTrace;
use super::slices::{DECISION_TRACE, State};
use crate::contracts::SYSTEM_SLICE;

/// A root state as it is shown: the `system` slice's entries in their order (any
/// physically present `decision_trace` skipped), then `"decision_trace": <the trace>` when
/// the trace belongs in the state. Borrows both; serializing it copies nothing.
#[derive(Debug, Clone, Copy)]
pub struct ProjectedState<'a> {
    state: &'a State,
    trace: Option<&'a DecisionTrace>,
}

impl<'a> ProjectedState<'a> {
    pub(crate) fn new(state: &'a State, trace: &'a DecisionTrace, in_state: bool) -> Self {
        Self {
            state,
            trace: in_state.then_some(trace),
        }
    }

    /// The projection as one JSON value (copies the state and the trace).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a state and a trace are plain data")
    }
}

impl Serialize for ProjectedState<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.state.len()))?;
        for (key, value) in self.state {
            match value {
                Value::Object(system) if key == SYSTEM_SLICE => map.serialize_entry(
                    key,
                    &ProjectedSystem {
                        system,
                        trace: self.trace,
                    },
                )?,
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

/// The `system` slice with the trace spliced in last (see [`ProjectedState`]).
struct ProjectedSystem<'a> {
    system: &'a Map<String, Value>,
    trace: Option<&'a DecisionTrace>,
}

impl Serialize for ProjectedSystem<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let stale = usize::from(self.system.contains_key(DECISION_TRACE));
        let len = self.system.len() - stale + usize::from(self.trace.is_some());
        let mut map = serializer.serialize_map(Some(len))?;
        for (key, value) in self.system {
            if key != DECISION_TRACE {
                map.serialize_entry(key, value)?;
            }
        }
        if let Some(trace) = self.trace {
            map.serialize_entry(DECISION_TRACE, trace)?;
        }
        map.end()
    }
}
