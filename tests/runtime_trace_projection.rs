//! The decision trace is stored once (`RunState::trace`, `RunOutcome::trace`);
//! `state.system.decision_trace` is its projection: present in the serialized outcome (the
//! run summary) and in `state_json()`, absent from the in-memory `state`. A serialized run
//! state (a saved run) holds the trace once, under `trace`, with no projection.

mod support;

use pactgraph::runtime::{DecisionTrace, Executor, RunOutcome, RunState, RunStatus};
use serde_json::{Value, json};
use support::runtime::{builder, graph_file, rt};

fn executor(file: &str, keep: bool) -> Executor {
    builder(graph_file(file))
        .trace_in_state(keep)
        .build()
        .unwrap()
}

/// The fashion workflow, run to its end.
fn finished(keep: bool, input: Value) -> RunState {
    let ex = executor("examples/workflows/fashion.json", keep);
    let mut run = ex.start(input).unwrap();
    assert_eq!(
        rt().block_on(ex.run_in_place(&mut run)),
        RunStatus::Completed
    );
    run
}

/// The clarification workflow, paused for an answer.
fn paused(keep: bool) -> RunState {
    let ex = executor("examples/workflows/clarification.json", keep);
    let mut run = ex.start(json!({})).unwrap();
    assert_eq!(
        rt().block_on(ex.run_in_place(&mut run)),
        RunStatus::AwaitingInput
    );
    run
}

fn fashion_input() -> Value {
    json!({"request": {"topic": "fashion"}})
}

/// How often `"decision_trace"` occurs in the serialized text (duplicates included).
fn occurrences(text: &str) -> usize {
    text.matches("\"decision_trace\"").count()
}

#[test]
fn a_serialized_outcome_carries_the_trace_once_even_if_the_input_had_one() {
    let input = json!({
        "request": {"topic": "fashion"},
        "system": {"decision_trace": ["from the caller"], "mine": 1}
    });
    let run = finished(true, input);
    let mut outcome = run.outcome();
    let trace = serde_json::to_value(&outcome.trace).unwrap();
    // A physically present copy (here planted after the run) is never emitted.
    outcome.state["system"]["decision_trace"] = json!(["stale"]);
    let value = serde_json::to_value(&outcome).unwrap();
    assert_eq!(value["state"]["system"]["decision_trace"], trace);
    let keys: Vec<&str> = value["state"]["system"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["mine", "budgets", "call_stack", "steps", "decision_trace"]
    );
    assert_eq!(occurrences(&serde_json::to_string(&outcome).unwrap()), 1);
    // The run state holds the trace once, under `trace`, and no projection.
    assert_eq!(occurrences(&serde_json::to_string(&run).unwrap()), 0);
    assert_eq!(run.to_json()["trace"], trace);
    assert_eq!(run.state_json()["system"]["decision_trace"], trace);
    assert_eq!(outcome.state_json()["system"]["decision_trace"], trace);
    let back: DecisionTrace =
        serde_json::from_value(value["state"]["system"]["decision_trace"].clone()).unwrap();
    assert_eq!(back, outcome.trace);
}

#[test]
fn the_in_memory_state_holds_no_copy_of_the_trace() {
    let run = finished(true, fashion_input());
    assert!(run.state()["system"].get("decision_trace").is_none());
    assert_eq!(run.state()["system"]["steps"], 2);
    let outcome = run.clone().into_outcome();
    assert!(outcome.state["system"].get("decision_trace").is_none());
    assert!(
        run.outcome().state["system"]
            .get("decision_trace")
            .is_none()
    );
    let paused = paused(true);
    assert!(paused.state()["system"].get("decision_trace").is_none());
    // Nor does one read back from a saved run.
    let restored = RunState::from_json(paused.to_json()).unwrap();
    assert!(restored.state()["system"].get("decision_trace").is_none());
    let ex = executor("examples/workflows/fashion.json", true);
    let started = ex
        .start(json!({"request": {}, "system": {"decision_trace": [1]}}))
        .unwrap();
    assert!(started.state()["system"].get("decision_trace").is_none());
    assert_eq!(started.state_json()["system"]["decision_trace"], json!([]));
}

#[test]
fn saved_runs_round_trip_byte_for_byte() {
    for keep in [true, false] {
        for run in [finished(keep, fashion_input()), paused(keep)] {
            let first = run.to_json();
            let text = serde_json::to_string_pretty(&first).unwrap();
            let restored = RunState::from_json(first.clone()).unwrap();
            assert_eq!(restored, run, "keep = {keep}");
            assert_eq!(restored.to_json(), first, "keep = {keep}");
            assert_eq!(
                serde_json::to_string_pretty(&restored).unwrap(),
                text,
                "keep = {keep}"
            );
            assert!(first["state"]["system"].get("decision_trace").is_none());
            assert_eq!(first["trace_in_state"], keep);
            assert_eq!(
                restored.state_json()["system"]
                    .get("decision_trace")
                    .is_some(),
                keep
            );

            let outcome = run.outcome();
            let text = serde_json::to_string(&outcome).unwrap();
            let restored: RunOutcome = serde_json::from_str(&text).unwrap();
            assert_eq!(restored, outcome, "keep = {keep}");
            assert_eq!(serde_json::to_string(&restored).unwrap(), text);
        }
    }
}

#[test]
fn a_restored_paused_run_resumes_like_the_original() {
    let ex = executor("examples/workflows/clarification.json", true);
    let run = paused(true);
    let restored: RunState = serde_json::from_str(&serde_json::to_string(&run).unwrap()).unwrap();
    let a = rt().block_on(ex.run(ex.resume(run, "M").unwrap()));
    let b = rt().block_on(ex.run(ex.resume(restored, "M").unwrap()));
    assert_eq!(a.status, RunStatus::Completed);
    assert_eq!(a, b);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    assert_eq!(
        a.state_json()["system"]["decision_trace"],
        serde_json::to_value(&a.trace).unwrap()
    );
}

#[test]
fn mid_run_the_projection_is_the_trace_so_far() {
    let ex = executor("examples/workflows/fashion.json", true);
    let mut run = ex.start(fashion_input()).unwrap();
    rt().block_on(ex.step(&mut run));
    assert!(run.is_running());
    assert!(!run.trace().is_empty());
    assert_eq!(
        run.state_json()["system"]["decision_trace"],
        serde_json::to_value(run.trace()).unwrap()
    );
}

#[test]
fn without_trace_in_state_no_decision_trace_appears_anywhere() {
    let input = json!({"request": {"topic": "fashion"}, "system": {"decision_trace": [1]}});
    let run = finished(false, input);
    assert!(!run.trace().is_empty());
    let outcome = run.outcome();
    let paused = paused(false);
    for text in [
        serde_json::to_string(&run).unwrap(),
        serde_json::to_string(&outcome).unwrap(),
        serde_json::to_string(&run.state_json()).unwrap(),
        serde_json::to_string(&outcome.state_json()).unwrap(),
        serde_json::to_string(run.state()).unwrap(),
        serde_json::to_string(&paused).unwrap(),
        serde_json::to_string(&paused.state_json()).unwrap(),
    ] {
        assert_eq!(occurrences(&text), 0, "{text}");
    }
}

#[test]
fn the_executor_that_pauses_or_ends_a_run_decides_whether_the_state_carries_the_trace() {
    // Saved with the trace in the state, resumed by an executor that keeps it out.
    let run = paused(true);
    assert!(run.state_json()["system"].get("decision_trace").is_some());
    let lean = executor("examples/workflows/clarification.json", false);
    let outcome = rt().block_on(lean.run(lean.resume(run, "M").unwrap()));
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(
        outcome.state_json()["system"]
            .get("decision_trace")
            .is_none()
    );
    assert_eq!(occurrences(&serde_json::to_string(&outcome).unwrap()), 0);
}
