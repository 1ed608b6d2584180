//! The run as plain data: everything a run needs to continue, and its outcome.

use std::sync::Arc;

use indexmap::IndexMap;
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::callstack::{Frame, UncommittedFrame};
use super::status::{RunStatus, TerminationReason};
use super::trace::DecisionTrace;
use crate::contracts::SYSTEM_SLICE;

/// The key of the trace's projection in the `system` slice.
pub(crate) const DECISION_TRACE: &str = "decision_trace";

/// What the next step does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pending {
    /// The supervisor decides (at the current level).
    Decide {
        /// The deciding supervisor.
        supervisor: Arc<str>,
    },
    /// A node runs next without a decision (a handoff).
    Handoff {
        /// The node to run.
        node: Arc<str>,
        /// The supervisor control returns to afterwards.
        dispatcher: Arc<str>,
    },
    /// Nothing: the run has ended.
    Nothing,
}

/// A run in progress (or finished): state, call stack, counters, trace, pending decision
/// and status. Plain serializable data: save it between any two steps and continue later
/// with an executor built from the same graph and handlers.
///
/// The decision trace is stored once, in [`RunState::trace`]. Its copy in
/// `state.system.decision_trace` (unless the executor was built with
/// [`trace_in_state(false)`](super::ExecutorBuilder::trace_in_state)) is a projection:
/// every serialized form of the run state has it, [`RunState::state_json`] materializes
/// it, and the in-memory [`RunState::state`] does not hold it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunState {
    /// The workflow's name.
    pub workflow: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// Why it ended or paused.
    pub termination_reason: Option<TerminationReason>,
    /// The error or guard message when it failed or stopped.
    pub message: Option<String>,
    /// The question asked, while awaiting input.
    pub question: Option<String>,
    /// The last committed root state, without `system.decision_trace`: that copy of the
    /// trace is a projection of [`RunState::trace`], added when the run state is serialized
    /// and by [`RunState::state_json`].
    pub state: Value,
    /// Open subgraph calls, outermost first.
    pub stack: Vec<Frame>,
    /// Steps taken (node executions plus subgraph entries).
    pub steps: u32,
    /// Times each node has run.
    pub visits: IndexMap<String, u32>,
    /// Times each subgraph has been entered.
    pub entries: IndexMap<String, u32>,
    /// What the next step does.
    pub pending: Pending,
    /// The decision trace so far.
    pub trace: DecisionTrace,
    /// Frames that were open when the run stopped (reported, not merged).
    pub uncommitted: Vec<UncommittedFrame>,
    /// Wall-clock start, in milliseconds since the Unix epoch (for the run deadline).
    pub started_at_ms: u64,
    /// The current step's timestamp (not saved; never part of comparisons).
    pub(crate) clock: StepClock,
    /// Whether the trace belongs in `state.system.decision_trace` of the serialized state
    /// (set from `ExecutorBuilder::trace_in_state`; read back from a saved run).
    pub(crate) trace_in_state: bool,
}

/// The timestamp taken once at the start of a step and shared by its trace items (reading
/// the system clock is not free).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StepClock {
    pub(crate) at_ms: u64,
}

impl PartialEq for StepClock {
    /// Transient: two run states never differ by it.
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl RunState {
    /// Current call depth (0 at the root).
    pub fn depth(&self) -> u32 {
        u32::try_from(self.stack.len()).unwrap_or(u32::MAX)
    }

    /// The state of the current level (the innermost frame's child state, or the root).
    pub fn level_state(&self) -> &Value {
        self.stack.last().map_or(&self.state, |f| &f.state)
    }

    pub(crate) fn level_state_mut(&mut self) -> &mut Value {
        match self.stack.last_mut() {
            Some(f) => &mut f.state,
            None => &mut self.state,
        }
    }

    /// The subgraph of the current level (`None` at the root).
    pub fn current_subgraph(&self) -> Option<&str> {
        self.stack.last().map(|f| &*f.subgraph_id)
    }

    /// True while more steps can be taken.
    pub fn is_running(&self) -> bool {
        self.status == RunStatus::Running
    }

    /// The outcome of the run as it stands.
    pub fn outcome(&self) -> RunOutcome {
        RunOutcome {
            workflow: self.workflow.clone(),
            status: self.status,
            termination_reason: self.termination_reason,
            message: self.message.clone(),
            steps: self.steps,
            state: self.state.clone(),
            trace: self.trace.clone(),
            question: self.question.clone(),
            uncommitted: self.uncommitted.clone(),
            trace_in_state: self.trace_in_state,
        }
    }

    /// The root state as it is serialized: [`RunState::state`] with
    /// `system.decision_trace` added (when the trace belongs in the state), streamed
    /// without copying the trace.
    pub fn projected_state(&self) -> ProjectedState<'_> {
        ProjectedState::new(&self.state, &self.trace, self.trace_in_state)
    }

    /// The root state as one JSON value, with `system.decision_trace` materialized (when
    /// the trace belongs in the state). Builds a copy of the trace; to write the state out,
    /// serialize [`RunState::projected_state`] (or the run state) instead.
    pub fn state_json(&self) -> Value {
        self.projected_state().to_value()
    }

    /// Serializes the run state as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a run state is plain data")
    }

    /// Reads a run state saved with [`RunState::to_json`] (or serde).
    pub fn from_json(value: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(value)
    }
}

/// How a run ended (or paused): what the CLI prints and a caller inspects.
///
/// As in [`RunState`], the trace is stored once, in [`RunOutcome::trace`];
/// `state.system.decision_trace` is its projection (in every serialized form and in
/// [`RunOutcome::state_json`], not in the in-memory [`RunOutcome::state`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The workflow's name.
    pub workflow: String,
    /// `completed`, `stopped`, `failed` or `awaiting_input` (`running` only when a
    /// caller asks for the outcome of an unfinished run).
    pub status: RunStatus,
    /// Why it ended.
    pub termination_reason: Option<TerminationReason>,
    /// The error or guard message, when there is one.
    pub message: Option<String>,
    /// Steps taken.
    pub steps: u32,
    /// The last committed root state, without `system.decision_trace`: that copy of the
    /// trace is a projection of [`RunOutcome::trace`], added when the outcome is serialized
    /// and by [`RunOutcome::state_json`].
    pub state: Value,
    /// The decision trace.
    pub trace: DecisionTrace,
    /// The question, when awaiting input.
    pub question: Option<String>,
    /// Frames open when the run stopped, reported and not merged.
    pub uncommitted: Vec<UncommittedFrame>,
    /// Whether the trace belongs in `state.system.decision_trace` of the serialized state.
    pub(crate) trace_in_state: bool,
}

impl RunOutcome {
    /// The root state as it is serialized: [`RunOutcome::state`] with
    /// `system.decision_trace` added (when the trace belongs in the state), streamed
    /// without copying the trace.
    pub fn projected_state(&self) -> ProjectedState<'_> {
        ProjectedState::new(&self.state, &self.trace, self.trace_in_state)
    }

    /// The root state as one JSON value, with `system.decision_trace` materialized (when
    /// the trace belongs in the state). Builds a copy of the trace; to write the state out,
    /// serialize [`RunOutcome::projected_state`] (or the outcome) instead.
    pub fn state_json(&self) -> Value {
        self.projected_state().to_value()
    }
}

impl RunState {
    /// The outcome, consuming the run state (no copies).
    pub fn into_outcome(self) -> RunOutcome {
        RunOutcome {
            workflow: self.workflow,
            status: self.status,
            termination_reason: self.termination_reason,
            message: self.message,
            steps: self.steps,
            state: self.state,
            trace: self.trace,
            question: self.question,
            uncommitted: self.uncommitted,
            trace_in_state: self.trace_in_state,
        }
    }
}

// ---- serialization: the trace projected into `state.system.decision_trace` -----------

/// A root state as it is serialized: the `system` slice's entries in their order (any
/// physically present `decision_trace` skipped), then `"decision_trace": <the trace>` when
/// the trace belongs in the state. Borrows both; serializing it copies nothing. The trace
/// goes into an existing `system` object only (the runtime always creates one); a state
/// without one serializes unchanged.
///
/// Returned by [`RunState::projected_state`] and [`RunOutcome::projected_state`]; the run
/// state and the outcome serialize their `state` field through it.
#[derive(Debug, Clone, Copy)]
pub struct ProjectedState<'a> {
    state: &'a Value,
    trace: Option<&'a DecisionTrace>,
}

impl<'a> ProjectedState<'a> {
    fn new(state: &'a Value, trace: &'a DecisionTrace, in_state: bool) -> Self {
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
        let Value::Object(root) = self.state else {
            return self.state.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(root.len()))?;
        for (key, value) in root {
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

/// Removes `system.decision_trace` from a deserialized root state; true if it was there.
/// The typed trace is authoritative: the removed copy is only the projection's marker.
fn take_projection(state: &mut Value) -> bool {
    match state.get_mut(SYSTEM_SLICE) {
        Some(Value::Object(system)) => system.shift_remove(DECISION_TRACE).is_some(),
        _ => false,
    }
}

/// Serializes `Option` and `Vec` fields that are left out when empty, as
/// `#[serde(skip_serializing_if)]` would.
fn field_or_skip<S: SerializeStruct, T: Serialize + ?Sized>(
    st: &mut S,
    key: &'static str,
    value: &T,
    skip: bool,
) -> Result<(), S::Error> {
    if skip {
        st.skip_field(key)
    } else {
        st.serialize_field(key, value)
    }
}

impl Serialize for RunState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = 11
            + usize::from(self.message.is_some())
            + usize::from(self.question.is_some())
            + usize::from(!self.uncommitted.is_empty());
        let mut st = serializer.serialize_struct("RunState", len)?;
        st.serialize_field("workflow", &self.workflow)?;
        st.serialize_field("status", &self.status)?;
        st.serialize_field("termination_reason", &self.termination_reason)?;
        field_or_skip(&mut st, "message", &self.message, self.message.is_none())?;
        field_or_skip(&mut st, "question", &self.question, self.question.is_none())?;
        st.serialize_field("state", &self.projected_state())?;
        st.serialize_field("stack", &self.stack)?;
        st.serialize_field("steps", &self.steps)?;
        st.serialize_field("visits", &self.visits)?;
        st.serialize_field("entries", &self.entries)?;
        st.serialize_field("pending", &self.pending)?;
        st.serialize_field("trace", &self.trace)?;
        let none = self.uncommitted.is_empty();
        field_or_skip(&mut st, "uncommitted", &self.uncommitted, none)?;
        st.serialize_field("started_at_ms", &self.started_at_ms)?;
        st.end()
    }
}

/// The fields of a saved [`RunState`], as read.
#[derive(Deserialize)]
#[serde(rename = "RunState")]
struct RunStateData {
    workflow: String,
    status: RunStatus,
    termination_reason: Option<TerminationReason>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    question: Option<String>,
    state: Value,
    stack: Vec<Frame>,
    steps: u32,
    visits: IndexMap<String, u32>,
    entries: IndexMap<String, u32>,
    pending: Pending,
    trace: DecisionTrace,
    #[serde(default)]
    uncommitted: Vec<UncommittedFrame>,
    started_at_ms: u64,
}

impl<'de> Deserialize<'de> for RunState {
    /// Reads a run state; a `state.system.decision_trace` is dropped (the `trace` field is
    /// authoritative) and records that the trace belongs in the state.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let d = RunStateData::deserialize(deserializer)?;
        let mut state = d.state;
        let trace_in_state = take_projection(&mut state);
        Ok(Self {
            workflow: d.workflow,
            status: d.status,
            termination_reason: d.termination_reason,
            message: d.message,
            question: d.question,
            state,
            stack: d.stack,
            steps: d.steps,
            visits: d.visits,
            entries: d.entries,
            pending: d.pending,
            trace: d.trace,
            uncommitted: d.uncommitted,
            started_at_ms: d.started_at_ms,
            clock: StepClock::default(),
            trace_in_state,
        })
    }
}

impl Serialize for RunOutcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = 6
            + usize::from(self.message.is_some())
            + usize::from(self.question.is_some())
            + usize::from(!self.uncommitted.is_empty());
        let mut st = serializer.serialize_struct("RunOutcome", len)?;
        st.serialize_field("workflow", &self.workflow)?;
        st.serialize_field("status", &self.status)?;
        st.serialize_field("termination_reason", &self.termination_reason)?;
        field_or_skip(&mut st, "message", &self.message, self.message.is_none())?;
        st.serialize_field("steps", &self.steps)?;
        st.serialize_field("state", &self.projected_state())?;
        st.serialize_field("trace", &self.trace)?;
        field_or_skip(&mut st, "question", &self.question, self.question.is_none())?;
        let none = self.uncommitted.is_empty();
        field_or_skip(&mut st, "uncommitted", &self.uncommitted, none)?;
        st.end()
    }
}

/// The fields of a serialized [`RunOutcome`], as read.
#[derive(Deserialize)]
#[serde(rename = "RunOutcome")]
struct RunOutcomeData {
    workflow: String,
    status: RunStatus,
    termination_reason: Option<TerminationReason>,
    #[serde(default)]
    message: Option<String>,
    steps: u32,
    state: Value,
    trace: DecisionTrace,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    uncommitted: Vec<UncommittedFrame>,
}

impl<'de> Deserialize<'de> for RunOutcome {
    /// Reads an outcome; a `state.system.decision_trace` is dropped (the `trace` field is
    /// authoritative) and records that the trace belongs in the state.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let d = RunOutcomeData::deserialize(deserializer)?;
        let mut state = d.state;
        let trace_in_state = take_projection(&mut state);
        Ok(Self {
            workflow: d.workflow,
            status: d.status,
            termination_reason: d.termination_reason,
            message: d.message,
            steps: d.steps,
            state,
            trace: d.trace,
            question: d.question,
            uncommitted: d.uncommitted,
            trace_in_state,
        })
    }
}
