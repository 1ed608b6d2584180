//! The step's data: a [`Step`] in progress and everything planning hands to commit (the
//! decision, what follows it, each pattern's planned part). Plain data over the plan's
//! tables and the effects; the logic that fills it in is in the rest of `machine`.
//!
//! One step is cut in three: **planning** reads the run and works out everything the step
//! will do, down to the [`Effect`] it waits on, if any; a driver **performs** the effect
//! (see [`Executor::perform`]); **commit** applies the outcome to the run in one go. Only
//! commit changes the run, so a step abandoned before its commit leaves the run exactly as
//! it was.
//!
//! [`Executor::step`] drives all three; a driver that records effects (a run store) or
//! runs several at once uses [`Executor::begin_step`], [`Executor::resolve_step`] and
//! [`Executor::commit_step`] itself.
//!
//! [`Executor::perform`]: crate::runtime::Executor::perform
//! [`Executor::step`]: crate::runtime::Executor::step
//! [`Executor::begin_step`]: crate::runtime::Executor::begin_step
//! [`Executor::resolve_step`]: crate::runtime::Executor::resolve_step
//! [`Executor::commit_step`]: crate::runtime::Executor::commit_step

use std::borrow::Cow;
use std::sync::Arc;

use super::budgets::GuardStop;
use crate::contracts::{Advisors, StopGlobal, StopLocal};
use crate::model::ChatMessage;
use crate::runtime::data::decision_memo::DecisionMemo;
use crate::runtime::data::{
    AdvisingRun, Candidates, Chain, HttpAttempt, NodeOutput, RunState, TerminationReason,
    ToolCallStatus, ToolCaller, TraceItem, TraceKind, Usage,
};
use crate::runtime::effects::{Effect, Fault, ModelReply, Report};
use crate::runtime::plan::agent::AgentPlan;
use crate::runtime::plan::{NodePlan, SubgraphPlan, SupervisorPlan};

pub(crate) use super::step_parts::{
    FailedAttempt, Retrying, RoutedCall, StageExtra, TeamStep, TeamStop, TeamTurn, next_stage,
    router_chain,
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
    /// A rule decision made afresh, for the run to keep when the step commits (ADR
    /// 0072). Here rather than in the decision, which moves with the planned step.
    pub(crate) memo: Option<DecisionMemo>,
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

impl<'e> Step<'e> {
    /// Plans the step: `stage` written where [`Stage::Idle`] stood. An idle stage owns
    /// nothing, so it is written over without the call that drops a stage (a loop step's
    /// planned node, ADR 0073); a stage planned already is dropped as usual.
    #[inline(always)]
    pub(crate) fn plan(&mut self, stage: Stage<'e>) {
        if matches!(self.stage, Stage::Idle) {
            // The idle stage read out and forgotten: it owns nothing to drop.
            std::mem::forget(std::mem::replace(&mut self.stage, stage));
        } else {
            self.stage = stage;
        }
    }

    /// A step about to be planned on `run`: nothing planned yet (it commits nothing).
    #[inline(always)]
    pub(crate) fn on(run: &RunState) -> Self {
        Step {
            stage: Stage::Idle,
            at_ms: 0,
            base: (run.steps, run.trace.len()),
            memo: None,
        }
    }

    /// True when the step owns nothing that needs dropping: the common step committed
    /// in place (a rule decision and its node's run,
    /// [`commit_in_place`](super::commit_in_place)) once commit has taken its parts,
    /// every id left the plan's, borrowed, and every other part empty. The executor
    /// holds its step in a `ManuallyDrop` and drops it only when this is false, rather
    /// than walking five nested drops (about 100 instructions a loop step, ADR 0061).
    /// Skipping the drop leaks nothing: the match admits only variants whose fields own
    /// no allocation and no reference count.
    #[inline(always)]
    pub(crate) fn owns_nothing(&self) -> bool {
        matches!(
            &self.stage,
            Stage::Idle
                | Stage::Ready(Planned {
                    decision: None
                        | Some(Decided::Rules {
                            candidates: Cow::Borrowed(_),
                            ..
                        }),
                    fallback: None,
                    then: Then::Node(NodeStep {
                        dispatcher: Cow::Borrowed(_),
                        source: None | Some(Cow::Borrowed(_)),
                        chain: None,
                        result: NodeResult::Constant,
                        extra: None,
                        ..
                    }),
                    ..
                })
        )
    }

    /// The effect the step waits on, if any.
    pub fn effect(&self) -> Option<&Effect> {
        match &self.stage {
            Stage::Waiting { effect, .. } => effect.as_deref(),
            _ => None,
        }
    }

    /// Takes the effect the step waits on, to perform it. The step keeps waiting until
    /// [`Executor::resolve_step`](crate::runtime::Executor::resolve_step) feeds the effect's output back.
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
    /// An agent session's model call or tool calls: complete but for their results.
    Session(Planned<'e>),
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
    pub(crate) decision: Option<Decided<'e>>,
    /// The fallback item (rare, so boxed), recorded second.
    pub(crate) fallback: Option<Box<TraceItem>>,
    pub(crate) then: Then<'e>,
}

/// A supervisor's decision, noted while planning and recorded as its `decision` trace
/// item at commit (the item's step, depth and level are the same then). Smaller than the
/// item, so the step stays small as it moves.
///
/// What the plan holds is borrowed from it (the supervisor's id, a rule's target, reason
/// and lone-winner list); the trace item clones them when it is recorded.
pub(crate) enum Decided<'e> {
    /// A rule table's verdict: all but a several-way candidate list is the plan's.
    Rules {
        supervisor: &'e Arc<str>,
        target: &'e Arc<str>,
        reason: &'e Arc<str>,
        candidates: Cow<'e, Candidates>,
    },
    /// A policy's decision (a handler, a program or an agent): boxed, so that the rule
    /// decision of a loop step stays small as the step moves.
    Policy(Box<PolicyDecided<'e>>),
}

/// A policy's decision, as [`Decided::Policy`] holds it.
pub(crate) struct PolicyDecided<'e> {
    pub(crate) supervisor: &'e Arc<str>,
    pub(crate) target: Arc<str>,
    pub(crate) reason: Option<Arc<str>>,
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
    /// An agent session's model call or tool calls (boxed: rare, and large).
    Session(Box<SessionStep<'e>>),
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

/// An id a planned node step names (its dispatcher, its source): the plan's own shared
/// id borrowed, as a rule dispatch names its supervisor, or one the run state holds
/// (a handoff's dispatcher), counted.
pub(crate) type StepId<'e> = Cow<'e, Arc<str>>;

/// A node run, planned.
pub(crate) struct NodeStep<'e> {
    pub(crate) np: &'e NodePlan,
    pub(crate) dispatcher: StepId<'e>,
    pub(crate) kind: TraceKind,
    pub(crate) source: Option<StepId<'e>>,
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
    /// The plain members' reports (in `members` order) once the fork is performed.
    pub(crate) reports: Vec<Report>,
    /// Routers whose own handoff is owed (see [`Pending::Handoff`](crate::runtime::data::Pending::Handoff)), kept for the primary.
    pub(crate) owed: Vec<Arc<str>>,
    /// The agent members this step advances (in `members` order), each by one call.
    pub(crate) seats: Vec<SeatStep<'e>>,
    /// The fork under way (`None`: this step begins it).
    pub(crate) round: Option<Box<AdvisingRun>>,
}

/// One agent session of a fork (ADR 0040), advanced by one call in this step: the member,
/// its session (or the opening that begins it) and the call's work.
pub(crate) struct SeatStep<'e> {
    /// The member's place among the fork's members.
    pub(crate) position: usize,
    pub(crate) np: &'e NodePlan,
    pub(crate) agent: &'e AgentPlan,
    /// The session's index in the run's sessions; `None` for the session this step
    /// begins with `opening`.
    pub(crate) session: Option<u32>,
    /// The messages this step adds before its call: a new session's head, or a team
    /// turn's inbox.
    pub(crate) opening: Vec<ChatMessage>,
    pub(crate) work: SessionWork,
    /// Whether the fork's effect makes a call for it (else its work is complete).
    pub(crate) calls: bool,
    /// Whether the agent's own `max_turns` bounds the session (an advisor's); a team's
    /// turn limits bound its members' and lead's instead.
    pub(crate) own_turns: bool,
    /// Its tool calls passed the member's time limit (what to say): it fails `timeout`
    /// once they are recorded.
    pub(crate) timed_out: Option<String>,
    /// For an agent tool's session (ADR 0046): the tool call it answers (`None` for an
    /// advisor's, a team member's or a lead's).
    pub(crate) caller: Option<ToolCaller>,
    /// The agent tools its last reply called, under way beside its own tool calls (ADR
    /// 0046): its member's call is then a fork of them all.
    pub(crate) agent_tools: Option<Box<AgentTools<'e>>>,
}

/// An agent session's step, planned: whose session it is (kept for the step that ends
/// it), and the work of this step.
pub(crate) struct SessionStep<'e> {
    /// The agent node's or the supervisor's id: the `source` of the session's items.
    pub(crate) id: Arc<str>,
    pub(crate) agent: &'e AgentPlan,
    /// The supervisor the session's items are recorded under (the node's dispatcher, or
    /// the deciding supervisor), and the one a failure names.
    pub(crate) dispatcher: Arc<str>,
    pub(crate) owner: SessionOwner<'e>,
    /// The session's index in the run's sessions; `None` for the session this step
    /// begins with `opening` (its system and first user messages).
    pub(crate) session: Option<u32>,
    pub(crate) opening: Vec<ChatMessage>,
    /// Model calls the session made before this node visit or decision (a decision
    /// continuing the entrypoint's session after a clarification): `max_turns` counts the
    /// calls after them.
    pub(crate) earlier: u32,
    /// The session's own tool calls answered in this step (a [`SessionWork::Tools`]), or
    /// its model call.
    pub(crate) work: SessionWork,
    /// The agent tools its last reply called, under way (ADR 0046): `None` when the step
    /// answers no agent tool's call.
    pub(crate) agent_tools: Option<Box<AgentTools<'e>>>,
}

/// The agent tools under way below a session whose last reply called them (ADR 0046):
/// every session of the tree advanced by one call in one fork effect, as a fork of
/// sessions is (ADR 0040), the session's own tool node calls with them.
pub(crate) struct AgentTools<'e> {
    /// Whether the fork's first member runs the session's own tool node calls.
    pub(crate) own_calls: bool,
    /// One seat per session of the tree making a call in this step (a model call or its
    /// last reply's tool node calls), in the order of the fork's members after the first.
    pub(crate) seats: Vec<SeatStep<'e>>,
}

/// Whose session a [`SessionStep`] belongs to.
pub(crate) enum SessionOwner<'e> {
    /// An agent node's visit: how it was reached and where control goes after it.
    Node(NodeVisit<'e>),
    /// A supervisor policy's decision: its `route` is the decision.
    Policy(&'e SupervisorPlan),
}

/// An agent node's visit: what its ending needs (its item, its chain, where control
/// goes).
pub(crate) struct NodeVisit<'e> {
    pub(crate) np: &'e NodePlan,
    pub(crate) kind: TraceKind,
    pub(crate) source: Option<Arc<str>>,
    pub(crate) chain: Option<Chain>,
    pub(crate) owed: Vec<Arc<str>>,
    pub(crate) after: After<'e>,
}

impl SessionStep<'_> {
    /// What the session is, in a message: `agent node` or `the agent policy of
    /// supervisor` (followed by the id).
    pub(crate) fn what(&self) -> &'static str {
        match self.owner {
            SessionOwner::Node(_) => "agent node",
            SessionOwner::Policy(_) => "the agent policy of supervisor",
        }
    }

    /// The model call `turn` of the session is the last its `max_turns` allows.
    pub(crate) fn is_last(&self, turn: u32) -> bool {
        turn.saturating_sub(self.earlier) >= self.agent.max_turns()
    }
}

/// What an agent session's step does.
pub(crate) enum SessionWork {
    /// Model call `turn` (1 for the first), and its result once performed.
    Model {
        turn: u32,
        result: Option<Result<ModelReply, Fault>>,
        attempt: u32,
        duration_us: u64,
        /// When the call failed for good: its HTTP attempts, each failed (status, error,
        /// duration, wait), for its `model_call` item.
        failed: Vec<HttpAttempt>,
    },
    /// The tool calls of the last reply, one outcome each in the reply's order: those
    /// answered while planning (a mistake, a `set` tool) and those run by the effect.
    Tools(Vec<ToolOutcome>),
    /// The session could not begin (a template failed): the node fails.
    Failed(String),
}

/// One tool call of a reply and what it gave.
pub(crate) struct ToolOutcome {
    pub(crate) call_id: String,
    pub(crate) tool: Arc<str>,
    /// How it ended (`ok` until a mistake, a failure or a skip says otherwise).
    pub(crate) status: ToolCallStatus,
    /// What the model is told (the tool's output object or `{"error": ...}`), once known.
    pub(crate) content: Option<String>,
    /// The error, when the call failed or was a mistake.
    pub(crate) error: Option<String>,
    pub(crate) usage: Option<Usage>,
    pub(crate) duration_us: u64,
    /// The run was cancelled while it ran: nothing of the step is committed.
    pub(crate) cancelled: bool,
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
    /// An agent session ended with a valid exit: its writes, the microseconds its model
    /// and tool calls took, and what they cost. Its steps and its usage were counted as
    /// each call was committed; only the visit is left to count.
    Session(Box<Ran>, u64, Option<Usage>),
}

/// Where control goes after the node.
#[derive(Clone, Copy)]
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

/// Makes the step ready with `then` (no fallback item).
pub(crate) fn ready<'e>(
    step: &mut Step<'e>,
    level: Level<'e>,
    decision: Option<Decided<'e>>,
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
pub(crate) struct NodeTarget<'e> {
    pub(crate) np: &'e NodePlan,
    pub(crate) dispatcher: StepId<'e>,
    pub(crate) kind: TraceKind,
    pub(crate) source: Option<StepId<'e>>,
    /// Set for a stage reached through a handoff or a router; a dispatched node's chain is
    /// worked out from its contract.
    pub(crate) chain: Option<Chain>,
    /// Router retries and routed chains only.
    pub(crate) extra: Option<Box<StageExtra>>,
    /// Its advisors have reported already (it was pending as `Advised`, or it is a
    /// router run again: its advice stands).
    pub(crate) advised: bool,
}
