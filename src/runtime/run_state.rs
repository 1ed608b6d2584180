//! The run as plain data: everything a run needs to continue, and its outcome.

use std::sync::Arc;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::callstack::{Frame, UncommittedFrame};
use super::status::{RunStatus, TerminationReason};
use super::trace::DecisionTrace;

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The workflow's name.
    pub workflow: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// Why it ended or paused.
    pub termination_reason: Option<TerminationReason>,
    /// The error or guard message when it failed or stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The question asked, while awaiting input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The last committed root state.
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncommitted: Vec<UncommittedFrame>,
    /// Wall-clock start, in milliseconds since the Unix epoch (for the run deadline).
    pub started_at_ms: u64,
    /// The current step's timestamp (not saved; never part of comparisons).
    #[serde(skip)]
    pub(crate) clock: StepClock,
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
        }
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The workflow's name.
    pub workflow: String,
    /// `completed`, `stopped`, `failed` or `awaiting_input` (`running` only when a
    /// caller asks for the outcome of an unfinished run).
    pub status: RunStatus,
    /// Why it ended.
    pub termination_reason: Option<TerminationReason>,
    /// The error or guard message, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Steps taken.
    pub steps: u32,
    /// The last committed root state (with `system.decision_trace`).
    pub state: Value,
    /// The decision trace.
    pub trace: DecisionTrace,
    /// The question, when awaiting input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// Frames open when the run stopped, reported and not merged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncommitted: Vec<UncommittedFrame>,
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
        }
    }
}
