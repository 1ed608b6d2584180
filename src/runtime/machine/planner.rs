//! The planning type: what planning a step reads besides the run. A [`Planner`] is the
//! executor's plan and the time the step is planned at, passed in: planning never reads
//! the clock (nor the cancellation token, which [`begin`](Planner::begin) takes), so a test
//! drives it with any time it likes.

use std::borrow::Cow;
use std::time::Duration;

use super::step::{Level, NodeTarget};
use crate::runtime::data::{RunState, TraceKind};
use crate::runtime::plan::{NodePlan, Plan, RuleEntry, SupervisorPlan};

/// Plans steps of runs of one plan, at one time. Two words, made per step; every
/// `plan_*` function of the state machine is a method of it.
#[derive(Clone, Copy)]
pub(crate) struct Planner<'e> {
    /// The compiled workflow and its handlers.
    pub(crate) plan: &'e Plan,
    /// Milliseconds since the Unix epoch the step is planned at: what the run deadline
    /// and the time limits of the step's calls are measured against. Zero when nothing
    /// needs it (a frozen clock and no deadline).
    pub(crate) now_ms: u64,
}

impl<'e> Planner<'e> {
    /// The message for an id the run state names and the workflow lacks.
    #[cold]
    #[inline(never)]
    pub(crate) fn unknown(&self, what: &str, id: &str) -> String {
        format!(
            "the run state names {what} `{id}`, which workflow `{}` does not have (was it saved by another workflow?)",
            self.plan.graph.workflow()
        )
    }

    /// Resolves the current level's subgraph and caller.
    pub(crate) fn level(&self, run: &RunState) -> Result<Level<'e>, String> {
        let plan = self.plan;
        let Some(frame) = run.stack.last() else {
            return Ok(Level { frame: None });
        };
        let sg = plan
            .subgraphs
            .get(&*frame.subgraph_id)
            .ok_or_else(|| self.unknown("subgraph", &frame.subgraph_id))?;
        let caller = plan
            .supervisors
            .get(&*frame.caller)
            .ok_or_else(|| self.unknown("supervisor", &frame.caller))?;
        Ok(Level {
            frame: Some((sg, caller)),
        })
    }

    /// Node `id`, dispatched by `sp`.
    pub(crate) fn dispatch(
        &self,
        sp: &'e SupervisorPlan,
        id: &str,
    ) -> Result<NodeTarget<'e>, String> {
        self.dispatch_to(sp, self.plan.nodes.get(id), id)
    }

    /// [`Planner::dispatch`] to a rule table's winning entry: its node's plan read by the
    /// position the table resolved when it was built, without hashing the id. Inlined
    /// where it is called (the loop step's dispatch: ADR 0073).
    #[inline(always)]
    pub(crate) fn dispatch_entry(
        &self,
        sp: &'e SupervisorPlan,
        e: &RuleEntry,
    ) -> Result<NodeTarget<'e>, String> {
        let np = match e.node.and_then(|i| self.plan.nodes.get_index(i)) {
            Some((_, np)) => Some(np),
            None => self.plan.nodes.get(&*e.id),
        };
        self.dispatch_to(sp, np, &e.id)
    }

    #[inline(always)]
    fn dispatch_to(
        &self,
        sp: &'e SupervisorPlan,
        np: Option<&'e NodePlan>,
        id: &str,
    ) -> Result<NodeTarget<'e>, String> {
        match np {
            Some(np) => Ok(NodeTarget {
                np,
                // The plan's id, borrowed: no reference count (ADR 0061).
                dispatcher: Cow::Borrowed(&sp.id),
                kind: TraceKind::Dispatch,
                source: Some(Cow::Borrowed(&sp.id)),
                chain: None,
                extra: None,
                advised: false,
            }),
            None => Err(self.unknown("node", id)),
        }
    }

    /// The time limit for one handler call: the node limit, capped by the run deadline
    /// (measured at [`Planner::now_ms`]).
    pub(crate) fn call_limit(&self, run: &RunState, own: Option<u64>) -> Option<Duration> {
        let budgets = self.plan.graph.budgets();
        let own = own.or(budgets.node_timeout_ms);
        let left = budgets
            .timeout_ms
            .map(|t| t.saturating_sub(self.now_ms.saturating_sub(run.started_at_ms)));
        match (own, left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(Duration::from_millis)
    }
}
