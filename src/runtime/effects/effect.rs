//! Effects: the calls a step waits on (a node handler or program, a supervisor policy),
//! described as data by the planning half of a step and carried out by a driver.
//!
//! A driver takes the [`Effect`] a [`Step`](crate::runtime::Step) waits on, performs it
//! (with [`Executor::perform`](crate::runtime::Executor::perform), or however it likes: recorded as
//! started in a store, several at once), and feeds the [`EffectOutput`] back. Nothing
//! here touches the run.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::guarded::Fault;
use super::handlers::{NodeInput, PolicyInput, SharedNode, SharedPolicy};
use crate::contracts::{ExecSpec, SupervisorOutput};
use crate::runtime::data::{NodeOutput, Role, RunId, Usage, Writes};

/// What an effect runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EffectKind {
    /// A node's handler or program; its output is the node's writes.
    Node,
    /// A supervisor's policy (handler or program); its output is a routing decision.
    Policy,
    /// A primary node's advisors, all at once; its output is their reports.
    Fork,
    /// One model call of an agent session; its output is the model's reply.
    Model,
    /// The tool calls of one model reply, all at once; its output is their results.
    Tools,
}

/// One call a step waits on. Carries its input, so performing it needs nothing from the
/// run; dropping it (or the future performing it) aborts the call and kills its program.
#[derive(Debug)]
pub struct Effect {
    pub(crate) kind: EffectKind,
    pub(crate) id: Arc<str>,
    pub(crate) step: u32,
    pub(crate) limit: Option<Duration>,
    /// How long to wait before calling (a retry's backoff; zero otherwise).
    pub(crate) delay: Duration,
    pub(crate) call: Call,
    /// The role the call plays (a router's, a team member's or lead's output may carry
    /// more reserved keys).
    pub(crate) role: Role,
}

/// How the effect is carried out. Cloned only for a node with a retry policy (the next
/// attempt's call).
#[derive(Debug, Clone)]
pub(crate) enum Call {
    /// A node handler registered from Rust.
    Node(SharedNode, NodeInput),
    /// A policy handler registered from Rust.
    Policy(SharedPolicy, PolicyInput),
    /// A program, with its stdin and, for a node's program, the ids of the call (set in
    /// its environment).
    Program(Arc<ExecSpec>, Value, Option<CallIds>),
    /// A primary's advisors, run concurrently (see `runtime/machine/advisors/`).
    Fork(Vec<Member>),
    /// One model call of an agent session.
    Model(Box<ModelCall>),
    /// The tool calls of one model reply that run a tool node, run concurrently.
    Tools(Vec<ToolInvocation>),
}

/// A model call: the client, the request and the call's ids (its attempt is what a
/// driver sets; the client's own HTTP retries are inside one attempt).
#[derive(Clone)]
#[cfg_attr(
    not(feature = "agents"),
    expect(
        dead_code,
        reason = "without `agents` no model call is made, only planned"
    )
)]
pub(crate) struct ModelCall {
    /// The model key (for messages).
    pub(crate) model: Arc<str>,
    /// The agent node whose session calls, and the session's turn (for `model_delta`
    /// events).
    pub(crate) node: Arc<str>,
    pub(crate) turn: u32,
    #[cfg(feature = "agents")]
    pub(crate) client: Arc<crate::model::client::ChatClient>,
    /// The conversation so far, the functions offered and the forced choice (the last
    /// turn forces the exit tool).
    pub(crate) messages: Vec<crate::model::ChatMessage>,
    pub(crate) tools: Vec<crate::model::ToolDef>,
    pub(crate) tool_choice: Option<crate::model::ToolChoice>,
    pub(crate) ids: CallIds,
}

impl std::fmt::Debug for ModelCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCall")
            .field("model", &self.model)
            .field("ids", &self.ids)
            .finish_non_exhaustive()
    }
}

/// One tool call that runs a tool node: its place in the reply's calls, and the call.
#[derive(Debug, Clone)]
pub(crate) struct ToolInvocation {
    /// The call's index among the reply's tool calls.
    pub(crate) index: usize,
    /// Its time limit: the tool node's own (or `node_timeout_ms`), capped by the run
    /// deadline.
    pub(crate) limit: Option<Duration>,
    pub(crate) call: Call,
}

/// A model's reply, as the session reads it.
#[derive(Debug)]
pub(crate) struct ModelReply {
    pub(crate) message: crate::model::ChatMessage,
    pub(crate) finish_reason: Option<String>,
    /// `None`: the server sent no usage (unknown).
    pub(crate) usage: Option<crate::model::Usage>,
    /// HTTP attempts that failed before the answer, in order.
    pub(crate) failed_attempts: Vec<crate::runtime::data::HttpAttempt>,
}

/// A model call that failed for good, as the session reads it.
#[derive(Debug)]
pub(crate) struct ModelFailure {
    /// What went wrong: the model, the HTTP status and the server's message.
    pub(crate) message: String,
    /// Every HTTP attempt of the call, in order.
    pub(crate) attempts: Vec<crate::runtime::data::HttpAttempt>,
}

/// What one tool node run gave.
#[derive(Debug)]
pub(crate) struct ToolRan {
    /// The call's index among the reply's tool calls.
    pub(crate) index: usize,
    pub(crate) result: Result<NodeOutput, Fault>,
    pub(crate) duration_us: u64,
}

/// Which call of which run a node call is: what a program with side effects needs to make
/// a repeated call idempotent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallIds {
    pub(crate) run_id: RunId,
    pub(crate) step: u32,
    pub(crate) attempt: u32,
}

impl CallIds {
    /// `PACTGRAPH_RUN_ID`, `PACTGRAPH_STEP` and `PACTGRAPH_ATTEMPT`.
    pub(crate) fn env(self) -> [(&'static str, String); 3] {
        [
            ("PACTGRAPH_RUN_ID", self.run_id.to_string()),
            ("PACTGRAPH_STEP", self.step.to_string()),
            ("PACTGRAPH_ATTEMPT", self.attempt.to_string()),
        ]
    }
}

impl Call {
    /// The attempt a node call is (1 for the first); `None` for a policy call.
    pub(crate) fn attempt(&self) -> Option<u32> {
        match self {
            Call::Node(_, input) => Some(input.attempt),
            Call::Program(_, _, ids) => ids.map(|i| i.attempt),
            Call::Model(m) => Some(m.ids.attempt),
            Call::Tools(calls) => calls.first().and_then(|t| t.call.attempt()),
            // A fork of sessions: its sessions' calls share the step's attempt.
            Call::Fork(members) => members.iter().find_map(|m| match &m.call {
                MemberCall::Session(c) => c.attempt(),
                _ => None,
            }),
            Call::Policy(..) => None,
        }
    }

    /// Makes a node call attempt `n`: in the handler's input, or in the program's stdin
    /// and environment.
    pub(crate) fn set_attempt(&mut self, n: u32) {
        match self {
            Call::Node(_, input) => input.attempt = n,
            Call::Program(_, stdin, ids) => {
                if let Some(ids) = ids {
                    ids.attempt = n;
                    if let Some(m) = stdin.as_object_mut() {
                        m.insert("attempt".into(), n.into());
                    }
                }
            }
            Call::Model(m) => m.ids.attempt = n,
            Call::Tools(calls) => {
                for t in calls {
                    t.call.set_attempt(n);
                }
            }
            Call::Fork(members) => {
                for m in members {
                    if let MemberCall::Session(c) = &mut m.call {
                        c.set_attempt(n);
                    }
                }
            }
            Call::Policy(..) => {}
        }
    }
}

impl Effect {
    /// A node run or a policy call.
    pub fn kind(&self) -> EffectKind {
        self.kind
    }

    /// The node's or the supervisor's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The step it belongs to (steps taken before it).
    pub fn step(&self) -> u32 {
        self.step
    }

    /// Its time limit: its own (or `node_timeout_ms`), capped by the run deadline.
    pub fn time_limit(&self) -> Option<Duration> {
        self.limit
    }

    /// Which attempt of its step's node call it is: what its program reads as `attempt`
    /// on stdin and `PACTGRAPH_ATTEMPT`, and its handler as [`NodeInput::attempt`]. 1 for
    /// a step's first call, higher for a node `retry` policy's later ones, or when a driver
    /// runs a step again (after a crash, say). Always 1 for a policy call or a fork of
    /// plain members; a fork of agent sessions has its sessions' calls' attempt.
    pub fn attempt(&self) -> u32 {
        self.call.attempt().unwrap_or(1)
    }

    /// Makes this call attempt `n` (at least 1). A policy call has no attempt; in a fork,
    /// only its agent sessions' calls have one.
    pub fn set_attempt(&mut self, n: u32) {
        self.call.set_attempt(n.max(1));
    }

    /// How long [`Executor::perform`](crate::runtime::Executor::perform) waits before calling (a retry's backoff).
    pub fn delay(&self) -> Duration {
        self.delay
    }
}

/// What an effect produced, fed back to its step.
#[derive(Debug)]
pub struct EffectOutput {
    pub(crate) result: Result<Produced, Fault>,
    /// Microseconds the call took (0 with a frozen clock).
    pub(crate) duration_us: u64,
    /// The attempt the call was (see [`Effect::attempt`]).
    pub(crate) attempt: u32,
}

/// A successful effect's value.
// A node's output is the common value, moved once from the call to the step: boxing it
// would allocate on every node step.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
#[cfg_attr(
    not(feature = "agents"),
    expect(dead_code, reason = "without `agents` no model replies (or fails)")
)]
pub(crate) enum Produced {
    /// A node's output, its envelope read (see `runtime/data/output.rs`).
    Node(NodeOutput),
    /// A policy's decision.
    Decision(SupervisorOutput),
    /// Advisors' reports, in `members` order.
    Reports(Vec<Report>),
    /// A model's reply.
    Reply(Box<ModelReply>),
    /// A model call that failed for good (after its retries): the error (naming the
    /// model and the HTTP status, never the key) and its HTTP attempts.
    ModelFailed(Box<ModelFailure>),
    /// Tool node runs, in the reply's order.
    ToolResults(Vec<ToolRan>),
}

impl EffectOutput {
    /// True when the call produced a value (writes or a decision).
    pub fn is_ok(&self) -> bool {
        self.result.is_ok()
    }

    /// The failure in words (an error, a panic, garbage, a time-out or cancellation).
    pub fn error(&self) -> Option<String> {
        match &self.result {
            Ok(_) => None,
            Err(
                Fault::Failed(m)
                | Fault::Permanent(m)
                | Fault::Timeout(m)
                | Fault::InvalidOutput(m),
            ) => Some(m.clone()),
            Err(Fault::Cancelled) => Some("cancelled".into()),
        }
    }

    /// How long the call took, in microseconds (0 with a frozen clock).
    pub fn duration_us(&self) -> u64 {
        self.duration_us
    }

    /// The attempt the call was.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

/// One member of a fork, planned: its id, time limit and call.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) id: Arc<str>,
    pub(crate) limit: Option<Duration>,
    pub(crate) call: MemberCall,
    /// An advisor's call is a plain node's; a team member's may broadcast and exit.
    pub(crate) role: Role,
}

/// How a member is carried out.
#[derive(Debug, Clone)]
pub(crate) enum MemberCall {
    /// A handler or program.
    Call(Call),
    /// A `set` node (or one without behaviour): its report is its constants.
    Constant(Writes),
    /// It may not run (its `max_visits` is used up): a failure report, nothing run.
    Refused(String),
    /// An agent member's next call: a model call or its last reply's tool calls (a
    /// [`Call::Model`] or [`Call::Tools`]); its report carries what the call produced.
    Session(Call),
}

/// How a member's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReportStatus {
    Ok = 0,
    Failed = 1,
    Timeout = 2,
}

/// What one member gave.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) advisor: Arc<str>,
    pub(crate) status: ReportStatus,
    pub(crate) output: Option<Writes>,
    /// Team members: the `$broadcast` sent, and whether it sent `$exit: true`.
    pub(crate) broadcast: Option<Value>,
    pub(crate) exit: bool,
    pub(crate) usage: Option<Usage>,
    pub(crate) error: Option<String>,
    pub(crate) duration_us: u64,
    /// The run was cancelled while it ran.
    pub(crate) cancelled: bool,
    /// An agent member's call: what it produced (a reply, tool results), for its session.
    pub(crate) produced: Option<Result<Produced, Fault>>,
}

/// The stdin of a node program:
/// `{"node": id, "input": {slice: value...}, "run_id": id, "step": n, "attempt": n}`, plus
/// `"error"` when a router runs again after an invalid route.
pub(crate) fn node_stdin(id: &str, view: Writes, ids: CallIds, error: Option<String>) -> Value {
    let mut stdin = json!({
        "node": id,
        "input": view,
        "run_id": ids.run_id,
        "step": ids.step,
        "attempt": ids.attempt,
    });
    if let (Some(e), Value::Object(m)) = (error, &mut stdin) {
        m.insert("error".into(), Value::String(e));
    }
    stdin
}
