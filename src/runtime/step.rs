//! One step, cut in three: **planning** reads the run and works out everything the step
//! will do, down to the [`Effect`] it waits on, if any; a driver **performs** the effect
//! (see [`Executor::perform`]); **commit** applies the outcome to the run in one go. Only
//! commit changes the run, so a step abandoned before its commit leaves the run exactly as
//! it was.
//!
//! [`Executor::step`] drives all three; a driver that records effects (a run store) or
//! runs several at once uses [`Executor::begin_step`], [`Executor::resolve_step`] and
//! [`Executor::commit_step`] itself.

use std::sync::Arc;
use std::time::Duration;

use super::advisors::Report;
use super::budgets::{GuardStop, check_clock, check_node};
use super::builder::{
    Clock, NodePlan, NodeRun, PolicyRun, SubgraphPlan, SupervisorPlan, check, check_at,
};
use super::decisions::{Action, choice_label, decision_reason, resolve};
use super::effects::{Call, CallIds, Effect, EffectKind, EffectOutput, Produced, node_stdin};
use super::executor::{Executor, wall_ms};
use super::guarded::Fault;
use super::handlers::{NodeInput, PolicyInput, RunContext};
use super::output::NodeOutput;
use super::route::{RoutedCall, StageExtra, router_chain};
use super::run_state::{Pending, RunState};
use super::status::{RunStatus, TerminationReason};
use super::trace::{Chain, ChainTrigger, TraceItem, TraceKind};
use crate::contracts::{
    Advisors, RetryPolicy, RoutingDecision, StopGlobal, StopLocal, SupervisorOutput,
};

/// A step in progress: planned from a [`RunState`], possibly waiting on an [`Effect`],
/// then committed to that same run. Borrows the executor, not the run.
pub struct Step<'e> {
    pub(crate) stage: Stage<'e>,
    /// The step's timestamp, shared by its trace items.
    pub(crate) at_ms: u64,
    /// Steps taken and trace length of the run it was planned on: a step commits only to
    /// a run that has not moved since.
    pub(crate) base: (u32, usize),
}

impl std::fmt::Debug for Step<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = match &self.stage {
            Stage::Idle => "idle",
            Stage::Waiting { .. } => "waiting",
            Stage::Ready(_) => "ready",
        };
        f.debug_struct("Step")
            .field("stage", &stage)
            .field("effect", &self.effect())
            .finish_non_exhaustive()
    }
}

impl Step<'_> {
    /// The effect the step waits on, if any.
    pub fn effect(&self) -> Option<&Effect> {
        match &self.stage {
            Stage::Waiting { effect, .. } => effect.as_deref(),
            _ => None,
        }
    }

    /// Takes the effect the step waits on, to perform it. The step keeps waiting until
    /// [`Executor::resolve_step`] feeds the effect's output back.
    pub fn take_effect(&mut self) -> Option<Effect> {
        match &mut self.stage {
            Stage::Waiting { effect, .. } => effect.take().map(|e| *e),
            _ => None,
        }
    }

    /// True when nothing is awaited: the step can be committed.
    pub fn is_ready(&self) -> bool {
        !matches!(self.stage, Stage::Waiting { .. })
    }
}

/// Where a step stands.
// Built once per step and moved a few times on the stack; boxing the large variants
// would allocate on every step, the hot path this layout keeps allocation-free.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Stage<'e> {
    /// The run was not running: committing does nothing.
    Idle,
    /// Waiting on an effect (taken by the driver, or not yet).
    Waiting {
        // Boxed: most steps have no effect, and every step's size is moved around.
        effect: Option<Box<Effect>>,
        then: Awaiting<'e>,
    },
    /// Everything is known.
    Ready(Planned<'e>),
}

/// What an awaited effect's output completes.
#[allow(clippy::large_enum_variant)] // as `Stage`
pub(crate) enum Awaiting<'e> {
    /// A policy's decision, for supervisor `sp`.
    Policy {
        sp: &'e SupervisorPlan,
        level: Level<'e>,
    },
    /// A node's writes: the plan is complete but for [`NodeStep::result`]. A node with a
    /// retry policy keeps what it needs to try again.
    Node(Planned<'e>, Option<Box<Retrying<'e>>>),
    /// A primary's advisors' reports: the plan is complete but for [`ForkStep::reports`].
    Fork(Planned<'e>),
}

/// A node call under a retry policy: the policy, the call to repeat and the attempts
/// that failed so far.
pub(crate) struct Retrying<'e> {
    pub(crate) policy: &'e RetryPolicy,
    /// The node's own time limit (a program's `timeout_ms`), for each attempt's limit.
    pub(crate) own_limit: Option<u64>,
    /// The call as first planned (its attempt number is set for each try).
    pub(crate) call: Call,
    /// Attempts made in this step so far.
    pub(crate) tried: u32,
    pub(crate) failed: Vec<FailedAttempt>,
}

/// An attempt of a node call that failed and was tried again (traced as `retry`).
#[derive(Debug)]
pub(crate) struct FailedAttempt {
    pub(crate) attempt: u32,
    pub(crate) kind: &'static str,
    pub(crate) message: String,
    pub(crate) duration_us: u64,
    /// The wait before the next attempt.
    pub(crate) backoff_ms: u64,
}

/// What running a node gave: its output or failure, and the attempts that failed before
/// (empty without a retry policy).
pub(crate) struct Ran {
    pub(crate) result: Result<NodeOutput, Fault>,
    pub(crate) failed: Vec<FailedAttempt>,
}

/// The current level, resolved: the subgraph of the innermost open frame and the
/// supervisor that called it (`None` at the root).
#[derive(Clone, Copy)]
pub(crate) struct Level<'e> {
    pub(crate) frame: Option<(&'e SubgraphPlan, &'e SupervisorPlan)>,
}

/// A step with every outcome known: what commit records and does.
pub(crate) struct Planned<'e> {
    pub(crate) level: Level<'e>,
    /// The decision (rules or policy), recorded first.
    pub(crate) decision: Option<Decided>,
    /// The fallback item (rare, so boxed), recorded second.
    pub(crate) fallback: Option<Box<TraceItem>>,
    pub(crate) then: Then<'e>,
}

/// A supervisor's decision, noted while planning and recorded as its `decision` trace
/// item at commit (the item's step, depth and level are the same then). Smaller than the
/// item, so the step stays small as it moves.
pub(crate) struct Decided {
    pub(crate) supervisor: Arc<str>,
    pub(crate) target: Arc<str>,
    pub(crate) reason: Option<Arc<str>>,
    pub(crate) candidates: Arc<[Arc<str>]>,
    pub(crate) duration_us: u64,
}

/// What the step does once its decision is recorded.
pub(crate) enum Then<'e> {
    /// A guard tripped before anything ran.
    Guard(GuardStop, Option<Arc<str>>),
    /// The run state names something this workflow does not have (it was saved by
    /// another workflow, or edited): the run fails before anything runs.
    Mismatch(String, Option<Arc<str>>),
    /// A policy call failed.
    PolicyFault { sup: Arc<str>, fault: Fault },
    /// A node runs (dispatched, handed off, or as a fallback).
    Node(NodeStep<'e>),
    /// A node's advisors run (the node itself runs in the next step).
    Fork(ForkStep<'e>),
    /// A subgraph is entered (by its caller's decision, or as a router's destination:
    /// then with the router's chain and the handoffs owed when it returns).
    Call {
        caller: Arc<str>,
        sg: &'e SubgraphPlan,
        routed: Option<Box<RoutedCall>>,
    },
    /// The current level ends.
    EndLevel {
        sup: Arc<str>,
        stop: StopLocal,
        reason: TerminationReason,
    },
    /// The run ends, committing the open frames (their plans, innermost first).
    StopGlobal {
        sup: Arc<str>,
        stop: StopGlobal,
        frames: Vec<&'e SubgraphPlan>,
    },
    /// The run pauses for an answer.
    Ask { sup: Arc<str>, question: String },
}

/// A node run, planned.
pub(crate) struct NodeStep<'e> {
    pub(crate) np: &'e NodePlan,
    pub(crate) dispatcher: Arc<str>,
    pub(crate) kind: TraceKind,
    pub(crate) source: Option<Arc<str>>,
    /// Where the node stands in a chain (`None` outside chains).
    pub(crate) chain: Option<Chain>,
    pub(crate) result: NodeResult,
    pub(crate) after: After<'e>,
    /// Router runs and routed chains only (`None` on the common path): the attempt and
    /// the routers' handoffs owed.
    pub(crate) extra: Option<Box<StageExtra>>,
}

/// A primary's advisors, planned: the primary, how it was reached, and the reports once
/// the fork effect has been performed.
pub(crate) struct ForkStep<'e> {
    pub(crate) np: &'e NodePlan,
    pub(crate) spec: &'e Advisors,
    pub(crate) dispatcher: Arc<str>,
    pub(crate) kind: TraceKind,
    pub(crate) source: Option<Arc<str>>,
    pub(crate) chain: Option<Chain>,
    pub(crate) reports: Vec<Report>,
    /// Routers whose own handoff is owed (see [`Pending::Handoff`]), kept for the primary.
    pub(crate) owed: Vec<Arc<str>>,
}

/// What running the node gave.
pub(crate) enum NodeResult {
    /// A budget or `max_visits` refused it: nothing ran, no step counted.
    Refused(GuardStop),
    /// Its input failed its `input_schema` (the step counts).
    InputInvalid(String),
    /// A chain stage reached through a handoff or a router got an input its
    /// `input_schema` rejects (the step counts).
    ChainPayloadInvalid(String),
    /// A `set` node (or one without behaviour): its writes are its constants.
    Constant,
    /// A handler or program: its output is awaited.
    Awaiting,
    /// A handler or program ran, taking this many microseconds. Boxed: only effect steps
    /// have it, and every step's size is moved around.
    Ran(Box<Ran>, u64),
}

/// Where control goes after the node.
pub(crate) enum After<'e> {
    /// Its `handoff` runs next.
    Handoff(&'e NodePlan),
    /// It ends its level (a terminal node, or an exitpoint of the current subgraph).
    EndLevel(&'static str),
    /// Back to the dispatching supervisor.
    Return,
    /// The node is a router: its `$route` decides (judged at commit).
    Route,
}

/// A trace item of `kind` at the run's current step, depth and level.
pub(crate) fn item(
    run: &RunState,
    kind: TraceKind,
    supervisor: Option<Arc<str>>,
    at_ms: u64,
) -> TraceItem {
    let mut item = TraceItem::new(kind, run.steps, run.depth());
    item.supervisor = supervisor;
    item.subgraph = run.stack.last().map(|f| Arc::clone(&f.subgraph_id));
    item.at_ms = at_ms;
    item
}

impl Executor {
    /// Plans the run's next step without changing the run: checks the deadline and
    /// cancellation, decides (rule-based supervisors decide here; a policy becomes an
    /// effect), gates the node it leads to (budgets, visits, input schema) and describes
    /// its handler or program call as an effect. A run that is not running gives a step
    /// that commits nothing.
    pub fn begin_step<'e>(&'e self, run: &RunState) -> Step<'e> {
        let budgets = self.plan.graph.budgets();
        let mut step = Step {
            stage: Stage::Idle,
            at_ms: 0,
            base: (run.steps, run.trace.len()),
        };
        let Some(pending) = run.pending() else {
            return step;
        };
        let now = if self.plan.clock == Clock::System || budgets.timeout_ms.is_some() {
            wall_ms()
        } else {
            0
        };
        if self.plan.clock == Clock::System {
            step.at_ms = now;
        }
        match check_clock(run, budgets, &self.cancel, now) {
            Err(g) => {
                let sup = Some(Arc::clone(pending.supervisor()));
                ready(&mut step, Level { frame: None }, None, Then::Guard(g, sup));
            }
            Ok(()) => self.plan_pending(run, pending, &mut step),
        }
        step
    }

    /// Feeds an effect's output to the step waiting on it and plans the rest (a policy's
    /// decision may lead to a node whose call is the next effect). A step not waiting on
    /// an effect is left as it is.
    pub fn resolve_step<'e>(&'e self, run: &RunState, step: &mut Step<'e>, output: EffectOutput) {
        let stage = std::mem::replace(&mut step.stage, Stage::Idle);
        match stage {
            Stage::Waiting {
                then: Awaiting::Policy { sp, level },
                ..
            } => match output.result {
                Ok(Produced::Decision(out)) => {
                    let decided = Decided {
                        supervisor: Arc::clone(&sp.id),
                        target: choice_label(&out).into(),
                        reason: decision_reason(&out).map(Into::into),
                        candidates: Arc::default(),
                        duration_us: output.duration_us,
                    };
                    let action = resolve(out, &sp.contract, self.plan.graph.registry());
                    self.plan_action(run, level, sp, action, decided, step);
                }
                Ok(Produced::Node(_) | Produced::Reports(_)) => {
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
                        Ok(Produced::Decision(_) | Produced::Reports(_)) => Err(Fault::Failed(
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
                    fs.reports = r;
                }
                step.stage = Stage::Ready(planned);
            }
            other => step.stage = other,
        }
    }

    /// Plans from what is pending.
    fn plan_pending<'e>(&'e self, run: &RunState, pending: &Pending, step: &mut Step<'e>) {
        let plan = &*self.plan;
        let level = match self.level(run) {
            Ok(l) => l,
            Err(msg) => {
                let sup = Some(Arc::clone(pending.supervisor()));
                return ready(step, Level { frame: None }, None, Then::Mismatch(msg, sup));
            }
        };
        match pending {
            Pending::Decide { supervisor } => {
                let Some(sp) = plan.supervisors.get(&**supervisor) else {
                    let msg = self.unknown("supervisor", supervisor);
                    let sup = Some(Arc::clone(supervisor));
                    return ready(step, level, None, Then::Mismatch(msg, sup));
                };
                match &sp.policy {
                    PolicyRun::Rules(table) => {
                        // Triggers on `/system/...` see it as policies do: built fresh.
                        let fresh = table.reads_system.then(|| self.policy_view(run));
                        let verdict = table.decide(fresh.as_ref().unwrap_or(run.level_state()));
                        let decided = Decided {
                            supervisor: Arc::clone(&sp.id),
                            target: Arc::clone(
                                verdict.winner.map_or(&table.default_label, |e| &e.id),
                            ),
                            reason: Some(verdict.reason),
                            candidates: verdict.candidates,
                            duration_us: 0,
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
                                match self.dispatch(sp, &e.id) {
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
                }
            }
            Pending::Handoff {
                node,
                dispatcher,
                from,
                chain,
                owed,
            } => {
                let Some(np) = plan.nodes.get(&**node) else {
                    let msg = self.unknown("node", node);
                    let sup = Some(Arc::clone(dispatcher));
                    return ready(step, level, None, Then::Mismatch(msg, sup));
                };
                let target = NodeTarget {
                    np,
                    dispatcher: Arc::clone(dispatcher),
                    kind: TraceKind::Handoff,
                    source: Some(Arc::clone(from)),
                    chain: Some(chain.clone()),
                    extra: StageExtra::owing(owed),
                    advised: false,
                };
                self.plan_node(run, level, None, None, target, step);
            }
            Pending::Advised {
                node,
                dispatcher,
                kind,
                from,
                chain,
                owed,
            } => {
                let Some(np) = plan.nodes.get(&**node) else {
                    let msg = self.unknown("node", node);
                    let sup = Some(Arc::clone(dispatcher));
                    return ready(step, level, None, Then::Mismatch(msg, sup));
                };
                let target = NodeTarget {
                    np,
                    dispatcher: Arc::clone(dispatcher),
                    kind: *kind,
                    source: from.clone(),
                    chain: chain.clone(),
                    extra: StageExtra::owing(owed),
                    advised: true,
                };
                self.plan_node(run, level, None, None, target, step);
            }
            Pending::Retry { .. } | Pending::Call { .. } => {
                self.plan_routed(run, level, pending, step);
            }
        }
    }

    /// The message for an id the run state names and the workflow lacks.
    pub(super) fn unknown(&self, what: &str, id: &str) -> String {
        format!(
            "the run state names {what} `{id}`, which workflow `{}` does not have (was it saved by another workflow?)",
            self.plan.graph.workflow()
        )
    }

    /// Resolves the current level's subgraph and caller.
    fn level(&self, run: &RunState) -> Result<Level<'_>, String> {
        let Some(frame) = run.stack.last() else {
            return Ok(Level { frame: None });
        };
        let sg = self
            .plan
            .subgraphs
            .get(&*frame.subgraph_id)
            .ok_or_else(|| self.unknown("subgraph", &frame.subgraph_id))?;
        let caller = self
            .plan
            .supervisors
            .get(&*frame.caller)
            .ok_or_else(|| self.unknown("supervisor", &frame.caller))?;
        Ok(Level {
            frame: Some((sg, caller)),
        })
    }

    /// Node `id`, dispatched by `sp`.
    fn dispatch<'e>(&'e self, sp: &SupervisorPlan, id: &str) -> Result<NodeTarget<'e>, String> {
        match self.plan.nodes.get(id) {
            Some(np) => Ok(NodeTarget {
                np,
                dispatcher: Arc::clone(&sp.id),
                kind: TraceKind::Dispatch,
                source: Some(Arc::clone(&sp.id)),
                chain: None,
                extra: None,
                advised: false,
            }),
            None => Err(self.unknown("node", id)),
        }
    }

    /// Plans what a resolved decision of `sp` leads to.
    fn plan_action<'e>(
        &'e self,
        run: &RunState,
        level: Level<'e>,
        sp: &'e SupervisorPlan,
        action: Action,
        decided: Decided,
        step: &mut Step<'e>,
    ) {
        let plan = &*self.plan;
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
            Action::Fallback { violation, reason } => {
                let fallback = sp.contract.fallback.as_deref();
                let mut it = item(run, TraceKind::Fallback, Some(Arc::clone(&sup)), step.at_ms);
                it.target = Some(fallback.unwrap_or("stop_local").into());
                it.reason = Some(reason.as_str().into());
                it.termination_reason = violation.then_some(TerminationReason::AllowlistViolation);
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
                    reason: if violation {
                        TerminationReason::AllowlistViolation
                    } else {
                        TerminationReason::StopLocal
                    },
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

    /// Plans a node run: where control goes after it, its gate (budgets, visits, input
    /// schema) and, for a handler or program, the effect.
    pub(super) fn plan_node<'e>(
        &'e self,
        run: &RunState,
        level: Level<'e>,
        decision: Option<Decided>,
        fallback: Option<Box<TraceItem>>,
        target: NodeTarget<'e>,
        step: &mut Step<'e>,
    ) {
        let plan = &*self.plan;
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
            let planned = Planned {
                level,
                decision,
                fallback,
                then: Then::Fork(ForkStep {
                    np,
                    spec,
                    dispatcher,
                    kind,
                    source,
                    chain,
                    reports: Vec::new(),
                    owed: extra.map(|x| x.owed).unwrap_or_default(),
                }),
            };
            step.stage = match self.fork_effect(run, np, spec) {
                Ok(effect) => Stage::Waiting {
                    effect: Some(Box::new(effect)),
                    then: Awaiting::Fork(planned),
                },
                Err(g) => {
                    let Planned {
                        level,
                        decision,
                        fallback,
                        then,
                    } = planned;
                    let sup = match then {
                        Then::Fork(fs) => Some(fs.dispatcher),
                        _ => None,
                    };
                    Stage::Ready(Planned {
                        level,
                        decision,
                        fallback,
                        then: Then::Guard(g, sup),
                    })
                }
            };
            return;
        }
        // A dispatched router, or node with a `handoff`, starts a chain (stage 0).
        let chain = match chain {
            None if contract.router.is_some() => Some(router_chain(&np.id)),
            None if contract.handoff.is_some() => Some(Chain::handoff_root(Arc::clone(&np.id))),
            c => c,
        };
        let planned = |then: Then<'e>| Planned {
            level,
            decision,
            fallback,
            then,
        };
        let after = if contract.router.is_some() {
            // A router's own handoff is owed until its destination's chain completes.
            After::Route
        } else if let Some(next) = &contract.handoff {
            match plan.nodes.get(next.as_str()) {
                Some(n) => After::Handoff(n),
                None => {
                    let then = Then::Mismatch(self.unknown("node", next), Some(dispatcher));
                    step.stage = Stage::Ready(planned(then));
                    return;
                }
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
        };
        let handed_off = kind == TraceKind::Handoff;
        let mut ns = NodeStep {
            np,
            dispatcher,
            kind,
            source,
            chain,
            result: NodeResult::Constant,
            after,
            extra: None,
        };
        let error = extra.as_mut().and_then(|x| x.error.take());
        ns.extra = extra;
        if let Err(g) = check_node(run, plan.graph.budgets(), &np.id, contract.max_visits) {
            ns.result = NodeResult::Refused(g);
            step.stage = Stage::Ready(planned(Then::Node(ns)));
            return;
        }
        let needs_view = matches!(np.run, NodeRun::Handler(_) | NodeRun::Exec(_));
        let mut view =
            (needs_view || np.input_schema.is_some()).then(|| self.view(run, &contract.reads));
        if let Some(schema) = &np.input_schema
            && let Some(map) = view.take()
        {
            // Checked as an object of slices: the view is wrapped for the validator (moved,
            // not copied) and taken back for the call.
            let input = serde_json::Value::Object(map);
            if handed_off {
                if let Err((at, msg)) = check_at(schema, &input) {
                    ns.result =
                        NodeResult::ChainPayloadInvalid(chain_payload_message(&ns, &at, &msg));
                    step.stage = Stage::Ready(planned(Then::Node(ns)));
                    return;
                }
            } else if let Err(msg) = check(schema, &input) {
                let msg = format!(
                    "the input of node `{}` does not match its input_schema: {msg}",
                    np.id
                );
                ns.result = NodeResult::InputInvalid(msg);
                step.stage = Stage::Ready(planned(Then::Node(ns)));
                return;
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
        let call = match (&np.run, view) {
            (NodeRun::Handler(h), Some(view)) => Call::Node(
                h.clone(),
                NodeInput {
                    node: np.id.to_string(),
                    view,
                    depth: run.depth(),
                    subgraph: run.current_subgraph().map(str::to_string),
                    step: ids.step,
                    run_id: ids.run_id,
                    attempt: ids.attempt,
                    error,
                },
            ),
            (NodeRun::Exec(spec), Some(view)) => Call::Program(
                Arc::clone(spec),
                node_stdin(&np.id, view, ids, error),
                Some(ids),
            ),
            _ => {
                step.stage = Stage::Ready(planned(Then::Node(ns)));
                return;
            }
        };
        let own = match &np.run {
            NodeRun::Exec(spec) => spec.timeout_ms,
            _ => None,
        };
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
            router: contract.router.is_some(),
        };
        ns.result = NodeResult::Awaiting;
        step.stage = Stage::Waiting {
            effect: Some(Box::new(effect)),
            then: Awaiting::Node(planned(Then::Node(ns)), retrying),
        };
    }

    /// The policy call of supervisor `sp` (a handler or a program), as an effect.
    fn policy_effect(&self, run: &RunState, sp: &SupervisorPlan, callee: Callee<'_>) -> Effect {
        let (call, own) = match callee {
            Callee::Program(spec) => {
                let stdin = serde_json::json!({
                    "supervisor": &*sp.id,
                    "depth": run.depth(),
                    "allow": sp.contract.allow,
                    "state": self.policy_view(run),
                });
                (
                    Call::Program(Arc::clone(spec), stdin, None),
                    spec.timeout_ms,
                )
            }
            Callee::Handler(h) => {
                let input = PolicyInput {
                    supervisor: sp.id.to_string(),
                    state: self.policy_view(run),
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
            router: false,
        }
    }

    /// The next attempt of a node call that failed with `fault`, if its retry policy
    /// covers the failure and has attempts left (and the run has time left). Notes the
    /// failed attempt in `r`.
    fn retry_effect(
        &self,
        run: &RunState,
        node: &Arc<str>,
        r: &mut Retrying<'_>,
        fault: &Fault,
        attempt: u32,
        duration_us: u64,
    ) -> Option<Effect> {
        if r.tried >= r.policy.max_attempts || !fault.is_retried_by(r.policy) {
            return None;
        }
        let limit = self.call_limit(run, r.own_limit);
        if limit.is_some_and(|l| l.is_zero()) {
            return None;
        }
        // The attempt that failed is the one the driver performed (a store may have
        // started the step at a higher attempt after a crash).
        let attempt = attempt.max(1);
        let backoff_ms = r.policy.backoff_before(r.tried + 1);
        let (kind, message) = fault.describe();
        r.failed.push(FailedAttempt {
            attempt,
            kind,
            message: message.to_string(),
            duration_us,
            backoff_ms,
        });
        r.tried += 1;
        let mut call = r.call.clone();
        call.set_attempt(attempt.saturating_add(1));
        let router = self
            .plan
            .nodes
            .get(&**node)
            .is_some_and(|np| np.contract(&self.plan.graph).router.is_some());
        Some(Effect {
            kind: EffectKind::Node,
            id: Arc::clone(node),
            step: run.steps,
            limit,
            delay: Duration::from_millis(backoff_ms),
            call,
            router,
        })
    }

    /// Commits a step to the run it was planned on: records its trace items and applies
    /// its outcome. Returns the status after it. A step still waiting on an effect, or
    /// planned on a run that has moved since (or on another run), commits nothing.
    pub fn commit_step(&self, run: &mut RunState, step: Step<'_>) -> RunStatus {
        if step.base != (run.steps, run.trace.len()) {
            return run.status();
        }
        if let Stage::Ready(planned) = step.stage {
            super::transitions::Tx {
                ex: self,
                run,
                at_ms: step.at_ms,
                chain: None,
            }
            .commit(planned);
        }
        run.status()
    }
}

/// Makes the step ready with `then` (no fallback item).
pub(super) fn ready<'e>(
    step: &mut Step<'e>,
    level: Level<'e>,
    decision: Option<Decided>,
    then: Then<'e>,
) {
    step.stage = Stage::Ready(Planned {
        level,
        decision,
        fallback: None,
        then,
    });
}

/// A node about to be planned: which, for whom, reached how.
pub(super) struct NodeTarget<'e> {
    pub(super) np: &'e NodePlan,
    pub(super) dispatcher: Arc<str>,
    pub(super) kind: TraceKind,
    pub(super) source: Option<Arc<str>>,
    /// Set for a stage reached through a handoff or a router; a dispatched node's chain is
    /// worked out from its contract.
    pub(super) chain: Option<Chain>,
    /// Router retries and routed chains only.
    pub(super) extra: Option<Box<StageExtra>>,
    /// Its advisors have reported already (it was pending as `Advised`, or it is a
    /// router run again: its advice stands).
    pub(super) advised: bool,
}

/// The message of `invalid_chain_payload`: the upstream stage (the node that handed
/// off, or the router that routed), the downstream stage, and where the input first goes
/// wrong.
fn chain_payload_message(ns: &NodeStep<'_>, at: &str, msg: &str) -> String {
    let upstream = ns.source.as_deref().unwrap_or("?");
    let (root, stage, how) = ns.chain.as_ref().map_or(("?", 0, "handed off"), |c| {
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
        ns.np.id
    )
}

/// Who answers a policy call.
enum Callee<'a> {
    Handler(&'a super::handlers::SharedPolicy),
    Program(&'a Arc<crate::contracts::ExecSpec>),
}
