//! Budgets and guards, checked before every step.

use crate::contracts::Budgets;
use crate::runtime::data::{
    COST_USD, INPUT_TOKENS, MAX_TRACE_DEPTH, OUTPUT_TOKENS, RunState, TerminationReason,
};
use crate::runtime::effects::CancelWatch;

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
///
/// Inlined where it is called: the common step (not cancelled, within its deadline) is
/// a few comparisons; a guard that trips is built out of line ([`cancelled`],
/// [`past_deadline`]).
#[inline(always)]
pub(crate) fn check_clock(
    run: &RunState,
    budgets: &Budgets,
    cancel: &CancelWatch,
    now_ms: u64,
) -> Result<(), GuardStop> {
    if cancel.is_cancelled() {
        return Err(cancelled());
    }
    if let Some(limit) = budgets.timeout_ms
        && now_ms.saturating_sub(run.started_at_ms) > limit
    {
        return Err(past_deadline(limit));
    }
    Ok(())
}

/// The guard of a cancelled run.
#[cold]
#[inline(never)]
fn cancelled() -> GuardStop {
    GuardStop::new(TerminationReason::Cancelled, "the run was cancelled".into())
}

/// The guard of a run past its deadline of `limit` ms.
#[cold]
#[inline(never)]
fn past_deadline(limit: u64) -> GuardStop {
    GuardStop::new(
        TerminationReason::Timeout,
        format!("the run passed its deadline of {limit} ms"),
    )
}

/// One more step must fit in `max_steps`, and in `max_tokens` and `max_cost_usd` when set.
#[inline]
fn check_steps(run: &RunState, budgets: &Budgets, what: &str, id: &str) -> Result<(), GuardStop> {
    if budgets.limits_usage() {
        check_usage(run, budgets, what, id)?;
    }
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

/// The usage budgets: no step starts once the tokens (`input_tokens` plus
/// `output_tokens`) or the cost (`cost_usd`) the run's nodes reported have reached their
/// limit. The step that crosses a limit completes (its cost is known only once it ran).
#[cold]
#[inline(never)]
fn check_usage(run: &RunState, budgets: &Budgets, what: &str, id: &str) -> Result<(), GuardStop> {
    let amount = |name: &str| run.usage_total.get(name).and_then(|n| n.as_f64());
    if let Some(limit) = budgets.max_tokens {
        let used = [INPUT_TOKENS, OUTPUT_TOKENS]
            .iter()
            .filter_map(|n| amount(n))
            .sum::<f64>();
        if used >= limit as f64 {
            return Err(GuardStop::new(
                TerminationReason::BudgetExceeded,
                format!(
                    "{what} `{id}` would start after the run used {used} tokens \
                     (input_tokens plus output_tokens), but max_tokens is {limit}"
                ),
            ));
        }
    }
    if let Some(limit) = budgets.max_cost_usd {
        let used = amount(COST_USD).unwrap_or(0.0);
        if used >= limit {
            return Err(GuardStop::new(
                TerminationReason::BudgetExceeded,
                format!(
                    "{what} `{id}` would start after the run spent {used} USD (cost_usd), \
                     but max_cost_usd is {limit}"
                ),
            ));
        }
    }
    Ok(())
}

/// Before a model call or the tool calls of supervisor `id`'s policy agent: each is a
/// step, within max_steps and the usage budgets.
pub(crate) fn check_policy(run: &RunState, budgets: &Budgets, id: &str) -> Result<(), GuardStop> {
    check_steps(run, budgets, "the policy of supervisor", id)
}

/// Before running node `id` (at most `max_visits` runs of it).
///
/// Inlined where it is called: a node without `max_visits` in a run without usage
/// budgets and below `max_steps` (the common step) is two comparisons; the rest is
/// [`check_node_in_full`], out of line.
#[inline(always)]
pub(crate) fn check_node(
    run: &RunState,
    budgets: &Budgets,
    id: &str,
    max_visits: Option<u32>,
) -> Result<(), GuardStop> {
    if max_visits.is_none() && !budgets.limits_usage() && run.steps < budgets.max_steps {
        return Ok(());
    }
    check_node_in_full(run, budgets, id, max_visits)
}

/// [`check_node`]'s every guard.
#[inline(never)]
fn check_node_in_full(
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
    check_depth(run, budgets, "entering subgraph", id)?;
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

/// Before clarifying subgraph `id`: a step (and usage within its budgets) one level
/// deeper. Not an entry: `max_reentry` does not count it.
pub(crate) fn check_clarify(run: &RunState, budgets: &Budgets, id: &str) -> Result<(), GuardStop> {
    check_steps(run, budgets, "clarifying subgraph", id)?;
    check_depth(run, budgets, "clarifying subgraph", id)
}

/// One level deeper must fit in `max_depth`.
fn check_depth(run: &RunState, budgets: &Budgets, what: &str, id: &str) -> Result<(), GuardStop> {
    let depth = u64::from(run.depth()) + 1;
    // The trace records depths as `u16`: a larger `max_depth` is capped there.
    let max_depth = budgets.max_depth.min(MAX_TRACE_DEPTH);
    if depth > u64::from(max_depth) {
        let capped = if max_depth < budgets.max_depth {
            format!(
                " (max_depth {} is capped at {MAX_TRACE_DEPTH})",
                budgets.max_depth
            )
        } else {
            String::new()
        };
        return Err(GuardStop::new(
            TerminationReason::MaxDepthExceeded,
            format!("{what} `{id}` would reach depth {depth} but max_depth is {max_depth}{capped}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::runtime::data::{Control, DecisionTrace, Frame, Pending, RunId, Usage};

    /// A run at its first step (as `Executor::start` makes it), built here so that the
    /// budgets are tested below the executor.
    fn run() -> RunState {
        RunState {
            workflow: "w".into(),
            run_id: RunId::new(),
            control: Control::Running(Pending::Decide {
                supervisor: Arc::from("root"),
            }),
            state: Default::default(),
            stack: Vec::new(),
            steps: 0,
            visits: Default::default(),
            entries: Default::default(),
            trace: DecisionTrace::default(),
            uncommitted: Vec::new(),
            usage_total: Usage::new(),
            kept: Vec::new(),
            started_at_ms: 0,
            trace_in_state: true,
            sessions: Vec::new(),
            changes: Default::default(),
        }
    }

    /// Trace items record depths as `u16`: a `max_depth` above that is capped, and a call
    /// past the cap is a depth guard stop that says so, never a wrapped depth.
    #[test]
    fn max_depth_is_capped_where_trace_depths_end() {
        let mut run = run();
        let frame = |d: u32| Frame {
            subgraph_id: Arc::from("s"),
            depth: d,
            entry_step: 0,
            caller: Arc::from("root"),
            state: Default::default(),
            owed: None,
        };
        run.stack = (1..=MAX_TRACE_DEPTH).map(frame).collect();
        let budgets = Budgets::default().max_depth(u32::MAX);
        let stop = check_call(&run, &budgets, "s", Some(u32::MAX)).expect_err("past the cap");
        assert_eq!(stop.reason, TerminationReason::MaxDepthExceeded);
        assert!(stop.message.contains("capped at 65535"), "{}", stop.message);
        run.stack.pop();
        assert!(check_call(&run, &budgets, "s", Some(u32::MAX)).is_ok());
    }

    /// The clock's guards, inlined fast path and out-of-line stop alike: within the
    /// deadline and not cancelled passes; past it stops `timeout`; cancelled stops
    /// `cancelled`, before the deadline is looked at (both at once: `cancelled`).
    #[test]
    fn clock_guards_cancellation_first_then_the_deadline() {
        let run = run();
        let token = tokio_util::sync::CancellationToken::new();
        let watch = CancelWatch::new(&token);
        let budgets = Budgets::default().timeout_ms(100);
        assert_eq!(check_clock(&run, &budgets, &watch, 100), Ok(()));
        assert_eq!(
            check_clock(&run, &Budgets::default(), &watch, u64::MAX),
            Ok(())
        );
        let late = check_clock(&run, &budgets, &watch, 101).expect_err("past the deadline");
        assert_eq!(late.reason, TerminationReason::Timeout);
        assert_eq!(late.message, "the run passed its deadline of 100 ms");
        token.cancel();
        for now in [0, 101] {
            let stop = check_clock(&run, &budgets, &watch, now).expect_err("cancelled");
            assert_eq!(stop.reason, TerminationReason::Cancelled, "at {now} ms");
        }
    }

    /// The node guard's fast path (no `max_visits`, no usage budget, below `max_steps`)
    /// and each guard it skips to: `max_steps` reached, `max_visits` reached, a usage
    /// budget spent.
    #[test]
    fn node_guards_past_the_fast_path() {
        let mut run = run();
        let budgets = Budgets::default().max_steps(2);
        assert_eq!(check_node(&run, &budgets, "n", None), Ok(()));
        run.steps = 2;
        let stop = check_node(&run, &budgets, "n", None).expect_err("max_steps");
        assert_eq!(stop.reason, TerminationReason::MaxStepsExceeded);
        assert!(
            stop.message.contains("node `n` would be step 3"),
            "{}",
            stop.message
        );
        run.steps = 0;
        run.visits.insert("n".into(), 1);
        assert_eq!(check_node(&run, &budgets, "n", Some(2)), Ok(()));
        let stop = check_node(&run, &budgets, "n", Some(1)).expect_err("max_visits");
        assert_eq!(stop.reason, TerminationReason::CycleDetected);
        assert!(
            stop.message.contains("already ran 1 time(s)"),
            "{}",
            stop.message
        );
        let spent = Budgets::default().max_cost_usd(0.0);
        let stop = check_node(&run, &spent, "n", None).expect_err("usage");
        assert_eq!(stop.reason, TerminationReason::BudgetExceeded);
    }
}
