//! Effects: the calls a step waits on (a node handler or program, a supervisor policy),
//! described as data by the planning half of a step and carried out by a driver.
//!
//! A driver takes the [`Effect`] a [`Step`](super::Step) waits on, performs it (with
//! [`Executor::perform`](super::Executor::perform), or however it likes: recorded as
//! started in a store, several at once), and feeds the [`EffectOutput`] back. Nothing
//! here touches the run.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::advisors::{Member, Report};
use super::data::RunId;
use super::data::Writes;
use super::data::{NodeOutput, Role, accept_as};
use super::executor::Executor;
use super::guarded::{CatchUnwind, Fault, call_guarded, exec_program};
use super::handlers::{NodeInput, PolicyInput, SharedNode, SharedPolicy};
use crate::contracts::condition::json_kind;
use crate::contracts::{ExecSpec, SupervisorOutput};

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
    /// A primary's advisors, run concurrently (see [`super::advisors`]).
    Fork(Vec<Member>),
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
    fn env(self) -> [(&'static str, String); 3] {
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
            Call::Policy(..) | Call::Fork(_) => None,
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
            Call::Policy(..) | Call::Fork(_) => {}
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
    /// runs a step again (after a crash, say). Always 1 for a policy call or a fork.
    pub fn attempt(&self) -> u32 {
        self.call.attempt().unwrap_or(1)
    }

    /// Makes this call attempt `n` (at least 1). A policy call or a fork has no attempt.
    pub fn set_attempt(&mut self, n: u32) {
        self.call.set_attempt(n.max(1));
    }

    /// How long [`Executor::perform`] waits before calling (a retry's backoff).
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
pub(crate) enum Produced {
    /// A node's output, its envelope read (see [`super::output`]).
    Node(NodeOutput),
    /// A policy's decision.
    Decision(SupervisorOutput),
    /// Advisors' reports, in `members` order.
    Reports(Vec<Report>),
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

impl Executor {
    /// Performs an effect: calls the handler or runs the program under the effect's time
    /// limit and this executor's cancellation token, and reads a node's output envelope.
    /// Never panics: a panic, an error, bad output, a time-out or cancellation comes back
    /// as a failed output.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future aborts the handler at its next await point (or
    /// the backoff wait before it) and kills a running program; the run is untouched
    /// (effects never change it).
    pub async fn perform(&self, effect: Effect) -> EffectOutput {
        let attempt = effect.attempt();
        let Effect {
            kind,
            limit,
            delay,
            call,
            role,
            ..
        } = effect;
        if !delay.is_zero() {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => {
                    return EffectOutput { result: Err(Fault::Cancelled), duration_us: 0, attempt };
                }
                _ = tokio::time::sleep(delay) => {}
            }
        }
        let t0 = self.timer();
        let result = match (kind, call) {
            (_, Call::Policy(h, input)) => call_guarded(|| h.0.decide(input), limit, &self.cancel)
                .await
                .map(Produced::Decision),
            (_, Call::Fork(members)) => Ok(Produced::Reports(self.join_members(members).await)),
            (EffectKind::Policy, Call::Program(spec, stdin, _)) => self
                .program(&spec, &stdin, None, limit)
                .await
                .and_then(|v| {
                    serde_json::from_value::<SupervisorOutput>(v)
                        .map(Produced::Decision)
                        .map_err(|e| Fault::Failed(format!("printed an invalid decision: {e}")))
                }),
            (_, call) => self.call_node(limit, call, role).await.map(Produced::Node),
        };
        EffectOutput {
            result,
            duration_us: Self::elapsed(t0),
            attempt,
        }
    }
}

impl Executor {
    /// Calls a node's handler or runs its program under `limit` and the run's
    /// cancellation, and reads its output envelope as `role`'s (a router's may carry
    /// `$route` and `$message`, a team member's or lead's `$broadcast` and more).
    pub(crate) async fn call_node(
        &self,
        limit: Option<Duration>,
        call: Call,
        role: Role,
    ) -> Result<NodeOutput, Fault> {
        match call {
            Call::Node(h, input) => call_guarded(|| h.0.call(input), limit, &self.cancel)
                .await
                .and_then(|out| node_output(out, role)),
            Call::Program(spec, stdin, ids) => {
                match self.program(&spec, &stdin, ids, limit).await {
                    Ok(Value::Object(m)) => node_output(m.into(), role),
                    Ok(other) => Err(Fault::Failed(format!(
                        "printed {} instead of an object of slice writes",
                        json_kind(&other)
                    ))),
                    Err(f) => Err(f),
                }
            }
            Call::Policy(..) | Call::Fork(_) => Err(Fault::Failed(
                "was given a call that is not a node's".into(),
            )),
        }
    }

    /// Runs a program (a node's, with its call ids in the environment, or a policy's) and
    /// returns the JSON it printed. A panic while running it (say, a runtime without I/O)
    /// is a failed call, as a handler's is.
    async fn program(
        &self,
        spec: &ExecSpec,
        stdin: &Value,
        ids: Option<CallIds>,
        limit: Option<Duration>,
    ) -> Result<Value, Fault> {
        let env = ids.map(CallIds::env);
        let env = env.as_ref().map_or(&[][..], |e| &e[..]);
        let run = exec_program(spec, &self.plan.base_dir, stdin, env, limit, &self.cancel);
        match CatchUnwind(Box::pin(run)).await {
            Ok(out) => out,
            Err(panic) => Err(Fault::Failed(panic)),
        }
    }
}

/// Reads a node's output envelope; a refused one is an `invalid_output` fault.
fn node_output(out: NodeOutput, role: Role) -> Result<NodeOutput, Fault> {
    accept_as(out, role).map_err(|e| Fault::InvalidOutput(format!("sent an invalid output: {e}")))
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
