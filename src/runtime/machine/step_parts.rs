//! The parts of a step that only some patterns plan: a team's turn, a node call under a
//! retry policy, a router's stage and the chain it starts. Plain data, like the rest of
//! [`step`](super::step), which re-exports them.

use std::sync::Arc;

use super::budgets::GuardStop;
use super::step::{After, SeatStep};
use crate::contracts::{RetryPolicy, Team};
use crate::runtime::data::{Chain, ChainTrigger, NodeOutput, Owed, TeamRun};
use crate::runtime::effects::{Call, Fault, Report};
use crate::runtime::plan::NodePlan;

/// A team step, planned: the team, its progress as planning left it, and the turn(s).
pub(crate) struct TeamStep<'e> {
    pub(crate) np: &'e NodePlan,
    pub(crate) spec: &'e Team,
    pub(crate) run: Box<TeamRun>,
    pub(crate) turn: TeamTurn<'e>,
}

/// The turn(s) a team step takes.
// Lives boxed in its step (`Then::Team`): the lead's output inline costs nothing more.
#[allow(clippy::large_enum_variant)]
pub(crate) enum TeamTurn<'e> {
    /// A member cycle: the plain members' reports once the fork is performed (in
    /// `members` order) and the agent members' seats; `tools`: the cycle's second
    /// round, answering the tool calls of the agent members' replies (no new turn).
    Members {
        reports: Vec<Report>,
        seats: Vec<SeatStep<'e>>,
        tools: bool,
    },
    /// An agent lead's turn (its model call), or with `tools` the tool calls of its
    /// last reply; where the team node's control goes if the turn is final.
    LeadSeat {
        lead: &'e NodePlan,
        after: After<'e>,
        seat: SeatStep<'e>,
        tools: bool,
    },
    /// The lead's turn: whether it must be final, where the team node's control goes if it
    /// is, and its output once performed.
    Lead {
        lead: &'e NodePlan,
        final_turn: bool,
        after: After<'e>,
        result: Option<Result<NodeOutput, Fault>>,
        duration_us: u64,
    },
    /// No step can be taken (a budget, or a node the workflow lacks).
    Stop(TeamStop),
}

/// Why a team step cannot be taken.
pub(crate) enum TeamStop {
    Guard(GuardStop),
    Mismatch(String),
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

/// What a router run or a routed chain stage carries besides an ordinary node step.
#[derive(Debug, Default)]
pub(crate) struct StageExtra {
    /// Which run of the router this is in one routing (1, then 2... on retries).
    pub(crate) run: u32,
    /// What was wrong with the previous route (for the router's input; taken at planning).
    pub(crate) error: Option<String>,
    /// Routers whose own `handoff` is owed, innermost last.
    pub(crate) owed: Vec<Arc<str>>,
}

impl StageExtra {
    /// The extra of a stage owing these handoffs (`None`, allocating nothing, when none
    /// is owed).
    pub(crate) fn owing(owed: &[Arc<str>]) -> Option<Box<Self>> {
        (!owed.is_empty()).then(|| {
            Box::new(Self {
                run: 1,
                error: None,
                owed: owed.to_vec(),
            })
        })
    }
}

/// A subgraph entered as a router's destination.
pub(crate) struct RoutedCall {
    /// The router (the call item's `source`).
    pub(crate) router: Arc<str>,
    /// The subgraph's place in the router's chain, and the handoffs owed on its return.
    pub(crate) owed: Owed,
}

/// Stage 0 of a chain starting at router `id`.
pub(crate) fn router_chain(id: &Arc<str>) -> Chain {
    Chain {
        root: Arc::clone(id),
        stage: 0,
        trigger: ChainTrigger::Router,
    }
}

/// The stage after `chain` (or after stage 0 of a chain rooted at `root`), reached by
/// `trigger`.
pub(crate) fn next_stage(chain: Option<&Chain>, root: &Arc<str>, trigger: ChainTrigger) -> Chain {
    match chain {
        Some(c) => Chain {
            root: Arc::clone(&c.root),
            stage: c.stage.saturating_add(1),
            trigger,
        },
        None => Chain {
            root: Arc::clone(root),
            stage: 1,
            trigger,
        },
    }
}
