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

use super::executor::Executor;
use super::guarded::{CatchUnwind, Fault, call_guarded, exec_program};
use super::handlers::{NodeInput, PolicyInput, SharedNode, SharedPolicy, Writes};
use super::output::{NodeOutput, accept};
use super::record::RunId;
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
}

/// One call a step waits on. Carries its input, so performing it needs nothing from the
/// run; dropping it (or the future performing it) aborts the call and kills its program.
#[derive(Debug)]
pub struct Effect {
    pub(crate) kind: EffectKind,
    pub(crate) id: Arc<str>,
    pub(crate) step: u32,
    pub(crate) limit: Option<Duration>,
    pub(crate) call: Call,
}

/// How the effect is carried out.
#[derive(Debug)]
pub(crate) enum Call {
    /// A node handler registered from Rust.
    Node(SharedNode, NodeInput),
    /// A policy handler registered from Rust.
    Policy(SharedPolicy, PolicyInput),
    /// A program, with its stdin and, for a node's program, the ids of the call (set in
    /// its environment).
    Program(Arc<ExecSpec>, Value, Option<CallIds>),
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

    /// The attempt a node call makes (1 unless set): what its program reads as `attempt`
    /// on stdin and `PACTGRAPH_ATTEMPT`, and its handler as [`NodeInput::attempt`]. A
    /// driver that runs a step again (after a crash, say) sets a higher one.
    pub fn attempt(&self) -> u32 {
        match &self.call {
            Call::Node(_, input) => input.attempt,
            Call::Program(_, _, Some(ids)) => ids.attempt,
            _ => 1,
        }
    }

    /// Makes this call attempt `n` (at least 1). A policy call has no attempt.
    pub fn set_attempt(&mut self, n: u32) {
        let n = n.max(1);
        match &mut self.call {
            Call::Node(_, input) => input.attempt = n,
            Call::Program(_, stdin, Some(ids)) => {
                ids.attempt = n;
                if let Some(Value::Object(m)) = Some(stdin)
                    && m.contains_key("attempt")
                {
                    m.insert("attempt".into(), json!(n));
                }
            }
            _ => {}
        }
    }
}

/// What an effect produced, fed back to its step.
#[derive(Debug)]
pub struct EffectOutput {
    pub(crate) result: Result<Produced, Fault>,
    /// Microseconds the call took (0 with a frozen clock).
    pub(crate) duration_us: u64,
}

/// A successful effect's value.
#[derive(Debug)]
pub(crate) enum Produced {
    /// A node's output, its envelope read (see [`super::output`]).
    Node(NodeOutput),
    /// A policy's decision.
    Decision(SupervisorOutput),
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
            Err(Fault::Failed(m) | Fault::Timeout(m) | Fault::InvalidOutput(m)) => Some(m.clone()),
            Err(Fault::Cancelled) => Some("cancelled".into()),
        }
    }

    /// How long the call took, in microseconds (0 with a frozen clock).
    pub fn duration_us(&self) -> u64 {
        self.duration_us
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
    /// Cancel safe: dropping the future aborts the handler at its next await point and
    /// kills a running program; the run is untouched (effects never change it).
    pub async fn perform(&self, effect: Effect) -> EffectOutput {
        let t0 = self.timer();
        let Effect {
            kind, limit, call, ..
        } = effect;
        let result = match call {
            Call::Node(h, input) => call_guarded(|| h.0.call(input), limit, &self.cancel)
                .await
                .and_then(node_output),
            Call::Policy(h, input) => call_guarded(|| h.0.decide(input), limit, &self.cancel)
                .await
                .map(Produced::Decision),
            Call::Program(spec, stdin, ids) => {
                let env = ids.map(CallIds::env);
                let env = env.as_ref().map_or(&[][..], |e| &e[..]);
                let base = &self.plan.base_dir;
                // A panic while running the program (say, a runtime without I/O) is a failed
                // call, as a handler's is.
                let run = exec_program(&spec, base, &stdin, env, limit, &self.cancel);
                let out = match CatchUnwind(Box::pin(run)).await {
                    Ok(out) => out,
                    Err(panic) => Err(Fault::Failed(panic)),
                };
                match (kind, out) {
                    (_, Err(f)) => Err(f),
                    (EffectKind::Node, Ok(Value::Object(m))) => node_output(m.into()),
                    (EffectKind::Node, Ok(other)) => Err(Fault::Failed(format!(
                        "printed {} instead of an object of slice writes",
                        json_kind(&other)
                    ))),
                    (EffectKind::Policy, Ok(v)) => serde_json::from_value::<SupervisorOutput>(v)
                        .map(Produced::Decision)
                        .map_err(|e| Fault::Failed(format!("printed an invalid decision: {e}"))),
                }
            }
        };
        EffectOutput {
            result,
            duration_us: Self::elapsed(t0),
        }
    }
}

/// Reads a node's output envelope; a refused one is an `invalid_output` fault.
fn node_output(out: NodeOutput) -> Result<Produced, Fault> {
    accept(out)
        .map(Produced::Node)
        .map_err(|e| Fault::InvalidOutput(format!("sent an invalid output: {e}")))
}

/// The stdin of a node program:
/// `{"node": id, "input": {slice: value...}, "run_id": id, "step": n, "attempt": n}`.
pub(crate) fn node_stdin(id: &str, view: Writes, ids: CallIds) -> Value {
    json!({
        "node": id,
        "input": view,
        "run_id": ids.run_id,
        "step": ids.step,
        "attempt": ids.attempt,
    })
}
