//! Performing effects: a handler called or a program run under the effect's time limit
//! and the run's cancellation, a node's output envelope read, a fork's members joined.
//! What performing needs from its executor (where programs run, the clock, the token) is
//! a [`Performer`]; nothing here touches the run.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::effect::{
    Call, CallIds, Effect, EffectKind, EffectOutput, Member, MemberCall, Produced, Report,
    ReportStatus,
};
use super::guarded::{CatchUnwind, Fault, call_guarded, exec_program};
use crate::contracts::condition::json_kind;
use crate::contracts::{ExecSpec, SupervisorOutput};
use crate::runtime::data::{Clock, NodeOutput, Role, RunEvents, accept_as, elapsed};

/// What performing an effect needs from the executor that planned it: the folder its
/// programs run in, the clock its durations come from, the token that cancels it, and
/// where a streamed model reply's pieces are published. Made per effect, copied freely.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(feature = "agents"),
    expect(dead_code, reason = "without `agents` no model reply is streamed")
)]
pub(crate) struct Performer<'a> {
    pub(crate) base_dir: &'a Path,
    pub(crate) clock: Clock,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) events: Option<&'a RunEvents>,
}

impl Performer<'_> {
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
    pub(crate) async fn perform(self, effect: Effect) -> EffectOutput {
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
        let t0 = self.clock.timer();
        let result = match (kind, call) {
            (_, Call::Policy(h, input)) => call_guarded(|| h.0.decide(input), limit, self.cancel)
                .await
                .map(Produced::Decision),
            (_, Call::Fork(members)) => Ok(Produced::Reports(self.join_members(members).await)),
            (_, Call::Model(call)) => Box::pin(self.call_model(limit, *call)).await,
            (_, Call::Tools(calls)) => Ok(Produced::ToolResults(
                Box::pin(self.call_tools(calls)).await,
            )),
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
            duration_us: elapsed(t0),
            attempt,
        }
    }
    /// Calls a node's handler or runs its program under `limit` and the run's
    /// cancellation, and reads its output envelope as `role`'s (a router's may carry
    /// `$route` and `$message`, a team member's or lead's `$broadcast` and more).
    pub(crate) async fn call_node(
        self,
        limit: Option<Duration>,
        call: Call,
        role: Role,
    ) -> Result<NodeOutput, Fault> {
        match call {
            Call::Node(h, input) => call_guarded(|| h.0.call(input), limit, self.cancel)
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
            Call::Policy(..) | Call::Fork(_) | Call::Model(_) | Call::Tools(_) => Err(
                Fault::Failed("was given a call that is not a node's".into()),
            ),
        }
    }

    /// Runs a program (a node's, with its call ids in the environment, or a policy's) and
    /// returns the JSON it printed. A panic while running it (say, a runtime without I/O)
    /// is a failed call, as a handler's is.
    async fn program(
        self,
        spec: &ExecSpec,
        stdin: &Value,
        ids: Option<CallIds>,
        limit: Option<Duration>,
    ) -> Result<Value, Fault> {
        let env = ids.map(CallIds::env);
        let env = env.as_ref().map_or(&[][..], |e| &e[..]);
        let run = exec_program(spec, self.base_dir, stdin, env, limit, self.cancel);
        match CatchUnwind(Box::pin(run)).await {
            Ok(out) => out,
            Err(panic) => Err(Fault::Failed(panic)),
        }
    }

    /// Runs every member at once and waits for all of them. Never fails: an error, a
    /// panic, bad output or a time-out is that member's failure report.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops every member's call: handlers are aborted at their next
    /// await point and programs' process groups are killed.
    pub(crate) async fn join_members(self, members: Vec<Member>) -> Vec<Report> {
        futures_util::future::join_all(members.into_iter().map(|m| self.run_member(m))).await
    }

    async fn run_member(self, m: Member) -> Report {
        let t0 = self.clock.timer();
        let result = match m.call {
            MemberCall::Session(call) => {
                // An agent member's call: its own time limit and the run's cancellation
                // abort it (the model's HTTP request or the tool programs).
                let produced = Box::pin(self.session_call(m.limit, call)).await;
                let cancelled = produced.as_ref().err() == Some(&Fault::Cancelled);
                return Report {
                    advisor: m.id,
                    status: ReportStatus::Ok,
                    output: None,
                    broadcast: None,
                    exit: false,
                    usage: None,
                    error: None,
                    duration_us: elapsed(t0),
                    cancelled,
                    produced: Some(produced),
                };
            }
            // Constants are read as the role's envelope (a team member's may broadcast).
            MemberCall::Constant(w) => accept_as(w.into(), m.role)
                .map_err(|e| Fault::InvalidOutput(format!("sent an invalid output: {e}"))),
            MemberCall::Refused(msg) => Err(Fault::Failed(msg)),
            // Boxed: the call's future is large (a time limit, the cancellation waiter),
            // and every member's future is moved into the join at its full size.
            MemberCall::Call(call) => Box::pin(self.call_node(m.limit, call, m.role)).await,
        };
        let duration_us = elapsed(t0);
        let (mut broadcast, mut exit) = (None, false);
        let (status, output, usage, error, cancelled) = match result {
            Ok(out) => {
                broadcast = out.broadcast;
                exit = out.exit;
                (ReportStatus::Ok, Some(out.writes), out.usage, None, false)
            }
            Err(fault) => {
                let status = match fault {
                    Fault::Timeout(_) => ReportStatus::Timeout,
                    _ => ReportStatus::Failed,
                };
                let cancelled = fault == Fault::Cancelled;
                (
                    status,
                    None,
                    None,
                    Some(fault.describe().1.to_string()),
                    cancelled,
                )
            }
        };
        Report {
            advisor: m.id,
            status,
            output,
            broadcast,
            exit,
            usage,
            error,
            duration_us,
            cancelled,
            produced: None,
        }
    }

    /// An agent member's call (a model call, or a reply's tool calls) under the member's
    /// time limit: passing it aborts the call, a `timeout`.
    async fn session_call(self, limit: Option<Duration>, call: Call) -> Result<Produced, Fault> {
        let work = async {
            match call {
                Call::Model(m) => self.call_model(limit, *m).await,
                Call::Tools(calls) => Ok(Produced::ToolResults(self.call_tools(calls).await)),
                // A session's tool calls with agent tools among them (ADR 0046): its own
                // calls and the agent tools' sessions' calls, at once.
                Call::Fork(members) => Ok(Produced::Reports(
                    Box::pin(self.join_members(members)).await,
                )),
                _ => Err(Fault::Failed(
                    "was given a call that is not a session's".into(),
                )),
            }
        };
        match limit {
            Some(d) => tokio::time::timeout(d, work).await.unwrap_or_else(|_| {
                Err(Fault::Timeout(format!(
                    "did not finish within its time limit of {} ms",
                    d.as_millis()
                )))
            }),
            None => work.await,
        }
    }
}

/// Reads a node's output envelope; a refused one is an `invalid_output` fault.
fn node_output(out: NodeOutput, role: Role) -> Result<NodeOutput, Fault> {
    accept_as(out, role).map_err(|e| Fault::InvalidOutput(format!("sent an invalid output: {e}")))
}
