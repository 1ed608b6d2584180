//! Budgets and guards, checked before every step.

use tokio_util::sync::CancellationToken;

use super::run_state::RunState;
use super::status::TerminationReason;
use crate::contracts::Budgets;

/// A guard tripped: the run stops with this reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GuardStop {
    pub(crate) reason: TerminationReason,
    pub(crate) message: String,
}

impl GuardStop {
    fn new(reason: TerminationReason, message: String) -> Self {
        Self { reason, message }
    }
}

/// Cancellation and the run deadline (checked at the start of every step).
pub(crate) fn check_clock(
    run: &RunState,
    budgets: &Budgets,
    cancel: &CancellationToken,
    now_ms: u64,
) -> Result<(), GuardStop> {
    if cancel.is_cancelled() {
        return Err(GuardStop::new(
            TerminationReason::Cancelled,
            "the run was cancelled".into(),
        ));
    }
    if let Some(limit) = budgets.timeout_ms
        && now_ms.saturating_sub(run.started_at_ms) > limit
    {
        return Err(GuardStop::new(
            TerminationReason::Timeout,
            format!("the run passed its deadline of {limit} ms"),
        ));
    }
    Ok(())
}

/// One more step must fit in `max_steps`.
fn check_steps(run: &RunState, budgets: &Budgets, what: &str, id: &str) -> Result<(), GuardStop> {
    if run.steps >= budgets.max_steps {
        return Err(GuardStop::new(
            TerminationReason::MaxStepsExceeded,
            format!(
                "{what} `{id}` would be step {} but max_steps is {}",
                u64::from(run.steps) + 1,
                budgets.max_steps
            ),
        ));
    }
    Ok(())
}

/// Before running node `id` (at most `max_visits` runs of it).
pub(crate) fn check_node(
    run: &RunState,
    budgets: &Budgets,
    id: &str,
    max_visits: Option<u32>,
) -> Result<(), GuardStop> {
    check_steps(run, budgets, "node", id)?;
    if let Some(max) = max_visits {
        let done = run.visits.get(id).copied().unwrap_or(0);
        if done >= max {
            return Err(GuardStop::new(
                TerminationReason::CycleDetected,
                format!("node `{id}` already ran {done} time(s); its max_visits is {max}"),
            ));
        }
    }
    Ok(())
}

/// Before entering subgraph `id` (depth and re-entry).
pub(crate) fn check_call(
    run: &RunState,
    budgets: &Budgets,
    id: &str,
    max_reentry: Option<u32>,
) -> Result<(), GuardStop> {
    check_steps(run, budgets, "entering subgraph", id)?;
    let depth = u64::from(run.depth()) + 1;
    if depth > u64::from(budgets.max_depth) {
        return Err(GuardStop::new(
            TerminationReason::MaxDepthExceeded,
            format!(
                "entering subgraph `{id}` would reach depth {depth} but max_depth is {}",
                budgets.max_depth
            ),
        ));
    }
    let max = max_reentry.unwrap_or(budgets.max_reentry);
    let done = run.entries.get(id).copied().unwrap_or(0);
    if done >= max {
        return Err(GuardStop::new(
            TerminationReason::CycleDetected,
            format!("subgraph `{id}` was already entered {done} time(s); its max_reentry is {max}"),
        ));
    }
    Ok(())
}
