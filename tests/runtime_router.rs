//! Routers (spec 5.3): `$route` to a node (a chain stage, trigger `router`) or a subgraph
//! (a call from the router's level), `$message` delivered to `message_slice`, `may_answer`,
//! retries with the error in the router's input, and `invalid_route` (the router's own
//! handoff after the destination's chain: `runtime_router_handoffs.rs`).

mod support;

use pactgraph::runtime::{
    ChainTrigger, HandlerError, NodeInput, NodeOutput, Pending, RunStatus, TerminationReason as R,
    TraceKind as K,
};
use serde_json::{Value, json};
use support::router::{Seen, chain, items_of, routed, run_saved, run_state, scripted};
use support::runtime::{builder, graph, rt, run_with_io, user_state, writes};

#[test]
fn an_unknown_destination_then_a_valid_one_retries_once_with_the_error() {
    let executor = |seen: &Seen| {
        let g = graph(routed(
            json!({"destinations": ["a", "b", "sub"]}),
            json!({"handler": "router"}),
        ));
        scripted(
            builder(g),
            vec![
                json!({"scratch": "first", "$route": "nowhere"}),
                json!({"pick": "b", "$route": "b"}),
            ],
            seen,
        )
    };
    let seen = Seen::default();
    let ex = executor(&seen);
    let s = run_state(&ex, json!({"request": {"q": 1}}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    // The rejected attempt applied nothing; the accepted one its writes.
    assert_eq!(
        user_state(&s.outcome()),
        json!({"request": {"q": 1}, "pick": "b", "done": "b"})
    );
    let seen = seen.lock().expect("not poisoned").clone();
    assert_eq!(seen.len(), 2);
    // Each run of the router is a step of its own (attempt 1 of that step's call).
    assert_eq!(seen[0], (0, 1, None));
    assert_eq!((seen[1].0, seen[1].1), (1, 1));
    let error = seen[1].2.as_deref().expect("the error reached the router");
    assert!(
        error.contains("\"nowhere\"") && error.contains("not one of the destinations"),
        "{error}"
    );
    // Two router runs (two steps), then `b` as stage 1 of the router's chain.
    let runs = items_of(&s, "r");
    assert_eq!(runs.len(), 2);
    assert!(
        runs[0]
            .reason()
            .is_some_and(|r| r.starts_with("invalid route (router run 1): ")),
        "{:?}",
        runs[0].reason
    );
    assert_eq!(runs[1].reason(), Some("$route: b (router run 2)"));
    assert_eq!(
        runs[1].chain().cloned(),
        chain("r", 0, ChainTrigger::Router)
    );
    let b = items_of(&s, "b");
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].kind, K::Handoff);
    assert_eq!(b[0].source(), Some("r"));
    assert_eq!(b[0].chain().cloned(), chain("r", 1, ChainTrigger::Router));
    assert_eq!(s.steps(), 3);
    assert_eq!(s.visits().get("r"), Some(&2));
    // Saved and loaded between every two steps, the run ends the same.
    let saved = run_saved(&executor(&Seen::default()), json!({"request": {"q": 1}}));
    assert_eq!(saved.trace().without_timing(), s.trace().without_timing());
}

#[test]
fn a_router_that_never_routes_fails_with_invalid_route_and_applies_nothing() {
    let g = graph(routed(
        json!({"destinations": ["a", "sub"], "retries": 2}),
        json!({"handler": "router"}),
    ));
    let seen = Seen::default();
    let ex = scripted(
        builder(g),
        vec![json!({"scratch": "x", "pick": "y", "$route": "b"})],
        &seen,
    );
    let s = run_state(&ex, json!({"request": {}}));
    assert_eq!(s.status(), RunStatus::Failed);
    assert_eq!(s.termination_reason(), Some(R::InvalidRoute));
    let msg = s.message().expect("a message");
    assert!(
        msg.contains("router `r` gave no valid route in 3 runs") && msg.contains("\"b\""),
        "{msg}"
    );
    assert_eq!(user_state(&s.outcome()), json!({"request": {}}));
    assert_eq!(seen.lock().expect("not poisoned").len(), 3);
    assert_eq!(s.visits().get("r"), Some(&3));
    assert!(items_of(&s, "a").is_empty() && items_of(&s, "b").is_empty());
    let last = s.trace().iter().last().expect("an end item");
    assert_eq!(last.termination_reason, Some(R::InvalidRoute));
    // Also the shape of `invalid_route` in the outcome.
    let out = serde_json::to_value(s.outcome()).expect("plain data");
    assert_eq!(out["termination_reason"], "invalid_route");
}

#[test]
fn malformed_routes_are_retried_like_unknown_ones() {
    for (bad, says) in [
        (json!({"pick": 1}), "no `$route` was sent"),
        (json!({"$route": null}), "may not answer itself"),
        (
            json!({"$route": 7}),
            "must be a destination id (a string), not a number",
        ),
        (
            json!({"$route": "a", "$message": {"x": 1}}),
            "`$message` must be a string",
        ),
        (
            json!({"$route": "a", "$message": "hi"}),
            "declares no message_slice",
        ),
    ] {
        let g = graph(routed(
            json!({"destinations": ["a"], "retries": 0}),
            json!({"handler": "router"}),
        ));
        let ex = scripted(builder(g), vec![bad], &Seen::default());
        let s = run_state(&ex, json!({}));
        assert_eq!(s.termination_reason(), Some(R::InvalidRoute));
        let msg = s.message().expect("a message");
        assert!(msg.contains("in 1 run;") && msg.contains(says), "{msg}");
    }
}

#[test]
fn a_non_router_sending_a_route_is_invalid_output() {
    let mut doc = routed(json!({"destinations": ["a"]}), json!({"handler": "router"}));
    doc["nodes"]["a"]["run"] = json!({"handler": "a"});
    let g = graph(doc);
    let ex = builder(g)
        .node_handler("router", |_| async {
            Ok::<_, HandlerError>(NodeOutput::new(writes(&[])).with_route("a"))
        })
        .node_handler("a", |_| async {
            Ok::<_, HandlerError>(writes(&[("done", json!(1)), ("$route", json!("b"))]))
        })
        .node_handler("work", |_| async { Ok::<_, HandlerError>(writes(&[])) })
        .build()
        .expect("builds");
    let s = run_state(&ex, json!({}));
    assert_eq!(s.termination_reason(), Some(R::InvalidOutput));
    assert!(
        s.message()
            .is_some_and(|m| m.contains("`$route` may be sent only by a router node")),
        "{:?}",
        s.message()
    );
}

#[test]
fn the_message_is_delivered_before_the_destination_runs() {
    let mut doc = routed(
        json!({"destinations": ["a", "sub"], "message_slice": "note"}),
        json!({"handler": "router"}),
    );
    doc["nodes"]["a"]["run"] = json!({"handler": "a"});
    let g = graph(doc);
    let ex = builder(g)
        .node_handler("router", |_| async {
            let out = NodeOutput::new(writes(&[("pick", json!("a"))]))
                .with_route("a")
                .with_message("the customer is in a hurry");
            Ok::<_, HandlerError>(out)
        })
        .node_handler("a", |input: NodeInput| async move {
            let note = input.view.get("note").cloned().unwrap_or(Value::Null);
            Ok::<_, HandlerError>(writes(&[("done", json!({"a saw": note}))]))
        })
        .node_handler("work", |_| async { Ok::<_, HandlerError>(writes(&[])) })
        .build()
        .expect("builds");
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let note = json!({"router": "r", "message": "the customer is in a hurry"});
    assert_eq!(
        user_state(&s.outcome()),
        json!({"pick": "a", "note": note, "done": {"a saw": note}})
    );
}

#[test]
fn a_destination_subgraph_is_called_with_its_boundary_and_schemas() {
    let mut doc = routed(
        json!({"destinations": ["a", "sub"], "message_slice": "note"}),
        json!({"handler": "router"}),
    );
    doc["subgraphs"]["sub"]["input_schema"] = json!({"type": "object", "required": ["request"]});
    doc["subgraphs"]["sub"]["output_schema"] = json!({"type": "object", "required": ["done"]});
    let g = graph(doc.clone());
    let route = json!({"pick": "sub", "$route": "sub", "$message": "deep dive"});
    let ex = scripted(builder(g), vec![route.clone()], &Seen::default());
    let s = run_state(&ex, json!({"request": {"q": 2}}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let note = json!({"router": "r", "message": "deep dive"});
    // The child saw `request` and the message (its boundary's reads) and returned `done`.
    assert_eq!(
        user_state(&s.outcome()),
        json!({"request": {"q": 2}, "pick": "sub", "note": note,
               "done": {"sub": true, "note": note}})
    );
    let call = s
        .trace()
        .iter()
        .find(|i| i.kind == K::Call)
        .expect("a call item");
    assert_eq!(call.supervisor(), Some("root"));
    assert_eq!(call.source(), Some("r"));
    assert_eq!(call.target(), Some("sub"));
    assert_eq!(call.chain().cloned(), chain("r", 1, ChainTrigger::Router));
    assert_eq!(s.entries().get("sub"), Some(&1));
    // After the return the router's supervisor decides again (and stops: `done` exists).
    let kinds: Vec<K> = s.trace().to_items().iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [
            K::Decision,
            K::Dispatch,
            K::Call,
            K::Decision,
            K::Dispatch,
            K::Return,
            K::Decision,
            K::End
        ]
    );
    // The input schema applies: without `request` the call fails.
    let g = graph(doc);
    let ex = scripted(builder(g), vec![route], &Seen::default());
    let s = run_state(&ex, json!({}));
    assert_eq!(s.termination_reason(), Some(R::SubgraphInputInvalid));
}

#[test]
fn a_destination_failing_its_input_schema_is_an_invalid_chain_payload() {
    let mut doc = routed(json!({"destinations": ["a"]}), json!({"handler": "router"}));
    doc["nodes"]["a"]["reads"] = json!(["pick"]);
    doc["nodes"]["a"]["input_schema"] = json!({"type": "object", "required": ["pick"],
        "properties": {"pick": {"type": "string"}}});
    let g = graph(doc);
    let ex = scripted(
        builder(g),
        vec![json!({"pick": 5, "$route": "a"})],
        &Seen::default(),
    );
    let s = run_state(&ex, json!({}));
    assert_eq!(s.termination_reason(), Some(R::InvalidChainPayload));
    let msg = s.message().expect("a message");
    assert!(
        msg.contains("chain `r`: stage 0 `r` routed to stage 1 `a`") && msg.contains("/pick"),
        "{msg}"
    );
}

#[test]
fn may_answer_lets_a_router_end_its_level() {
    let g = graph(routed(
        json!({"destinations": ["a"], "may_answer": true}),
        json!({"handler": "router"}),
    ));
    let ex = scripted(
        builder(g),
        vec![json!({"pick": "myself", "$route": null})],
        &Seen::default(),
    );
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    assert_eq!(s.termination_reason(), Some(R::Terminal));
    assert_eq!(user_state(&s.outcome()), json!({"pick": "myself"}));
    let r = items_of(&s, "r")[0];
    assert_eq!(r.reason(), Some("answered ($route: null)"));
    let end = s.trace().iter().last().expect("an end item");
    assert_eq!(end.reason(), Some("router `r` answered"));
    // No `$route` at all is an answer too.
    let g = graph(routed(
        json!({"destinations": ["a"], "may_answer": true}),
        json!({"set": {"pick": "set"}}),
    ));
    let ex = scripted(builder(g), vec![json!({})], &Seen::default());
    let s = run_state(&ex, json!({}));
    assert_eq!(s.termination_reason(), Some(R::Terminal));
    assert_eq!(user_state(&s.outcome()), json!({"pick": "set"}));

    // Without `may_answer`, the same output is an invalid route.
    let g = graph(routed(
        json!({"destinations": ["a"], "may_answer": false}),
        json!({"handler": "router"}),
    ));
    let seen = Seen::default();
    let ex = scripted(
        builder(g),
        vec![json!({"pick": "myself", "$route": null})],
        &seen,
    );
    let s = run_state(&ex, json!({}));
    assert_eq!(s.termination_reason(), Some(R::InvalidRoute));
    assert_eq!(seen.lock().expect("not poisoned").len(), 2);
    assert_eq!(user_state(&s.outcome()), json!({}));
}

#[test]
fn a_pending_retry_and_call_serialize() {
    let g = graph(routed(
        json!({"destinations": ["a", "sub"]}),
        json!({"handler": "router"}),
    ));
    let ex = scripted(
        builder(g),
        vec![json!({"$route": "zzz"}), json!({"$route": "sub"})],
        &Seen::default(),
    );
    let mut state = ex
        .start(json!({"request": {}}))
        .expect("the input is valid");
    let rt = rt();
    let mut seen = Vec::new();
    while state.is_running() {
        if let Some(p) = state.pending() {
            let v = serde_json::to_value(p).expect("plain data");
            seen.push(v.as_object().and_then(|o| o.keys().next().cloned()));
            assert_eq!(
                &serde_json::from_value::<Pending>(v).expect("reads back"),
                p
            );
        }
        rt.block_on(ex.step(&mut state));
    }
    let seen: Vec<&str> = seen.iter().flatten().map(String::as_str).collect();
    assert!(
        seen.contains(&"retry") && seen.contains(&"call"),
        "{seen:?}"
    );
}

#[test]
fn a_python_router_gets_the_error_on_stdin() {
    // The first run names an unknown destination; the second, told why on stdin, routes
    // to `a` and keeps what it was told in `pick`.
    let program = r#"
import json, os, sys
m = json.load(sys.stdin)
if "error" not in m:
    json.dump({"$route": "nowhere"}, sys.stdout)
else:
    json.dump({"pick": {"error": m["error"], "attempt": m["attempt"], "step": m["step"],
                        "env": os.environ["PACTGRAPH_STEP"]},
               "$route": "a"}, sys.stdout)
"#;
    let g = graph(routed(
        json!({"destinations": ["a", "sub"]}),
        json!({"exec": {"argv": ["python3", "-c", program], "timeout_ms": 10000}}),
    ));
    let ex = builder(g)
        .node_handler("work", |_| async { Ok::<_, HandlerError>(writes(&[])) })
        .build()
        .expect("builds");
    let s = run_with_io(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let pick = &user_state(&s.outcome())["pick"];
    // A new step, whose call is its first attempt.
    assert_eq!(pick["attempt"], 1);
    assert_eq!(pick["step"], 1);
    assert_eq!(pick["env"], "1");
    let error = pick["error"]
        .as_str()
        .expect("the error reached the program");
    assert!(
        error.contains("\"nowhere\" (no node or subgraph)"),
        "{error}"
    );
    assert_eq!(user_state(&s.outcome())["done"], "a");
}

#[test]
fn the_shipped_router_triage_runs_end_to_end() {
    let g = support::runtime::graph_file("examples/workflows/router_triage.json");
    let ex = builder(g)
        .base_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows"))
        .build()
        .expect("builds");
    for (text, label, note) in [
        (
            "I was charged twice for my invoice",
            "billing",
            "Billing question: answer from the refund policy.",
        ),
        (
            "The export button crashes the app",
            "technical",
            "Not billing: investigate before answering.",
        ),
    ] {
        let s = run_with_io(&ex, json!({"ticket": {"text": text}}));
        assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
        assert_eq!(s.termination_reason(), Some(R::Terminal));
        let state = user_state(&s.outcome());
        assert_eq!(state["triage"]["label"], label);
        assert_eq!(
            state["route_note"],
            json!({"router": "triage", "message": note})
        );
        assert!(
            state[format!("{label}_answer")]["text"].is_string(),
            "{state:#}"
        );
        assert_eq!(state["closed"], true);
        let close = items_of(&s, "close")[0];
        assert_eq!(close.source(), Some("triage"));
    }
}
