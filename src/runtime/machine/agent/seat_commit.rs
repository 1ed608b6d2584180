//! Committing one call of a session that runs in a fork (ADR 0040): the model call or
//! the tool calls recorded exactly as a lone session's are (a step and a `model_call` or
//! `tool_call` item each, the messages appended, the usage counted), leaving what to do
//! next to the fork's pattern (an advisor's report, a team turn's broadcast).

use std::sync::Arc;

use super::commit::{USAGE_UNKNOWN, call_usage, model_call_reason};
use super::reply::{Verdict, ask_for_exit, judge};
use crate::model::ChatMessage;
use crate::runtime::data::{
    CallRecord, HttpAttempt, ModelCallItem, NodeOutput, TerminationReason, ToolCallItem,
    ToolCallStatus, ToolCaller, TraceKind,
};
use crate::runtime::effects::{Fault, ModelReply};
use crate::runtime::machine::commit::{Tx, attach_usage};
use crate::runtime::machine::step::ToolOutcome;
use crate::runtime::plan::agent::AgentPlan;

/// How a committed model call leaves its session.
// Made once per model call and matched at once: boxing the output would allocate for
// nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum TurnEnd {
    /// It ended with a valid exit: this output.
    Exit(NodeOutput),
    /// It goes on: tool calls to answer, or the request for the exit tool sent.
    Going,
    /// It failed: `model_error` (the call failed for good) or `agent_no_exit` (its turns
    /// are used up), with what to say.
    Failed(TerminationReason, String),
}

/// How a failure names the session's agent: `agent tool `ID`` for an agent tool's
/// session (its caller reads the message as the tool's answer), else `agent node `ID``.
pub(crate) fn who(node: &str, caller: Option<&ToolCaller>) -> String {
    match caller {
        Some(_) => format!("agent tool `{node}`"),
        None => format!("agent node `{node}`"),
    }
}

impl Tx<'_> {
    /// Records model call `turn` (attempt `attempt`, `duration_us` long) of session
    /// `index` of node `node` (for supervisor `sup`): one step, its `model_call` item and
    /// its usage; appends the reply to the conversation and reads it (a text reply that
    /// is no exit is answered with a request for the exit tool). `last`: the session
    /// fails `agent_no_exit` without an exit in this reply. `caller`: the tool call an
    /// agent tool's session answers (named in the item's reason).
    pub(crate) fn model_committed(
        &mut self,
        (sup, node): (&Arc<str>, &Arc<str>),
        (agent, caller): (&AgentPlan, Option<&ToolCaller>),
        index: u32,
        ((turn, attempt, duration_us), last): ((u32, u32, u64), bool),
        result: Result<ModelReply, (Fault, Vec<HttpAttempt>)>,
    ) -> TurnEnd {
        let model: Arc<str> = agent.model.as_str().into();
        let reply = match result {
            Ok(reply) => reply,
            Err((fault, failed_attempts)) => {
                let msg = fault.describe().1.to_string();
                self.run.steps += 1;
                let it = self.record(TraceKind::ModelCall, sup);
                it.set_source(node);
                it.set_target(&model);
                it.set_reason(format!("turn {turn}, attempt {attempt}: failed: {msg}"));
                it.duration_us = duration_us;
                it.set_call(Some(CallRecord::Model(ModelCallItem {
                    node: Arc::clone(node),
                    model,
                    turn,
                    attempt,
                    failed_attempts,
                    finish_reason: None,
                    usage_known: false,
                    error: Some(msg.clone()),
                })));
                let msg = format!("{} (model `{}`): {msg}", who(node, caller), agent.model);
                return TurnEnd::Failed(TerminationReason::ModelError, msg);
            }
        };
        let ModelReply {
            message,
            finish_reason,
            usage,
            failed_attempts,
        } = reply;
        let usage = call_usage(agent.price.as_ref(), usage.as_ref());
        self.run.usage_total.add_all(&usage);
        self.run.steps += 1;
        let usage_known = usage.get(USAGE_UNKNOWN).is_none();
        let mut reason = model_call_reason(
            (turn, attempt),
            &failed_attempts,
            finish_reason.as_deref(),
            usage_known,
        );
        if let Some(c) = caller {
            // Which call of which session this agent tool answers.
            reason.push_str(&format!(
                ", for tool call {} of session {}",
                c.call, c.session
            ));
        }
        let it = self.record(TraceKind::ModelCall, sup);
        it.set_source(node);
        it.set_target(&model);
        it.set_reason(reason);
        it.duration_us = duration_us;
        attach_usage(it, usage);
        it.set_call(Some(CallRecord::Model(ModelCallItem {
            node: Arc::clone(node),
            model,
            turn,
            attempt,
            failed_attempts,
            finish_reason,
            usage_known,
            error: None,
        })));
        let verdict = judge(self.plan, agent, &message);
        self.push_messages(index, [message]);
        match verdict {
            Verdict::Exit(output) => TurnEnd::Exit(output),
            Verdict::Calls | Verdict::Text if last => TurnEnd::Failed(
                TerminationReason::AgentNoExit,
                format!(
                    "{} made {turn} model call(s), its max_turns, without a valid `{}` call",
                    who(node, caller),
                    agent.exit().def.name
                ),
            ),
            Verdict::Calls => TurnEnd::Going,
            Verdict::Text => {
                self.push_messages(index, [ChatMessage::user(ask_for_exit(agent))]);
                TurnEnd::Going
            }
        }
    }

    /// Records the tool calls of a reply of session `index` of node `node` (for
    /// supervisor `sup`): one `tool_call` item and one step each (a call skipped for want
    /// of steps counts none), their results appended in the reply's order. False,
    /// recording nothing, when the run was cancelled while they ran.
    pub(crate) fn tools_committed(
        &mut self,
        (sup, node): (&Arc<str>, &Arc<str>),
        index: u32,
        outcomes: Vec<ToolOutcome>,
    ) -> bool {
        if outcomes.iter().any(|o| o.cancelled) {
            return false;
        }
        let mut messages = Vec::with_capacity(outcomes.len());
        for o in outcomes {
            // Its place in the reply (agent tools' answers may come later, ADR 0046).
            let at = self
                .run
                .sessions
                .get(index as usize)
                .map_or(0, |s| super::conversation::call_place(s, &o.call_id));
            if o.status != ToolCallStatus::Skipped {
                self.run.steps += 1;
            }
            if let Some(u) = &o.usage {
                self.run.usage_total.add_all(u);
            }
            let reason = match &o.error {
                None => format!("call {}: ok", o.call_id),
                Some(e) => format!("call {}: error: {e}", o.call_id),
            };
            let record = ToolCallItem {
                caller: Arc::clone(node),
                tool: Arc::clone(&o.tool),
                call_id: o.call_id.clone(),
                index: u32::try_from(at).unwrap_or(u32::MAX),
                status: o.status,
                error: o.error,
            };
            let it = self.record(TraceKind::ToolCall, sup);
            it.set_source(node);
            it.set_target(o.tool);
            it.set_reason(reason);
            it.duration_us = o.duration_us;
            if let Some(u) = o.usage {
                attach_usage(it, u);
            }
            it.set_call(Some(CallRecord::Tool(record)));
            let content = o.content.unwrap_or_else(|| "{}".into());
            messages.push(ChatMessage::tool(o.call_id, content));
        }
        self.push_messages(index, messages);
        true
    }
}
