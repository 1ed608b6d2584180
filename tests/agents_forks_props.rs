//! For all forks of agent advisors (1 to 3 advisors, each calling a tool 0 to 2 times
//! before it reports), a run saved and loaded again (its `RunState` JSON) after every
//! step ends exactly as the same run taken in one go: the same trace, conversations and
//! reports, and the scripted server asked the same calls (no committed call made again).
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use chat_server::{ChatServer, Reply};
use pactgraph::runtime::{RunState, RunStatus};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::runtime::{builder, graph};

/// A `set` primary advised by agents `a0..`, each told `You are aI.` (the server's
/// needle); `fixed` is a `set` tool they may call.
fn doc(base_url: &str, advisors: usize) -> Value {
    let ids: Vec<String> = (0..advisors).map(|i| format!("a{i}")).collect();
    let mut nodes = serde_json::Map::new();
    for id in &ids {
        nodes.insert(
            id.clone(),
            json!({"supervisor": "desk", "reads": ["draft"],
                   "run": {"agent": {"instructions": format!("You are {id}."),
                                     "prompt": "{{ draft }}", "tools": ["fixed"],
                                     "max_turns": 4}}}),
        );
    }
    nodes.insert(
        "primary".into(),
        json!({"supervisor": "desk", "reads": ["draft", "advice"], "writes": ["out"],
               "run": {"set": {"out": 1}}, "advisors": {"members": ids, "slice": "advice"},
               "triggers": [{"when": {"path": "/out", "exists": false}}]}),
    );
    nodes.insert(
        "fixed".into(),
        json!({"supervisor": "desk", "run": {"set": {"n": 7}},
               "tool": {"description": "A constant.",
                        "parameters": {"type": "object", "properties": {}}}}),
    );
    json!({
        "workflow": "fork-props",
        "slices": {"draft": {}, "advice": {}, "out": {}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["primary"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": nodes
    })
}

/// Scripts one run: advisor `i` calls `fixed` `tools[i]` times, then reports.
fn script(server: &ChatServer, tools: &[usize]) {
    for (i, &n) in tools.iter().enumerate() {
        let needle = format!("You are a{i}.");
        for k in 0..n {
            server.route(
                &needle,
                Reply::tool_calls(&[(&format!("t{k}"), "fixed", "{}")]),
            );
        }
        let report = json!({"report": format!("a{i} after {n} tool call(s)")}).to_string();
        server.route(
            &needle,
            Reply::tool_calls(&[("r", "final_report", &report)]),
        );
    }
}

/// What must be the same in both runs (run ids and nonces differ between runs).
fn observed(run: &RunState) -> Value {
    let trace: Vec<Value> = run
        .trace()
        .iter()
        .map(|i| json!([i.kind, i.step, i.source(), i.target(), i.reason()]))
        .collect();
    let sessions: Vec<Value> = run
        .sessions()
        .iter()
        .map(|s| serde_json::to_value(&s.messages).expect("messages serialize"))
        .collect();
    json!({"status": format!("{:?}", run.status()), "steps": run.steps(), "trace": trace,
           "sessions": sessions, "reports": run.state()["advice"]["reports"]})
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn a_fork_saved_after_every_step_ends_as_the_run_taken_in_one_go(
        tools in prop::collection::vec(0usize..3, 1..4)
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let server = rt.block_on(ChatServer::start([]));
        let ex = builder(graph(doc(&server.base_url(), tools.len())))
            .build()
            .expect("the executor builds");
        let input = json!({"draft": "We ship Monday."});

        script(&server, &tools);
        let mut whole = ex.start(input.clone()).expect("starts");
        rt.block_on(ex.run_in_place(&mut whole));
        prop_assert_eq!(whole.status(), RunStatus::Completed, "{:?}", whole.message());
        let asked = server.requests().len();
        let calls: usize = tools.iter().map(|n| n + 1).sum();
        prop_assert_eq!(asked, calls, "one request per model call");

        script(&server, &tools);
        let mut saved = ex.start(input).expect("starts");
        loop {
            let status = rt.block_on(ex.step(&mut saved));
            saved = RunState::from_json(saved.to_json()).expect("a saved run loads");
            if status != RunStatus::Running {
                break;
            }
        }
        prop_assert_eq!(server.requests().len(), 2 * calls, "no call made twice");
        prop_assert_eq!(observed(&saved), observed(&whole));
    }
}
