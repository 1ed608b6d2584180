//! Forks of sessions (ADR 0040): several agent sessions advanced together, each by one
//! call per step (a model call, or its last reply's tool calls). Planning gives each live
//! session's call as a member of one fork effect (`MemberCall::Session`), performed at
//! once; commit records each call as its own steps and items (`model_call`,
//! `tool_call`), in the members' order, and says how each session stands. Advisors that
//! are agents run on it.

use std::sync::Arc;

use super::commit::TurnEnd;
use super::plan::model_call;
use super::templates::opening;
use crate::runtime::data::{NodeOutput, RunState, Session, Usage, Writes};
use crate::runtime::effects::{Call, EffectOutput, Fault, Produced};
use crate::runtime::machine::commit::Tx;
use crate::runtime::machine::planner::Planner;
use crate::runtime::machine::planning::resolve_session;
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
        let mut seat = SeatStep {
            position,
            np,
            agent,
            session: None,
            opening: Vec::new(),
            work: SessionWork::Failed(String::new()),
            calls: false,
            timed_out: None,
        };
        match opening(&np.id, agent, view, None) {
            Ok(messages) => {
                let step = run.steps.saturating_add(offset);
                let call = model_call(run, agent, messages.clone(), 1, step);
                seat.opening = messages;
                seat.work = SessionWork::Model {
                    turn: 1,
                    result: None,
                    attempt: 1,
                    duration_us: 0,
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
        let (work, call, steps) = self.session_next(run, agent, conversation, offset);
        let seat = SeatStep {
            position,
            np,
            agent,
            session: Some(session),
            opening: Vec::new(),
            work,
            calls: call.is_some(),
            timed_out: None,
        };
        Ok((seat, call, steps))
    }
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

/// How a seat's call leaves its member.
// Made once per seat and matched at once.
#[allow(clippy::large_enum_variant)]
pub(crate) enum SeatEnd {
    /// Its session ended with a valid exit: the output, and the microseconds and usage
    /// of all its calls.
    Exit {
        output: NodeOutput,
        duration_us: u64,
        usage: Option<Usage>,
    },
    /// Its session goes on (this index in the run's sessions).
    Going(u32),
    /// It failed (`timeout` when a call passed its time limit), after calls that took
    /// this long and cost this much.
    Failed {
        timeout: bool,
        message: String,
        duration_us: u64,
        usage: Option<Usage>,
    },
    /// The run was cancelled while its call ran: nothing of the call is kept.
    Cancelled,
}

impl Tx<'_> {
    /// Commits a seat's call (for supervisor `sup`): a session begun here is added to the
    /// run's sessions; the model call or the tool calls are recorded as any session's
    /// are (a step and an item each, the messages appended, the usage counted).
    pub(crate) fn seat(&mut self, sup: &Arc<str>, mut seat: SeatStep<'_>) -> SeatEnd {
        let node = Arc::clone(&seat.np.id);
        let work = std::mem::replace(&mut seat.work, SessionWork::Failed(String::new()));
        let timeout = match &work {
            SessionWork::Failed(message) => {
                // Its opening failed: the step planned for its first call is counted.
                self.run.steps += 1;
                return SeatEnd::Failed {
                    timeout: false,
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
            Some(i) => i,
            None => {
                let visit = self.run.visits.get(&*node).copied().unwrap_or(0) + 1;
                self.run.sessions.push(Session {
                    node: Arc::clone(&node),
                    visit,
                    model: seat.agent.model.clone(),
                    step: self.run.steps,
                    messages: std::mem::take(&mut seat.opening),
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
            } => {
                let result = result.unwrap_or_else(|| {
                    Err(Fault::Failed(
                        "was committed before its reply arrived".into(),
                    ))
                });
                let call = (turn, attempt, duration_us);
                self.model_committed(sup, &node, seat.agent, index, call, result)
            }
            SessionWork::Tools(outcomes) => {
                self.tools_committed(sup, &node, index, outcomes);
                match seat.timed_out.take() {
                    Some(msg) => TurnEnd::Failed(
                        crate::runtime::data::TerminationReason::NodeFailed,
                        format!("agent node `{node}`: its tool calls {msg}"),
                    ),
                    None => TurnEnd::Going,
                }
            }
            SessionWork::Failed(_) => TurnEnd::Going,
        };
        match end {
            TurnEnd::Going => SeatEnd::Going(index),
            TurnEnd::Exit(output) => {
                let (duration_us, usage) = self.session_totals(index);
                SeatEnd::Exit {
                    output,
                    duration_us,
                    usage,
                }
            }
            TurnEnd::Failed(_, message) => {
                let (duration_us, usage) = self.session_totals(index);
                SeatEnd::Failed {
                    timeout,
                    message,
                    duration_us,
                    usage,
                }
            }
        }
    }
}
