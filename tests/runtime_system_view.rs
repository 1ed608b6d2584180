//! What a run shows of itself: `system` (the step count and the decision trace) read
//! fresh by policies, nodes and rule triggers, the recent trace items a policy is given
//! (or the whole trace on request), and traces equal apart from timing for the same input.

mod support;

use pactgraph::RoutingDecision as D;
use pactgraph::contracts::SupervisorOutput;
use std::sync::{Arc, Mutex};

use pactgraph::runtime::{
    ExecutorBuilder, HandlerError, PolicyInput, RunStatus, TerminationReason as R, TraceKind as K,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph, graph_file, run};

/// A supervisor whose policy is the handler `script`, and one node `m` that hands off to
/// `m2`: two steps a dispatch.
fn policy_loop() -> Value {
    json!({
        "workflow": "views",
        "slices": {"c": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["m"], "policy": {"handler": "script"}}},
        "nodes": {
            "m": {"supervisor": "root", "writes": ["c"], "run": {"set": {"c": 1}}, "handoff": "m2"},
            "m2": {"supervisor": "root", "writes": ["c"], "run": {"set": {"c": 2}}}
        }
    })
}

#[test]
fn the_same_input_gives_the_same_trace_apart_from_timing() {
    let g = || graph_file("examples/workflows/fashion.json");
    let timed = pactgraph::runtime::Executor::builder(support::runtime::valid(g()))
        .build()
        .unwrap();
    let input = json!({"request": {"topic": "fashion"}});
    let a = run(&timed, input.clone());
    let b = run(&timed, input.clone());
    assert!(
        a.trace.to_items().iter().all(|i| i.at_ms > 0),
        "system clock stamps items"
    );
    assert_eq!(a.trace.without_timing(), b.trace.without_timing());
    let frozen = run(&builder(g()).build().unwrap(), input);
    assert_eq!(frozen.trace, a.trace.without_timing());
}

/// What a recording policy saw of `system` at each call: its step count and the trace
/// items it was given.
type Seen = Arc<Mutex<Vec<(u64, Vec<Value>)>>>;

/// `b` with policy `script` recording what it sees of `system` (into the returned
/// [`Seen`]), dispatching `m` while fewer than `until` steps have run, then `stop_global`.
fn recording_policy(b: ExecutorBuilder, until: u64) -> (ExecutorBuilder, Seen) {
    let seen = Seen::default();
    let log = Arc::clone(&seen);
    let policy = move |input: PolicyInput| {
        let steps = input.state["system"]["steps"].as_u64().unwrap();
        let items = input.state["system"]["decision_trace"]
            .as_array()
            .unwrap()
            .clone();
        log.lock().unwrap().push((steps, items));
        async move {
            Ok::<SupervisorOutput, HandlerError>(if steps < until {
                "m".into()
            } else {
                D::stop_global("enough").into()
            })
        }
    };
    (b.policy_handler("script", policy), seen)
}

#[test]
fn policies_and_nodes_reading_system_see_it_fresh() {
    let (b, seen) = recording_policy(builder(graph(policy_loop())), 1);
    let o = run(&b.build().unwrap(), json!({}));
    assert_eq!(o.termination_reason, Some(R::StopGlobal));
    let counts: Vec<(u64, usize)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(steps, items)| (*steps, items.len()))
        .collect();
    assert_eq!(counts, [(0, 0), (2, 4)]);
}

#[test]
fn rule_triggers_on_system_see_it_fresh() {
    // `done` wins once three steps have run: the trigger reads the live step count, not
    // the copy of `system` written at start (which says 0 until the run ends).
    let doc = json!({
        "workflow": "counted",
        "slices": {"out": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["work", "done"]}},
        "nodes": {
            "work": {"supervisor": "root", "writes": ["out"], "run": {"set": {"out": 1}},
                     "triggers": [{"priority": 1, "when": true}]},
            "done": {"supervisor": "root", "writes": ["out"], "run": {"set": {"out": "done"}},
                     "terminal": true,
                     "triggers": [{"priority": 5, "when": {"path": "/system/steps", "equals": 3}}]}
        }
    });
    let o = run(&builder(graph(doc)).build().unwrap(), json!({}));
    assert_eq!(
        (o.status, o.termination_reason, o.steps),
        (RunStatus::Completed, Some(R::Terminal), 4)
    );
    assert_eq!(o.state["out"], "done");
    let decided: Vec<&str> = o
        .trace
        .iter()
        .filter(|i| i.kind == K::Decision)
        .filter_map(|i| i.target())
        .collect();
    assert_eq!(decided, ["work", "work", "work", "done"]);
}

/// A policy reading `system` is given the recent trace items, not the whole trace: what a
/// call copies stays bounded however long the run (the last `TraceView::DEFAULT_RECENT`
/// items, the newest last); `TraceView::Full` gives every item on request.
#[test]
fn policies_see_the_recent_trace_items_or_the_whole_trace_on_request() {
    use pactgraph::runtime::TraceView;
    let seen_by = |view: Option<TraceView>| {
        let mut doc = policy_loop();
        doc["budgets"] = json!({"max_steps": 1000});
        let (mut b, seen) = recording_policy(builder(graph(doc)), 100);
        if let Some(v) = view {
            b = b.trace_view(v);
        }
        let o = run(&b.build().unwrap(), json!({}));
        assert_eq!(o.termination_reason, Some(R::StopGlobal));
        let items: Vec<Vec<Value>> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, i)| i.clone())
            .collect();
        (o, items)
    };
    let (o, recent) = seen_by(None);
    let longest = recent.iter().map(Vec::len).max().unwrap();
    assert_eq!(longest, TraceView::DEFAULT_RECENT);
    assert!(o.trace.to_items().len() > 2 * TraceView::DEFAULT_RECENT);
    // The last call saw the newest items: the trace's items before its own decision.
    let last = recent.last().unwrap();
    let before_last_decision = o.trace.to_items().len() - 2; // the decision and the end follow
    let expected: Vec<Value> = o.trace.to_items()
        [before_last_decision - TraceView::DEFAULT_RECENT..before_last_decision]
        .iter()
        .map(|i| serde_json::to_value(i).unwrap())
        .collect();
    assert_eq!(last, &expected);
    let (o, full) = seen_by(Some(TraceView::Full));
    assert_eq!(full.last().unwrap().len(), o.trace.to_items().len() - 2);
}
