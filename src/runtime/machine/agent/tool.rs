//! An agent called as a tool (the seed's sub-agent tool): a tool node whose `run` is an
//! agent answers its caller's tool call with a session of its own. Its arguments (checked
//! against the tool's `parameters`) are its input; its model calls and tool calls are
//! steps as any session's; its exit (`final_report` with `{"result"}`, or plain text) is
//! the caller's `tool` message. The caller's other calls wait: a reply's calls are
//! answered in its order, the calls before an agent tool's at once, then its session
//! alone, then the rest. What is pending stays the outermost session's; each step plans
//! down to the innermost session under way (see [`ToolCaller`]).

use std::sync::Arc;

use super::commit::session_totals;
use super::plan::{AgentCall, new_session, session_stage, unanswered};
use super::reply::error_content;
use super::templates::opening;
use crate::model::ChatMessage;
use crate::runtime::data::{
    CallRecord, RunState, ToolCallItem, ToolCallStatus, ToolCaller, TraceKind,
};
use crate::runtime::machine::commit::{Tx, attach_usage};
use crate::runtime::machine::planner::Planner;
use crate::runtime::machine::step::{Level, SessionOwner, SessionStep, Step};

impl<'e> Planner<'e> {
    /// Plans the step of agent tool `called`, answering `caller`'s call: its session's
    /// first model call, or (when it is under way) its next call.
    pub(crate) fn agent_tool_step(
        &self,
        run: &RunState,
        level: Level<'e>,
        dispatcher: &Arc<str>,
        caller: ToolCaller,
        called: AgentCall<'e>,
        step: &mut Step<'e>,
    ) {
        let session = run
            .sessions
            .iter()
            .rposition(|s| s.caller.as_ref() == Some(&caller))
            .and_then(|at| u32::try_from(at).ok());
        let AgentCall {
            id,
            agent,
            arguments,
            ..
        } = called;
        let owner = SessionOwner::Tool(caller);
        let ss = new_session(
            (Arc::clone(&id), agent),
            Arc::clone(dispatcher),
            owner,
            session,
            0,
        );
        if session.is_some() {
            return self.continue_session(run, level, ss, step);
        }
        let (ss, effect) = self.open_session(
            run,
            ss,
            opening(&format!("agent tool `{id}`"), agent, arguments, None),
        );
        step.stage = session_stage(level, ss, effect);
    }
}

impl Tx<'_> {
    /// Agent tool `ss` ended (session `index`, `None` when it could not begin): its
    /// caller's call is answered with `result` (the exit's arguments as JSON text) or the
    /// error, as one `tool_call` item (source the caller, the session's time and usage;
    /// no step of its own: its calls were steps).
    pub(crate) fn tool_answered(
        &mut self,
        ss: &SessionStep<'_>,
        index: Option<u32>,
        result: Result<String, String>,
    ) {
        let SessionOwner::Tool(caller) = &ss.owner else {
            return;
        };
        let (total_us, usage) = index.map_or((0, None), |i| session_totals(self.run, i));
        let calling = self.run.sessions.get(caller.session as usize);
        let source = calling.map(|s| Arc::clone(&s.node));
        // The call's place in its reply: after the calls answered before it.
        let at = calling
            .and_then(unanswered)
            .map_or(0, |(_, answered)| answered);
        let (reason, content, error) = match result {
            Ok(content) => (format!("call {}: ok", caller.call), content, None),
            Err(e) => {
                let error = format!("agent tool `{}` failed: {e}", ss.id);
                let reason = format!("call {}: error: {error}", caller.call);
                (reason, error_content(&error), Some(error))
            }
        };
        let record = ToolCallItem {
            caller: source.clone().unwrap_or_else(|| Arc::clone(&ss.dispatcher)),
            tool: Arc::clone(&ss.id),
            call_id: caller.call.clone(),
            index: u32::try_from(at).unwrap_or(u32::MAX),
            status: if error.is_some() {
                ToolCallStatus::Failed
            } else {
                ToolCallStatus::Ok
            },
            error,
        };
        let it = self.record(TraceKind::ToolCall, Some(Arc::clone(&ss.dispatcher)));
        it.source = source;
        it.target = Some(Arc::clone(&ss.id));
        it.reason = Some(reason.into());
        it.duration_us = total_us;
        if let Some(u) = usage {
            // Counted in `usage_total` call by call: here for the caller's sum.
            attach_usage(it, u);
        }
        it.set_call(Some(CallRecord::Tool(record)));
        let message = ChatMessage::tool(caller.call.clone(), content);
        self.push_messages(caller.session, [message]);
    }
}
