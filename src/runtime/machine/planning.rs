//! Planning a step from what is pending, and feeding an effect's output back: the entry
//! points of the state machine ([`Planner::begin`], [`Planner::resolve`], [`commit_step`]),
//! which the executor calls with the time it read and its cancellation token.

use std::borrow::Cow;
use std::sync::Arc;

use super::agent::{Routed, feed_own, feed_seats, resolve_session};
use super::budgets::check_clock;
use super::commit::Tx;
use super::decide::Callee;
use super::decisions::{choice_label, decision_reason, resolve};
use super::planner::Planner;
use super::step::{
    Awaiting, Decided, Level, NodeResult, NodeTarget, PolicyDecided, Ran, Stage, StageExtra, Step,
    TeamTurn, Then, ready,
};
use crate::contracts::{RoutingDecision, SupervisorOutput};
use crate::runtime::data::decision_memo::DecisionMemo;
use crate::runtime::data::{Chain, Clock, Pending, RunState, RunStatus, TraceKind};
use crate::runtime::effects::{CancelWatch, EffectOutput, Fault, Produced};
use crate::runtime::plan::{Plan, PolicyRun};

impl<'e> Planner<'e> {
    /// Plans the run's next step without changing the run: checks the deadline (against
    /// [`Planner::now_ms`]) and `cancel`, decides (rule-based supervisors decide here; a
    /// policy becomes an effect), gates the node it leads to (budgets, visits, input
    /// schema) and describes its handler or program call as an effect. A run that is not
    /// running gives a step that commits nothing. Inlined, so the step is planned in
    /// its caller's frame rather than copied out of this one.
    #[inline(always)]
    pub(crate) fn begin(self, run: &RunState, cancel: &CancelWatch) -> Step<'e> {
        let mut step = Step::on(run);
        self.begin_in(run, cancel, &mut step);
        step
    }

    /// [`Planner::begin`] into a step its caller holds (made by [`Step::on`] from the
    /// same run): planned where it lies, so the caller commits it there without a copy
    /// of the step between planning's frame and its own (ADR 0061).
    #[inline(always)]
    pub(crate) fn begin_in(self, run: &RunState, cancel: &CancelWatch, step: &mut Step<'e>) {
        let budgets = self.plan.graph.budgets();
        let Some(pending) = run.pending() else {
            return;
        };
        if self.plan.clock == Clock::System {
            step.at_ms = self.now_ms;
        }
        match check_clock(run, budgets, cancel, self.now_ms) {
            Err(g) => {
                let sup = Some(Arc::clone(pending.supervisor()));
                ready(step, Level { frame: None }, None, Then::Guard(g, sup));
            }
            Ok(()) => self.plan_pending(run, pending, step),
        }
    }

    /// Feeds an effect's output to the step waiting on it and plans the rest (a policy's
    /// decision may lead to a node whose call is the next effect). A step not waiting on
    /// an effect is left as it is.
    pub(crate) fn resolve(self, run: &RunState, step: &mut Step<'e>, output: EffectOutput) {
        let stage = std::mem::replace(&mut step.stage, Stage::Idle);
        match stage {
            Stage::Waiting {
                then: Awaiting::Policy { sp, level },
                ..
            } => match output.result {
                Ok(Produced::Decision(out)) => {
                    let decided = Decided::Policy(Box::new(PolicyDecided {
                        supervisor: &sp.id,
                        target: choice_label(&out).into(),
                        reason: decision_reason(&out).map(Into::into),
                        duration_us: output.duration_us,
                    }));
                    let action = resolve(out, &sp.contract, self.plan.graph.registry());
                    self.plan_action(run, level, sp, action, decided, step);
                }
                Ok(
                    Produced::Node(_)
                    | Produced::Reports(_)
                    | Produced::Reply(_)
                    | Produced::ModelFailed(_)
                    | Produced::ToolResults(_),
                ) => {
                    let fault =
                        Fault::Failed("was given a node's output instead of a decision".into());
                    let sup = Arc::clone(&sp.id);
                    ready(step, level, None, Then::PolicyFault { sup, fault });
                }
                Err(fault) => {
                    let sup = Arc::clone(&sp.id);
                    ready(step, level, None, Then::PolicyFault { sup, fault });
                }
            },
            Stage::Waiting {
                then: Awaiting::Node(mut planned, mut retrying),
                ..
            } => {
                if let Then::Node(ns) = &mut planned.then {
                    let writes = match output.result {
                        Ok(Produced::Node(out)) => Ok(out),
                        Ok(
                            Produced::Decision(_)
                            | Produced::Reports(_)
                            | Produced::Reply(_)
                            | Produced::ModelFailed(_)
                            | Produced::ToolResults(_),
                        ) => Err(Fault::Failed(
                            "was given something other than its writes".into(),
                        )),
                        Err(f) => Err(f),
                    };
                    let (attempt, duration_us) = (output.attempt, output.duration_us);
                    if let (Err(fault), Some(r)) = (&writes, retrying.as_deref_mut())
                        && let Some(effect) =
                            self.retry_effect(run, &ns.np.id, r, fault, attempt, duration_us)
                    {
                        step.stage = Stage::Waiting {
                            effect: Some(Box::new(effect)),
                            then: Awaiting::Node(planned, retrying),
                        };
                        return;
                    }
                    let failed = retrying.map(|r| r.failed).unwrap_or_default();
                    ns.result = NodeResult::Ran(
                        Box::new(Ran {
                            result: writes,
                            failed,
                        }),
                        duration_us,
                    );
                }
                step.stage = Stage::Ready(planned);
            }
            Stage::Waiting {
                then: Awaiting::Fork(mut planned),
                ..
            } => {
                if let Then::Fork(fs) = &mut planned.then
                    && let Ok(Produced::Reports(r)) = output.result
                {
                    // Agent members' calls feed their seats; the others are plain
                    // members' reports.
                    fs.reports = feed_seats(r, &mut fs.seats, output.attempt);
                }
                step.stage = Stage::Ready(planned);
            }
            Stage::Waiting {
                then: Awaiting::Team(mut planned),
                ..
            } => {
                if let Then::Team(ts) = &mut planned.then {
                    match &mut ts.turn {
                        TeamTurn::Members { reports, seats, .. } => {
                            if let Ok(Produced::Reports(r)) = output.result {
                                *reports = feed_seats(r, seats, output.attempt);
                            }
                        }
                        TeamTurn::LeadSeat { seat, .. } => {
                            if let Ok(Produced::Reports(r)) = output.result {
                                feed_seats(r, std::slice::from_mut(seat), output.attempt);
                            }
                        }
                        TeamTurn::Lead {
                            result,
                            duration_us,
                            ..
                        } => {
                            *duration_us = output.duration_us;
                            *result = Some(match output.result {
                                Ok(Produced::Node(out)) => Ok(out),
                                Ok(_) => Err(Fault::Failed(
                                    "was given something other than its output".into(),
                                )),
                                Err(f) => Err(f),
                            });
                        }
                        TeamTurn::Stop(_) => {}
                    }
                }
                step.stage = Stage::Ready(planned);
            }
            Stage::Waiting {
                then: Awaiting::Session(mut planned),
                ..
            } => {
                if let Then::Session(ss) = &mut planned.then {
                    match ss.agent_tools.as_mut() {
                        // A fork of agent tools: the session's own tool calls first (when
                        // it makes some), then the seats.
                        Some(tools) => {
                            if let Ok(Produced::Reports(mut r)) = output.result {
                                if tools.own_calls && !r.is_empty() {
                                    let own = r.remove(0);
                                    feed_own(&mut ss.work, own, output.attempt);
                                }
                                feed_seats(r, &mut tools.seats, output.attempt);
                            }
                        }
                        None => resolve_session(&mut ss.work, output),
                    }
                }
                step.stage = Stage::Ready(planned);
            }
            other => step.stage = other,
        }
    }

    /// Plans from what is pending.
    fn plan_pending(&self, run: &RunState, pending: &Pending, step: &mut Step<'e>) {
        let plan = self.plan;
        let level = match self.level(run) {
            Ok(l) => l,
            Err(msg) => {
                let sup = Some(Arc::clone(pending.supervisor()));
                return ready(step, Level { frame: None }, None, Then::Mismatch(msg, sup));
            }
        };
        match pending {
            Pending::Decide { supervisor } => {
                let Some(sp) = plan.supervisor(supervisor) else {
                    let msg = self.unknown("supervisor", supervisor);
                    let sup = Some(Arc::clone(supervisor));
                    return ready(step, level, None, Then::Mismatch(msg, sup));
                };
                match &sp.policy {
                    PolicyRun::Rules(table) => {
                        // Triggers on `/system/...` see it as policies do: built fresh (and
                        // only then made and dropped, ADR 0064).
                        // Or taken again from the run's memo when no slice its triggers
                        // read was written since the table last decided on this level
                        // (ADR 0072); a decision made here is remembered at commit.
                        let depth = run.stack.len();
                        let verdict = if table.reads_system {
                            table.decide(&self.plan.policy_view(run))
                        } else if let Some(taken) = run
                            .changes
                            .memo()
                            .and_then(|m| m.taken(table.id, depth, table.reads))
                        {
                            let verdict = table.again(taken);
                            debug_assert_eq!(
                                table.decide(run.level_state()).taken,
                                Some(taken),
                                "a decision taken again is the one made afresh"
                            );
                            verdict
                        } else {
                            let verdict = table.decide(run.level_state());
                            step.memo =
                                verdict.taken.map(|t| DecisionMemo::new(table.id, depth, t));
                            verdict
                        };
                        let decided = Decided::Rules {
                            supervisor: &sp.id,
                            target: verdict.winner.map_or(&table.default_label, |e| &e.id),
                            reason: verdict.reason,
                            candidates: verdict.candidates,
                        };
                        match verdict.winner {
                            // A winning trigger names an `allow` entry of the right kind:
                            // no allowlist check, no id copied.
                            Some(e) => {
                                if e.is_subgraph {
                                    let then = match plan.subgraphs.get(&*e.id) {
                                        Some(sg) => Then::Call {
                                            caller: Arc::clone(&sp.id),
                                            sg,
                                            routed: None,
                                        },
                                        None => Then::Mismatch(
                                            self.unknown("subgraph", &e.id),
                                            Some(Arc::clone(&sp.id)),
                                        ),
                                    };
                                    return ready(step, level, Some(decided), then);
                                }
                                match self.dispatch_entry(sp, e) {
                                    Ok(t) => {
                                        self.plan_node(run, level, Some(decided), None, t, step)
                                    }
                                    Err(msg) => {
                                        let then = Then::Mismatch(msg, Some(Arc::clone(&sp.id)));
                                        ready(step, level, Some(decided), then)
                                    }
                                }
                            }
                            None => {
                                let default = table
                                    .default
                                    .clone()
                                    .unwrap_or_else(RoutingDecision::stop_local);
                                let action = resolve(
                                    SupervisorOutput::Decision(default),
                                    &sp.contract,
                                    plan.graph.registry(),
                                );
                                self.plan_action(run, level, sp, action, decided, step);
                            }
                        }
                    }
                    PolicyRun::Handler(h) => {
                        step.stage = Stage::Waiting {
                            effect: Some(Box::new(self.policy_effect(run, sp, Callee::Handler(h)))),
                            then: Awaiting::Policy { sp, level },
                        };
                    }
                    PolicyRun::Exec(spec) => {
                        step.stage = Stage::Waiting {
                            effect: Some(Box::new(self.policy_effect(
                                run,
                                sp,
                                Callee::Program(spec),
                            ))),
                            then: Awaiting::Policy { sp, level },
                        };
                    }
                    PolicyRun::Agent(agent) => {
                        self.policy_session_start(run, level, sp, agent, step);
                    }
                }
            }
            Pending::Deciding { .. } => {
                // The policy agent's next call, or its `route`: resolved as a handler's
                // decision is.
                if let Some(routed) = self.plan_deciding(run, level, pending, step) {
                    let Routed {
                        sp,
                        output,
                        reason,
                        duration_us,
                    } = routed;
                    let decided = Decided::Policy(Box::new(PolicyDecided {
                        supervisor: &sp.id,
                        target: choice_label(&output).into(),
                        reason: Some(reason.into()),
                        duration_us,
                    }));
                    let action = resolve(output, &sp.contract, plan.graph.registry());
                    self.plan_action(run, level, sp, action, decided, step);
                }
            }
            Pending::Handoff {
                node,
                dispatcher,
                from,
                chain,
                owed,
            } => {
                let reached = (
                    TraceKind::Handoff,
                    Some(Arc::clone(from)),
                    Some(chain.clone()),
                );
                self.plan_pending_node(run, level, node, dispatcher, reached, owed, false, step);
            }
            Pending::Advised {
                node,
                dispatcher,
                kind,
                from,
                chain,
                owed,
            } => {
                let reached = (*kind, from.clone(), chain.clone());
                self.plan_pending_node(run, level, node, dispatcher, reached, owed, true, step);
            }
            Pending::Retry { .. } | Pending::Call { .. } => {
                self.plan_routed(run, level, pending, step);
            }
            Pending::Team(team) => self.plan_pending_team(run, level, team, step),
            Pending::Advising(adv) => self.plan_pending_advising(run, level, adv, step),
            Pending::Session { .. } => self.plan_pending_session(run, level, pending, step),
        }
    }

    /// Plans node `node`, pending without a decision (a handoff, or a primary whose
    /// advisors have reported): reached as `reached` (trace kind, source, chain), owing
    /// `owed` routers' handoffs.
    #[allow(clippy::too_many_arguments)]
    fn plan_pending_node(
        &self,
        run: &RunState,
        level: Level<'e>,
        node: &str,
        dispatcher: &Arc<str>,
        reached: (TraceKind, Option<Arc<str>>, Option<Chain>),
        owed: &[Arc<str>],
        advised: bool,
        step: &mut Step<'e>,
    ) {
        let Some(np) = self.plan.nodes.get(node) else {
            let msg = self.unknown("node", node);
            let sup = Some(Arc::clone(dispatcher));
            return ready(step, level, None, Then::Mismatch(msg, sup));
        };
        let (kind, source, chain) = reached;
        let target = NodeTarget {
            np,
            dispatcher: Cow::Owned(Arc::clone(dispatcher)),
            kind,
            source: source.map(Cow::Owned),
            chain,
            extra: StageExtra::owing(owed),
            advised,
        };
        self.plan_node(run, level, None, None, target, step);
    }
}

/// Commits a step to the run it was planned on: records its trace items and applies its
/// outcome. Returns the status after it. A step still waiting on an effect, or planned on
/// a run that has moved since (or on another run), commits nothing.
#[inline(always)]
pub(crate) fn commit_step(plan: &Plan, run: &mut RunState, mut step: Step<'_>) -> RunStatus {
    commit_in_place(plan, run, &mut step)
}

/// [`commit_step`] reading the step where it lies (the executor's step without effects,
/// planned in its frame): nothing of it is moved but the parts commit keeps (ADR 0061).
/// The step is spent afterwards.
#[inline(always)]
pub(crate) fn commit_in_place(plan: &Plan, run: &mut RunState, step: &mut Step<'_>) -> RunStatus {
    if step.base != (run.steps, run.trace.len()) {
        return run.status();
    }
    if let Stage::Ready(planned) = &mut step.stage {
        // A rule decision made afresh is kept before anything this step writes, so that
        // its writes count (ADR 0072).
        if let Some(m) = step.memo {
            run.changes.remember(m);
        }
        // Every slice change made before this step is seen from its first item on.
        run.values_seen_from_here();
        Tx {
            plan,
            run,
            at_ms: step.at_ms,
            chain: None,
        }
        .commit(planned);
    }
    run.status()
}
