//! A run state's parts as they are written and read: the control as separate fields
//! (status, termination reason, message, question, pending) and the run state's own
//! serialization (summary fields first, then what continuing needs).

use std::sync::Arc;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize, Serializer};

use super::callstack::{Frame, KeptChild, UncommittedFrame};
use super::changes::Changes;
use super::decision_trace::DecisionTrace;
use super::output::Usage;
use super::pending::Pending;
use super::run_id::RunId;
use super::run_state::{Control, RunState};
use super::session::Session;
use super::slices::State;
use super::status::{RunStatus, TerminationReason};

impl RunState {
    /// The control as the fields the run state serializes: status, termination reason,
    /// message, question and pending (for a paused run, the supervisor that asked).
    #[cfg(feature = "store")]
    pub(crate) fn control_parts(
        &self,
    ) -> (
        RunStatus,
        Option<TerminationReason>,
        Option<&str>,
        Option<&str>,
        Option<Pending>,
    ) {
        let pending = match &self.control {
            Control::Running(p) => Some(p.clone()),
            Control::AwaitingInput { supervisor, .. } => Some(Pending::Decide {
                supervisor: Arc::clone(supervisor),
            }),
            Control::Ended { .. } => None,
        };
        (
            self.status(),
            self.termination_reason(),
            self.message(),
            self.question(),
            pending,
        )
    }

    /// Sets the control from its serialized fields (see [`RunState::control_parts`]).
    #[cfg(feature = "store")]
    pub(crate) fn set_control(
        &mut self,
        status: RunStatus,
        termination_reason: Option<TerminationReason>,
        message: Option<String>,
        question: Option<String>,
        pending: Option<Pending>,
    ) -> Result<(), String> {
        self.control =
            Self::control_from_parts(status, termination_reason, message, question, pending)?;
        Ok(())
    }

    /// The control its serialized fields describe, refusing parts that contradict each
    /// other (running with nothing pending, paused without a question, ended without a
    /// reason).
    pub(crate) fn control_from_parts(
        status: RunStatus,
        termination_reason: Option<TerminationReason>,
        message: Option<String>,
        question: Option<String>,
        pending: Option<Pending>,
    ) -> Result<Control, String> {
        Ok(match (status, pending, question, termination_reason) {
            (RunStatus::Running, Some(p), None, None) => Control::Running(p),
            (RunStatus::Running, None, _, _) => {
                return Err("a running run needs `pending`".into());
            }
            (
                RunStatus::AwaitingInput,
                Some(Pending::Decide { supervisor }),
                Some(question),
                Some(TerminationReason::AwaitingInput),
            ) => Control::AwaitingInput {
                question,
                supervisor,
            },
            (RunStatus::AwaitingInput, ..) => {
                return Err(
                    "a run awaiting input needs `question`, `pending: {\"decide\": ...}` \
                     and termination_reason `awaiting_input`"
                        .into(),
                );
            }
            (status, None, None, Some(reason)) => Control::Ended {
                status,
                reason,
                message,
            },
            (status, ..) => {
                return Err(format!(
                    "a `{status}` run needs a termination_reason and no `pending` or `question`"
                ));
            }
        })
    }
}

// ---- the run state's own serialization: summary fields, then what continuing needs ----

/// The serialized form of a [`RunState`], as read (it is written from borrowed fields in
/// the same order). The trace is written once, under `trace`; the state has no projection.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename = "RunState")]
struct RunStateData {
    workflow: String,
    run_id: RunId,
    status: RunStatus,
    termination_reason: Option<TerminationReason>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    pending: Option<Pending>,
    state: State,
    stack: Vec<Frame>,
    steps: u32,
    visits: IndexMap<String, u32>,
    entries: IndexMap<String, u32>,
    trace: DecisionTrace,
    #[serde(default)]
    uncommitted: Vec<UncommittedFrame>,
    #[serde(default)]
    usage_total: Usage,
    #[serde(default)]
    kept: Vec<KeptChild>,
    started_at_ms: u64,
    trace_in_state: bool,
    #[serde(default)]
    sessions: Vec<Session>,
}

impl Serialize for RunState {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        // Borrowed fields; the two maps and the trace are small next to the state.
        #[derive(Serialize)]
        struct Borrowed<'a> {
            workflow: &'a str,
            run_id: RunId,
            status: RunStatus,
            termination_reason: Option<TerminationReason>,
            #[serde(skip_serializing_if = "Option::is_none")]
            message: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            question: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            pending: Option<&'a Pending>,
            state: &'a State,
            stack: &'a [Frame],
            steps: u32,
            visits: &'a IndexMap<String, u32>,
            entries: &'a IndexMap<String, u32>,
            trace: &'a DecisionTrace,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            uncommitted: &'a [UncommittedFrame],
            #[serde(skip_serializing_if = "Usage::is_empty")]
            usage_total: &'a Usage,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            kept: &'a [KeptChild],
            started_at_ms: u64,
            trace_in_state: bool,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            sessions: &'a [Session],
        }
        let pending = match &self.control {
            Control::Running(p) => Some(p),
            _ => None,
        };
        let asked;
        let pending = match &self.control {
            Control::AwaitingInput { supervisor, .. } => {
                asked = Pending::Decide {
                    supervisor: Arc::clone(supervisor),
                };
                Some(&asked)
            }
            _ => pending,
        };
        Borrowed {
            workflow: &self.workflow,
            run_id: self.run_id,
            status: self.status(),
            termination_reason: self.termination_reason(),
            message: self.message(),
            question: self.question(),
            pending,
            state: &self.state,
            stack: &self.stack,
            steps: self.steps,
            visits: &self.visits,
            entries: &self.entries,
            trace: &self.trace,
            uncommitted: &self.uncommitted,
            usage_total: &self.usage_total,
            kept: &self.kept,
            started_at_ms: self.started_at_ms,
            trace_in_state: self.trace_in_state,
            sessions: &self.sessions,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RunState {
    /// Reads a run state, refusing one whose parts contradict each other (running with
    /// nothing pending, paused without a question, ended without a reason).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let d = RunStateData::deserialize(deserializer)?;
        let control = RunState::control_from_parts(
            d.status,
            d.termination_reason,
            d.message,
            d.question,
            d.pending,
        )
        .map_err(D::Error::custom)?;
        Ok(Self {
            workflow: d.workflow,
            run_id: d.run_id,
            control,
            state: d.state,
            stack: d.stack,
            steps: d.steps,
            visits: d.visits,
            entries: d.entries,
            trace: d.trace,
            uncommitted: d.uncommitted,
            usage_total: d.usage_total,
            kept: d.kept,
            started_at_ms: d.started_at_ms,
            trace_in_state: d.trace_in_state,
            sessions: d.sessions,
            changes: Changes::default(),
        })
    }
}
