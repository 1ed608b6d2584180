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

use super::advisors::Report;
use super::budgets::{GuardStop, check_clock};
use super::builder::{NodePlan, PolicyRun, SubgraphPlan, SupervisorPlan};
use super::data::Clock;
use super::data::NodeOutput;
use super::data::now_ms;
use super::data::{Chain, TraceItem, TraceKind};
use super::data::{Pending, RunState};
use super::data::{RunStatus, TerminationReason};
use super::decide::Callee;
use super::decisions::{choice_label, decision_reason, resolve};
use super::effects::{Effect, EffectOutput, Produced};
use super::executor::Executor;
use super::guarded::Fault;
use super::plan_node::NodeTarget;
use super::retry::{FailedAttempt, Retrying};
use super::route::{RoutedCall, StageExtra};
use super::team::{TeamStep, TeamTurn};
use crate::contracts::{Advisors, RoutingDecision, StopGlobal, StopLocal, SupervisorOutput};

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
    /// A team's member cycle or lead turn: complete but for the reports or the output.
    Team(Planned<'e>),
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
    /// A team's member cycle or lead turn (boxed: rare, and large).
    Team(Box<TeamStep<'e>>),
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
    /// A finished `chat` subgraph kept at this level is asked a follow-up.
    Clarify {
        caller: Arc<str>,
        sg: &'e SubgraphPlan,
        question: String,
    },
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
            now_ms()
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
            Stage::Waiting {
                then: Awaiting::Team(mut planned),
                ..
            } => {
                if let Then::Team(ts) = &mut planned.then {
                    match &mut ts.turn {
                        TeamTurn::Members(reports) => {
                            if let Ok(Produced::Reports(r)) = output.result {
                                *reports = r;
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
        }
    }

    /// Plans node `node`, pending without a decision (a handoff, or a primary whose
    /// advisors have reported): reached as `reached` (trace kind, source, chain), owing
    /// `owed` routers' handoffs.
    #[allow(clippy::too_many_arguments)]
    fn plan_pending_node<'e>(
        &'e self,
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
            dispatcher: Arc::clone(dispatcher),
            kind,
            source,
            chain,
            extra: StageExtra::owing(owed),
            advised,
        };
        self.plan_node(run, level, None, None, target, step);
    }

    /// The message for an id the run state names and the workflow lacks.
    pub(super) fn unknown(&self, what: &str, id: &str) -> String {
        format!(
            "the run state names {what} `{id}`, which workflow `{}` does not have (was it saved by another workflow?)",
            self.plan.graph.workflow()
        )
    }

    /// Resolves the current level's subgraph and caller.
    pub(super) fn level(&self, run: &RunState) -> Result<Level<'_>, String> {
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
    pub(super) fn dispatch<'e>(
        &'e self,
        sp: &SupervisorPlan,
        id: &str,
    ) -> Result<NodeTarget<'e>, String> {
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
