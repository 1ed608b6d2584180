//! Teams whose members and lead are agents (brief 5.5, 10.2; ADR 0040). Each keeps one
//! session across the team's cycles: a turn appends its inbox as a user message and
//! makes one model call (with the tool calls it makes). A member exits with
//! `team_broadcast` `{"message", "exit"}`, the lead with `team_broadcast` `{"message"}`
//! (another cycle) or `final_report` (the team node's writes, `$final`). Their calls are
//! seats of the cycle's fork (see `agent/seats.rs`): a member's model call runs at once
//! with the other members' turns; a reply's tool calls run in a second round of the
//! cycle (no new turn), so the lead still sees each cycle's broadcasts after every
//! member's turn is over. `member_max_turns` and `lead_max_turns` count model calls.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::commit::said;
use super::plan::Planning;
use crate::contracts::Team;
use crate::model::ChatMessage;
use crate::runtime::data::{
    BroadcastKind, Control, MemberStatus, NodeOutput, Pending, Role, RunState, TeamPhase, TeamRun,
    TerminationReason, TraceKind, Usage, turn_input,
};
use crate::runtime::effects::{Call, Effect, EffectKind, Fault};
use crate::runtime::machine::agent::{SeatEnd, mid_turn};
use crate::runtime::machine::budgets::GuardStop;
use crate::runtime::machine::commit::Tx;
use crate::runtime::machine::planner::Planner;
use crate::runtime::machine::step::{After, Level, NodeResult, Ran, SeatStep, TeamStop, TeamTurn};
use crate::runtime::plan::agent::{AgentPlan, TEAM_BROADCAST};
use crate::runtime::plan::{NodePlan, NodeRun};

/// The user message that opens an agent's team turn: its team input
/// (`{"me", "turn", "inbox", "final_turn"}`) as JSON.
pub(super) fn turn_message(team: &str, input: &Value) -> ChatMessage {
    let json = serde_json::to_string(input).expect("JSON values serialize");
    ChatMessage::user(format!(
        "Your turn in team `{team}`. Your team input (`inbox`: what was said since your \
         last turn):\n{json}"
    ))
}

impl<'e> Planner<'e> {
    /// Node `id` and its agent plan, when it runs as an agent.
    pub(super) fn agent_of(&self, id: &str) -> Option<(&'e NodePlan, &'e AgentPlan)> {
        let np = self.plan.nodes.get(id)?;
        match &np.run {
            NodeRun::Agent(agent) => Some((np, agent)),
            _ => None,
        }
    }

    /// The cycle's second round, when agent members' last replies asked for tools: those
    /// tool calls, at once (`None` when no member waits on any).
    pub(super) fn plan_member_tools(&self, run: &RunState, team: &TeamRun) -> Option<Planning<'e>> {
        let waiting: Vec<(usize, &str, u32)> = team
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, (id, m))| match m.session {
                Some(s) if m.status == MemberStatus::Active && mid_turn(run, s) => {
                    Some((i, id.as_str(), s))
                }
                _ => None,
            })
            .collect();
        if waiting.is_empty() {
            return None;
        }
        let mut members = Vec::with_capacity(waiting.len());
        let mut seats = Vec::with_capacity(waiting.len());
        let mut offset = 0u32;
        for (index, id, session) in waiting {
            let planned = self
                .agent_of(id)
                .ok_or_else(|| self.unknown("agent node", id))
                .and_then(|(mp, agent)| {
                    self.seat_next(run, (index, offset), mp, agent, session)
                        .map(|next| (mp, next))
                });
            let (mp, (seat, call, steps)) = match planned {
                Ok(p) => p,
                Err(msg) => return Some((None, TeamTurn::Stop(TeamStop::Mismatch(msg)))),
            };
            if let Some(call) = call {
                members.push(self.seat_member(run, mp, None, call));
            }
            seats.push(seat);
            offset = offset.saturating_add(steps);
        }
        if let Err(g) = steps_left(run, self, &team.node, offset) {
            return Some((None, TeamTurn::Stop(TeamStop::Guard(g))));
        }
        let effect = fork(&team.node, run, members);
        let turn = TeamTurn::Members {
            reports: Vec::new(),
            seats,
            tools: true,
        };
        Some((Some(effect), turn))
    }

    /// An agent lead's step: the tool calls of its last reply when they are unanswered,
    /// else its next turn (the inbox appended, one model call, `final_report` forced on
    /// a final turn).
    pub(super) fn plan_lead_seat(
        &self,
        run: &RunState,
        (np, spec): (&'e NodePlan, &'e Team),
        team: &mut TeamRun,
        (lead, agent): (&'e NodePlan, &'e AgentPlan),
        after: After<'e>,
    ) -> Planning<'e> {
        if let Some(session) = team.lead_session.filter(|s| mid_turn(run, *s)) {
            let (seat, call, steps) = match self.seat_next(run, (0, 0), lead, agent, session) {
                Ok(next) => next,
                Err(msg) => return (None, TeamTurn::Stop(TeamStop::Mismatch(msg))),
            };
            if let Err(g) = steps_left(run, self, &np.id, steps.saturating_sub(1)) {
                return (None, TeamTurn::Stop(TeamStop::Guard(g)));
            }
            let effect =
                call.map(|c| fork(&np.id, run, vec![self.seat_member(run, lead, None, c)]));
            let turn = TeamTurn::LeadSeat {
                lead,
                after,
                seat,
                tools: true,
            };
            return (effect, turn);
        }
        let turn = team.lead_turns.saturating_add(1);
        let final_turn = !team.any_active() || turn >= spec.lead_max_turns || team.final_next;
        let input = turn_input(
            &lead.id,
            turn,
            team.inbox(team.lead_seen, &lead.id),
            final_turn,
        );
        team.lead_seen = team.transcript.len();
        let view = || self.plan.view(run, &lead.contract(&self.plan.graph).reads);
        let message = turn_message(&np.id, &input);
        let (seat, call) = self.seat_turn(
            run,
            (0, 0),
            lead,
            agent,
            team.lead_session,
            view,
            message,
            final_turn,
        );
        let effect = call.map(|c| fork(&np.id, run, vec![self.seat_member(run, lead, None, c)]));
        let turn = TeamTurn::LeadSeat {
            lead,
            after,
            seat,
            tools: false,
        };
        (effect, turn)
    }
}

/// A fork effect of team `node` running `members`.
fn fork(node: &Arc<str>, run: &RunState, members: Vec<crate::runtime::effects::Member>) -> Effect {
    Effect {
        kind: EffectKind::Fork,
        id: Arc::clone(node),
        step: run.steps,
        limit: None,
        delay: Duration::ZERO,
        call: Call::Fork(members),
        role: Role::Plain,
    }
}

/// `steps` steps and the lead's next one must fit in `max_steps`.
fn steps_left(
    run: &RunState,
    planner: &Planner<'_>,
    team: &str,
    steps: u32,
) -> Result<(), GuardStop> {
    let budgets = planner.plan.graph.budgets();
    let need = u64::from(steps).saturating_add(1);
    let left = u64::from(budgets.max_steps.saturating_sub(run.steps));
    if need > left {
        return Err(GuardStop {
            reason: TerminationReason::MaxStepsExceeded,
            message: format!(
                "the tool calls of team `{team}` and the lead's turn need {need} steps but \
                 {left} are left of max_steps {}",
                budgets.max_steps
            ),
        });
    }
    Ok(())
}

impl Tx<'_> {
    /// The usage and microseconds of the model call just committed for `who`, when the
    /// last trace item is it.
    fn last_call(&self, who: &str) -> (u64, Option<Usage>) {
        match self.run.trace.last() {
            Some(it) if it.kind == TraceKind::ModelCall && it.source() == Some(who) => {
                (it.duration_us, it.usage().cloned())
            }
            _ => (0, None),
        }
    }

    /// Commits an agent member's seat in a cycle: its model call (a turn: a visit, the
    /// turn counted, its broadcast or failure, its `team_turn` item) or, with `tools`,
    /// its reply's tool calls. True when the run was cancelled meanwhile.
    pub(super) fn member_seat(
        &mut self,
        np: &NodePlan,
        spec: &Team,
        team: &mut TeamRun,
        seat: SeatStep<'_>,
        tools: bool,
    ) -> bool {
        let dispatcher = Arc::clone(&team.dispatcher);
        let id = Arc::clone(&seat.np.id);
        let max = spec.max_broadcast_bytes;
        let end = self.seat(&dispatcher, seat);
        if tools {
            match end {
                SeatEnd::Cancelled => return true,
                SeatEnd::Failed { message, .. } => team.fail_member(max, &id, &message),
                SeatEnd::Going(_) | SeatEnd::Exit { .. } => {}
            }
            return false;
        }
        if matches!(end, SeatEnd::Cancelled) {
            return true;
        }
        let (duration_us, usage) = self.last_call(&id);
        // Its turn's step was counted with its model call.
        self.run.count_visit(&id);
        let turn = match team.members.get_mut(&*id) {
            Some(m) => {
                m.turns += 1;
                m.turns
            }
            None => return false,
        };
        let outcome = match end {
            SeatEnd::Going(session) => {
                if let Some(m) = team.members.get_mut(&*id) {
                    m.session = Some(session);
                }
                if mid_turn(self.run, session) {
                    "tool calls".to_string()
                } else {
                    "silent".to_string()
                }
            }
            SeatEnd::Exit {
                output, session, ..
            } => {
                if let Some(m) = team.members.get_mut(&*id) {
                    m.session = Some(session);
                }
                self.answer_ended_turn(session, TEAM_BROADCAST);
                said(team, max, &id, output.broadcast, output.exit).to_string()
            }
            SeatEnd::Failed { message, .. } => {
                team.fail_member(max, &id, &message);
                format!("failed: {message}")
            }
            SeatEnd::Cancelled => return true,
        };
        let reason = format!("member turn {turn} of cycle {}: {outcome}", team.cycle);
        self.turn_item(np, &dispatcher, &id, reason, duration_us, usage);
        false
    }

    /// Commits an agent lead's seat: its turn (its broadcast starting another cycle, or
    /// its `final_report` ending the team as the team node's run) or, with `tools`, its
    /// reply's tool calls (its turn is then over without a broadcast).
    pub(super) fn lead_seat(
        &mut self,
        level: Level<'_>,
        (np, spec): (&NodePlan, &Team),
        mut team: Box<TeamRun>,
        (lead, after, seat, tools): (&NodePlan, After<'_>, SeatStep<'_>, bool),
    ) {
        let dispatcher = Arc::clone(&team.dispatcher);
        let end = self.seat(&dispatcher, seat);
        let end = match end {
            SeatEnd::Cancelled => {
                return self.fault(
                    &lead.id,
                    "the lead of team",
                    Fault::Cancelled,
                    Some(dispatcher),
                );
            }
            SeatEnd::Failed {
                reason, message, ..
            } => return self.fail(reason, message, Some(dispatcher)),
            end => end,
        };
        if tools {
            return self.lead_turn_over(np, spec, team, &lead.id, "its tool calls answered");
        }
        team.lead_turns += 1;
        let n = team.lead_turns;
        let (duration_us, usage) = self.last_call(&lead.id);
        self.run.count_visit(&lead.id);
        match end {
            SeatEnd::Exit {
                output,
                duration_us: total_us,
                ..
            } if output.is_final => {
                let reason = format!("lead turn {n}: final");
                self.turn_item(np, &dispatcher, &lead.id, reason, duration_us, usage);
                let ran = Ran {
                    result: Ok(NodeOutput::new(output.writes)),
                    failed: Vec::new(),
                };
                // The lead's calls counted their steps and usage: the team node's run
                // counts only its visit (and its item carries no usage, ADR 0021).
                let result = NodeResult::Session(Box::new(ran), total_us, None);
                self.team_final(level, (np, spec), team, result, after);
            }
            SeatEnd::Exit {
                output, session, ..
            } => {
                team.lead_session = Some(session);
                self.answer_ended_turn(session, TEAM_BROADCAST);
                if let Some(msg) = output.broadcast {
                    team.push(spec.max_broadcast_bytes, &lead.id, BroadcastKind::Lead, msg);
                }
                let said = if team.final_next {
                    "overflow"
                } else {
                    "broadcast"
                };
                let reason = format!("lead turn {n}: {said}");
                self.turn_item(np, &dispatcher, &lead.id, reason, duration_us, usage);
                self.lead_turn_over(np, spec, team, &lead.id, "no final_report");
            }
            SeatEnd::Going(session) => {
                team.lead_session = Some(session);
                if mid_turn(self.run, session) {
                    // Its tool calls are answered in the team's next step.
                    let reason = format!("lead turn {n}: tool calls");
                    self.turn_item(np, &dispatcher, &lead.id, reason, duration_us, usage);
                    team.next = TeamPhase::Lead;
                    self.run.control = Control::Running(Pending::Team(team));
                } else {
                    let reason = format!("lead turn {n}: no broadcast");
                    self.turn_item(np, &dispatcher, &lead.id, reason, duration_us, usage);
                    self.lead_turn_over(np, spec, team, &lead.id, "no final_report");
                }
            }
            SeatEnd::Failed { .. } | SeatEnd::Cancelled => {}
        }
    }

    /// An agent lead's turn is over without the team's answer: another cycle, or, on a
    /// final turn, the run fails `team_no_final`.
    fn lead_turn_over(
        &mut self,
        np: &NodePlan,
        spec: &Team,
        mut team: Box<TeamRun>,
        lead: &str,
        what: &str,
    ) {
        let n = team.lead_turns;
        let final_turn = !team.any_active() || n >= spec.lead_max_turns || team.final_next;
        if final_turn {
            let msg = format!(
                "the lead `{lead}` of team `{}` gave no `final_report` on its final turn (turn \
                 {n}: {what})",
                np.id
            );
            let sup = Some(Arc::clone(&team.dispatcher));
            return self.fail(TerminationReason::TeamNoFinal, msg, sup);
        }
        team.cycle += 1;
        team.next = TeamPhase::Members;
        self.run.control = Control::Running(Pending::Team(team));
    }
}
