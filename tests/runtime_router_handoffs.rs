//! Routers and handoffs (spec 5.3): the router's own handoff runs after its destination's
//! chain, nested routers pay their handoffs innermost first, and a destination with
//! advisors keeps the handoff it owes while a retried router skips its advisors.

mod support;

use std::sync::Arc;

use pactgraph::runtime::{
    Chain, ChainTrigger, HandlerError, NodeOutput, RunStatus, TraceKind as K,
};
use serde_json::json;
use support::router::{Seen, chain, items_of, routed, run_saved, run_state, scripted};
use support::runtime::{builder, graph, user_state, writes};

#[test]
fn the_routers_own_handoff_runs_after_the_destination_chain() {
    let mut doc = routed(
        json!({"destinations": ["a", "sub"]}),
        json!({"handler": "router"}),
    );
    doc["slices"]["after"] = json!({});
    doc["nodes"]["r"]["handoff"] = json!("h");
    doc["nodes"]["a"]["handoff"] = json!("b");
    doc["nodes"]["b"]["terminal"] = json!(true);
    doc["nodes"]["b"]["run"] = json!({"set": {"done": "b"}});
    doc["nodes"]["h"] = json!({"supervisor": "root", "writes": ["after"],
        "run": {"set": {"after": "h ran"}}});
    let g = graph(doc.clone());
    let ex = scripted(builder(g), vec![json!({"$route": "a"})], &Seen::default());
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let order: Vec<(&str, Option<Chain>)> = s
        .trace()
        .iter()
        .filter(|i| matches!(i.kind, K::Dispatch | K::Handoff))
        .map(|i| (i.target().unwrap_or_default(), i.chain().cloned()))
        .collect();
    assert_eq!(
        order,
        [
            ("r", chain("r", 0, ChainTrigger::Router)),
            ("a", chain("r", 1, ChainTrigger::Router)),
            ("b", chain("r", 2, ChainTrigger::Handoff)),
            // `b` is terminal, but the router's handoff is never bypassed.
            ("h", chain("r", 3, ChainTrigger::Handoff)),
        ]
    );
    let h = items_of(&s, "h")[0];
    assert_eq!(h.source(), Some("r"));
    assert_eq!(user_state(&s.outcome())["after"], "h ran");
    // `h` returns to `root`, which decides again.
    let after_h = s
        .trace()
        .iter()
        .skip_while(|i| i.target() != Some("h"))
        .nth(1)
        .expect("an item after h");
    assert_eq!(after_h.kind, K::Return);

    // A subgraph destination: the handoff runs after the call returns.
    let g = graph(doc);
    let ex = scripted(builder(g), vec![json!({"$route": "sub"})], &Seen::default());
    let s = run_state(&ex, json!({"request": {}}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let kinds: Vec<(K, &str)> = s
        .trace()
        .iter()
        .map(|i| (i.kind, i.target().unwrap_or_default()))
        .filter(|(k, _)| matches!(k, K::Dispatch | K::Handoff | K::Call | K::Return))
        .collect();
    assert_eq!(
        kinds,
        [
            (K::Dispatch, "r"),
            (K::Call, "sub"),
            (K::Dispatch, "work"),
            (K::Return, "root"),
            (K::Handoff, "h"),
            (K::Return, "root"),
        ]
    );
    assert_eq!(
        items_of(&s, "h")[0].chain().cloned(),
        chain("r", 2, ChainTrigger::Handoff)
    );
    assert_eq!(user_state(&s.outcome())["after"], "h ran");
    // Saved mid-call (the frame owes the handoff), the run ends the same.
    let saved = run_saved(&ex, json!({"request": {}}));
    assert_eq!(saved.trace().without_timing(), s.trace().without_timing());
}

#[test]
fn nested_routers_pay_their_handoffs_innermost_first() {
    let doc = json!({
        "workflow": "nested",
        "slices": {"log": {}, "done": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["r1"], "default": {"stop_global": {}}}},
        "nodes": {
            "r1": {"supervisor": "root", "triggers": [{"when": {"path": "/done", "exists": false}}],
                   "router": {"destinations": ["r2"]}, "handoff": "h1", "run": {"handler": "to_r2"}},
            "r2": {"supervisor": "root", "router": {"destinations": ["d"], "may_answer": true},
                   "handoff": "h2", "run": {"handler": "r2"}},
            "d": {"supervisor": "root", "run": {"set": {}}},
            "h2": {"supervisor": "root", "run": {"set": {}}},
            "h1": {"supervisor": "root", "writes": ["done"], "run": {"set": {"done": true}}}
        }
    });
    for (r2, expect) in [
        (json!({"$route": "d"}), vec!["r1", "r2", "d", "h2", "h1"]),
        // `r2` answers: its own handoff is not owed (it routed nowhere), `r1`'s still is.
        (json!({"$route": null}), vec!["r1", "r2", "h1"]),
    ] {
        let r2 = Arc::new(r2);
        let ex = builder(graph(doc.clone()))
            .node_handler("to_r2", |_| async {
                Ok::<_, HandlerError>(NodeOutput::new(writes(&[])).with_route("r2"))
            })
            .node_handler("r2", move |_| {
                let out = r2.as_object().cloned().unwrap_or_default();
                async move { Ok::<_, HandlerError>(out) }
            })
            .build()
            .expect("builds");
        let s = run_state(&ex, json!({}));
        assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
        let ran: Vec<&str> = s
            .trace()
            .iter()
            .filter(|i| matches!(i.kind, K::Dispatch | K::Handoff))
            .filter_map(|i| i.target())
            .collect();
        assert_eq!(ran, expect);
        let h1 = items_of(&s, "h1")[0];
        assert_eq!(h1.source(), Some("r1"));
    }
}

#[test]
fn a_destination_with_advisors_keeps_the_owed_handoff_and_a_retried_router_skips_its_advisors() {
    let doc = json!({
        "workflow": "advised_route",
        "slices": {"advice": {}, "done": {}, "after": {}, "scratch": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["r"], "default": {"stop_global": {}}}},
        "nodes": {
            "r": {"supervisor": "root", "reads": ["advice"],
                  "triggers": [{"when": {"path": "/done", "exists": false}}],
                  "router": {"destinations": ["d"]}, "handoff": "h",
                  "advisors": {"members": ["m"], "slice": "advice"},
                  "run": {"handler": "router"}},
            "d": {"supervisor": "root", "reads": ["advice"], "writes": ["done"],
                  "advisors": {"members": ["m"], "slice": "advice"},
                  "run": {"set": {"done": true}}},
            "m": {"supervisor": "root", "writes": ["scratch"], "run": {"set": {"scratch": 1}}},
            "h": {"supervisor": "root", "writes": ["after"], "run": {"set": {"after": true}}}
        }
    });
    let seen = Seen::default();
    let ex = scripted(
        builder(graph(doc)),
        vec![json!({"$route": "zzz"}), json!({"$route": "d"})],
        &seen,
    );
    let s = run_state(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    assert_eq!(user_state(&s.outcome())["after"], true);
    let kinds: Vec<(K, &str)> = s
        .trace()
        .iter()
        .filter(|i| !matches!(i.kind, K::Decision | K::Advisor | K::End))
        .map(|i| (i.kind, i.target().unwrap_or_default()))
        .collect();
    assert_eq!(
        kinds,
        [
            (K::Fork, "r"),
            (K::Join, "r"),
            (K::Dispatch, "r"),
            // The router runs again without its advisors.
            (K::Dispatch, "r"),
            (K::Fork, "d"),
            (K::Join, "d"),
            (K::Handoff, "d"),
            // `d` ran after its advisors, and the router's handoff was still owed.
            (K::Handoff, "h"),
            (K::Return, "root"),
        ]
    );
    assert_eq!(seen.lock().expect("not poisoned").len(), 2);
}
