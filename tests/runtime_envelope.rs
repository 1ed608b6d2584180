//! The node output envelope (`$usage` kept and summed, other `$` keys refused with
//! `invalid_output`), the ids node programs and handlers get (`run_id`, `step`,
//! `attempt`), and handoff chains (chain metadata, `invalid_chain_payload`).

mod support;

use pactgraph::runtime::{
    Chain, ChainTrigger, Executor, HandlerError, NodeInput, NodeOutput, RunState, RunStatus,
    TerminationReason as R, TraceItem, TraceKind as K, Usage, Writes,
};
use serde_json::{Number, Value, json};
use support::runtime::{builder, graph, rt, run_with_io, user_state, writes};

/// Runs to the end, keeping the run state (its `usage_total` and `run_id`).
fn run_state(ex: &Executor, input: Value) -> RunState {
    let mut state = ex.start(input).expect("the input is valid");
    rt().block_on(ex.run_in_place(&mut state));
    state
}

/// Root supervisor runs `na` (writes `a`) then `nb` (writes `b`), then stops.
fn two_nodes(run_a: Value, run_b: Value) -> Value {
    json!({
        "workflow": "envelope",
        "slices": {"a": {}, "b": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["na", "nb"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "na": {"supervisor": "root", "writes": ["a"], "run": run_a,
                   "triggers": [{"priority": 2, "when": {"path": "/a", "exists": false}}]},
            "nb": {"supervisor": "root", "writes": ["b"], "run": run_b,
                   "triggers": [{"priority": 1, "when": {"path": "/b", "exists": false}}]}
        }
    })
}

fn node_item<'a>(s: &'a RunState, node: &str) -> &'a TraceItem {
    s.trace()
        .iter()
        .find(|i| i.kind == K::Dispatch && i.target() == Some(node))
        .unwrap_or_else(|| panic!("no dispatch of `{node}` in {:#?}", s.trace().to_items()))
}

fn f(x: f64) -> Number {
    Number::from_f64(x).expect("finite")
}

#[test]
fn usage_is_kept_on_the_node_item_and_summed_per_run() {
    let g = graph(two_nodes(
        json!({"handler": "typed"}),
        json!({"handler": "plain"}),
    ));
    let ex = builder(g)
        .node_handler("typed", |_| async {
            let out = NodeOutput::new(writes(&[("a", json!(1))])).with_usage(
                Usage::new()
                    .with("input_tokens", 10)
                    .with("cost_usd", f(0.5)),
            );
            Ok::<_, HandlerError>(out)
        })
        // A plain map of writes may carry `$usage` itself, as a program's output does.
        .node_handler("plain", |_| async {
            Ok(writes(&[
                ("b", json!(2)),
                ("$usage", json!({"input_tokens": 5, "output_tokens": 3})),
            ]))
        })
        .build()
        .expect("builds");
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    assert_eq!(user_state(&s.outcome()), json!({"a": 1, "b": 2}));
    let usage = |node| serde_json::to_value(node_item(&s, node).usage()).expect("plain data");
    assert_eq!(usage("na"), json!({"input_tokens": 10, "cost_usd": 0.5}));
    assert_eq!(usage("nb"), json!({"input_tokens": 5, "output_tokens": 3}));
    assert_eq!(
        serde_json::to_value(s.usage_total()).expect("plain data"),
        json!({"input_tokens": 15, "cost_usd": 0.5, "output_tokens": 3})
    );
    // Shown in the trace; absent on items without usage.
    let trace = serde_json::to_value(s.trace()).expect("plain data");
    let shown: Vec<&Value> = trace
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|i| i.get("usage"))
        .collect();
    assert_eq!(shown.len(), 2, "{trace:#}");
    // The total survives a save and a load.
    let back = RunState::from_json(s.to_json()).expect("reads back");
    assert_eq!(back.usage_total(), s.usage_total());
    assert_eq!(s.to_json()["usage_total"]["input_tokens"], 15);
}

#[test]
fn a_run_without_usage_serializes_without_it() {
    let g = graph(two_nodes(
        json!({"set": {"a": 1}}),
        json!({"set": {"b": 2}}),
    ));
    let ex = builder(g).build().expect("builds");
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed);
    assert!(s.usage_total().is_empty());
    let v = s.to_json();
    assert!(v.get("usage_total").is_none(), "{v:#}");
    // Node runs carry only their wall time; no other item has a usage record.
    let trace = v["trace"].as_array().expect("an array");
    assert!(
        trace.iter().all(|i| i.get("chain").is_none()
            && match i["kind"].as_str() {
                Some("dispatch") => i["usage"]
                    .as_object()
                    .is_some_and(|u| u.len() == 1 && u.contains_key("wall_ms")),
                _ => i.get("usage").is_none(),
            }),
        "{trace:#?}"
    );
}

/// `na` is a handler returning `out`; the run's end.
fn refused(out: Writes) -> RunState {
    let g = graph(two_nodes(json!({"handler": "h"}), json!({"set": {"b": 2}})));
    let ex = builder(g)
        .node_handler("h", move |_| {
            let out = out.clone();
            async move { Ok(out) }
        })
        .build()
        .expect("builds");
    run_state(&ex, json!({}))
}

#[test]
fn an_unknown_dollar_key_fails_the_step_and_applies_nothing() {
    let s = refused(writes(&[("a", json!(1)), ("$bogus", json!(2))]));
    assert_eq!(s.status(), RunStatus::Failed);
    assert_eq!(s.termination_reason(), Some(R::InvalidOutput));
    let msg = s.message().expect("a message");
    assert!(
        msg.contains("node `na`") && msg.contains("`$bogus` is not a reserved key"),
        "{msg}"
    );
    assert_eq!(user_state(&s.outcome()), json!({}), "nothing applied");
    assert_eq!(s.steps(), 1, "the step counts");
    let end = s.trace().iter().last().expect("an end item");
    assert_eq!(
        (end.kind, end.termination_reason),
        (K::End, Some(R::InvalidOutput))
    );
    assert_eq!(
        serde_json::to_value(R::InvalidOutput).expect("plain"),
        "invalid_output"
    );
}

#[test]
fn role_keys_are_refused_naming_the_role() {
    for (key, role) in [
        ("$route", "a router node"),
        ("$message", "a router node"),
        ("$broadcast", "a team member or a team's lead"),
        ("$exit", "a team member"),
        ("$final", "a team's lead"),
    ] {
        let s = refused(writes(&[("a", json!(1)), (key, json!(true))]));
        assert_eq!(s.termination_reason(), Some(R::InvalidOutput), "{key}");
        let msg = s.message().expect("a message");
        assert!(
            msg.contains(&format!("`{key}` may be sent only by {role}")),
            "{msg}"
        );
        assert_eq!(
            user_state(&s.outcome()),
            json!({}),
            "{key}: nothing applied"
        );
    }
}

#[test]
fn a_malformed_usage_is_invalid_output() {
    let s = refused(writes(&[("a", json!(1)), ("$usage", json!({"t": "many"}))]));
    assert_eq!(s.termination_reason(), Some(R::InvalidOutput));
    let msg = s.message().expect("a message");
    assert!(msg.contains("`$usage` `t` must be a number"), "{msg}");
    assert!(s.usage_total().is_empty());
}

#[test]
fn a_step_refused_after_its_usage_keeps_the_cost_but_not_the_writes() {
    // `c` is outside the node's writes: write_boundary_violation, nothing applied, but
    // the node ran and its cost is counted (on the failure's item and in the total).
    let s = refused(writes(&[
        ("a", json!(1)),
        ("c", json!(1)),
        ("$usage", json!({"output_tokens": 7})),
    ]));
    assert_eq!(s.termination_reason(), Some(R::WriteBoundaryViolation));
    assert_eq!(user_state(&s.outcome()), json!({}));
    assert_eq!(s.usage_total().get("output_tokens"), Some(&7.into()));
    let end = s.trace().iter().last().expect("an end item");
    assert_eq!(end.kind, K::End);
    assert_eq!(
        end.usage().and_then(|u| u.get("output_tokens")),
        Some(&7.into())
    );
}

const ECHO: &str = "import sys, json, os\n\
d = json.load(sys.stdin)\n\
print(json.dumps({'b': {'stdin': {k: d[k] for k in ('node', 'run_id', 'step', 'attempt')},\n\
                        'input': d['input'],\n\
                        'env': {k: os.environ[k] for k in ('PACTGRAPH_RUN_ID', 'PACTGRAPH_STEP', 'PACTGRAPH_ATTEMPT')}},\n\
                  '$usage': {'input_tokens': 4}}))\n";

#[test]
fn node_programs_get_run_id_step_and_attempt_on_stdin_and_in_the_environment() {
    let mut doc = two_nodes(
        json!({"set": {"a": 1}}),
        json!({"exec": {"argv": ["python3", "-c", ECHO], "timeout_ms": 20000}}),
    );
    doc["nodes"]["nb"]["reads"] = json!(["a"]);
    let ex = builder(graph(doc)).build().expect("builds");
    let s = run_with_io(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let id = s.run_id().to_string();
    let b = &s.state()["b"];
    // `na` took step 0; `nb`'s call belongs to step 1.
    assert_eq!(
        b["stdin"],
        json!({"node": "nb", "run_id": id, "step": 1, "attempt": 1})
    );
    assert_eq!(b["input"], json!({"a": 1}));
    assert_eq!(
        b["env"],
        json!({"PACTGRAPH_RUN_ID": id, "PACTGRAPH_STEP": "1", "PACTGRAPH_ATTEMPT": "1"})
    );
    assert_eq!(s.usage_total().get("input_tokens"), Some(&4.into()));
    assert!(node_item(&s, "nb").usage().is_some());
}

#[test]
fn a_node_program_printing_a_role_key_is_invalid_output() {
    let code = "import json; print(json.dumps({'b': 1, '$route': 'na'}))";
    let doc = two_nodes(
        json!({"set": {"a": 1}}),
        json!({"exec": {"argv": ["python3", "-c", code], "timeout_ms": 20000}}),
    );
    let ex = builder(graph(doc)).build().expect("builds");
    let s = run_with_io(&ex, json!({}));
    assert_eq!(s.termination_reason(), Some(R::InvalidOutput));
    let msg = s.message().expect("a message");
    assert!(
        msg.contains("node `nb`") && msg.contains("`$route` may be sent only by a router node"),
        "{msg}"
    );
    assert_eq!(user_state(&s.outcome()), json!({"a": 1}), "`b` not applied");
}

#[test]
fn handlers_get_the_run_id_step_and_attempt() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    let g = graph(two_nodes(json!({"set": {"a": 1}}), json!({"handler": "h"})));
    let ex = builder(g)
        .node_handler("h", move |input: NodeInput| {
            log.lock()
                .expect("not poisoned")
                .push((input.run_id, input.step, input.attempt));
            async { Ok(writes(&[("b", json!(1))])) }
        })
        .build()
        .expect("builds");
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed);
    assert_eq!(*seen.lock().expect("not poisoned"), [(s.run_id(), 1, 1)]);
}

/// `root` dispatches `a`, which hands off to `b`, which hands off to `c`; `c` returns.
fn chain(a_writes: Value) -> Value {
    json!({
        "workflow": "chain",
        "slices": {"draft": {}, "answer": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["a", "solo"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "a": {"supervisor": "root", "writes": ["draft"], "handoff": "b",
                  "run": {"set": {"draft": a_writes}},
                  "triggers": [{"priority": 2, "when": {"path": "/answer", "exists": false}}]},
            "b": {"supervisor": "root", "reads": ["draft"], "writes": ["draft"], "handoff": "c",
                  "input_schema": {"type": "object", "required": ["draft"], "properties": {
                      "draft": {"type": "object", "required": ["title"],
                                "properties": {"title": {"type": "string"}}}}},
                  "run": {"set": {"draft": {"title": "checked"}}}},
            "c": {"supervisor": "root", "reads": ["draft"], "writes": ["answer"],
                  "run": {"set": {"answer": "ok"}}},
            "solo": {"supervisor": "root", "writes": ["answer"], "run": {"set": {"answer": 1}},
                     "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]}
        }
    })
}

fn stage(root: &str, stage: u32) -> Option<Chain> {
    Some(Chain {
        root: root.into(),
        stage,
        trigger: ChainTrigger::Handoff,
    })
}

#[test]
fn every_item_of_a_handoff_chain_carries_its_stage() {
    let ex = builder(graph(chain(json!({"title": "draft"}))))
        .build()
        .expect("builds");
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let items: Vec<(K, &str, Option<Chain>)> = s
        .trace()
        .iter()
        .map(|i| (i.kind, i.target().unwrap_or("-"), i.chain().cloned()))
        .collect();
    assert_eq!(
        items,
        vec![
            (K::Decision, "a", None),
            (K::Dispatch, "a", stage("a", 0)),
            (K::Handoff, "b", stage("a", 1)),
            (K::Handoff, "c", stage("a", 2)),
            (K::Return, "root", stage("a", 2)),
            (K::Decision, "stop_global", None),
            (K::End, "completed", None),
        ]
    );
    let dispatch = serde_json::to_value(&s.trace().to_items()[1]).expect("plain data");
    assert_eq!(
        dispatch["chain"],
        json!({"root": "a", "stage": 0, "trigger": "handoff"})
    );
    assert_eq!(
        user_state(&s.outcome()),
        json!({"draft": {"title": "checked"}, "answer": "ok"})
    );
}

#[test]
fn a_node_without_handoff_is_no_chain() {
    let mut doc = chain(json!({"title": "draft"}));
    doc["nodes"]["a"]["triggers"] = json!([]);
    let ex = builder(graph(doc)).build().expect("builds");
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed);
    assert!(s.trace().to_items().iter().all(|i| i.chain().is_none()));
    assert!(s.trace().iter().any(|i| i.target() == Some("solo")));
}

#[test]
fn a_run_saved_mid_chain_continues_the_chain() {
    let ex = builder(graph(chain(json!({"title": "draft"}))))
        .build()
        .expect("builds");
    let whole = run_state(&ex, json!({}));
    let mut s = ex.start(json!({})).expect("starts");
    rt().block_on(ex.step(&mut s)); // decides and runs `a`: `b` is pending
    let saved = s.to_json();
    assert_eq!(
        saved["pending"]["handoff"]["chain"],
        json!({"root": "a", "stage": 1, "trigger": "handoff"})
    );
    let mut back = RunState::from_json(saved).expect("reads back");
    rt().block_on(ex.run_in_place(&mut back));
    assert_eq!(back.trace(), whole.trace());
    assert_eq!(back.state(), whole.state());
}

#[test]
fn a_stage_whose_input_schema_rejects_its_input_is_invalid_chain_payload() {
    let ex = builder(graph(chain(json!({"title": 5}))))
        .build()
        .expect("builds");
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Failed);
    assert_eq!(s.termination_reason(), Some(R::InvalidChainPayload));
    let msg = s.message().expect("a message");
    assert!(
        msg.starts_with(
            "chain `a`: stage 0 `a` handed off to stage 1 `b`, whose input_schema rejects \
             the input at `/draft/title`: "
        ) && msg.contains("is not of type \"string\""),
        "{msg}"
    );
    // `a`'s writes were committed in its own step; `b` ran nothing.
    assert_eq!(user_state(&s.outcome()), json!({"draft": {"title": 5}}));
    let end = s.trace().iter().last().expect("an end item");
    assert_eq!(
        (end.kind, end.termination_reason, end.chain().cloned()),
        (K::End, Some(R::InvalidChainPayload), stage("a", 1))
    );
    assert_eq!(
        serde_json::to_value(R::InvalidChainPayload).expect("plain"),
        "invalid_chain_payload"
    );
}

#[test]
fn a_dispatched_node_with_a_bad_input_is_still_node_failed() {
    // Outside a handoff, an input_schema failure keeps its reason.
    let mut doc = chain(json!({"title": "draft"}));
    doc["supervisors"]["root"]["allow"] = json!(["a", "solo", "b"]);
    doc["nodes"]["b"]["triggers"] =
        json!([{"priority": 3, "when": {"path": "/answer", "exists": false}}]);
    let ex = builder(graph(doc)).build().expect("builds");
    let s = run_state(&ex, json!({}));
    assert_eq!(s.termination_reason(), Some(R::NodeFailed));
    let msg = s.message().expect("a message");
    assert!(msg.contains("the input of node `b`"), "{msg}");
}
