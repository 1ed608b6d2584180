//! The seed's end-to-end acceptance scenario: normal path, safety stops, observability.

mod support;

use std::sync::Arc;

use pactgraph::runtime::{RunStatus, TerminationReason as R, TraceKind as K};
use serde_json::{Value, json};
use support::runtime::{builder, graph, graph_file, path, run, user_state};

fn fashion() -> pactgraph::runtime::Executor {
    builder(graph_file("examples/workflows/fashion.json"))
        .build()
        .unwrap()
}

#[test]
fn a_normal_path_calls_the_subgraph_and_maps_its_output() {
    let o = run(&fashion(), json!({"request": {"topic": "fashion"}}));
    assert_eq!(o.status, RunStatus::Completed);
    assert_eq!(o.termination_reason, Some(R::StopGlobal));
    assert_eq!(o.steps, 2, "one subgraph entry and one node run");
    assert_eq!(
        user_state(&o),
        json!({
            "request": {"topic": "fashion"},
            "fashion": {"trend": "wide-leg trousers"},
            "answer": {"fashion": {"trend": "wide-leg trousers"}}
        })
    );
    let want = [
        (K::Decision, "domain_supervisor", "fashion"),
        (K::Call, "domain_supervisor", "fashion"),
        (K::Decision, "fashion_supervisor", "trend"),
        (K::Dispatch, "fashion_supervisor", "trend"),
        (K::Return, "fashion_supervisor", "fashion_supervisor"),
        (K::Decision, "fashion_supervisor", "stop_local"),
        (K::Return, "domain_supervisor", "domain_supervisor"),
        (K::Decision, "domain_supervisor", "stop_global"),
        (K::End, "domain_supervisor", "completed"),
    ];
    let got = path(&o);
    let got: Vec<(K, &str, &str)> = got
        .iter()
        .map(|(k, s, t)| (*k, s.as_str(), t.as_str()))
        .collect();
    assert_eq!(got, want);
    assert!(o.uncommitted.is_empty());
}

#[test]
fn c_trace_entries_carry_step_depth_supervisor_choice_and_reason() {
    let o = run(&fashion(), json!({"request": {"topic": "fashion"}}));
    // Read through the items' accessors: ids as `&str`, borrowed from the trace.
    let decisions: Vec<_> = o
        .trace
        .iter()
        .filter(|i| i.kind == K::Decision)
        .map(|i| {
            (
                i.step,
                i.depth,
                i.supervisor().unwrap(),
                i.target().unwrap(),
                i.reason().unwrap(),
            )
        })
        .collect();
    assert_eq!(decisions[0].0, 0);
    assert_eq!(decisions[0].1, 0);
    assert!(
        decisions[0]
            .4
            .contains("`fashion` trigger #0 (priority 10)"),
        "{:?}",
        decisions[0]
    );
    assert_eq!((decisions[1].0, decisions[1].1), (1, 1));
    assert_eq!(decisions[1].2, "fashion_supervisor");
    assert_eq!(decisions[2].3, "stop_local");
    assert_eq!(decisions[2].4, "no trigger matched: default");
    assert_eq!(
        (decisions[3].0, decisions[3].1, decisions[3].3),
        (2, 0, "stop_global")
    );
    // Items inside the subgraph name it; the root level has none.
    let call = o.trace.iter().find(|i| i.kind == K::Dispatch).unwrap();
    assert_eq!(call.subgraph(), Some("fashion"));
    assert_eq!(o.trace.to_items()[0].subgraph, None);
    // The candidates considered are recorded, best first.
    assert_eq!(
        &*o.trace.to_items()[0].candidates,
        [Arc::from("fashion"), Arc::from("reply")]
    );
    // The last item ends the run with its reason.
    let last = o.trace.to_items().into_iter().last().unwrap();
    assert_eq!(last.termination_reason, Some(R::StopGlobal));
    // The same trace is projected into `system.decision_trace`.
    assert_eq!(
        o.state_json()["system"]["decision_trace"],
        serde_json::to_value(&o.trace).unwrap()
    );
}

/// A subgraph whose supervisor calls the same subgraph again (recursion) after writing
/// a mark inside its boundary.
fn recursive(max_depth: u32, max_reentry: u32) -> Value {
    json!({
        "workflow": "recursive",
        "slices": {"request": {}, "mark": {}},
        "budgets": {"max_depth": max_depth, "max_steps": 40, "max_reentry": max_reentry},
        "entry": "root",
        "supervisors": {
            "root": {"allow": ["deep"], "default": {"stop_global": {}}},
            "deep_sup": {"allow": ["deep"]}
        },
        "subgraphs": {
            "deep": {"entrypoint": "deep_sup", "supervisors": ["deep_sup"],
                     "reads": ["request"], "writes": ["mark"],
                     "triggers": [{"priority": 1, "when": true}]}
        },
        "nodes": {}
    })
}

#[test]
fn b_max_depth_stops_safely_and_discards_open_frames() {
    let ex = builder(graph(recursive(2, 10))).build().unwrap();
    let o = run(&ex, json!({"request": {"q": 1}}));
    assert_eq!(o.status, RunStatus::Stopped);
    assert_eq!(o.termination_reason, Some(R::MaxDepthExceeded));
    assert_eq!(o.uncommitted.len(), 2, "{:?}", o.uncommitted);
    assert_eq!(o.uncommitted[0].depth, 1);
    assert_eq!(o.uncommitted[1].depth, 2);
    assert_eq!(user_state(&o), json!({"request": {"q": 1}}));
    let last = o.trace.to_items().into_iter().last().unwrap();
    assert_eq!(last.kind, K::GuardStop);
    assert_eq!(last.depth, 2);
    assert_eq!(last.termination_reason, Some(R::MaxDepthExceeded));
    assert!(last.reason.as_deref().unwrap().contains("max_depth is 2"));
}

#[test]
fn b_cycle_is_detected_by_reentry() {
    let ex = builder(graph(recursive(10, 2))).build().unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(o.status, RunStatus::Stopped);
    assert_eq!(o.termination_reason, Some(R::CycleDetected));
    assert_eq!(o.steps, 2);
    assert!(
        o.trace
            .to_items()
            .last()
            .unwrap()
            .reason
            .as_deref()
            .unwrap()
            .contains("max_reentry is 2")
    );
}

#[test]
fn b_a_subgraph_max_reentry_overrides_the_runs() {
    let mut doc = recursive(10, 5);
    doc["subgraphs"]["deep"]["max_reentry"] = json!(1);
    let o = run(&builder(graph(doc)).build().unwrap(), json!({}));
    assert_eq!(o.termination_reason, Some(R::CycleDetected));
    assert_eq!(o.steps, 1);
}

#[test]
#[cfg(feature = "yaml")]
fn yaml_workflows_run_the_same_way() {
    let ex = builder(graph_file("examples/workflows/support_triage.yaml"))
        .build()
        .unwrap();
    let o = run(&ex, json!({"ticket": {"text": "charged twice"}}));
    assert_eq!(o.status, RunStatus::Completed);
    assert_eq!(o.termination_reason, Some(R::Terminal));
    assert_eq!(o.steps, 3);
    let kinds: Vec<K> = o.trace.to_items().iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [K::Decision, K::Dispatch, K::Handoff, K::Handoff, K::End]
    );
    assert_eq!(o.state["review"], json!({"approved": true}));
}
