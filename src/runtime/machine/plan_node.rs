//! Planning a node run: where control goes after it (handoff, end of level, return), its
//! gates (budgets, visits, input schema, a chain stage's payload), its advisors' fork, and
//! the effect that calls its handler or program.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use super::budgets::check_node;
use super::calls::{NodeCall, node_call};
use super::planner::Planner;
use super::step::{
    After, Awaiting, Decided, ForkStep, Level, NodeResult, NodeStep, NodeTarget, Planned, Retrying,
    Stage, Step, Then, router_chain,
};
use crate::runtime::data::{Chain, ChainTrigger, Role, RunState, TraceItem, TraceKind};
use crate::runtime::effects::{CallIds, Effect, EffectKind};
use crate::runtime::plan::{NodePlan, NodeRun, check, check_at};

impl<'e> Planner<'e> {
    /// Plans a node run: where control goes after it, its gate (budgets, visits, input
    /// schema) and, for a handler or program, the effect.
    pub(crate) fn plan_node(
        &self,
        run: &RunState,
        level: Level<'e>,
        decision: Option<Decided<'e>>,
        fallback: Option<Box<TraceItem>>,
        target: NodeTarget<'e>,
        step: &mut Step<'e>,
    ) {
        let plan = self.plan;
        if let Some(spec) = &target.np.contract(&plan.graph).team {
            // A team node runs its team (see `team/`); its own run is the lead's answer.
            return self.plan_team_start(run, level, (decision, fallback), target, spec, step);
        }
        let NodeTarget {
            np,
            dispatcher,
            kind,
            source,
            chain,
            mut extra,
            advised,
        } = target;
        let contract = np.contract(&plan.graph);
        if let (Some(spec), false) = (&contract.advisors, advised) {
            // The primary's own gate first: advising a node that may not run is wasted.
            let gate = check_node(run, plan.graph.budgets(), &np.id, contract.max_visits)
                .and_then(|()| self.fork_effect(run, np, spec));
            step.stage = match gate {
                Ok((effect, seats)) => Stage::Waiting {
                    effect: Some(Box::new(effect)),
                    then: Awaiting::Fork(Planned {
                        level,
                        decision,
                        fallback,
                        then: Then::Fork(ForkStep {
                            np,
                            spec,
                            dispatcher: dispatcher.into_owned(),
                            kind,
                            source: source.map(Cow::into_owned),
                            chain,
                            reports: Vec::new(),
                            owed: extra.map(|x| x.owed).unwrap_or_default(),
                            seats,
                            round: None,
                        }),
                    }),
                },
                Err(g) => Stage::Ready(Planned {
                    level,
                    decision,
                    fallback,
                    then: Then::Guard(g, Some(dispatcher.into_owned())),
                }),
            };
            return;
        }
        // A dispatched router, or node with a `handoff`, starts a chain (stage 0).
        let chain = match chain {
            None if contract.router.is_some() => Some(router_chain(&np.id)),
            None if contract.handoff.is_some() => Some(Chain::handoff_root(Arc::clone(&np.id))),
            c => c,
        };
        let after = match self.after_node(level, np) {
            Ok(a) => a,
            Err(msg) => {
                let then = Then::Mismatch(msg, Some(dispatcher.into_owned()));
                step.stage = Stage::Ready(Planned {
                    level,
                    decision,
                    fallback,
                    then,
                });
                return;
            }
        };
        let handed_off = kind == TraceKind::Handoff;
        let error = extra.as_mut().and_then(|x| x.error.take());
        // The gates, then the call: what commit finds (`Err`: refused or invalid input),
        // or what the node calls (`None`: nothing, a `set` node).
        let gated: Result<Option<NodeCall<'e>>, NodeResult> = 'gate: {
            if let Err(g) = check_node(run, plan.graph.budgets(), &np.id, contract.max_visits) {
                break 'gate Err(NodeResult::Refused(g));
            }
            // A `set` node (or one without behaviour) with no input schema reads no view
            // and calls nothing: no view is made, none dropped (ADR 0064).
            if matches!(np.run, NodeRun::Set(_) | NodeRun::Nothing) && np.input_schema.is_none() {
                break 'gate Ok(None);
            }
            let needs_view = matches!(
                np.run,
                NodeRun::Handler(_) | NodeRun::Exec(_) | NodeRun::Agent(_)
            );
            let mut view = (needs_view || np.input_schema.is_some())
                .then(|| self.plan.view(run, &contract.reads));
            if let Some(schema) = &np.input_schema
                && let Some(map) = view.take()
            {
                // Checked as an object of slices: the view is wrapped for the validator
                // (moved, not copied) and taken back for the call.
                let input = serde_json::Value::Object(map);
                if handed_off {
                    if let Err((at, msg)) = check_at(schema, &input) {
                        let upstream = (source.as_deref(), chain.as_ref());
                        let msg = chain_payload_message(np, upstream, &at, &msg);
                        break 'gate Err(NodeResult::ChainPayloadInvalid(msg));
                    }
                } else if let Err(msg) = check(schema, &input) {
                    let msg = format!(
                        "the input of node `{}` does not match its input_schema: {msg}",
                        np.id
                    );
                    break 'gate Err(NodeResult::InputInvalid(msg));
                }
                if let serde_json::Value::Object(map) = input {
                    view = Some(map);
                }
            }
            let ids = CallIds {
                run_id: run.run_id,
                step: run.steps,
                attempt: 1,
            };
            Ok(view.and_then(|view| node_call(np, run, ids, || view, error)))
        };
        let result = match gated {
            Err(result) => result,
            // A `set` node (or one without behaviour) calls nothing: its writes are
            // applied at commit.
            Ok(None) => NodeResult::Constant,
            Ok(Some(call)) => {
                let ns = NodeStep {
                    np,
                    dispatcher,
                    kind,
                    source,
                    chain,
                    result: NodeResult::Awaiting,
                    after,
                    extra,
                };
                return self.plan_call(run, (level, decision, fallback), ns, call, step);
            }
        };
        // Written whole into the step from its parts, not built aside and copied in
        // (the common step's node: ADR 0061).
        step.plan(Stage::Ready(Planned {
            level,
            decision,
            fallback,
            then: Then::Node(NodeStep {
                np,
                dispatcher,
                kind,
                source,
                chain,
                result,
                after,
                extra,
            }),
        }));
    }

    /// The rest of [`Planner::plan_node`] for a node that calls something: its call (a
    /// handler or a program) as the step's effect, or an agent's session.
    fn plan_call(
        &self,
        run: &RunState,
        (level, decision, fallback): (Level<'e>, Option<Decided<'e>>, Option<Box<TraceItem>>),
        ns: NodeStep<'e>,
        call: NodeCall<'e>,
        step: &mut Step<'e>,
    ) {
        let np = ns.np;
        let contract = np.contract(&self.plan.graph);
        let planned = |then: Then<'e>| Planned {
            level,
            decision,
            fallback,
            then,
        };
        let call = match call {
            NodeCall::Call(call) => call,
            NodeCall::Session(agent, view) => {
                // An agent: its session's first model call (see `agent/`).
                let (ss, effect) = self.session_start(run, ns, agent, view);
                let planned = planned(Then::Session(ss));
                step.stage = match effect {
                    Some(effect) => Stage::Waiting {
                        effect: Some(Box::new(effect)),
                        then: Awaiting::Session(planned),
                    },
                    None => Stage::Ready(planned),
                };
                return;
            }
        };
        let own = np.own_timeout_ms();
        let retrying = contract
            .retry
            .as_ref()
            .filter(|p| p.max_attempts > 1)
            .map(|policy| {
                Box::new(Retrying {
                    policy,
                    own_limit: own,
                    call: call.clone(),
                    tried: 1,
                    failed: Vec::new(),
                })
            });
        let effect = Effect {
            kind: EffectKind::Node,
            id: Arc::clone(&np.id),
            step: run.steps,
            limit: self.call_limit(run, own),
            delay: Duration::ZERO,
            call,
            role: if contract.router.is_some() {
                Role::Router
            } else {
                Role::Plain
            },
        };
        step.stage = Stage::Waiting {
            effect: Some(Box::new(effect)),
            then: Awaiting::Node(planned(Then::Node(ns)), retrying),
        };
    }
}

impl<'e> Planner<'e> {
    /// Where control goes after node `np` runs at `level`: its router's `$route`, its
    /// handoff, the end of its level (terminal, or an exitpoint), or back to its
    /// supervisor. The error names a handoff target the workflow lacks.
    ///
    /// Inlined where it is called: the loop's node (it returns, at the root) is read from
    /// the plan here; every other node in [`Planner::after_node_in_full`], out of line.
    #[inline(always)]
    pub(crate) fn after_node(&self, level: Level<'e>, np: &NodePlan) -> Result<After<'e>, String> {
        if np.returns_at_root && level.frame.is_none() {
            // The loop's node: read from the plan, not the contract (ADR 0064).
            return Ok(After::Return);
        }
        self.after_node_in_full(level, np)
    }

    /// [`Planner::after_node`] read from the node's contract and the level.
    #[inline(never)]
    fn after_node_in_full(&self, level: Level<'e>, np: &NodePlan) -> Result<After<'e>, String> {
        let plan = self.plan;
        let contract = np.contract(&plan.graph);
        Ok(if contract.router.is_some() {
            // A router's own handoff is owed until its destination's chain completes.
            After::Route
        } else if let Some(next) = &contract.handoff {
            match plan.nodes.get(next.as_str()) {
                Some(n) => After::Handoff(n),
                None => return Err(self.unknown("node", next)),
            }
        } else if contract.terminal {
            After::EndLevel("terminal node")
        } else if level
            .frame
            .is_some_and(|(sg, _)| sg.contract.exitpoints.iter().any(|e| *e == *np.id))
        {
            After::EndLevel("exitpoint")
        } else {
            After::Return
        })
    }
}

/// The message of `invalid_chain_payload`: the upstream stage (the node that handed
/// off, or the router that routed), the downstream stage, and where the input first goes
/// wrong.
fn chain_payload_message(
    np: &NodePlan,
    (source, chain): (Option<&Arc<str>>, Option<&Chain>),
    at: &str,
    msg: &str,
) -> String {
    let upstream = source.map_or("?", |s| &**s);
    let (root, stage, how) = chain.map_or(("?", 0, "handed off"), |c| {
        let how = match c.trigger {
            ChainTrigger::Router => "routed",
            _ => "handed off",
        };
        (&*c.root, c.stage, how)
    });
    format!(
        "chain `{root}`: stage {} `{upstream}` {how} to stage {stage} `{}`, whose \
         input_schema rejects the input at `{at}`: {msg}",
        stage.saturating_sub(1),
        np.id
    )
}
