//! Agent tools called from inside a fork of sessions (ADR 0046): an advisor agent or a
//! team member whose reply calls a tool node whose `run` is an agent. The agent tool's
//! session runs inside the fork, advancing with the fork's steps (its calls the fork
//! member's), and its exit answers the advisor's or member's call. Through the library
//! against the scripted Chat Completions server on loopback (real HTTP).
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use chat_server::{ChatServer, Reply};
use pactgraph::runtime::{RunStatus, ToolCaller, TraceKind as K};
use serde_json::{Value, json};
use support::runtime::{builder, graph};

/// Agent tool `helper` (prompt `Helper task {{ input.q }}`, the needle the server routes
/// its requests by), which may call `fixed` (a `set` tool).
fn helper_nodes(sup: &str) -> Value {
    json!({
        "helper": {"supervisor": sup,
                   "run": {"agent": {"prompt": "Helper task {{ input.q }}",
                                     "tools": ["fixed"], "max_turns": 3}},
                   "tool": {"description": "Helps.",
                            "parameters": {"type": "object",
                                           "properties": {"q": {"type": "string"}},
                                           "required": ["q"]}}},
        "fixed": {"supervisor": sup, "run": {"set": {"style": "plain"}},
                  "tool": {"description": "The house style.",
                           "parameters": {"type": "object", "properties": {}}}}
    })
}

fn models(base_url: &str) -> Value {
    json!({"default": {"base_url": base_url, "model": "m",
                       "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}})
}

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::calls(&[(id, name, args)])
}

/// Proves: an advisor agent (`scout`) calling agent tool `helper` gets its answer: the
/// helper's session runs inside the advisors' fork over three steps (its first model
/// call, its own `set` call, its exit), then `scout`'s next request holds the helper's
/// `final_report` result as the `tool` message of its call; `scout`'s report reaches the
/// primary; the helper's session records the call it answered.
#[test]
fn an_advisor_agent_calls_an_agent_tool() {
    let rt = chat_server::runtime(2);
    let server = rt.block_on(ChatServer::start([]));
    server.route("You are scout.", call("c", "helper", json!({"q": "tides"})));
    server.route("Helper task tides", call("hf", "fixed", json!({})));
    server.route(
        "Helper task tides",
        call("he", "final_report", json!({"result": {"facts": ["moon"]}})),
    );
    server.route(
        "You are scout.",
        call("e", "final_report", json!({"report": "The moon."})),
    );
    server.route(
        "You decide.",
        call("d", "final_report", json!({"decision": "ship"})),
    );
    let mut nodes = helper_nodes("desk");
    nodes["scout"] = json!({"supervisor": "desk", "reads": ["draft"],
                            "run": {"agent": {"instructions": "You are scout.",
                                              "prompt": "{{ draft }}",
                                              "tools": ["helper"], "max_turns": 3}}});
    nodes["reviewer"] = json!({"supervisor": "desk", "reads": ["draft", "advice"],
                               "writes": ["decision"],
                               "advisors": {"members": ["scout"], "slice": "advice"},
                               "run": {"agent": {"instructions": "You decide."}},
                               "triggers": [{"when": {"path": "/decision", "exists": false}}]});
    let doc = json!({
        "workflow": "advisor-agent-tool",
        "slices": {"draft": {}, "advice": {}, "decision": {"schema": {"type": "string"}}},
        "models": models(&server.base_url()),
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["reviewer"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": nodes
    });
    let ex = builder(graph(doc)).build().expect("the executor builds");
    let mut run = ex.start(json!({"draft": "Tides?"})).expect("starts");
    rt.block_on(ex.run_in_place(&mut run));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["decision"], "ship");
    let scout = server.requests_with("You are scout.");
    let helper = server.requests_with("Helper task tides");
    assert_eq!((scout.len(), helper.len()), (2, 2));
    assert_eq!(
        scout[1]["messages"][3],
        json!({"role": "tool", "tool_call_id": "c",
               "content": r#"{"result":{"facts":["moon"]}}"#})
    );
    assert_eq!(
        helper[1]["messages"][2],
        json!({"role": "tool", "tool_call_id": "hf", "content": r#"{"style":"plain"}"#}),
        "the helper's own tool call, answered in the fork"
    );
    let sessions = run.sessions();
    let h = sessions
        .iter()
        .find(|s| &*s.node == "helper")
        .expect("the helper's session");
    let scout_at = sessions
        .iter()
        .position(|s| &*s.node == "scout")
        .expect("scout's session");
    assert_eq!(
        h.caller,
        Some(ToolCaller {
            session: u32::try_from(scout_at).expect("small"),
            turn: 1,
            call: "c".into()
        })
    );
    let items = &run.trace().to_items();
    let answered = items
        .iter()
        .find(|i| i.kind == K::ToolCall && i.target.as_deref() == Some("helper"))
        .expect("the helper's answer");
    assert_eq!(answered.source.as_deref(), Some("scout"));
    assert_eq!(answered.reason.as_deref(), Some("call c: ok"));
    let advice = run.state()["advice"].to_string();
    assert!(advice.contains("The moon."), "{advice}");
}

/// Proves: a team member (`critic`) calling agent tool `helper` gets its answer within
/// the team: the cycle's tool round repeats while the helper's session is under way
/// (its model call, its `set` call, its exit), the lead's turn comes after, and the
/// member's next turn holds the helper's result as its call's `tool` message.
#[test]
fn a_team_member_calls_an_agent_tool() {
    let rt = chat_server::runtime(2);
    let server = rt.block_on(ChatServer::start([]));
    server.route(
        "You are critic.",
        call("c", "helper", json!({"q": "style"})),
    );
    server.route("Helper task style", call("hf", "fixed", json!({})));
    server.route(
        "Helper task style",
        call("he", "final_report", json!({"result": "plain"})),
    );
    server.route(
        "You are chair.",
        call("b", "team_broadcast", json!({"message": "critic: more?"})),
    );
    server.route(
        "You are critic.",
        call(
            "x",
            "team_broadcast",
            json!({"message": "Use plain.", "exit": true}),
        ),
    );
    server.route(
        "You are chair.",
        call("f", "final_report", json!({"decision": "plain"})),
    );
    let agent = |id: &str, tools: Value| {
        json!({"supervisor": "desk", "reads": ["draft"],
               "run": {"agent": {"instructions": format!("You are {id}."),
                                 "prompt": "Draft: {{ draft }}", "tools": tools}}})
    };
    let mut nodes = helper_nodes("desk");
    nodes["critic"] = agent("critic", json!(["helper"]));
    nodes["chair"] = agent("chair", json!([]));
    nodes["panel"] = json!({"supervisor": "desk", "reads": ["draft"], "writes": ["decision"],
                            "team": {"members": ["critic"], "lead": "chair", "slice": "team",
                                     "member_max_turns": 3, "lead_max_turns": 2},
                            "triggers": [{"when": {"path": "/decision", "exists": false}}]});
    let doc = json!({
        "workflow": "team-agent-tool",
        "slices": {"draft": {}, "team": {}, "decision": {"schema": {"type": "string"}}},
        "models": models(&server.base_url()),
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["panel"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": nodes
    });
    let ex = builder(graph(doc)).build().expect("the executor builds");
    let mut run = ex
        .start(json!({"draft": "Simple is best."}))
        .expect("starts");
    rt.block_on(ex.run_in_place(&mut run));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["decision"], "plain");
    let critic = server.requests_with("You are critic.");
    let helper = server.requests_with("Helper task style");
    let chair = server.requests_with("You are chair.");
    assert_eq!((critic.len(), helper.len(), chair.len()), (2, 2, 2));
    assert_eq!(
        critic[1]["messages"][4],
        json!({"role": "tool", "tool_call_id": "c", "content": r#"{"result":"plain"}"#})
    );
    let order: Vec<&str> = server
        .requests()
        .iter()
        .map(|r| {
            if r.raw_body.contains("You are critic.") {
                "critic"
            } else if r.raw_body.contains("Helper task") {
                "helper"
            } else {
                "chair"
            }
        })
        .collect();
    assert_eq!(
        order,
        ["critic", "helper", "helper", "chair", "critic", "chair"],
        "the helper's session ends within the critic's cycle, before the lead's turn"
    );
}
