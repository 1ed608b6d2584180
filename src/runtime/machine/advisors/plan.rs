//! Planning advisors: the fork's first round (every member's call at once, an agent
//! member's session begun with its first model call) and, while agent members' sessions
//! go on ([`Pending::Advising`](crate::runtime::Pending::Advising)), each next round: every live session's next call.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::contracts::Advisors;
use crate::runtime::data::{AdvisingRun, Role, RunState, TerminationReason};
use crate::runtime::effects::{Call, CallIds, Effect, EffectKind, Member, MemberCall};
use crate::runtime::machine::budgets::{GuardStop, check_node};
use crate::runtime::machine::calls::{NodeCall, node_call};
use crate::runtime::machine::planner::Planner;
use crate::runtime::machine::step::{
    Awaiting, ForkStep, Level, Planned, SeatStep, Stage, Step, Then, ready,
};
use crate::runtime::plan::{NodePlan, NodeRun};

impl<'e> Planner<'e> {
    /// Plans the members of `np`'s advisors as one fork effect, or the guard that stops
    /// the run first: the steps left must cover every member and the primary. An agent
    /// member's session begins in it (its first model call is its member's call, see
    /// `agent/seats.rs`): the seats are what commit needs of them.
    pub(crate) fn fork_effect(
        &self,
        run: &RunState,
        np: &NodePlan,
        spec: &Advisors,
    ) -> Result<(Effect, Vec<SeatStep<'e>>), GuardStop> {
        let plan = self.plan;
        let budgets = plan.graph.budgets();
        let members = spec.members.len();
        let need = u64::try_from(members).unwrap_or(u64::MAX).saturating_add(1);
        let left = u64::from(budgets.max_steps.saturating_sub(run.steps));
        if need > left {
            return Err(GuardStop {
                reason: TerminationReason::MaxStepsExceeded,
                message: format!(
                    "node `{}` and its {members} advisor(s) need {need} steps but {left} are \
                     left of max_steps {}",
                    np.id, budgets.max_steps
                ),
            });
        }
        let mut planned = Vec::with_capacity(members);
        let mut seats = Vec::new();
        for (i, id) in spec.members.iter().enumerate() {
            let offset = u32::try_from(i).unwrap_or(u32::MAX);
            let step = run.steps.saturating_add(offset);
            let agent = plan.nodes.get(id.as_str()).and_then(|mp| match &mp.run {
                NodeRun::Agent(agent)
                    if visits_left(run, id, mp.contract(&plan.graph).max_visits).is_ok() =>
                {
                    Some((mp, agent))
                }
                _ => None,
            });
            let Some((mp, agent)) = agent else {
                planned.push(self.member(run, id, step, spec.timeout_ms, None));
                continue;
            };
            let view = plan.view(run, &mp.contract(&plan.graph).reads);
            let (seat, call) = self.seat_start(run, (i, offset), mp, agent, view);
            if let Some(call) = call {
                planned.push(self.seat_member(run, mp, spec.timeout_ms, call));
            }
            seats.push(seat);
        }
        let effect = Effect {
            kind: EffectKind::Fork,
            id: Arc::clone(&np.id),
            step: run.steps,
            limit: None,
            delay: Duration::ZERO,
            call: Call::Fork(planned),
            role: Role::Plain,
        };
        Ok((effect, seats))
    }

    /// Plans the next round of advisors under way (see [`Pending::Advising`](crate::runtime::Pending::Advising)): each live
    /// session's next call as a member of one fork effect, within the budgets (the calls
    /// and the primary's step must fit in `max_steps`).
    pub(crate) fn plan_pending_advising(
        &self,
        run: &RunState,
        level: Level<'e>,
        adv: &AdvisingRun,
        step: &mut Step<'e>,
    ) {
        let plan = self.plan;
        let sup = Some(Arc::clone(&adv.dispatcher));
        let stop = |step: &mut Step<'e>, then| ready(step, level, None, then);
        let Some(np) = plan.nodes.get(&*adv.node) else {
            return stop(step, Then::Mismatch(self.unknown("node", &adv.node), sup));
        };
        let Some(spec) = np.contract(&plan.graph).advisors.as_ref() else {
            let msg = format!(
                "the run state holds advisors of node `{}`, which has none in workflow `{}`",
                np.id,
                plan.graph.workflow()
            );
            return stop(step, Then::Mismatch(msg, sup));
        };
        if let Err(g) = check_node(run, plan.graph.budgets(), &np.id, None) {
            return stop(step, Then::Guard(g, sup));
        }
        let mut members = Vec::new();
        let mut seats = Vec::new();
        let mut offset = 0u32;
        for (position, id, session) in adv.live() {
            let agent = plan.nodes.get(&**id).and_then(|mp| match &mp.run {
                NodeRun::Agent(agent) => Some((mp, agent)),
                _ => None,
            });
            let Some((mp, agent)) = agent else {
                let msg = format!(
                    "the run state holds a session of advisor `{id}`, which workflow `{}` does \
                     not run as an agent",
                    plan.graph.workflow()
                );
                return stop(step, Then::Mismatch(msg, sup));
            };
            let (seat, call, steps) =
                match self.seat_next(run, (position, offset), mp, agent, session) {
                    Ok(next) => next,
                    Err(msg) => return stop(step, Then::Mismatch(msg, sup)),
                };
            if let Some(call) = call {
                members.push(self.seat_member(run, mp, spec.timeout_ms, call));
            }
            seats.push(seat);
            offset = offset.saturating_add(steps);
        }
        let budgets = plan.graph.budgets();
        let need = u64::from(offset).saturating_add(1);
        let left = u64::from(budgets.max_steps.saturating_sub(run.steps));
        if need > left {
            let g = GuardStop {
                reason: TerminationReason::MaxStepsExceeded,
                message: format!(
                    "the advisors of node `{}` and the node need {need} more steps but {left} \
                     are left of max_steps {}",
                    np.id, budgets.max_steps
                ),
            };
            return stop(step, Then::Guard(g, sup));
        }
        let effect = Effect {
            kind: EffectKind::Fork,
            id: Arc::clone(&np.id),
            step: run.steps,
            limit: None,
            delay: Duration::ZERO,
            call: Call::Fork(members),
            role: Role::Plain,
        };
        step.stage = Stage::Waiting {
            effect: Some(Box::new(effect)),
            then: Awaiting::Fork(Planned {
                level,
                decision: None,
                fallback: None,
                then: Then::Fork(ForkStep {
                    np,
                    spec,
                    dispatcher: Arc::clone(&adv.dispatcher),
                    kind: adv.kind,
                    source: adv.from.clone(),
                    chain: adv.chain.clone(),
                    reports: Vec::new(),
                    owed: adv.owed.clone(),
                    seats,
                    round: Some(Box::new(adv.clone())),
                }),
            }),
        };
    }

    /// Member `id`, as step `step` of the run. `team`: a team member's turn, given this
    /// team input in this slice (besides its `reads` view).
    pub(crate) fn member(
        &self,
        run: &RunState,
        id: &str,
        step: u32,
        cap: Option<u64>,
        team: Option<(&str, Value)>,
    ) -> Member {
        let role = if team.is_some() {
            Role::Member
        } else {
            Role::Plain
        };
        let plan = self.plan;
        let Some(mp) = plan.nodes.get(id) else {
            // A validated graph has every member; a run state from elsewhere may not.
            return Member {
                id: Arc::from(id),
                limit: None,
                call: MemberCall::Refused(format!("the workflow has no node `{id}`")),
                role,
            };
        };
        let contract = mp.contract(&plan.graph);
        if let Err(msg) = visits_left(run, id, contract.max_visits) {
            return Member {
                id: Arc::clone(&mp.id),
                limit: None,
                call: MemberCall::Refused(msg),
                role,
            };
        }
        let ids = CallIds {
            run_id: run.run_id,
            step,
            attempt: 1,
        };
        let mut team = team;
        // Called once, by the branch that calls the member: the team input is moved in.
        let view = || {
            let room = usize::from(team.is_some());
            let mut view = self.plan.view_and(run, &contract.reads, room);
            if let Some((slice, input)) = team.take() {
                view.insert(slice.to_string(), input);
            }
            view
        };
        let call = match node_call(mp, run, ids, view, None).map(NodeCall::into_call) {
            Some(Ok(call)) => MemberCall::Call(call),
            Some(Err(msg)) => MemberCall::Refused(msg),
            None => MemberCall::Constant(mp.constant_writes()),
        };
        Member {
            id: Arc::clone(&mp.id),
            limit: self.member_limit(run, mp, cap),
            call,
            role,
        }
    }
}

/// Whether member `mp` may run once more (its `max_visits`); the error says why not.
fn visits_left(run: &RunState, id: &str, max_visits: Option<u32>) -> Result<(), String> {
    let done = run.visits.get(id).copied().unwrap_or(0);
    match max_visits {
        Some(max) if done >= max => Err(format!(
            "it already ran {done} time(s); its max_visits is {max}"
        )),
        _ => Ok(()),
    }
}
