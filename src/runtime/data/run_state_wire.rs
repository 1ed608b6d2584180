//! A run state's parts as they are written and read: the control as separate fields
//! (status, termination reason, message, question, pending) and the run state's own
//! serialization (summary fields first, then what continuing needs).

use std::sync::Arc;

use indexmap::IndexMap;
use serde::ser::SerializeStruct;
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

/// Which of a run state's serialized fields: those before its root `state`, or after it.
#[derive(Clone, Copy)]
enum Part {
    Head,
    Tail,
}

impl RunState {
    /// Serializes the fields of `part` into `s`, in their order; the optional ones skipped
    /// when empty, as `#[serde(skip_serializing_if)]` skips them.
    fn serialize_part<S: SerializeStruct>(&self, s: &mut S, part: Part) -> Result<(), S::Error> {
        match part {
            Part::Head => {
                s.serialize_field("workflow", &*self.workflow)?;
                s.serialize_field("run_id", &self.run_id)?;
                s.serialize_field("status", &self.status())?;
                s.serialize_field("termination_reason", &self.termination_reason())?;
                optional(s, "message", self.message())?;
                optional(s, "question", self.question())?;
                match &self.control {
                    Control::Running(p) => s.serialize_field("pending", p)?,
                    Control::AwaitingInput { supervisor, .. } => s.serialize_field(
                        "pending",
                        &Pending::Decide {
                            supervisor: Arc::clone(supervisor),
                        },
                    )?,
                    Control::Ended { .. } => s.skip_field("pending")?,
                }
            }
            Part::Tail => {
                // The two maps and the trace are small next to the state.
                s.serialize_field("stack", &self.stack)?;
                s.serialize_field("steps", &self.steps)?;
                s.serialize_field("visits", &self.visits)?;
                s.serialize_field("entries", &self.entries)?;
                s.serialize_field("trace", &self.trace)?;
                unless_empty(s, "uncommitted", &self.uncommitted)?;
                if self.usage_total.is_empty() {
                    s.skip_field("usage_total")?;
                } else {
                    s.serialize_field("usage_total", &self.usage_total)?;
                }
                unless_empty(s, "kept", &self.kept)?;
                s.serialize_field("started_at_ms", &self.started_at_ms)?;
                s.serialize_field("trace_in_state", &self.trace_in_state)?;
                unless_empty(s, "sessions", &self.sessions)?;
            }
        }
        Ok(())
    }

    /// The run state's JSON text, `serde_json::to_string(self)`'s bytes, its root state
    /// written by hand (`json_text::write_fields`, ADR 0070): a run's state at its creation
    /// holds its whole input, which `serde_json` escapes one byte at a time.
    ///
    /// Complexity: linear in the text's length.
    #[cfg(feature = "store")]
    pub(crate) fn to_json_text(&self) -> Result<String, serde_json::Error> {
        use super::json_text::write_fields;
        use super::text_buf::Text;

        let mut out = Vec::with_capacity(4096);
        {
            let mut text = Text::new(&mut out);
            // `{"workflow":...}` without its closing brace, the state, then the tail's
            // fields without its opening brace: one object, the fields in their order.
            serde_json::to_writer(&mut text, &PartOf(self, Part::Head))?;
            text.pop();
            text.put(b",\"state\":");
            write_fields(&mut text, self.state.iter());
            text.push(b',');
            let brace = text.len();
            serde_json::to_writer(&mut text, &PartOf(self, Part::Tail))?;
            text.cut(brace, 1);
        }
        // Written from UTF-8 pieces only; checked, not assumed.
        String::from_utf8(out).map_err(<serde_json::Error as serde::ser::Error>::custom)
    }
}

/// Serializes field `key` when `value` is there, skips it otherwise.
fn optional<S: SerializeStruct>(
    s: &mut S,
    key: &'static str,
    value: Option<&str>,
) -> Result<(), S::Error> {
    match value {
        Some(v) => s.serialize_field(key, v),
        None => s.skip_field(key),
    }
}

/// Serializes field `key` unless `items` is empty.
fn unless_empty<S: SerializeStruct, T: Serialize>(
    s: &mut S,
    key: &'static str,
    items: &[T],
) -> Result<(), S::Error> {
    if items.is_empty() {
        s.skip_field(key)
    } else {
        s.serialize_field(key, items)
    }
}

/// The fields of one [`Part`] of a run state, as an object of their own.
#[cfg(feature = "store")]
struct PartOf<'a>(&'a RunState, Part);

#[cfg(feature = "store")]
impl Serialize for PartOf<'_> {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        let mut s = serializer.serialize_struct("RunState", FIELDS)?;
        self.0.serialize_part(&mut s, self.1)?;
        s.end()
    }
}

/// How many fields a run state has at most.
const FIELDS: usize = 19;

impl Serialize for RunState {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        let mut s = serializer.serialize_struct("RunState", FIELDS)?;
        self.serialize_part(&mut s, Part::Head)?;
        s.serialize_field("state", &self.state)?;
        self.serialize_part(&mut s, Part::Tail)?;
        s.end()
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

// `to_json_text` and `set_control` are the store's.
#[cfg(all(test, feature = "store"))]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::graph::{GraphBuilder, synth};
    use crate::runtime::Executor;
    use crate::validator::ValidGraph;

    /// The text `to_json_text` writes for `run`, checked against `serde_json`'s and read
    /// back as the run.
    fn check(run: &RunState) {
        let text = run.to_json_text().expect("writes");
        assert_eq!(text, serde_json::to_string(run).expect("serializes"));
        let back: RunState = serde_json::from_str(&text).expect("reads back");
        assert_eq!(serde_json::to_string(&back).expect("serializes"), text);
    }

    /// Proves `to_json_text` writes exactly `serde_json::to_string`'s bytes for the run
    /// states of real runs at every step (a supervisor loop, repeated calls, three nested
    /// subgraphs with their frames on the stack), with an input holding quotes, control
    /// characters, non-ASCII text, floats, negative numbers and nested objects; for a run
    /// paused with a question (its `pending` made from the control) and one ended with a
    /// message; and that each text reads back as the same run.
    #[test]
    fn a_run_states_text_is_serde_jsons() {
        let input = json!({"task": ["a\"b\\c", "\u{1}\n\t", "é ✓ 😀", 1.5, -3, null,
            {"k\u{7f}": [true, false, {}], "": []}]});
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let docs = [
            synth::supervisor_loop(4),
            synth::repeated_calls(2),
            synth::nested_levels(3),
        ];
        let mut checked = 0;
        for doc in docs {
            let graph = GraphBuilder::from_document(doc).build().expect("compiles");
            let ex = Executor::builder(ValidGraph::new(graph).expect("valid"))
                .build()
                .expect("builds");
            let mut run = ex.start(input.clone()).expect("starts");
            check(&run);
            while run.is_running() {
                rt.block_on(ex.step(&mut run));
                check(&run);
                checked += 1;
            }
            let mut paused = run.clone();
            paused
                .set_control(
                    RunStatus::AwaitingInput,
                    Some(TerminationReason::AwaitingInput),
                    None,
                    Some("which \"one\"?\n".into()),
                    Some(Pending::Decide {
                        supervisor: Arc::from("boss"),
                    }),
                )
                .expect("a paused run");
            check(&paused);
            let mut ended = run;
            ended
                .set_control(
                    RunStatus::Failed,
                    Some(TerminationReason::NodeFailed),
                    Some("it failed: \u{2}".into()),
                    None,
                    None,
                )
                .expect("an ended run");
            check(&ended);
        }
        assert!(checked > 10, "the runs took their steps");
    }
}
