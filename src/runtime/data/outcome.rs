//! How a run ended (or paused), as a caller inspects it and as `pactgraph run` prints it:
//! [`RunOutcome`] and its serialized form, [`RunSummary`].

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::accounting::Accounting;
use super::callstack::UncommittedFrame;
use super::decision_trace::DecisionTrace;
use super::projected::ProjectedState;
use super::slices::{DECISION_TRACE, State};
use super::status::{RunStatus, TerminationReason};
use crate::contracts::SYSTEM_SLICE;

/// How a run ended (or paused): what a caller inspects.
///
/// As in [`RunState`](super::RunState), the trace is stored once, in [`RunOutcome::trace`]; serialized (as
/// a [`RunSummary`]), it appears once: as `state.system.decision_trace` when the trace
/// belongs in the state, else as `trace`.
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
    /// The last committed root state, without `system.decision_trace` (see
    /// [`RunOutcome::state_json`]).
    pub state: State,
    /// The decision trace.
    pub trace: DecisionTrace,
    /// The question, when awaiting input.
    pub question: Option<String>,
    /// Frames open when the run stopped, reported and not merged.
    pub uncommitted: Vec<UncommittedFrame>,
    /// What the run cost, summed from the trace's usage records (see [`Accounting`]).
    pub accounting: Accounting,
    /// Whether the trace belongs in `state.system.decision_trace` of the serialized state.
    pub(crate) trace_in_state: bool,
}

impl RunOutcome {
    /// The root state as it is shown: [`RunOutcome::state`] with `system.decision_trace`
    /// added (when the trace belongs in the state), streamed without copying the trace.
    pub fn projected_state(&self) -> ProjectedState<'_> {
        ProjectedState::new(&self.state, &self.trace, self.trace_in_state)
    }

    /// The root state as one JSON value, with `system.decision_trace` materialized (when
    /// the trace belongs in the state).
    pub fn state_json(&self) -> Value {
        self.projected_state().to_value()
    }

    /// The outcome's summary, as serialized and as the CLI prints it.
    pub fn summary(&self) -> RunSummary<'_> {
        RunSummary {
            workflow: &self.workflow,
            status: self.status,
            termination_reason: self.termination_reason,
            steps: self.steps,
            message: self.message.as_deref(),
            state: self.projected_state(),
            question: self.question.as_deref(),
            uncommitted: &self.uncommitted,
            accounting: AccountingOf::Kept(&self.accounting),
            trace: (!self.trace_in_state).then_some(&self.trace),
        }
    }
}

/// A summary's accounting: the outcome's, or summed from the trace when serialized.
#[derive(Debug, Clone, Copy)]
pub(super) enum AccountingOf<'a> {
    /// Already summed.
    Kept(&'a Accounting),
    /// Summed from this trace when written.
    Trace(&'a DecisionTrace),
}

impl Serialize for AccountingOf<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AccountingOf::Kept(a) => a.serialize(serializer),
            AccountingOf::Trace(t) => Accounting::from_trace(t).serialize(serializer),
        }
    }
}

/// A run's summary: `{workflow, status, termination_reason, steps, message?, state,
/// question?, uncommitted?, accounting, trace?}`, the trace appearing once (in
/// `state.system.decision_trace`, or as `trace` when it is kept out of the state).
/// What `pactgraph run` prints and how a [`RunOutcome`] serializes; borrows everything.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunSummary<'a> {
    pub(super) workflow: &'a str,
    pub(super) status: RunStatus,
    pub(super) termination_reason: Option<TerminationReason>,
    pub(super) steps: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) message: Option<&'a str>,
    pub(super) state: ProjectedState<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) question: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(super) uncommitted: &'a [UncommittedFrame],
    pub(super) accounting: AccountingOf<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) trace: Option<&'a DecisionTrace>,
}

impl Serialize for RunOutcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.summary().serialize(serializer)
    }
}

/// A serialized [`RunSummary`], as read back into a [`RunOutcome`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SummaryData {
    workflow: String,
    status: RunStatus,
    termination_reason: Option<TerminationReason>,
    steps: u32,
    #[serde(default)]
    message: Option<String>,
    state: State,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    uncommitted: Vec<UncommittedFrame>,
    /// Written for readers; summed again from the trace when read.
    #[serde(default, rename = "accounting")]
    _accounting: Option<Value>,
    #[serde(default)]
    trace: Option<DecisionTrace>,
}

impl<'de> Deserialize<'de> for RunOutcome {
    /// Reads a summary: the trace from `state.system.decision_trace` (removed from the
    /// state) or from `trace`.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let d = SummaryData::deserialize(deserializer)?;
        let mut state = d.state;
        let projected = match state.get_mut(SYSTEM_SLICE) {
            Some(Value::Object(system)) => system.shift_remove(DECISION_TRACE),
            _ => None,
        };
        let (trace, trace_in_state) = match (projected, d.trace) {
            (Some(_), Some(_)) => {
                return Err(D::Error::custom(
                    "the trace appears twice (in state.system.decision_trace and in trace)",
                ));
            }
            (Some(p), None) => (serde_json::from_value(p).map_err(D::Error::custom)?, true),
            (None, Some(t)) => (t, false),
            (None, None) => (DecisionTrace::default(), false),
        };
        Ok(Self {
            accounting: Accounting::from_trace(&trace),
            workflow: d.workflow,
            status: d.status,
            termination_reason: d.termination_reason,
            message: d.message,
            steps: d.steps,
            state,
            trace,
            question: d.question,
            uncommitted: d.uncommitted,
            trace_in_state,
        })
    }
}
