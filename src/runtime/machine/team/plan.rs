//! Teams (brief §5.5): running a node with a `team` field runs its members in cycles and
//! its lead after each cycle, until the lead answers `$final: true`.
//!
//! A team is a run of ordinary steps (ADR 0021). Its progress (the transcript, each
//! member's status, turns and read position, the lead's turns) lives in
//! [`Pending::Team`](crate::runtime::Pending::Team), so a run saved between any two steps resumes
//! the team where it was. Two kinds of steps alternate:
//!
//! - **a member cycle**: one [`Fork`](crate::runtime::EffectKind::Fork) effect runs every active
//!   member's turn at once; the commit counts one step per member turn (in declaration
//!   order, like advisors) and adds their broadcasts to the transcript in that order;
//! - **a lead turn**: one node effect (the lead's call); the commit counts one step. A
//!   final turn is also the team node's run: its writes are checked against the team
//!   node's contract and applied as the team node's, and control goes on from the team
//!   node (handoff, terminal, back to its supervisor).
//!
//! This file holds the planning half; `data/team_state.rs` the progress types,
//! `commit.rs` the commit.
//!
//! Complexity: a cycle with m active members costs O(m) effects and trace items; each
//! turn's inbox is what its participant has not seen, so a team's transcript is copied
//! into inputs about once per participant.

use std::sync::Arc;
use std::time::Duration;

use super::super::budgets::{GuardStop, check_node};
use super::super::calls::node_call;
use super::super::planner::Planner;
use super::super::step::{
    Awaiting, Decided, Level, NodeTarget, Planned, Stage, Step, TeamStep, TeamStop, TeamTurn, Then,
    ready,
};
use super::agents::turn_message;
use crate::contracts::Team;
use crate::runtime::data::{
    Chain, MemberStatus, NodeOutput, Role, RunState, TeamPhase, TeamRun, TerminationReason,
    TraceItem, accept_as, turn_input,
};
use crate::runtime::effects::{Call, CallIds, Effect, EffectKind, Fault, Member};
use crate::runtime::plan::NodePlan;

/// What a planned team step waits on (at most one effect) and then commits.
pub(super) type Planning<'e> = (Option<Effect>, TeamTurn<'e>);

impl<'e> Planner<'e> {
    /// Plans the first step of team node `target` (its gate: budgets and `max_visits`).
    pub(crate) fn plan_team_start(
        &self,
        run: &RunState,
        level: Level<'e>,
        head: (Option<Decided<'e>>, Option<Box<TraceItem>>),
        target: NodeTarget<'e>,
        spec: &'e Team,
        step: &mut Step<'e>,
    ) {
        let contract = target.np.contract(&self.plan.graph);
        let owed = target
            .extra
            .as_ref()
            .map(|x| x.owed.clone())
            .unwrap_or_default();
        let mut team = Box::new(TeamRun::start(
            (Arc::clone(&target.np.id), Arc::clone(&target.dispatcher)),
            (
                target.kind,
                target.source.as_deref().cloned(),
                target.chain.clone(),
            ),
            owed,
            spec,
        ));
        if team.chain.is_none() && contract.handoff.is_some() {
            // A dispatched team node with a `handoff` starts a chain (stage 0).
            team.chain = Some(Chain::handoff_root(Arc::clone(&target.np.id)));
        }
        match check_node(
            run,
            self.plan.graph.budgets(),
            &target.np.id,
            contract.max_visits,
        ) {
            Ok(()) => self.plan_team(run, level, head, target.np, spec, team, step),
            Err(g) => {
                let turn = TeamTurn::Stop(TeamStop::Guard(g));
                self.team_stage(level, head, None, target.np, spec, team, turn, step);
            }
        }
    }

    /// Plans a pending team's next step.
    pub(crate) fn plan_pending_team(
        &self,
        run: &RunState,
        level: Level<'e>,
        team: &TeamRun,
        step: &mut Step<'e>,
    ) {
        let plan = self.plan;
        let found = plan.nodes.get(&*team.node).and_then(|np| {
            let spec = np.contract(&plan.graph).team.as_ref()?;
            Some((np, spec))
        });
        let Some((np, spec)) = found else {
            let msg = self.unknown("team node", &team.node);
            let then = Then::Mismatch(msg, Some(Arc::clone(&team.dispatcher)));
            return ready(step, level, None, then);
        };
        let team = Box::new(team.clone());
        self.plan_team(run, level, (None, None), np, spec, team, step);
    }

    /// Plans the team's next step from its progress: the members' cycle (after failing
    /// those whose turns are used up), or the lead's turn.
    #[allow(clippy::too_many_arguments)]
    fn plan_team(
        &self,
        run: &RunState,
        level: Level<'e>,
        head: (Option<Decided<'e>>, Option<Box<TraceItem>>),
        np: &'e NodePlan,
        spec: &'e Team,
        mut team: Box<TeamRun>,
        step: &mut Step<'e>,
    ) {
        let cycle = match team.next {
            TeamPhase::Members => self.plan_cycle(run, spec, &mut team),
            TeamPhase::Lead => None,
        };
        let (effect, turn) = match cycle {
            Some(planned) => planned,
            None => {
                team.next = TeamPhase::Lead;
                self.plan_lead(run, level, np, spec, &mut team)
            }
        };
        self.team_stage(level, head, effect, np, spec, team, turn, step);
    }

    /// Sets the step's stage: waiting on `effect`, or ready.
    #[allow(clippy::too_many_arguments)]
    fn team_stage(
        &self,
        level: Level<'e>,
        head: (Option<Decided<'e>>, Option<Box<TraceItem>>),
        effect: Option<Effect>,
        np: &'e NodePlan,
        spec: &'e Team,
        run: Box<TeamRun>,
        turn: TeamTurn<'e>,
        step: &mut Step<'e>,
    ) {
        let planned = Planned {
            level,
            decision: head.0,
            fallback: head.1,
            then: Then::Team(Box::new(TeamStep {
                np,
                spec,
                run,
                turn,
            })),
        };
        step.stage = match effect {
            Some(e) => Stage::Waiting {
                effect: Some(Box::new(e)),
                then: Awaiting::Team(planned),
            },
            None => Stage::Ready(planned),
        };
    }

    /// Plans a members' cycle. Members whose turns are used up fail first; with nobody
    /// left to take a turn, gives `None`: the lead is next.
    fn plan_cycle(
        &self,
        run: &RunState,
        spec: &'e Team,
        team: &mut TeamRun,
    ) -> Option<Planning<'e>> {
        // Agent members whose last reply asked for tools: their tool calls are answered
        // first, in a round of their own; no new turn starts (see `agents.rs`).
        if let Some(round) = self.plan_member_tools(run, team) {
            return Some(round);
        }
        let used_up: Vec<String> = team
            .members
            .iter()
            .filter(|(_, m)| m.status == MemberStatus::Active && m.turns >= spec.member_max_turns)
            .map(|(id, _)| id.clone())
            .collect();
        for id in used_up {
            let why = format!(
                "it used all {} of its turns (member_max_turns) without `$exit`",
                spec.member_max_turns
            );
            team.fail_member(spec.max_broadcast_bytes, &id, &why);
        }
        // Positions in `members`, not ids: nothing is copied or looked up again.
        let turning: Vec<usize> = team
            .members
            .values()
            .enumerate()
            .filter(|(_, m)| m.status == MemberStatus::Active)
            .map(|(i, _)| i)
            .collect();
        if turning.is_empty() {
            return None;
        }
        let budgets = self.plan.graph.budgets();
        let need = u64::try_from(turning.len())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let left = u64::from(budgets.max_steps.saturating_sub(run.steps));
        if need > left {
            return Some((
                None,
                TeamTurn::Stop(TeamStop::Guard(GuardStop {
                    reason: TerminationReason::MaxStepsExceeded,
                    message: format!(
                        "cycle {} of team `{}` needs {need} steps ({} member turn(s) and the \
                         lead's) but {left} are left of max_steps {}",
                        team.cycle,
                        team.node,
                        turning.len(),
                        budgets.max_steps
                    ),
                })),
            ));
        }
        let mut members: Vec<Member> = Vec::with_capacity(turning.len());
        let mut seats = Vec::new();
        let transcript_len = team.transcript.len();
        for (i, &index) in turning.iter().enumerate() {
            let Some((id, m)) = team.members.get_index(index) else {
                continue;
            };
            let turn = m.turns.saturating_add(1);
            let final_turn = turn >= spec.member_max_turns;
            let input = turn_input(id, turn, team.inbox(m.seen, id), final_turn);
            let offset = u32::try_from(i).unwrap_or(u32::MAX);
            let at = run.steps.saturating_add(offset);
            match self.agent_of(id) {
                Some((mp, agent)) => {
                    // An agent member: one model call on its one session, the inbox
                    // appended as a user message.
                    let view = || self.plan.view(run, &mp.contract(&self.plan.graph).reads);
                    let message = turn_message(&team.node, &input);
                    let (seat, call) = self.seat_turn(
                        run,
                        (index, offset),
                        mp,
                        agent,
                        m.session,
                        view,
                        message,
                        final_turn,
                    );
                    if let Some(call) = call {
                        members.push(self.seat_member(run, mp, None, call));
                    }
                    seats.push(seat);
                }
                None => members.push(self.member(run, id, at, None, Some((&spec.slice, input)))),
            }
            if let Some((_, m)) = team.members.get_index_mut(index) {
                m.seen = transcript_len;
            }
        }
        let effect = Effect {
            kind: EffectKind::Fork,
            id: Arc::clone(&team.node),
            step: run.steps,
            limit: None,
            delay: Duration::ZERO,
            call: Call::Fork(members),
            role: Role::Plain,
        };
        let turn = TeamTurn::Members {
            reports: Vec::new(),
            seats,
            tools: false,
        };
        Some((Some(effect), turn))
    }

    /// Plans the lead's turn.
    fn plan_lead(
        &self,
        run: &RunState,
        level: Level<'e>,
        np: &'e NodePlan,
        spec: &'e Team,
        team: &mut TeamRun,
    ) -> Planning<'e> {
        let plan = self.plan;
        let Some(lead) = plan.nodes.get(spec.lead.as_str()) else {
            return (
                None,
                TeamTurn::Stop(TeamStop::Mismatch(self.unknown("node", &spec.lead))),
            );
        };
        let after = match self.after_node(level, np) {
            Ok(a) => a,
            Err(msg) => return (None, TeamTurn::Stop(TeamStop::Mismatch(msg))),
        };
        if run.steps >= plan.graph.budgets().max_steps {
            let g = GuardStop {
                reason: TerminationReason::MaxStepsExceeded,
                message: format!(
                    "the lead `{}` of team `{}` needs a step but none is left of max_steps {}",
                    lead.id,
                    np.id,
                    plan.graph.budgets().max_steps
                ),
            };
            return (None, TeamTurn::Stop(TeamStop::Guard(g)));
        }
        if let Some((_, agent)) = self.agent_of(&lead.id) {
            return self.plan_lead_seat(run, (np, spec), team, (lead, agent), after);
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
        let contract = lead.contract(&plan.graph);
        let view = || {
            let mut view = self.plan.view_and(run, &contract.reads, 1);
            view.insert(spec.slice.clone(), input);
            view
        };
        let ids = CallIds {
            run_id: run.run_id,
            step: run.steps,
            attempt: 1,
        };
        let Some(call) = node_call(lead, run, ids, view, None) else {
            // Constants: read as the lead's envelope (a `set` lead may send `$final`).
            let result = Some(
                accept_as(NodeOutput::new(lead.constant_writes()), Role::Lead)
                    .map_err(|e| Fault::InvalidOutput(format!("sent an invalid output: {e}"))),
            );
            let turn = TeamTurn::Lead {
                lead,
                final_turn,
                after,
                result,
                duration_us: 0,
            };
            return (None, turn);
        };
        let call = match call.into_call() {
            Ok(call) => call,
            Err(msg) => {
                let turn = TeamTurn::Lead {
                    lead,
                    final_turn,
                    after,
                    result: Some(Err(Fault::Permanent(msg))),
                    duration_us: 0,
                };
                return (None, turn);
            }
        };
        let own = lead.own_timeout_ms();
        let effect = Effect {
            kind: EffectKind::Node,
            id: Arc::clone(&lead.id),
            step: run.steps,
            limit: self.call_limit(run, own),
            delay: Duration::ZERO,
            call,
            role: Role::Lead,
        };
        let turn = TeamTurn::Lead {
            lead,
            final_turn,
            after,
            result: None,
            duration_us: 0,
        };
        (Some(effect), turn)
    }
}
