//! Agent tools asked in one reply run concurrently (ADR 0046), through the library
//! against the scripted Chat Completions server on loopback (real HTTP): their sessions
//! advance together, one call each per step, the reply's tool node calls in the first
//! step with them; the caller gets the results in its reply's order.
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use std::time::Duration;

use chat_server::{ChatServer, Reply};
use pactgraph::runtime::{RunState, RunStatus, TraceKind as K};
use serde_json::{Value, json};
use support::runtime::{builder, graph};

/// Root dispatches agent `agent` (writes `answer`), which may call `fixed` (a `set`
/// tool) and two agent tools, `alpha` (which may call `fixed` itself) and `beta`, each
/// taking `{"q"}`; their prompts hold the words the server routes their requests by.
fn doc(base_url: &str) -> Value {
    let params = json!({"type": "object", "properties": {"q": {"type": "string"}},
                        "required": ["q"], "additionalProperties": false});
    json!({
        "workflow": "agent-tools-concurrent",
        "slices": {"answer": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "scripted-model",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "budgets": {"max_steps": 30},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "agent": {"supervisor": "root", "writes": ["answer"],
                      "run": {"agent": {"prompt": "go", "tools": ["fixed", "alpha", "beta"]}},
                      "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
            "fixed": {"supervisor": "root", "run": {"set": {"status": "shipped"}},
                      "tool": {"description": "Always the same.",
                               "parameters": {"type": "object", "properties": {}}}},
            "alpha": {"supervisor": "root",
                      "run": {"agent": {"prompt": "Alpha task {{ input.q }}",
                                        "tools": ["fixed"], "max_turns": 3}},
                      "tool": {"description": "Alpha.", "parameters": params.clone()}},
            "beta": {"supervisor": "root",
                     "run": {"agent": {"prompt": "Beta task {{ input.q }}", "max_turns": 3}},
                     "tool": {"description": "Beta.", "parameters": params}}
        }
    })
}

fn run(rt: &tokio::runtime::Runtime, doc: Value) -> RunState {
    let ex = builder(graph(doc)).build().expect("the executor builds");
    let mut state = ex.start(json!({})).expect("a valid input");
    rt.block_on(ex.run_in_place(&mut state));
    state
}

/// How long a held reply waits for the other agent tool's request: far more than a
/// concurrent request needs, and the test's bound when the calls are sequential.
const HOLD: Duration = Duration::from_secs(10);

/// Proves: two agent tools asked in one reply run at once: the server holds each one's
/// first request until both have arrived (3 requests with the caller's), answering HTTP
/// 500 (a failed agent tool, so a failed assertion) if they came one after the other;
/// the reply's `set` call is answered in that same step; `alpha` goes on for two more
/// steps (its own tool call, its exit) while `beta`, done at its first call, waits; the
/// caller's next request holds the three results in its reply's order although they
/// were stored in the order they came (`fixed`, `beta`, `alpha`); every call is one
/// step and one item, the agent tools' answers are `tool_call` items of the caller at
/// their place in the reply.
#[test]
fn two_agent_tools_of_one_reply_run_at_once_and_answer_in_its_order() {
    let rt = chat_server::runtime(2);
    let server = rt.block_on(ChatServer::start([
        Reply::calls(&[
            ("a1", "alpha", json!({"q": "x"})),
            ("f1", "fixed", json!({})),
            ("b1", "beta", json!({"q": "y"})),
        ]),
        Reply::calls(&[("e", "final_report", json!({"answer": "both"}))]),
    ]));
    server.route(
        "Alpha task",
        Reply::calls(&[("af", "fixed", json!({}))]).hold_until(3, HOLD),
    );
    server.route(
        "Alpha task",
        Reply::calls(&[("ae", "final_report", json!({"result": "A"}))]),
    );
    server.route(
        "Beta task",
        Reply::calls(&[("be", "final_report", json!({"result": "B"}))]).hold_until(3, HOLD),
    );
    let run = run(&rt, doc(&server.base_url()));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["answer"], "both");
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "each model call made once");
    let back = &requests[4].body["messages"];
    let tail: Vec<(&str, &str)> = back.as_array().expect("messages")[2..]
        .iter()
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default(),
                m["content"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        tail,
        [
            ("a1", r#"{"result":"A"}"#),
            ("f1", r#"{"status":"shipped"}"#),
            ("b1", r#"{"result":"B"}"#)
        ],
        "the results in the reply's order"
    );
    let stored: Vec<Option<&str>> = run.sessions()[0].messages[2..]
        .iter()
        .map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(stored, [Some("f1"), Some("b1"), Some("a1"), None]);
    let items = &run.trace().to_items();
    let kinds: Vec<(K, Option<&str>, u32)> = items
        .iter()
        .map(|i| (i.kind, i.source.as_deref(), i.step))
        .collect();
    assert_eq!(
        kinds[..10],
        [
            (K::Decision, None, 0),
            (K::ModelCall, Some("agent"), 1),
            // One commit: the `set` call and both agent tools' first calls.
            (K::ToolCall, Some("agent"), 2),
            (K::ModelCall, Some("alpha"), 3),
            (K::ModelCall, Some("beta"), 4),
            (K::ToolCall, Some("agent"), 4),
            // `alpha` alone: its own tool call, then its exit.
            (K::ToolCall, Some("alpha"), 5),
            (K::ModelCall, Some("alpha"), 6),
            (K::ToolCall, Some("agent"), 6),
            (K::ModelCall, Some("agent"), 7),
        ]
    );
    let place = |i: usize| {
        let t = items[i].tool_call().expect("the call's fields");
        (&*t.tool, &*t.call_id, t.index)
    };
    assert_eq!(place(2), ("fixed", "f1", 1));
    assert_eq!(place(5), ("beta", "b1", 2));
    assert_eq!(place(8), ("alpha", "a1", 0));
    assert_eq!(run.steps(), 7, "five model calls and two `set` calls");
}

/// Proves: an agent tool failing for good (its model answers HTTP 401) while another
/// runs beside it is its caller's tool error, naming the tool, the model and the
/// status; the other agent tool's result still arrives and the caller completes.
#[test]
fn an_agent_tool_failing_beside_another_is_its_callers_error() {
    let rt = chat_server::runtime(2);
    let server = rt.block_on(ChatServer::start([
        Reply::calls(&[
            ("a1", "alpha", json!({"q": "x"})),
            ("b1", "beta", json!({"q": "y"})),
        ]),
        Reply::calls(&[("e", "final_report", json!({"answer": "half"}))]),
    ]));
    server.route("Alpha task", Reply::error(401, "bad key"));
    server.route(
        "Beta task",
        Reply::calls(&[("be", "final_report", json!({"result": "B"}))]),
    );
    let run = run(&rt, doc(&server.base_url()));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    let back = &server.requests()[3].body["messages"];
    let alpha = back[2]["content"].as_str().unwrap_or_default();
    assert_eq!(back[2]["tool_call_id"], "a1");
    assert!(
        alpha.contains("agent tool `alpha` (model `default`)")
            && alpha.contains("scripted-model")
            && alpha.contains("401")
            && !alpha.contains("agent node"),
        "{alpha}"
    );
    assert_eq!(back[3]["content"], r#"{"result":"B"}"#);
}
