//! What a step leaves behind in reference counts: a step committed in place and disposed
//! of without its drop glue (ADR 0061) must neither leak an id's count nor release one
//! it does not hold.

use std::sync::Arc;

use serde_json::json;

use super::Executor;
use super::plan::PolicyRun;
use crate::contracts::WorkflowDocument;
use crate::graph::GraphBuilder;
use crate::validator::ValidGraph;

/// `boss` dispatches `work` (a `set` node) forever; `chain_head` hands off to `tail`,
/// which returns to `boss2` (a step whose dispatcher the run state holds, counted).
fn executor(doc: serde_json::Value) -> Executor {
    let doc = WorkflowDocument::from_value(doc).expect("a valid document");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    Executor::builder(ValidGraph::new(graph).expect("valid"))
        .build()
        .expect("builds")
}

/// The reference counts of every supervisor, node and rule entry id of the plan (a rule
/// entry may hold its node's id in an allocation of its own).
fn counts(ex: &Executor) -> Vec<usize> {
    let sups = ex
        .plan
        .supervisors
        .values()
        .map(|s| Arc::strong_count(&s.id));
    let nodes = ex.plan.nodes.values().map(|n| Arc::strong_count(&n.id));
    let entries = ex.plan.supervisors.values().flat_map(|s| match &s.policy {
        PolicyRun::Rules(t) => t.entry_ids().map(Arc::strong_count).collect(),
        _ => Vec::new(),
    });
    sups.chain(nodes).chain(entries).collect()
}

/// Runs `steps` more steps of `run` on a runtime of its own.
fn steps(ex: &Executor, run: &mut super::RunState, steps: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        for _ in 0..steps {
            ex.step(run).await;
        }
    });
}

/// Runs `n` steps of a new run, which must still be running (each `step()` one node
/// run), drops the run and checks every count is back where it was before the run.
fn counts_restored_after(ex: &Executor, n: usize) {
    let base = counts(ex);
    let mut run = ex.start(json!({})).expect("starts");
    steps(ex, &mut run, n);
    assert!(run.is_running());
    assert_eq!(run.steps() as usize, n);
    drop(run);
    assert_eq!(counts(ex), base);
}

/// Proves a loop step (rule decision, `set` node, return: the step that is forgotten
/// rather than dropped) neither leaks an id's count nor releases one it did not hold: the
/// trace's items hold counts of their ids (ADR 0086), so the counts are compared once the
/// run of 520 steps is dropped: exactly as before the run started. A leak would leave them
/// higher; a release of a count the step did not hold would leave them lower (and free a
/// live id).
#[test]
fn a_loop_step_leaves_every_count_as_it_was() {
    let ex = executor(json!({
        "workflow": "loop", "slices": {"out": {}}, "entry": "boss",
        "budgets": {"max_steps": 10_000},
        "supervisors": {"boss": {"allow": ["work"]}},
        "nodes": {"work": {"supervisor": "boss", "writes": ["out"],
            "triggers": [{"priority": 1, "when": true}], "run": {"set": {"out": {"ok": true}}}}}
    }));
    counts_restored_after(&ex, 520);
}

/// Proves the same for steps that hold counted ids (a handoff's dispatcher comes from the
/// run state): such a step is dropped as before, its counts released, none leaked. The
/// trace keeps each handoff chain's root (a count an item), so the counts are compared
/// once the run is dropped: exactly as before the run started.
#[test]
fn a_handoff_loop_leaves_every_count_as_it_was() {
    let ex = executor(json!({
        "workflow": "handoffs", "slices": {"a": {}, "b": {}}, "entry": "boss",
        "budgets": {"max_steps": 10_000},
        "supervisors": {"boss": {"allow": ["head"]}},
        "nodes": {
            "head": {"supervisor": "boss", "writes": ["a"], "handoff": "tail",
                "triggers": [{"priority": 1, "when": true}], "run": {"set": {"a": 1}}},
            "tail": {"supervisor": "boss", "writes": ["b"], "run": {"set": {"b": 2}}}
        }
    }));
    counts_restored_after(&ex, 600);
}

/// Proves a loop step whose decision lists several candidates (two triggers tie: the list
/// is the step's own, a count on each entry's id) releases them: the step is dropped, not
/// forgotten. The trace keeps each item's list, so the counts are compared once the run
/// is dropped: exactly as before the run started.
#[test]
fn a_tied_decision_releases_its_candidates() {
    let ex = executor(json!({
        "workflow": "tie", "slices": {"out": {}}, "entry": "boss",
        "budgets": {"max_steps": 10_000},
        "supervisors": {"boss": {"allow": ["a", "b"]}},
        "nodes": {
            "a": {"supervisor": "boss", "writes": ["out"],
                "triggers": [{"priority": 1, "when": true}], "run": {"set": {"out": 1}}},
            "b": {"supervisor": "boss", "writes": ["out"],
                "triggers": [{"priority": 1, "when": true}], "run": {"set": {"out": 2}}}
        }
    }));
    counts_restored_after(&ex, 300);
}
