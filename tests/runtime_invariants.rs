//! The invariants that replaced the runtime's defensive branches (ADR 0009): each is now
//! kept by a type or checked once at the door, and these tests show the door is shut.

mod support;

use pactgraph::runtime::{RunState, RunStatus, TerminationReason};
use pactgraph::validator::ValidGraph;
use pactgraph::{GraphBuilder, NodeContract, SliceDecl, SupervisorContract};
use serde_json::{Value, json};
use support::runtime::{builder, graph_file, rt};

fn fashion_run() -> (pactgraph::runtime::Executor, RunState) {
    let ex = builder(graph_file("examples/workflows/fashion.json"))
        .build()
        .unwrap();
    let run = ex.start(json!({"request": {"topic": "fashion"}})).unwrap();
    (ex, run)
}

/// A saved run state, edited by `edit`, read back.
fn read_back(edit: impl FnOnce(&mut Value)) -> Result<RunState, serde_json::Error> {
    let (_, run) = fashion_run();
    let mut v = run.to_json();
    edit(&mut v);
    RunState::from_json(v)
}

#[test]
fn a_running_run_always_has_a_next_step() {
    // The old `Pending::Nothing` while running: not representable, and refused on read.
    let e = read_back(|v| {
        v.as_object_mut().unwrap().remove("pending");
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("a running run needs `pending`"),
        "{e}"
    );
    // A paused run needs its question; an ended run its reason and no next step.
    let e = read_back(|v| v["status"] = json!("awaiting_input")).unwrap_err();
    assert!(e.to_string().contains("needs `question`"), "{e}");
    let e = read_back(|v| v["status"] = json!("completed")).unwrap_err();
    assert!(e.to_string().contains("needs a termination_reason"), "{e}");
    // Unchanged, it reads back equal.
    let (_, run) = fashion_run();
    assert_eq!(RunState::from_json(run.to_json()).unwrap(), run);
}

#[test]
fn states_are_objects_by_type() {
    for bad in [json!([1, 2]), json!("text"), json!(null)] {
        let e = read_back(|v| v["state"] = bad.clone()).unwrap_err();
        assert!(e.to_string().contains("invalid type"), "{bad}: {e}");
    }
    let e = read_back(|v| {
        v["stack"] = json!([{"subgraph_id": "fashion", "depth": 1, "entry_step": 1,
                              "caller": "domain_supervisor", "state": 7}]);
    })
    .unwrap_err();
    assert!(e.to_string().contains("invalid type"), "{e}");
}

#[test]
fn only_graphs_the_validator_accepts_reach_the_executor() {
    // The entry is not a supervisor (formerly `StartError::UnknownEntry` at run time):
    // the graph never becomes valid, so no executor can be built for it.
    let partial = match GraphBuilder::new("w")
        .slice("a", SliceDecl::new())
        .entry("n")
        .supervisor(SupervisorContract::new("root").allow(["n"]))
        .node(
            NodeContract::new("n")
                .supervisor("root")
                .writes(["a"])
                .terminal(true),
        )
        .build()
    {
        Ok(g) => g,
        Err(f) => f.into_partial(),
    };
    let rejected = ValidGraph::new(partial).unwrap_err();
    assert!(rejected.report.has_errors() || !rejected.graph.problems().is_empty());
}

#[test]
fn a_run_state_naming_what_the_workflow_lacks_fails_at_its_next_step_and_names_it() {
    // Saved by another workflow, or edited: the one place unknown ids are still met.
    let (ex, mut run) = fashion_run();
    rt().block_on(ex.step(&mut run)); // inside the fashion subgraph now
    assert_eq!(run.stack().len(), 1);
    let mut v = run.to_json();
    v["stack"][0]["subgraph_id"] = json!("ghost");
    let mut foreign = RunState::from_json(v).unwrap();
    rt().block_on(ex.run_in_place(&mut foreign));
    assert_eq!(foreign.status(), RunStatus::Failed);
    assert_eq!(
        foreign.termination_reason(),
        Some(TerminationReason::NodeFailed)
    );
    let msg = foreign.message().unwrap();
    assert!(
        msg.contains("subgraph `ghost`") && msg.contains("fashion_advisor"),
        "{msg}"
    );

    let mut v = run.to_json();
    v["pending"] = json!({"decide": {"supervisor": "nobody"}});
    let mut foreign = RunState::from_json(v).unwrap();
    rt().block_on(ex.run_in_place(&mut foreign));
    assert!(foreign.message().unwrap().contains("supervisor `nobody`"));
    // Nothing ran: the step count is where the saved run left it.
    assert_eq!(foreign.steps(), run.steps());
}
