//! The run as plain data: everything a run needs to continue, and its outcome.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;

use super::accounting::Accounting;
use super::callstack::{Frame, KeptChild, UncommittedFrame};
use super::changes::{Changes, RecordedInput, SliceWriter, StepValues};
use super::decision_trace::DecisionTrace;
use super::json_text::write_fields;
use super::outcome::{AccountingOf, RunOutcome, RunSummary};
use super::output::Usage;
use super::pending::Pending;
use super::projected::ProjectedState;
use super::run_id::RunId;
use super::session::Session;
use super::slices::State;
use super::status::{RunStatus, TerminationReason};
use super::text_buf::Text;
use crate::contracts::SYSTEM_SLICE;

/// Where a run stands, as one value: a running run always has a next step, a paused run
/// a question and the supervisor that asked it, an ended run a reason.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Control {
    /// More steps to take.
    Running(Pending),
    /// Paused by `ask_clarification`.
    AwaitingInput {
        /// The question asked.
        question: String,
        /// The supervisor that asked and decides again on resume.
        supervisor: Arc<str>,
    },
    /// Completed, stopped or failed.
    Ended {
        /// `completed`, `stopped` or `failed`.
        status: RunStatus,
        /// Why.
        reason: TerminationReason,
        /// The error or guard message (stopped and failed runs).
        message: Option<String>,
    },
}

/// A run in progress (or finished): state, call stack, counters, trace, what happens
/// next and status. Plain serializable data: save it between any two steps and continue
/// later with an executor built from the same graph and handlers.
///
/// The decision trace is stored once, in [`RunState::trace`]. When the executor keeps
/// the trace in the state (the default, see
/// [`trace_in_state`](crate::runtime::ExecutorBuilder::trace_in_state)), the outcome and
/// [`RunState::state_json`] show it as `state.system.decision_trace`, a projection; the
/// serialized run state holds it only under `trace`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunState {
    /// The workflow's name.
    pub(crate) workflow: String,
    /// The run's id (made by [`Executor::start`](crate::runtime::Executor::start); a
    /// [`RunRecord`](crate::runtime::RunRecord) of the run carries the same one). Node programs and
    /// handlers get it, to make repeated calls idempotent.
    pub(crate) run_id: RunId,
    pub(crate) control: Control,
    /// The last committed root state, without `system.decision_trace` (a projection of
    /// [`RunState::trace`], see [`RunState::state_json`]).
    pub(crate) state: State,
    /// Open subgraph calls, outermost first.
    pub(crate) stack: Vec<Frame>,
    /// Steps taken (node executions plus subgraph entries).
    pub(crate) steps: u32,
    /// Times each node has run.
    pub(crate) visits: IndexMap<String, u32>,
    /// Times each subgraph has been entered.
    pub(crate) entries: IndexMap<String, u32>,
    /// The decision trace so far.
    pub(crate) trace: DecisionTrace,
    /// Frames that were open when the run stopped (reported, not merged).
    pub(crate) uncommitted: Vec<UncommittedFrame>,
    /// The sum of every `$usage` the run's nodes reported (empty when none did).
    pub(crate) usage_total: Usage,
    /// Final child states of `chat` subgraphs that returned, kept at their calling level
    /// for `clarify` (outermost level first).
    pub(crate) kept: Vec<KeptChild>,
    /// Wall-clock start, in milliseconds since the Unix epoch (for the run deadline).
    pub(crate) started_at_ms: u64,
    /// Whether the trace is projected into `state.system.decision_trace` of the outcome
    /// and of [`RunState::state_json`].
    pub(crate) trace_in_state: bool,
    /// The agent sessions of the run, one per agent node visit, in the order they began.
    pub(crate) sessions: Vec<Session>,
    /// The slices written since a store started the log (not run data).
    pub(crate) changes: Changes,
}

impl RunState {
    /// The workflow's name.
    pub fn workflow(&self) -> &str {
        &self.workflow
    }

    /// The run's id (made by [`Executor::start`](crate::runtime::Executor::start)).
    pub fn run_id(&self) -> RunId {
        self.run_id
    }

    /// The last committed root state, without `system.decision_trace` (see
    /// [`RunState::state_json`] for the state with it).
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Open subgraph calls, outermost first.
    pub fn stack(&self) -> &[Frame] {
        &self.stack
    }

    /// Steps taken (node executions plus subgraph entries).
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// Times each node has run.
    pub fn visits(&self) -> &IndexMap<String, u32> {
        &self.visits
    }

    /// Counts one more run of node `id` (its step is counted apart). A few nodes visited
    /// are found by scanning, without hashing the id (as `contracts::lookup` reads
    /// states).
    #[inline]
    pub(crate) fn count_visit(&mut self, id: &str) {
        let visits = &mut self.visits;
        let counted = if visits.len() <= crate::contracts::lookup::SCAN_MAX {
            visits
                .iter_mut()
                .find_map(|(k, n)| (k.as_str() == id).then_some(n))
        } else {
            visits.get_mut(id)
        };
        match counted {
            Some(n) => *n += 1,
            None => {
                self.visits.insert(id.to_string(), 1);
            }
        }
    }

    /// Times each subgraph has been entered.
    pub fn entries(&self) -> &IndexMap<String, u32> {
        &self.entries
    }

    /// The decision trace so far.
    pub fn trace(&self) -> &DecisionTrace {
        &self.trace
    }

    /// Frames that were open when the run stopped (reported, not merged).
    pub fn uncommitted(&self) -> &[UncommittedFrame] {
        &self.uncommitted
    }

    /// The sum of every `$usage` the run's nodes reported (empty when none did).
    pub fn usage_total(&self) -> &Usage {
        &self.usage_total
    }

    /// Final child states of `chat` subgraphs that returned, kept for `clarify`.
    pub fn kept(&self) -> &[KeptChild] {
        &self.kept
    }

    /// The agent sessions, one per agent node visit, in the order they began.
    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    /// Wall-clock start, in milliseconds since the Unix epoch (for the run deadline).
    pub fn started_at_ms(&self) -> u64 {
        self.started_at_ms
    }

    /// Where the run stands.
    pub fn status(&self) -> RunStatus {
        match &self.control {
            Control::Running(_) => RunStatus::Running,
            Control::AwaitingInput { .. } => RunStatus::AwaitingInput,
            Control::Ended { status, .. } => *status,
        }
    }

    /// Why it ended or paused (`None` while running).
    pub fn termination_reason(&self) -> Option<TerminationReason> {
        match &self.control {
            Control::Running(_) => None,
            Control::AwaitingInput { .. } => Some(TerminationReason::AwaitingInput),
            Control::Ended { reason, .. } => Some(*reason),
        }
    }

    /// The error or guard message of a stopped or failed run.
    pub fn message(&self) -> Option<&str> {
        match &self.control {
            Control::Ended { message, .. } => message.as_deref(),
            _ => None,
        }
    }

    /// The question asked, while awaiting input.
    pub fn question(&self) -> Option<&str> {
        match &self.control {
            Control::AwaitingInput { question, .. } => Some(question),
            _ => None,
        }
    }

    /// What the next step does, while running.
    pub fn pending(&self) -> Option<&Pending> {
        match &self.control {
            Control::Running(p) => Some(p),
            _ => None,
        }
    }

    /// Current call depth (0 at the root).
    pub fn depth(&self) -> u32 {
        u32::try_from(self.stack.len()).unwrap_or(u32::MAX)
    }

    /// The state of the current level (the innermost frame's child state, or the root).
    pub fn level_state(&self) -> &State {
        self.stack.last().map_or(&self.state, |f| &f.state)
    }

    /// Writes into the current level's slices (recorded in the change log when on).
    pub(crate) fn level_state_mut(&mut self) -> SliceWriter<'_> {
        let level = self.stack.len();
        let state = match self.stack.last_mut() {
            Some(f) => &mut f.state,
            None => &mut self.state,
        };
        SliceWriter {
            state,
            changes: &mut self.changes,
            level,
            values: true,
        }
    }

    /// Writes into the root state's slices (recorded in the change log when on).
    pub(crate) fn root_state_mut(&mut self) -> SliceWriter<'_> {
        SliceWriter {
            state: &mut self.state,
            changes: &mut self.changes,
            level: 0,
            values: true,
        }
    }

    /// Appends `messages` to session `index`, which holds `from` messages (a session
    /// begun by the step comes with its `head`); refuses a delta that does not fit.
    #[cfg(feature = "store")]
    pub(crate) fn apply_session_delta(
        &mut self,
        index: usize,
        head: Option<&Session>,
        from: usize,
        messages: &[crate::model::ChatMessage],
    ) -> Result<(), String> {
        if let Some(h) = head {
            if index != self.sessions.len() || from != 0 {
                return Err(format!(
                    "the delta begins session {index}, the run has {} sessions",
                    self.sessions.len()
                ));
            }
            self.sessions.push(h.clone_head());
        }
        let Some(s) = self.sessions.get_mut(index) else {
            return Err(format!(
                "the delta extends session {index}, which the run lacks"
            ));
        };
        if s.messages.len() != from {
            return Err(format!(
                "the delta extends session {index} from message {from}, it holds {}",
                s.messages.len()
            ));
        }
        s.messages.extend_from_slice(messages);
        Ok(())
    }

    /// Starts recording which slices the following transitions write (see
    /// `store::Before::tracking`), dropping an earlier log.
    #[cfg(feature = "store")]
    pub(crate) fn track_changes(&mut self) {
        self.changes.start();
    }

    /// Starts recording what each node run writes (and, before the run's first step, its
    /// input), for the `step` and `run_started` events the next commits make
    /// (docs/spec/events.md); [`RunState::events_made`] forgets what they carried. Only a
    /// store's driver and an executor with an event bus record: other runs pay one branch
    /// per node run.
    pub(crate) fn record_values(&mut self) {
        self.record_values_as(false);
    }

    /// [`RunState::record_values`], the input recorded as its JSON text (written once,
    /// not copied: a store's driver writes nothing else of it, ADR 0056).
    #[cfg(any(feature = "store", test))]
    pub(crate) fn record_values_as_text(&mut self) {
        self.record_values_as(true);
    }

    fn record_values_as(&mut self, text: bool) {
        let fresh = self.steps == 0 && self.trace.is_empty();
        let state = &self.state;
        self.changes.record_values(|| {
            fresh.then(|| {
                let input = state.iter().filter(|(k, _)| k.as_str() != SYSTEM_SLICE);
                if text {
                    let mut out = Vec::new();
                    write_fields(&mut Text::new(&mut out), input);
                    let out = String::from_utf8(out).expect("written from UTF-8 text");
                    RecordedInput::Text(out.into_boxed_str())
                } else {
                    RecordedInput::Value(Value::Object(
                        input.map(|(k, v)| (k.clone(), v.clone())).collect(),
                    ))
                }
            })
        });
    }

    /// Opens a subgraph's frame (a call or a clarification) on top of the stack, recording
    /// it for the `step` events while values are recorded.
    pub(crate) fn push_frame(&mut self, frame: Frame) {
        let level = self.stack.len() + 1;
        self.changes.opened_frame(level, &frame.state);
        self.changes.forget_decision();
        self.stack.push(frame);
    }

    /// Forgets the last rule decision (ADR 0072): for a change of the state or frames
    /// other than through [`RunState::level_state_mut`], [`RunState::push_frame`] and
    /// [`RunState::pop_frame`].
    pub(crate) fn forget_decision(&mut self) {
        self.changes.forget_decision();
    }

    /// Closes the innermost frame (a return, or a guard ending it), if any.
    pub(crate) fn pop_frame(&mut self) -> Option<Frame> {
        self.changes.forget_decision();
        self.stack.pop()
    }

    /// Marks where the slice changes made so far are seen from: the next trace item.
    /// Called before a step commits (docs/spec/events.md, `changes`).
    #[inline(always)]
    pub(crate) fn values_seen_from_here(&mut self) {
        let len = self.trace.len();
        self.changes.stamp(len);
    }

    /// The events of the transitions up to now are made: what they carried is forgotten.
    pub(crate) fn events_made(&mut self) {
        self.changes.clear_values();
    }

    /// What the recorded transitions' events carry, if recording.
    pub(crate) fn step_values(&self) -> Option<&StepValues> {
        self.changes.values()
    }

    /// The subgraph of the current level (`None` at the root).
    pub fn current_subgraph(&self) -> Option<&str> {
        self.stack.last().map(|f| &*f.subgraph_id)
    }

    /// True while more steps can be taken.
    pub fn is_running(&self) -> bool {
        matches!(self.control, Control::Running(_))
    }

    /// The outcome of the run as it stands.
    pub fn outcome(&self) -> RunOutcome {
        self.clone().into_outcome()
    }

    /// The outcome, consuming the run state (no copies).
    pub fn into_outcome(self) -> RunOutcome {
        let (status, termination_reason) = (self.status(), self.termination_reason());
        let (message, question) = match self.control {
            Control::Ended { message, .. } => (message, None),
            Control::AwaitingInput { question, .. } => (None, Some(question)),
            Control::Running(_) => (None, None),
        };
        RunOutcome {
            accounting: Accounting::from_trace(&self.trace),
            workflow: self.workflow,
            status,
            termination_reason,
            message,
            steps: self.steps,
            state: self.state,
            trace: self.trace,
            question,
            uncommitted: self.uncommitted,
            trace_in_state: self.trace_in_state,
        }
    }

    /// The root state as it is shown: [`RunState::state`] with `system.decision_trace`
    /// added (when the trace belongs in the state), streamed without copying the trace.
    pub fn projected_state(&self) -> ProjectedState<'_> {
        ProjectedState::new(&self.state, &self.trace, self.trace_in_state)
    }

    /// The root state as one JSON value, with `system.decision_trace` materialized (when
    /// the trace belongs in the state).
    pub fn state_json(&self) -> Value {
        self.projected_state().to_value()
    }

    /// The run's summary as the CLI prints it (see [`RunSummary`]).
    pub fn summary(&self) -> RunSummary<'_> {
        RunSummary {
            workflow: &self.workflow,
            status: self.status(),
            termination_reason: self.termination_reason(),
            steps: self.steps,
            message: self.message(),
            state: self.projected_state(),
            question: self.question(),
            uncommitted: &self.uncommitted,
            accounting: AccountingOf::Trace(&self.trace),
            trace: (!self.trace_in_state).then_some(&self.trace),
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
