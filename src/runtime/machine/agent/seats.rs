//! Forks of sessions (ADR 0040): several agent sessions advanced together, each by one
//! call per step (a model call, or its last reply's tool calls). Planning gives each live
//! session's call as a member of one fork effect (`MemberCall::Session`), performed at
//! once; commit records each call as its own steps and items (`model_call`,
//! `tool_call`), in the members' order, and says how each session stands. Advisors,
//! team members and team leads that are agents run on it.

use std::sync::Arc;
use std::time::Duration;

use super::conversation::unanswered;
use super::plan::model_call;
use super::resolve::resolve_session;
use super::seat_commit::{TurnEnd, who};
use super::templates::opening;
use crate::model::{ChatMessage, Role as ChatRole};
use crate::runtime::data::{NodeOutput, Role, RunState, Session, TerminationReason, Usage, Writes};
use crate::runtime::effects::{Call, EffectOutput, Fault, Member, MemberCall, Produced, Report};
use crate::runtime::machine::commit::Tx;
use crate::runtime::machine::planner::Planner;
use crate::runtime::machine::step::{SeatStep, SessionWork};
use crate::runtime::plan::NodePlan;
use crate::runtime::plan::agent::AgentPlan;

impl<'e> Planner<'e> {
    /// Begins the session of agent member `np` (at `position` among the fork's members)
    /// reading `view`, its first model call being step `run.steps + offset`: its opening
    /// and that call (`None` when a template fails: the member then fails).
    pub(crate) fn seat_start(
        &self,
        run: &RunState,
        (position, offset): (usize, u32),
        np: &'e NodePlan,
        agent: &'e AgentPlan,
        view: Writes,
    ) -> (SeatStep<'e>, Option<Call>) {
        let opened = opening(&who(&np.id, None), agent, view, None);
        self.seat_open(run, (position, offset), np, agent, opened)
    }

    /// Begins a session of agent `np` in a fork (at `position` among its members) with
    /// `opened` (its opening messages, or why a template failed), its first model call
    /// being step `run.steps + offset`: the seat and that call (`None` when the opening
    /// failed: the seat then fails).
    pub(crate) fn seat_open(
        &self,
        run: &RunState,
        (position, offset): (usize, u32),
        np: &'e NodePlan,
        agent: &'e AgentPlan,
        opened: Result<Vec<ChatMessage>, String>,
    ) -> (SeatStep<'e>, Option<Call>) {
        let mut seat = SeatStep {
            position,
            np,
            agent,
            session: None,
            opening: Vec::new(),
            work: SessionWork::Failed(String::new()),
            calls: false,
            own_turns: true,
            timed_out: None,
            caller: None,
            agent_tools: None,
        };
        match opened {
            Ok(messages) => {
                let step = run.steps.saturating_add(offset);
                let force = agent.max_turns() <= 1;
                let call = model_call(run, (&np.id, agent), (messages.clone(), 1), force, step);
                seat.opening = messages;
                seat.work = SessionWork::Model {
                    turn: 1,
                    result: None,
                    attempt: 1,
                    duration_us: 0,
                    failed: Vec::new(),
                };
                seat.calls = true;
                (seat, Some(call))
            }
            Err(msg) => {
                seat.work = SessionWork::Failed(msg);
                (seat, None)
            }
        }
    }

    /// The next call of member `np`'s live session `session` (at `position` among the
    /// fork's members), its first step being `run.steps + offset`: the seat, its call
    /// (`None` when every tool call was answered while planning) and the steps it counts.
    /// The error says what the run state lacks.
    pub(crate) fn seat_next(
        &self,
        run: &RunState,
        (position, offset): (usize, u32),
        np: &'e NodePlan,
        agent: &'e AgentPlan,
        session: u32,
    ) -> Result<(SeatStep<'e>, Option<Call>, u32), String> {
        let Some(conversation) = run.sessions.get(session as usize) else {
            return Err(format!(
                "the run state names session {session} of node `{}`, which it does not hold",
                np.id
            ));
        };
        let (work, call, steps, agents) =
            self.session_next(run, (&np.id, agent), conversation, offset);
        let mut seat = SeatStep {
            position,
            np,
            agent,
            session: Some(session),
            opening: Vec::new(),
            work,
            calls: call.is_some(),
            own_turns: true,
            timed_out: None,
            caller: None,
            agent_tools: None,
        };
        if agents.is_empty() {
            return Ok((seat, call, steps));
        }
        // Agent tools called: the seat's call is a fork of its own calls and theirs.
        let turn = conversation.turns();
        let from = offset.saturating_add(steps);
        let (call, taken) =
            self.seat_agent_tools(run, (&mut seat, session, turn), call, agents, from);
        Ok((seat, call, steps.saturating_add(taken)))
    }

    /// A team turn of member or lead `np` (at `position`, its model call being step
    /// `run.steps + offset`): its session (begun with its opening over `view` when
    /// `session` is `None`) gets `inbox` as a user message, then one model call, the
    /// first exit tool forced when `force` (a final turn). The team's limits bound it,
    /// not the agent's `max_turns`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn seat_turn(
        &self,
        run: &RunState,
        (position, offset): (usize, u32),
        np: &'e NodePlan,
        agent: &'e AgentPlan,
        session: Option<u32>,
        view: impl FnOnce() -> Writes,
        inbox: ChatMessage,
        force: bool,
    ) -> (SeatStep<'e>, Option<Call>) {
        let mut seat = SeatStep {
            position,
            np,
            agent,
            session,
            opening: Vec::new(),
            work: SessionWork::Failed(String::new()),
            calls: false,
            own_turns: false,
            timed_out: None,
            caller: None,
            agent_tools: None,
        };
        let (mut messages, turn) = match session.and_then(|s| run.sessions.get(s as usize)) {
            Some(conversation) => (conversation.messages.clone(), conversation.turns()),
            None if session.is_some() => {
                seat.work = SessionWork::Failed(format!(
                    "the run state names a session of node `{}` it does not hold",
                    np.id
                ));
                return (seat, None);
            }
            None => match opening(&who(&np.id, None), agent, view(), None) {
                Ok(head) => {
                    seat.opening.clone_from(&head);
                    (head, 0)
                }
                Err(msg) => {
                    seat.work = SessionWork::Failed(msg);
                    return (seat, None);
                }
            },
        };
        seat.opening.push(inbox.clone());
        messages.push(inbox);
        let step = run.steps.saturating_add(offset);
        let call = model_call(
            run,
            (&np.id, agent),
            (messages, turn.saturating_add(1)),
            force,
            step,
        );
        seat.work = SessionWork::Model {
            turn: turn.saturating_add(1),
            result: None,
            attempt: 1,
            duration_us: 0,
            failed: Vec::new(),
        };
        seat.calls = true;
        (seat, Some(call))
    }

    /// Agent member `mp`'s call (its session's next call) as a fork member, under the
    /// member's time limit (its own or `node_timeout_ms`, capped by `cap` and the run
    /// deadline).
    pub(crate) fn seat_member(
        &self,
        run: &RunState,
        mp: &NodePlan,
        cap: Option<u64>,
        call: Call,
    ) -> Member {
        Member {
            id: Arc::clone(&mp.id),
            limit: self.member_limit(run, mp, cap),
            call: MemberCall::Session(call),
            role: Role::Plain,
        }
    }

    /// A fork member's time limit: its own (or `node_timeout_ms`), capped by `cap` and
    /// the run deadline.
    pub(crate) fn member_limit(
        &self,
        run: &RunState,
        mp: &NodePlan,
        cap: Option<u64>,
    ) -> Option<Duration> {
        let own = mp
            .own_timeout_ms()
            .or(self.plan.graph.budgets().node_timeout_ms);
        let own = match (own, cap) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.call_limit(run, own)
    }
}

/// Whether session `session` is in the middle of a turn: its last reply's tool calls
/// are unanswered.
pub(crate) fn mid_turn(run: &RunState, session: u32) -> bool {
    run.sessions
        .get(session as usize)
        .is_some_and(|s| unanswered(s).is_some())
}

/// Feeds what a seat's call produced (a reply, tool results, or the fault) to its work.
/// Tool calls cut off by the member's time limit are answered as timed out, and the seat
/// remembers it.
pub(crate) fn resolve_seat(
    seat: &mut SeatStep<'_>,
    produced: Result<Produced, Fault>,
    duration_us: u64,
    attempt: u32,
) {
    let produced = match (seat.agent_tools.as_mut(), produced) {
        (Some(tools), Ok(Produced::Reports(mut reports))) => {
            // Its own tool calls (when it makes some), then its agent tools' (ADR 0046).
            if tools.own_calls && !reports.is_empty() {
                let own = reports.remove(0);
                feed_own(&mut seat.work, own, attempt);
            }
            feed_seats(reports, &mut tools.seats, attempt);
            return;
        }
        (_, produced) => produced,
    };
    if let (SessionWork::Tools(outcomes), Err(Fault::Timeout(msg))) = (&mut seat.work, &produced) {
        for o in outcomes.iter_mut().filter(|o| o.content.is_none()) {
            let error = format!("tool `{}` was stopped: the advisor {msg}", o.tool);
            o.content = Some(super::error_content(&error));
            o.error = Some(error);
            o.duration_us = duration_us;
        }
        seat.timed_out = Some(msg.clone());
        return;
    }
    let output = EffectOutput {
        result: produced,
        duration_us,
        attempt,
    };
    resolve_session(&mut seat.work, output);
}

/// Feeds the report of a fork's member that ran a session's own tool calls (its reply's
/// tool node calls beside its agent tools, ADR 0046) to their work.
pub(crate) fn feed_own(work: &mut SessionWork, mut report: Report, attempt: u32) {
    if let Some(result) = report.produced.take() {
        let output = EffectOutput {
            result,
            duration_us: report.duration_us,
            attempt,
        };
        resolve_session(work, output);
    }
}

/// Feeds a fork's reports to the seats waiting on them (those making a call, in
/// order); gives back the other members' reports, in order.
pub(crate) fn feed_seats(
    reports: Vec<Report>,
    seats: &mut [SeatStep<'_>],
    attempt: u32,
) -> Vec<Report> {
    let mut waiting = seats.iter_mut().filter(|s| s.calls);
    let mut plain = Vec::with_capacity(reports.len());
    for mut report in reports {
        match report.produced.take() {
            Some(p) => {
                if let Some(seat) = waiting.next() {
                    resolve_seat(seat, p, report.duration_us, attempt);
                }
            }
            None => plain.push(report),
        }
    }
    plain
}

/// Whether the run was cancelled while seat `seat`'s call (or an agent tool's under
/// it) ran.
pub(crate) fn seat_cancelled(seat: &SeatStep<'_>) -> bool {
    let own = match &seat.work {
        SessionWork::Model { result, .. } => matches!(result, Some(Err(Fault::Cancelled))),
        SessionWork::Tools(o) => o.iter().any(|o| o.cancelled),
        SessionWork::Failed(_) => false,
    };
    own || seat
        .agent_tools
        .as_ref()
        .is_some_and(|t| t.seats.iter().any(seat_cancelled))
}

/// Why agent tools' seats stopped their commit: a call passed its time limit (what to
/// say), or the run was cancelled while they ran.
pub(crate) enum ToolsStop {
    Timeout(String),
    Cancelled,
}

/// How a seat's call leaves its member.
// Made once per seat and matched at once.
#[allow(clippy::large_enum_variant)]
pub(crate) enum SeatEnd {
    /// Its session ended with a valid exit: the output, and the microseconds and usage
    /// of all its calls.
    Exit {
        output: NodeOutput,
        session: u32,
        duration_us: u64,
        usage: Option<Usage>,
    },
    /// Its session goes on (this index in the run's sessions).
    Going(u32),
    /// It failed (`timeout` when a call passed its time limit; `reason` what a team
    /// lead's failure ends the run with), after calls that took this long and cost this
    /// much.
    Failed {
        timeout: bool,
        reason: TerminationReason,
        message: String,
        duration_us: u64,
        usage: Option<Usage>,
    },
    /// The run was cancelled while its call ran: nothing of the call is kept.
    Cancelled,
}

impl Tx<'_> {
    /// Answers every tool call of session `index`'s last reply, whose exit ended a team
    /// turn (the conversation goes on next turn, and a reply's tool calls must each be
    /// answered): the exit `exit` with `{"ok": true}`, any other call as not run.
    pub(crate) fn answer_ended_turn(&mut self, index: u32, exit: &str) {
        let Some(last) = self
            .run
            .sessions
            .get(index as usize)
            .and_then(|s| s.messages.last())
            .filter(|m| m.role == ChatRole::Assistant)
        else {
            return;
        };
        let answers: Vec<ChatMessage> = last
            .tool_calls
            .iter()
            .map(|c| {
                let content = if c.name == exit {
                    r#"{"ok":true}"#.to_string()
                } else {
                    super::error_content(&format!(
                        "`{}` was not run: your turn ended with `{exit}`",
                        c.name
                    ))
                };
                ChatMessage::tool(c.id.clone(), content)
            })
            .collect();
        self.push_messages(index, answers);
    }

    /// Commits a seat's call (for supervisor `sup`): a session begun here is added to the
    /// run's sessions (a session going on gets the messages the step added, a team
    /// turn's inbox); the model call or the tool calls are recorded as any session's are
    /// (a step and an item each, the messages appended, the usage counted).
    pub(crate) fn seat(&mut self, sup: &Arc<str>, mut seat: SeatStep<'_>) -> SeatEnd {
        let node = Arc::clone(&seat.np.id);
        if seat_cancelled(&seat) {
            return SeatEnd::Cancelled;
        }
        let agent_tools = seat.agent_tools.take();
        let work = std::mem::replace(&mut seat.work, SessionWork::Failed(String::new()));
        let mut timeout = match &work {
            SessionWork::Failed(message) => {
                // Its opening failed: the step planned for its first call is counted.
                self.run.steps += 1;
                return SeatEnd::Failed {
                    timeout: false,
                    reason: TerminationReason::NodeFailed,
                    message: message.clone(),
                    duration_us: 0,
                    usage: None,
                };
            }
            SessionWork::Model {
                result: Some(Err(Fault::Cancelled)),
                ..
            } => return SeatEnd::Cancelled,
            SessionWork::Tools(o) if o.iter().any(|o| o.cancelled) => return SeatEnd::Cancelled,
            SessionWork::Model {
                result: Some(Err(Fault::Timeout(_))),
                ..
            } => true,
            _ => seat.timed_out.is_some(),
        };
        let index = match seat.session {
            Some(i) => {
                let added = std::mem::take(&mut seat.opening);
                self.push_messages(i, added);
                i
            }
            None => {
                let visit = match &seat.caller {
                    // An agent tool's sessions are its calls: this is the next one.
                    Some(_) => {
                        let n = self.run.sessions.iter().filter(|s| s.node == node).count();
                        u32::try_from(n).unwrap_or(u32::MAX)
                    }
                    None => self.run.visits.get(&*node).copied().unwrap_or(0),
                }
                .saturating_add(1);
                self.run.sessions.push(Session {
                    node: Arc::clone(&node),
                    visit,
                    model: seat.agent.model.clone(),
                    step: self.run.steps,
                    messages: std::mem::take(&mut seat.opening),
                    caller: seat.caller.clone(),
                });
                u32::try_from(self.run.sessions.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let end = match work {
            SessionWork::Model {
                turn,
                result,
                attempt,
                duration_us,
                failed,
            } => {
                let result = result
                    .unwrap_or_else(|| {
                        Err(Fault::Failed(
                            "was committed before its reply arrived".into(),
                        ))
                    })
                    .map_err(|fault| (fault, failed));
                let last = seat.own_turns && turn >= seat.agent.max_turns();
                let call = ((turn, attempt, duration_us), last);
                let agent = (seat.agent, seat.caller.as_ref());
                self.model_committed((sup, &node), agent, index, call, result)
            }
            SessionWork::Tools(outcomes) => {
                self.tools_committed((sup, &node), index, outcomes);
                let below = agent_tools.map_or(Ok(()), |t| self.tool_seats_committed(sup, t.seats));
                match below {
                    Ok(()) => {}
                    Err(ToolsStop::Cancelled) => return SeatEnd::Cancelled,
                    Err(ToolsStop::Timeout(msg)) => {
                        seat.timed_out.get_or_insert(msg);
                        timeout = true;
                    }
                }
                match seat.timed_out.take() {
                    Some(msg) => TurnEnd::Failed(
                        TerminationReason::NodeFailed,
                        format!("{}: its tool calls {msg}", who(&node, seat.caller.as_ref())),
                    ),
                    None => TurnEnd::Going,
                }
            }
            // Returned from above.
            SessionWork::Failed(_) => TurnEnd::Going,
        };
        match end {
            TurnEnd::Going => SeatEnd::Going(index),
            TurnEnd::Exit(output) => {
                let (duration_us, usage) = self.session_totals(index);
                SeatEnd::Exit {
                    output,
                    session: index,
                    duration_us,
                    usage,
                }
            }
            TurnEnd::Failed(reason, message) => {
                let (duration_us, usage) = self.session_totals(index);
                SeatEnd::Failed {
                    timeout,
                    reason,
                    message,
                    duration_us,
                    usage,
                }
            }
        }
    }
}
