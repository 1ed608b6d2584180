//! Committing an agent session's step: the model call or tool calls recorded (one
//! `model_call` or `tool_call` item and one step each), their messages appended to the
//! session, their usage counted, and then the session goes on, ends the node with its
//! exit's writes, or fails it (`model_error`, `agent_no_exit`).

use std::sync::Arc;

use serde_json::Number;

use super::plan::pending_session;
use super::reply::{Verdict, ask_for_exit, judge};
use crate::contracts::Price;
use crate::model::ChatMessage;
use crate::runtime::data::{
    COST_USD, Control, INPUT_TOKENS, OUTPUT_TOKENS, Session, TerminationReason, TraceKind, Usage,
};
use crate::runtime::effects::{Fault, ModelReply};
use crate::runtime::machine::commit::{Tx, attach_usage};
use crate::runtime::machine::step::{
    Level, NodeResult, NodeStep, Ran, SessionStep, SessionWork, StageExtra, ToolOutcome,
};
use crate::runtime::plan::agent::AgentPlan;

/// The usage name counting model calls whose server sent no usage: their tokens are
/// unknown (never guessed), so a sum with it is incomplete.
pub(crate) const USAGE_UNKNOWN: &str = "usage_unknown";

/// The usage name of cached input tokens.
const CACHED_INPUT_TOKENS: &str = "cached_input_tokens";

impl Tx<'_> {
    /// Commits an agent session's step.
    pub(crate) fn session(&mut self, level: Level<'_>, mut ss: Box<SessionStep<'_>>) {
        self.chain = ss.chain.clone();
        let work = std::mem::replace(&mut ss.work, SessionWork::Failed(String::new()));
        if let SessionWork::Failed(msg) = work {
            let node = Arc::clone(&ss.np.id);
            let sup = Arc::clone(&ss.dispatcher);
            return self.fail_after_run(TerminationReason::NodeFailed, msg, sup, (&node, 0), None);
        }
        if let SessionWork::Model {
            result: Some(Err(fault @ (Fault::Cancelled | Fault::Timeout(_)))),
            ..
        } = &work
        {
            // Nothing of the call is kept: the run stops (cancelled, or out of time).
            let (node, sup) = (Arc::clone(&ss.np.id), Arc::clone(&ss.dispatcher));
            return self.fault(&node, "agent node", fault.clone(), Some(sup));
        }
        let index = match ss.session {
            Some(i) => i,
            None => {
                let visit = self.run.visits.get(&*ss.np.id).copied().unwrap_or(0) + 1;
                self.run.sessions.push(Session {
                    node: Arc::clone(&ss.np.id),
                    visit,
                    model: ss.agent.model.clone(),
                    step: self.run.steps,
                    messages: std::mem::take(&mut ss.opening),
                });
                u32::try_from(self.run.sessions.len() - 1).unwrap_or(u32::MAX)
            }
        };
        match work {
            SessionWork::Model {
                turn,
                result,
                attempt,
                duration_us,
            } => {
                let result = result.unwrap_or_else(|| {
                    Err(Fault::Failed(
                        "was committed before its reply arrived".into(),
                    ))
                });
                self.model_turn(level, ss, index, (turn, attempt, duration_us), result);
            }
            SessionWork::Tools(outcomes) => self.tool_results(ss, index, outcomes),
            SessionWork::Failed(_) => {}
        }
    }

    /// Commits model call `turn` (attempt `attempt`, `duration_us` long) and reads its
    /// reply: the session goes on, ends the node, or fails it.
    fn model_turn(
        &mut self,
        level: Level<'_>,
        ss: Box<SessionStep<'_>>,
        index: u32,
        call: (u32, u32, u64),
        result: Result<ModelReply, Fault>,
    ) {
        let node = Arc::clone(&ss.np.id);
        let sup = Arc::clone(&ss.dispatcher);
        let last = call.0 >= ss.agent.max_turns();
        match self.model_committed(&sup, &node, ss.agent, index, (call, last), result) {
            TurnEnd::Exit(output) => {
                let (total_us, usage) = self.session_totals(index);
                let extra = StageExtra::owing(&ss.owed);
                let SessionStep {
                    np,
                    dispatcher,
                    kind,
                    source,
                    chain,
                    after,
                    ..
                } = *ss;
                let ran = Ran {
                    result: Ok(output),
                    failed: Vec::new(),
                };
                let ns = NodeStep {
                    np,
                    dispatcher,
                    kind,
                    source,
                    chain,
                    result: NodeResult::Session(Box::new(ran), total_us, usage),
                    after,
                    extra,
                };
                self.run_node(level, ns);
            }
            TurnEnd::Going => {
                self.run.control = Control::Running(pending_session(&ss, index));
            }
            TurnEnd::Failed(reason, msg) => {
                let (total_us, usage) = self.session_totals(index);
                self.fail_after_run(reason, msg, sup, (&node, total_us), usage);
            }
        }
    }

    /// Records model call `turn` (attempt `attempt`, `duration_us` long) of session
    /// `index` of node `node` (for supervisor `sup`): one step, its `model_call` item and
    /// its usage; appends the reply to the conversation and reads it (a text reply that
    /// is no exit is answered with a request for the exit tool). `last`: the session
    /// fails `agent_no_exit` without an exit in this reply. Says how the session stands
    /// after it.
    pub(crate) fn model_committed(
        &mut self,
        sup: &Arc<str>,
        node: &Arc<str>,
        agent: &AgentPlan,
        index: u32,
        ((turn, attempt, duration_us), last): ((u32, u32, u64), bool),
        result: Result<ModelReply, Fault>,
    ) -> TurnEnd {
        let reply = match result {
            Ok(reply) => reply,
            Err(fault) => {
                let msg = fault.describe().1.to_string();
                self.run.steps += 1;
                let it = self.record(TraceKind::ModelCall, Some(Arc::clone(sup)));
                it.source = Some(Arc::clone(node));
                it.target = Some(agent.model.as_str().into());
                it.reason = Some(format!("turn {turn}, attempt {attempt}: failed: {msg}").into());
                it.duration_us = duration_us;
                let msg = format!("agent node `{node}` (model `{}`): {msg}", agent.model);
                return TurnEnd::Failed(TerminationReason::ModelError, msg);
            }
        };
        let ModelReply {
            message,
            finish_reason,
            usage,
            retried,
        } = reply;
        let usage = call_usage(agent.price.as_ref(), usage.as_ref());
        self.run.usage_total.add_all(&usage);
        self.run.steps += 1;
        let mut reason = format!("turn {turn}, attempt {attempt}");
        if !retried.is_empty() {
            reason.push_str(&format!(" (after {})", retried.join("; ")));
        }
        reason.push_str(&format!(
            ", finish_reason {}",
            finish_reason.as_deref().unwrap_or("none")
        ));
        if usage.get(USAGE_UNKNOWN).is_some() {
            reason.push_str(", usage unknown (the server sent none)");
        }
        let it = self.record(TraceKind::ModelCall, Some(Arc::clone(sup)));
        it.source = Some(Arc::clone(node));
        it.target = Some(agent.model.as_str().into());
        it.reason = Some(reason.into());
        it.duration_us = duration_us;
        attach_usage(it, usage);
        let verdict = judge(self.plan, agent, &message);
        self.push_messages(index, [message]);
        match verdict {
            Verdict::Exit(output) => TurnEnd::Exit(output),
            Verdict::Calls | Verdict::Text if last => TurnEnd::Failed(
                TerminationReason::AgentNoExit,
                format!(
                    "agent node `{node}` made {turn} model call(s), its max_turns, without a \
                     valid `{}` call",
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

    /// Commits the tool calls of a reply: one `tool_call` item and one step each, their
    /// results appended in the reply's order; the session's next model call is next.
    fn tool_results(&mut self, ss: Box<SessionStep<'_>>, index: u32, outcomes: Vec<ToolOutcome>) {
        let sup = Arc::clone(&ss.dispatcher);
        if !self.tools_committed(&sup, &ss.np.id, index, outcomes) {
            return self.fault(&ss.np.id, "agent node", Fault::Cancelled, Some(sup));
        }
        self.run.control = Control::Running(pending_session(&ss, index));
    }

    /// Records the tool calls of a reply of session `index` of node `node` (for
    /// supervisor `sup`): one `tool_call` item and one step each, their results appended
    /// in the reply's order. False, recording nothing, when the run was cancelled while
    /// they ran.
    pub(crate) fn tools_committed(
        &mut self,
        sup: &Arc<str>,
        node: &Arc<str>,
        index: u32,
        outcomes: Vec<ToolOutcome>,
    ) -> bool {
        if outcomes.iter().any(|o| o.cancelled) {
            return false;
        }
        let mut messages = Vec::with_capacity(outcomes.len());
        for o in outcomes {
            self.run.steps += 1;
            if let Some(u) = &o.usage {
                self.run.usage_total.add_all(u);
            }
            let reason = match &o.error {
                None => format!("call {}: ok", o.call_id),
                Some(e) => format!("call {}: error: {e}", o.call_id),
            };
            let it = self.record(TraceKind::ToolCall, Some(Arc::clone(sup)));
            it.source = Some(Arc::clone(node));
            it.target = Some(o.tool);
            it.reason = Some(reason.into());
            it.duration_us = o.duration_us;
            if let Some(u) = o.usage {
                attach_usage(it, u);
            }
            let content = o.content.unwrap_or_else(|| "{}".into());
            messages.push(ChatMessage::tool(o.call_id, content));
        }
        self.push_messages(index, messages);
        true
    }

    /// Appends messages to session `index`.
    pub(crate) fn push_messages(
        &mut self,
        index: u32,
        messages: impl IntoIterator<Item = ChatMessage>,
    ) {
        if let Some(s) = self.run.sessions.get_mut(index as usize) {
            s.messages.extend(messages);
        }
    }

    /// What session `index`'s calls took so far: their microseconds, and their usage
    /// summed (`None` when none reported any).
    pub(crate) fn session_totals(&self, index: u32) -> (u64, Option<Usage>) {
        let Some(session) = self.run.sessions.get(index as usize) else {
            return (0, None);
        };
        let mut usage = Usage::new();
        let mut total_us = 0u64;
        for it in self.run.trace.items.iter().rev() {
            if it.step <= session.step {
                break;
            }
            let ours = matches!(it.kind, TraceKind::ModelCall | TraceKind::ToolCall)
                && it.source.as_deref() == Some(&*session.node);
            if ours {
                total_us = total_us.saturating_add(it.duration_us);
                if let Some(u) = it.usage() {
                    usage.add_all(u);
                }
            }
        }
        (total_us, (!usage.is_empty()).then_some(usage))
    }
}

/// How a committed model call leaves its session.
// Made once per model call and matched at once: boxing the output would allocate for
// nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum TurnEnd {
    /// It ended with a valid exit: this output.
    Exit(crate::runtime::data::NodeOutput),
    /// It goes on: tool calls to answer, or the request for the exit tool sent.
    Going,
    /// It failed: `model_error` (the call failed for good) or `agent_no_exit` (its turns
    /// are used up), with what to say.
    Failed(TerminationReason, String),
}

/// A model call's usage record: its tokens (and cached input tokens), and its cost when
/// the model has prices; unknown usage is counted as such, never guessed.
pub(crate) fn call_usage(price: Option<&Price>, usage: Option<&crate::model::Usage>) -> Usage {
    let Some(u) = usage else {
        return Usage::new().with(USAGE_UNKNOWN, 1);
    };
    let mut out = Usage::new()
        .with(INPUT_TOKENS, u.input_tokens)
        .with(OUTPUT_TOKENS, u.output_tokens);
    if let Some(c) = u.cached_input_tokens {
        out.add(CACHED_INPUT_TOKENS, Number::from(c));
    }
    if let Some(p) = price {
        let cost = u.input_tokens as f64 * p.input_per_mtok / 1e6
            + u.output_tokens as f64 * p.output_per_mtok / 1e6;
        if let Some(n) = Number::from_f64(cost) {
            out.add(COST_USD, n);
        }
    }
    out
}
