//! Planning driven with a fixed clock: the time and the cancellation token are arguments
//! of planning ([`Planner`]), so a test decides what time it is.

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::effects::CancelWatch;
use super::machine::{Planner, commit_step};
use super::{Clock, Executor, RunState, RunStatus, TerminationReason, TraceKind};
use crate::contracts::WorkflowDocument;
use crate::graph::GraphBuilder;
use crate::validator::ValidGraph;

/// `root` dispatches `reply`, a terminal `set` node, under a run deadline of 1000 ms.
fn with_deadline(clock: Clock) -> Executor {
    let doc = WorkflowDocument::from_value(json!({
        "workflow": "w", "slices": {"answer": {}}, "entry": "root",
        "budgets": {"timeout_ms": 1000},
        "supervisors": {"root": {"allow": ["reply"]}},
        "nodes": {"reply": {"supervisor": "root", "writes": ["answer"], "terminal": true,
            "triggers": [{"priority": 1, "when": true}],
            "run": {"set": {"answer": "hi"}}}}
    }))
    .expect("a valid document");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    Executor::builder(ValidGraph::new(graph).expect("valid"))
        .clock(clock)
        .build()
        .expect("builds")
}

/// A run started at `started_at_ms`, planned and committed one step at `now_ms`.
fn one_step(
    ex: &Executor,
    started_at_ms: u64,
    now_ms: u64,
    cancel: &CancellationToken,
) -> RunState {
    let mut run = ex.start(json!({})).expect("starts");
    run.started_at_ms = started_at_ms;
    let planner = Planner {
        plan: &ex.plan,
        now_ms,
    };
    let step = planner.begin(&run, &CancelWatch::new(cancel));
    assert!(
        step.is_ready(),
        "a rule decision and a `set` node wait on nothing"
    );
    commit_step(&ex.plan, &mut run, step);
    run
}

#[test]
fn the_deadline_is_judged_at_the_time_planning_is_given() {
    let ex = with_deadline(Clock::Frozen);
    let token = CancellationToken::new();
    // 1000 ms after the start is within the deadline: the step runs and the run completes.
    let run = one_step(&ex, 50_000, 51_000, &token);
    assert_eq!(run.status(), RunStatus::Completed);
    // 1001 ms after it is past the deadline, whatever the system clock says.
    let run = one_step(&ex, 50_000, 51_001, &token);
    assert_eq!(run.status(), RunStatus::Stopped);
    assert_eq!(run.termination_reason(), Some(TerminationReason::Timeout));
    assert_eq!(run.steps, 0, "nothing ran");
}

#[test]
fn a_system_clock_stamps_the_step_with_the_time_planning_is_given() {
    let ex = with_deadline(Clock::System);
    let run = one_step(&ex, 7_000, 7_250, &CancellationToken::new());
    assert_eq!(run.status(), RunStatus::Completed);
    let decision = run.trace.get(0).expect("a decision");
    assert_eq!(decision.kind, TraceKind::Decision);
    assert!(
        run.trace.iter().all(|i| i.at_ms == 7_250),
        "every item of the step carries the given time: {:?}",
        run.trace.iter().map(|i| i.at_ms).collect::<Vec<_>>()
    );
    // A frozen clock stamps nothing, whatever time planning is given.
    let ex = with_deadline(Clock::Frozen);
    let run = one_step(&ex, 7_000, 7_250, &CancellationToken::new());
    assert!(run.trace.iter().all(|i| i.at_ms == 0));
}

#[test]
fn planning_checks_the_token_it_is_given() {
    let ex = with_deadline(Clock::Frozen);
    let token = CancellationToken::new();
    token.cancel();
    assert!(!ex.cancellation_token().is_cancelled());
    let run = one_step(&ex, 1_000, 1_000, &token);
    assert_eq!(run.termination_reason(), Some(TerminationReason::Cancelled));
    let stop = run.trace.last().expect("a guard stop item");
    assert_eq!(stop.kind, TraceKind::GuardStop);
    assert_eq!(stop.supervisor(), Some("root"));
}
