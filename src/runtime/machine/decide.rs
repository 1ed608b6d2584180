//! Planning from a supervisor's decision: what a resolved decision leads to, and the
//! effect that calls a policy (handler or program).

use std::sync::Arc;
use std::time::Duration;

use super::decisions::Action;
use super::planner::Planner;
use super::step::{Decided, Level, Planned, Stage, Step, Then, item, ready};
use crate::contracts::{ExecSpec, StopLocal};
use crate::runtime::data::{Role, RunState, TerminationReason, TraceKind};
use crate::runtime::effects::{Call, Effect, EffectKind, PolicyInput, RunContext, SharedPolicy};
use crate::runtime::plan::SupervisorPlan;

impl<'e> Planner<'e> {
    /// Plans what a resolved decision of `sp` leads to.
    pub(crate) fn plan_action(
        &self,
        run: &RunState,
        level: Level<'e>,
        sp: &'e SupervisorPlan,
        action: Action,
        decided: Decided<'e>,
        step: &mut Step<'e>,
    ) {
        let plan = self.plan;
        let sup = Arc::clone(&sp.id);
        let then = match action {
            Action::Node(id) => {
                return match self.dispatch(sp, &id) {
                    Ok(t) => self.plan_node(run, level, Some(decided), None, t, step),
                    Err(msg) => {
                        let then = Then::Mismatch(msg, Some(Arc::clone(&sp.id)));
                        ready(step, level, Some(decided), then)
                    }
                };
            }
            Action::Subgraph(id) => match plan.subgraphs.get(id.as_str()) {
                Some(sg) => Then::Call {
                    caller: sup,
                    sg,
                    routed: None,
                },
                None => Then::Mismatch(self.unknown("subgraph", &id), Some(sup)),
            },
            Action::StopLocal(stop) => Then::EndLevel {
                sup,
                stop,
                reason: TerminationReason::StopLocal,
            },
            Action::StopGlobal(stop) => {
                let mut frames = Vec::with_capacity(run.stack.len());
                for f in run.stack.iter().rev() {
                    match plan.subgraphs.get(&*f.subgraph_id) {
                        Some(sg) => frames.push(sg),
                        None => {
                            let then =
                                Then::Mismatch(self.unknown("subgraph", &f.subgraph_id), Some(sup));
                            return ready(step, level, Some(decided), then);
                        }
                    }
                }
                Then::StopGlobal { sup, stop, frames }
            }
            Action::Ask(question) => Then::Ask { sup, question },
            Action::Clarify { subgraph, question } => {
                return match self.clarifiable(run, &subgraph) {
                    Ok(sg) => {
                        let then = Then::Clarify {
                            caller: sup,
                            sg,
                            question,
                        };
                        ready(step, level, Some(decided), then)
                    }
                    Err(reason) => {
                        let action = Action::Fallback {
                            violation: Some(TerminationReason::ClarifyUnavailable),
                            reason,
                        };
                        self.plan_action(run, level, sp, action, decided, step)
                    }
                };
            }
            Action::Fallback { violation, reason } => {
                let fallback = sp.contract.fallback.as_deref();
                let mut it = item(run, TraceKind::Fallback, Some(Arc::clone(&sup)), step.at_ms);
                it.target = Some(fallback.unwrap_or("stop_local").into());
                it.reason = Some(reason.as_str().into());
                it.termination_reason = violation;
                let it = Some(Box::new(it));
                if let Some(node) = fallback {
                    return match self.dispatch(sp, node) {
                        Ok(t) => self.plan_node(run, level, Some(decided), it, t, step),
                        Err(msg) => {
                            let then = Then::Mismatch(msg, Some(Arc::clone(&sp.id)));
                            step.stage = Stage::Ready(Planned {
                                level,
                                decision: Some(decided),
                                fallback: it,
                                then,
                            });
                        }
                    };
                }
                let then = Then::EndLevel {
                    sup,
                    stop: StopLocal {
                        reason: Some(reason),
                        ..StopLocal::default()
                    },
                    reason: violation.unwrap_or(TerminationReason::StopLocal),
                };
                step.stage = Stage::Ready(Planned {
                    level,
                    decision: Some(decided),
                    fallback: it,
                    then,
                });
                return;
            }
        };
        ready(step, level, Some(decided), then);
    }

    /// The policy call of supervisor `sp` (a handler or a program), as an effect.
    pub(crate) fn policy_effect(
        &self,
        run: &RunState,
        sp: &SupervisorPlan,
        callee: Callee<'_>,
    ) -> Effect {
        let (call, own) = match callee {
            Callee::Program(spec) => {
                let stdin = serde_json::json!({
                    "supervisor": &*sp.id,
                    "depth": run.depth(),
                    "allow": sp.contract.allow,
                    "state": self.plan.policy_view(run),
                });
                (
                    Call::Program(Arc::clone(spec), stdin, None),
                    spec.timeout_ms,
                )
            }
            Callee::Handler(h) => {
                let input = PolicyInput {
                    supervisor: sp.id.to_string(),
                    state: self.plan.policy_view(run),
                    contract: Arc::clone(&sp.contract),
                    context: RunContext {
                        workflow: run.workflow.clone(),
                        step: run.steps,
                        depth: run.depth(),
                        subgraph: run.current_subgraph().map(str::to_string),
                        call_stack: run
                            .stack
                            .iter()
                            .map(|f| f.subgraph_id.to_string())
                            .collect(),
                    },
                };
                (Call::Policy(h.clone(), input), None)
            }
        };
        Effect {
            kind: EffectKind::Policy,
            id: Arc::clone(&sp.id),
            step: run.steps,
            limit: self.call_limit(run, own),
            delay: Duration::ZERO,
            call,
            role: Role::Plain,
        }
    }
}

/// Who answers a policy call.
pub(crate) enum Callee<'a> {
    Handler(&'a SharedPolicy),
    Program(&'a Arc<ExecSpec>),
}
