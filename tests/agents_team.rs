//! Teams whose members and lead are agents (brief 5.5, 10.2), through the library against
//! the scripted Chat Completions server on loopback (real HTTP): each keeps one session
//! across the team's cycles (every turn appends its inbox as a user message), members
//! exit with `team_broadcast` `{"message", "exit"}`, the lead starts another cycle with
//! `team_broadcast` `{"message"}` or ends the team with `final_report` (the team node's
//! writes), and a member's tool calls are answered within its cycle.
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use chat_server::{ChatServer, Reply};
use pactgraph::runtime::{RunStatus, TraceKind as K};
use serde_json::{Value, json};
use support::runtime::{builder, graph};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Team node `panel` (writes `decision`, a string) with agent members `critic` and
/// `editor` and agent lead `chair`, each told `You are ID.` (the needle the server
/// routes their replies by); `fixed` is a `set` tool the members may call.
fn doc(base_url: &str) -> Value {
    let agent = |id: &str| {
        json!({"supervisor": "desk", "reads": ["draft"],
               "run": {"agent": {"instructions": format!("You are {id}."),
                                 "prompt": "Draft: {{ draft }}", "tools": ["fixed"]}}})
    };
    json!({
        "workflow": "agent-team",
        "slices": {"draft": {}, "team": {}, "decision": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["panel"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "panel": {"supervisor": "desk", "reads": ["draft"], "writes": ["decision"],
                      "team": {"members": ["critic", "editor"], "lead": "chair",
                               "slice": "team", "member_max_turns": 3, "lead_max_turns": 2},
                      "triggers": [{"when": {"path": "/decision", "exists": false}}]},
            "critic": agent("critic"),
            "editor": agent("editor"),
            "chair": agent("chair"),
            "fixed": {"supervisor": "desk", "run": {"set": {"style": "plain"}},
                      "tool": {"description": "The house style.",
                               "parameters": {"type": "object", "properties": {}}}}
        }
    })
}

fn call(name: &str, args: Value) -> Reply {
    Reply::tool_calls(&[("c", name, &args.to_string())])
}

fn broadcast(message: &str, exit: bool) -> Reply {
    call("team_broadcast", json!({"message": message, "exit": exit}))
}

/// The requests whose body holds `id`'s system message, in arrival order.
fn requests_of(server: &ChatServer, id: &str) -> Vec<Value> {
    let needle = format!("You are {id}.");
    server
        .requests()
        .into_iter()
        .filter(|r| r.raw_body.contains(&needle))
        .map(|r| r.body)
        .collect()
}

/// Proves, over two cycles: each participant's requests are one growing conversation
/// (every earlier message, then the new inbox as a user message); `editor` leaves with
/// `exit: true` after one turn and is asked nothing more; `critic`'s tool call is
/// answered in its cycle's second round, before the lead's turn, and its next turn
/// sees the result; the lead's broadcast reaches the members and its final turn is sent
/// with `final_report` forced; its `final_report` is the team node's write.
#[test]
fn a_team_of_agents_keeps_one_conversation_each_across_cycles() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([]));
    server.route("You are critic.", call("fixed", json!({})));
    server.route(
        "You are editor.",
        broadcast("Say `plain` not `simple`.", true),
    );
    server.route(
        "You are chair.",
        call("team_broadcast", json!({"message": "critic: more?"})),
    );
    server.route(
        "You are critic.",
        broadcast("The claim in line 2 is weak.", false),
    );
    server.route(
        "You are chair.",
        call("final_report", json!({"decision": "revise"})),
    );
    let ex = builder(graph(doc(&server.base_url())))
        .build()
        .expect("the executor builds");
    let mut state = ex
        .start(json!({"draft": "Simple is best."}))
        .expect("starts");
    rt.block_on(ex.run_in_place(&mut state));
    assert_eq!(
        state.status(),
        RunStatus::Completed,
        "{:?}",
        state.message()
    );
    assert_eq!(state.state()["decision"], "revise");

    let (critic, editor, chair) = (
        requests_of(&server, "critic"),
        requests_of(&server, "editor"),
        requests_of(&server, "chair"),
    );
    assert_eq!((critic.len(), editor.len(), chair.len()), (2, 1, 2));
    for (who, reqs) in [("critic", &critic), ("chair", &chair)] {
        let first = reqs[0]["messages"].as_array().expect("messages");
        let second = reqs[1]["messages"].as_array().expect("messages");
        assert_eq!(first.len(), 3, "{who}: system, prompt, inbox");
        assert_eq!(&second[..3], &first[..], "{who}: one conversation");
        assert_eq!(second[3]["role"], "assistant", "{who}");
        assert_eq!(second[4]["role"], "tool", "{who}: its call answered");
        assert_eq!(second[5]["role"], "user", "{who}: the next inbox");
        assert_eq!(second.len(), 6, "{who}");
    }
    // critic's tool call got the tool's result; the chair's broadcast got `ok`.
    assert_eq!(critic[1]["messages"][4]["content"], r#"{"style":"plain"}"#);
    assert_eq!(chair[1]["messages"][4]["content"], r#"{"ok":true}"#);
    // critic's second inbox: editor's exit and the chair's broadcast.
    let inbox = critic[1]["messages"][5]["content"].as_str().expect("text");
    assert!(inbox.contains("Say `plain` not `simple`."), "{inbox}");
    assert!(inbox.contains("critic: more?"), "{inbox}");
    // The chair's first inbox holds editor's exit; its second turn is final and forced.
    let first_inbox = chair[0]["messages"][2]["content"].as_str().expect("text");
    assert!(first_inbox.contains(r#""type":"exit""#), "{first_inbox}");
    assert_eq!(
        chair[1]["tool_choice"],
        json!({"type": "function", "function": {"name": "final_report"}})
    );
    let names = |r: &Value| -> Vec<String> {
        r["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| {
                t["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(names(&editor[0]), ["team_broadcast", "fixed"]);
    assert_eq!(
        names(&chair[0]),
        ["final_report", "team_broadcast", "fixed"]
    );

    let team = &state.state()["team"];
    assert_eq!(team["members"]["editor"]["status"], "exited");
    assert_eq!(
        team["members"]["critic"],
        json!({"status": "cancelled", "turns": 2})
    );
    assert_eq!(team["lead_turns"], 2);
    let kinds: Vec<K> = state.trace().to_items().iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [
            K::Decision,
            K::TeamCycle,
            K::ModelCall, // critic: calls `fixed`
            K::TeamTurn,
            K::ModelCall, // editor: exits
            K::TeamTurn,
            K::ToolCall,  // critic's tool call, the cycle's second round
            K::ModelCall, // chair: broadcasts
            K::TeamTurn,
            K::TeamCycle,
            K::ModelCall, // critic: broadcasts
            K::TeamTurn,
            K::ModelCall, // chair: final_report
            K::TeamTurn,
            K::Dispatch,
            K::Return,
            K::Decision,
            K::End
        ]
    );
    // Five model calls and one tool call, each a step (the team node's run counts none
    // of its own: its step is the lead's final model call).
    assert_eq!(state.steps(), 6);
    assert_eq!(state.sessions().len(), 3, "one session per participant");
}
