//! Agents called as tools (the seed's sub-agent tool), run concurrently (ADR 0046): a
//! tool node whose `run` is an agent answers its caller's tool call with a session of
//! its own. Its arguments (checked against the tool's `parameters`) are its input; its
//! exit (`final_report` with `{"result"}`, or plain text) is the caller's `tool` message.
//!
//! A reply calling agent tools is answered by a fork of sessions (ADR 0040's mechanism,
//! `seats.rs`): each step advances every agent tool's session under the reply by one
//! call (a model call, or its own reply's tool calls, down to agent tools it calls in
//! turn), the reply's tool node calls running in the first step with them. Each call is
//! committed as its own step and item, so a resumed run repeats none; an agent tool's
//! answer is appended when its session ends, and requests send a reply's answers in its
//! order. What is pending stays the outermost session's; each step finds the sessions
//! under way from the committed messages (see [`ToolCaller`]).

use std::sync::Arc;

use super::conversation::call_place;
use super::plan::{AgentCall, ToolWork, session_stage};
use super::reply::error_content;
use super::seats::{SeatEnd, ToolsStop, seat_cancelled};
use super::templates::opening;
use crate::model::ChatMessage;
use crate::runtime::data::{
    CallRecord, Role, RunState, ToolCallItem, ToolCallStatus, ToolCaller, TraceKind, Usage,
};
use crate::runtime::effects::{Call, Effect, EffectKind, Fault, Member, MemberCall};
use crate::runtime::machine::commit::{Tx, attach_usage};
use crate::runtime::machine::planner::Planner;
use crate::runtime::machine::step::{AgentTools, Level, SeatStep, SessionStep, SessionWork, Step};

/// What planning the agent tools' fork gathers: its members and seats, and the steps
/// its calls take so far.
struct Gathered<'e> {
    members: Vec<Member>,
    seats: Vec<SeatStep<'e>>,
    offset: u32,
}

impl<'e> Planner<'e> {
    /// Plans the step answering the last reply (model call `turn`) of session `index`
    /// (`ss`), whose unanswered calls `work` include agent tools: one fork effect runs its
    /// tool node calls and every agent tool session's next call at once.
    pub(super) fn agent_tools_step(
        &self,
        run: &RunState,
        level: Level<'e>,
        (mut ss, index, turn): (Box<SessionStep<'e>>, u32, u32),
        work: ToolWork<'e>,
        step: &mut Step<'e>,
    ) {
        let ToolWork {
            outcomes,
            invocations,
            agents,
        } = work;
        let mut g = Gathered {
            members: Vec::new(),
            seats: Vec::new(),
            offset: u32::try_from(outcomes.len()).unwrap_or(u32::MAX),
        };
        let own_calls = !invocations.is_empty();
        if own_calls {
            g.members.push(Member {
                id: Arc::clone(&ss.id),
                limit: None,
                call: MemberCall::Session(Call::Tools(invocations)),
                role: Role::Plain,
            });
        }
        for called in agents {
            let caller = ToolCaller {
                session: index,
                turn,
                call: called.call_id.clone(),
            };
            self.agent_tool_seats(run, caller, called, &mut g);
        }
        ss.work = SessionWork::Tools(outcomes);
        ss.agent_tools = Some(Box::new(AgentTools {
            own_calls,
            seats: g.seats,
        }));
        let effect = (!g.members.is_empty()).then(|| Effect {
            kind: EffectKind::Fork,
            id: Arc::clone(&ss.id),
            step: run.steps,
            limit: None,
            delay: std::time::Duration::ZERO,
            call: Call::Fork(g.members),
            role: Role::Plain,
        });
        step.stage = session_stage(level, ss, effect);
    }

    /// The call of fork seat `seat` (session `session`, whose reply, model call `turn`,
    /// called `agents` beside its own tool calls `own`), its agent tools' first step
    /// being `run.steps + from`: a fork of its own calls and every agent tool session's
    /// next call (ADR 0046), kept in the seat; and the steps the agent tools' calls take.
    pub(crate) fn seat_agent_tools(
        &self,
        run: &RunState,
        (seat, session, turn): (&mut SeatStep<'e>, u32, u32),
        own: Option<Call>,
        agents: Vec<AgentCall<'e>>,
        from: u32,
    ) -> (Option<Call>, u32) {
        let mut g = Gathered {
            members: Vec::new(),
            seats: Vec::new(),
            offset: from,
        };
        let own_calls = own.is_some();
        if let Some(call) = own {
            g.members.push(tool_member(&seat.np.id, None, call));
        }
        for called in agents {
            let caller = ToolCaller {
                session,
                turn,
                call: called.call_id.clone(),
            };
            self.agent_tool_seats(run, caller, called, &mut g);
        }
        seat.calls = !g.members.is_empty();
        seat.agent_tools = Some(Box::new(AgentTools {
            own_calls,
            seats: g.seats,
        }));
        let call = (!g.members.is_empty()).then_some(Call::Fork(g.members));
        (call, g.offset.saturating_sub(from))
    }

    /// Adds the seat of agent tool `called` answering `caller`'s call: its session's
    /// first model call, or its next call as any fork seat's (its own reply's tool calls,
    /// with the agent tools it calls in turn as a fork of their own, see
    /// [`Planner::seat_next`]). A call with no step left under `max_steps` is not
    /// planned: the run stops at its next step.
    fn agent_tool_seats(
        &self,
        run: &RunState,
        caller: ToolCaller,
        called: AgentCall<'e>,
        g: &mut Gathered<'e>,
    ) {
        if run.steps.saturating_add(g.offset) >= self.plan.graph.budgets().max_steps {
            return;
        }
        let AgentCall {
            id,
            np,
            agent,
            arguments,
            ..
        } = called;
        let at = (g.seats.len(), g.offset);
        let found = run
            .sessions
            .iter()
            .rposition(|s| s.caller.as_ref() == Some(&caller))
            .and_then(|i| u32::try_from(i).ok());
        let (mut seat, call, steps) = match found {
            None => {
                let opened = opening(&format!("agent tool `{id}`"), agent, arguments, None);
                let (seat, call) = self.seat_open(run, at, np, agent, opened);
                // One step either way: a failed opening counts the step planned for its
                // first call when committed (`Tx::seat`), so the tools after it are
                // planned past it and the budget sees it.
                (seat, call, 1)
            }
            Some(session) => match self.seat_next(run, at, np, agent, session) {
                Ok(next) => next,
                Err(msg) => {
                    // Not reached (the session was just found): the call is answered
                    // with the error rather than dropped.
                    let (mut seat, _) = self.seat_open(run, at, np, agent, Err(msg));
                    seat.session = Some(session);
                    (seat, None, 1)
                }
            },
        };
        seat.caller = Some(caller);
        if let Some(call) = call {
            g.members
                .push(tool_member(&id, self.call_limit(run, None), call));
        }
        g.offset = g.offset.saturating_add(steps);
        g.seats.push(seat);
    }
}

/// An agent tool's call as a member of the fork, under `limit`.
fn tool_member(id: &Arc<str>, limit: Option<std::time::Duration>, call: Call) -> Member {
    Member {
        id: Arc::clone(id),
        limit,
        call: MemberCall::Session(call),
        role: Role::Plain,
    }
}

/// Whether seat `seat`'s call never gave a result (the member above it passed its time
/// limit, dropping it): nothing of it is committed.
fn dropped(seat: &SeatStep<'_>) -> bool {
    match &seat.work {
        SessionWork::Model { result, .. } => result.is_none(),
        SessionWork::Tools(o) => o.iter().any(|o| o.content.is_none()),
        SessionWork::Failed(_) => false,
    }
}

impl Tx<'_> {
    /// Commits a step of agent tools under session `index` (`ss`): its own tool calls
    /// (one step and item each), then each seat's call as a fork's seat is committed
    /// (ADR 0040); an agent tool whose session ended answers its caller's call. Nothing
    /// is kept when the run was cancelled meanwhile; an agent tool's call past its time
    /// limit stops the run (`timeout`), as a lone call does.
    pub(crate) fn agent_tools(&mut self, mut ss: Box<SessionStep<'_>>, index: u32) {
        let sup = Arc::clone(&ss.dispatcher);
        let Some(tools) = ss.agent_tools.take() else {
            return;
        };
        let work = std::mem::replace(&mut ss.work, SessionWork::Failed(String::new()));
        let own = match work {
            SessionWork::Tools(o) => o,
            _ => Vec::new(),
        };
        if own.iter().any(|o| o.cancelled) || tools.seats.iter().any(seat_cancelled) {
            return self.fault(&ss.id, ss.what(), Fault::Cancelled, Some(sup));
        }
        if !own.is_empty() {
            self.tools_committed((&sup, &ss.id), index, own);
        }
        match self.tool_seats_committed(&sup, tools.seats) {
            Ok(()) => {}
            Err(ToolsStop::Timeout(msg)) => {
                self.fault(&ss.id, ss.what(), Fault::Timeout(msg), Some(sup));
            }
            Err(ToolsStop::Cancelled) => {
                self.fault(&ss.id, ss.what(), Fault::Cancelled, Some(sup));
            }
        }
    }

    /// Commits the seats of agent tools (for supervisor `sup`), in order, as a fork's
    /// seats are (ADR 0040): an agent tool whose session ended answers its caller's call
    /// with its exit or its failure. Stops at a call past its time limit (the run, or
    /// the fork's member, then fails `timeout`) or one cancelled.
    pub(crate) fn tool_seats_committed(
        &mut self,
        sup: &Arc<str>,
        seats: Vec<SeatStep<'_>>,
    ) -> Result<(), ToolsStop> {
        for seat in seats {
            let Some(caller) = seat.caller.clone() else {
                continue;
            };
            if dropped(&seat) {
                continue;
            }
            let tool = Arc::clone(&seat.np.id);
            match self.seat(sup, seat) {
                SeatEnd::Exit {
                    output,
                    duration_us,
                    usage,
                    ..
                } => {
                    let content = serde_json::Value::Object(output.writes).to_string();
                    self.tool_answered((sup, &tool), &caller, (duration_us, usage), Ok(content));
                }
                SeatEnd::Going(_) => {}
                SeatEnd::Failed {
                    timeout: true,
                    message,
                    ..
                } => {
                    return Err(ToolsStop::Timeout(format!(
                        "(agent tool `{tool}`) {message}"
                    )));
                }
                SeatEnd::Failed {
                    message,
                    duration_us,
                    usage,
                    ..
                } => {
                    self.tool_answered((sup, &tool), &caller, (duration_us, usage), Err(message));
                }
                SeatEnd::Cancelled => return Err(ToolsStop::Cancelled),
            }
        }
        Ok(())
    }

    /// Agent tool `tool` ended: its caller's call is answered with `result` (the exit's
    /// arguments as JSON text) or the error, as one `tool_call` item (source the caller;
    /// the session's time and usage, `spent`; no step of its own: its calls were steps).
    pub(crate) fn tool_answered(
        &mut self,
        (sup, tool): (&Arc<str>, &Arc<str>),
        caller: &ToolCaller,
        (total_us, usage): (u64, Option<Usage>),
        result: Result<String, String>,
    ) {
        let calling = self.run.sessions.get(caller.session as usize);
        let source = calling.map(|s| Arc::clone(&s.node));
        let at = calling.map_or(0, |s| call_place(s, &caller.call));
        let (reason, content, error) = match result {
            Ok(content) => (format!("call {}: ok", caller.call), content, None),
            Err(e) => {
                // `e` names the tool already (`who`): the session's failure as it was said.
                let error = e;
                let reason = format!("call {}: error: {error}", caller.call);
                (reason, error_content(&error), Some(error))
            }
        };
        let record = ToolCallItem {
            caller: source.clone().unwrap_or_else(|| Arc::clone(sup)),
            tool: Arc::clone(tool),
            call_id: caller.call.clone(),
            index: u32::try_from(at).unwrap_or(u32::MAX),
            status: if error.is_some() {
                ToolCallStatus::Failed
            } else {
                ToolCallStatus::Ok
            },
            error,
        };
        let it = self.record(TraceKind::ToolCall, sup);
        it.set_source(source);
        it.set_target(tool);
        it.set_reason(reason);
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
