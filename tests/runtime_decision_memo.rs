//! A rule decision taken again from the run's memo (ADR 0072) is the decision made
//! afresh: a write to a slice the triggers read, a subgraph's frame opened or closed, or
//! a run saved and loaded, each makes the next decision a fresh one. (In debug builds
//! every decision taken again is also made afresh and compared, in every test.)

mod support;

use pactgraph::runtime::{NodeInput, RunStatus, TraceKind as K};
use serde_json::{Value, json};
use support::runtime::{builder, graph, path, run, user_state, writes};

/// The node runs of a run, in order.
fn ran(o: &pactgraph::runtime::RunOutcome) -> Vec<String> {
    path(o)
        .into_iter()
        .filter(|(k, _, _)| *k == K::Dispatch || *k == K::Handoff)
        .map(|(_, _, target)| target)
        .collect()
}

/// Proves that a node writing the slice its supervisor's trigger reads changes the next
/// decision: `work` clears `/request/go` on its third run, and the fourth decision takes
/// the default (a memo kept past that write would dispatch `work` until the budget).
#[test]
fn a_write_to_a_slice_the_triggers_read_makes_the_next_decision_afresh() {
    let g = graph(json!({
        "workflow": "flip",
        "slices": {"request": {}, "out": {}},
        "budgets": {"max_steps": 50},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["work"], "default": {"stop_global": {}}}},
        "nodes": {"work": {"supervisor": "boss", "reads": ["out"], "writes": ["request", "out"],
            "triggers": [{"priority": 1, "when": {"path": "/request/go", "equals": true}}],
            "run": {"handler": "count"}}}
    }));
    let ex = builder(g)
        .node_handler("count", |input: NodeInput| async move {
            let n = input
                .view
                .get("out")
                .and_then(|o| o["n"].as_u64())
                .unwrap_or(0)
                + 1;
            Ok(writes(&[
                ("out", json!({"n": n})),
                ("request", json!({"go": n < 3})),
            ]))
        })
        .build()
        .expect("builds");
    let o = run(&ex, json!({"request": {"go": true}}));
    assert_eq!(ran(&o), ["work", "work", "work"]);
    assert_eq!(o.status, RunStatus::Completed);
    assert_eq!(user_state(&o)["out"], json!({"n": 3}));
}

/// Proves that a subgraph called twice decides afresh in its second frame: its
/// supervisor's last decision in the first call (the default, `stop_local`) was made on
/// the same level by the same table, with nothing written on that level since (the
/// root's decisions in between, with several matches, are not kept in its place), yet
/// the new frame's state differs (`round` 2, `out` by `bump`), so `b` runs, not a return
/// at once.
#[test]
fn a_new_frame_on_the_same_level_makes_its_first_decision_afresh() {
    // Node `x` runs in round `n` until it has written `out`.
    let only = |n: u64, x: &str| -> Value {
        json!({"all": [{"path": "/round/n", "equals": n},
            {"not": {"path": "/out/by", "equals": x}}]})
    };
    let g = graph(json!({
        "workflow": "twice",
        "slices": {"ready": {}, "round": {}, "out": {}},
        "budgets": {"max_steps": 50},
        "entry": "root",
        "supervisors": {
            "root": {"allow": ["g", "bump", "idle"], "default": {"stop_global": {}}},
            "inner": {"allow": ["a", "b"]}
        },
        "subgraphs": {"g": {"entrypoint": "inner", "supervisors": ["inner"],
            "reads": ["round"], "writes": ["out"],
            "triggers": [{"priority": 1, "when": {"all": [
                {"path": "/ready", "equals": true},
                {"not": {"path": "/out/by", "equals": "b"}}]}}]}},
        "nodes": {
            // Matches whenever `g` does, below it: the root's decisions have several
            // matches, which are not kept, so the inner table's memo is not replaced
            // by the root's between the two calls.
            "idle": {"supervisor": "root", "writes": ["out"],
                "triggers": [{"priority": 0, "when": {"not": {"path": "/out/by", "equals": "b"}}}],
                "run": {"set": {"out": {"by": "idle"}}}},
            "bump": {"supervisor": "root", "writes": ["round", "out"],
                "triggers": [{"priority": 2, "when": {"path": "/out/by", "equals": "a"}}],
                "run": {"set": {"round": {"n": 2}, "out": {"by": "bumped"}}}},
            "a": {"supervisor": "inner", "reads": ["round"], "writes": ["out"],
                "triggers": [{"priority": 1, "when": only(1, "a")}], "run": {"set": {"out": {"by": "a"}}}},
            "b": {"supervisor": "inner", "reads": ["round"], "writes": ["out"],
                "triggers": [{"priority": 1, "when": only(2, "b")}], "run": {"set": {"out": {"by": "b"}}}}
        }
    }));
    let ex = builder(g).build().expect("builds");
    let o = run(&ex, json!({"ready": true, "round": {"n": 1}}));
    assert_eq!(ran(&o), ["a", "bump", "b"], "{:#?}", path(&o));
    assert_eq!(user_state(&o)["out"], json!({"by": "b"}));
}
