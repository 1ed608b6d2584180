//! Agent sessions through `pactgraph run` against a real store and the scripted Chat
//! Completions server on loopback: a run killed (SIGKILL) while the server holds the
//! second turn resumes from its last committed turn (the first turn and the tool program
//! never run again); `runs cancel` aborts the request in flight; the API key appears
//! nowhere but in the request's `Authorization` header; `runs show --messages` prints
//! each session; the shipped examples of a supervisor's policy agent and of an agent
//! tool run.
#![cfg(all(target_os = "linux", feature = "cli", feature = "agents"))]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use std::time::Duration;

use chat_server::{ChatServer, Reply};
use serde_json::{Value, json};
use support::cli::{Bench, all_files, signal};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pactgraph")
}

/// A unique API key: if it appears anywhere, it leaked.
const KEY: &str = "sk-pactgraph-test-7f3a91c2e5d84b06";
const KEY_ENV: &str = "PACTGRAPH_AGENTS_TEST_KEY";

/// The tool program: appends `STEP ATTEMPT ARGUMENTS` to `side.txt` and answers
/// `{"noted": ARGUMENTS.text}`.
const NOTE_PY: &str = r#"import json, os, sys
req = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "side.txt"), "a") as f:
    f.write(f"{req['step']} {req['attempt']} {json.dumps(req['input'])}\n")
print(json.dumps({"noted": req["input"]["text"]}))
"#;

fn workflow(base_url: &str) -> String {
    json!({
        "workflow": "agent-cli",
        "slices": {"question": {}, "answer": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "scripted-model",
                               "api_key_env": KEY_ENV, "max_retries": 0}},
        "budgets": {"max_steps": 20},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "agent": {"supervisor": "root", "reads": ["question"], "writes": ["answer"],
                      "run": {"agent": {"prompt": "{{ question }}", "tools": ["note"]}},
                      "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
            "note": {"supervisor": "root",
                     "run": {"exec": {"argv": ["python3", "note.py"]}},
                     "tool": {"description": "Takes a note.",
                              "parameters": {"type": "object",
                                             "properties": {"text": {"type": "string"}},
                                             "required": ["text"],
                                             "additionalProperties": false}}}
        }
    })
    .to_string()
}

fn server_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn side(b: &Bench) -> Vec<String> {
    std::fs::read_to_string(b.dir.join("side.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Proves: SIGKILL of `pactgraph run` while the server holds the second turn, then
/// `runs resume`: the server saw the first turn exactly once, the tool program ran once,
/// the second turn is asked again with the same conversation, and the run completes.
/// The key is sent as `Authorization: Bearer` and appears in no output, trace or store
/// file.
#[test]
fn a_run_killed_mid_session_resumes_from_its_last_committed_turn() {
    let rt = server_rt();
    let server = rt.block_on(ChatServer::start([
        Reply::tool_calls(&[("call_1", "note", r#"{"text": "remember me"}"#)]),
        Reply::hang(),
    ]));
    for b in Bench::each(bin().as_ref()) {
        std::fs::remove_file(b.dir.join("side.txt")).ok();
        let before = server.requests().len();
        b.file("note.py", NOTE_PY);
        let wf = b.file("wf.json", &workflow(&server.base_url()));
        let mut child = b
            .command(&["run", wf.to_str().expect("utf-8"), "--name", "a"])
            .env(KEY_ENV, KEY)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the binary starts");
        assert!(
            rt.block_on(server.wait_requests(before + 2, Duration::from_secs(30))),
            "the second turn arrives"
        );
        signal(&child, "KILL");
        child.wait().expect("the process ends");
        assert_eq!(side(&b).len(), 1, "the tool ran before the kill");
        server.push(Reply::tool_calls(&[(
            "call_2",
            "final_report",
            r#"{"answer": "noted"}"#,
        )]));
        let r = b
            .command(&["runs", "resume", "a", "--quiet"])
            .env(KEY_ENV, KEY)
            .output()
            .expect("runs resume");
        let (out, err) = (
            String::from_utf8_lossy(&r.stdout).into_owned(),
            String::from_utf8_lossy(&r.stderr).into_owned(),
        );
        assert_eq!(r.status.code(), Some(0), "{out}\n{err}");
        let requests = &server.requests()[before..];
        assert_eq!(requests.len(), 3, "turn 1, turn 2 (killed), turn 2 again");
        let first_turns = requests
            .iter()
            .filter(|r| r.body["messages"].as_array().map(Vec::len) == Some(1))
            .count();
        assert_eq!(first_turns, 1, "the first turn was never asked again");
        assert_eq!(requests[1].body["messages"], requests[2].body["messages"]);
        assert_eq!(
            requests[2].body["messages"][2],
            json!({"role": "tool", "content": r#"{"noted":"remember me"}"#,
                   "tool_call_id": "call_1"})
        );
        for r in requests {
            assert_eq!(
                r.header("authorization"),
                Some(format!("Bearer {KEY}").as_str())
            );
        }
        let lines = side(&b);
        assert_eq!(
            lines,
            [r#"1 1 {"text": "remember me"}"#],
            "the tool ran once"
        );
        let shown = b.show("a");
        assert_eq!(shown["run"]["status"], "completed");
        assert_eq!(shown["state"]["answer"], "noted");
        let kinds: Vec<&str> = shown["trace"]
            .as_array()
            .expect("trace")
            .iter()
            .filter_map(|i| i["kind"].as_str())
            .filter(|k| k.ends_with("_call"))
            .collect();
        assert_eq!(kinds, ["model_call", "tool_call", "model_call"]);
        let messages = b.run(&["runs", "show", "a", "--messages"]);
        assert_eq!(messages.code, 0, "{}", messages.err);
        assert!(
            messages
                .out
                .contains("session 0: node `agent` (visit 1, model `default`, 4 message(s))"),
            "{}",
            messages.out
        );
        assert!(
            messages
                .out
                .contains("-> note [call_1] {\"text\": \"remember me\"}")
        );
        let json = b.run(&["runs", "show", "a", "--messages", "--format", "json"]);
        assert_eq!(
            json.json()["sessions"][0]["messages"]
                .as_array()
                .map(Vec::len),
            Some(4)
        );
        // The key: nowhere but the Authorization header.
        let shown_text = shown.to_string();
        for (what, text) in [
            ("stdout", &out),
            ("stderr", &err),
            ("runs show", &shown_text),
            ("runs show --messages", &messages.out),
            ("store files", &all_files(&b.dir)),
        ] {
            assert!(!text.contains(KEY), "the key leaked into {what}");
        }
        for r in requests {
            assert!(!r.raw_body.contains(KEY), "the key is in a request body");
        }
        // The next bench starts with a fresh script.
        server.push(Reply::tool_calls(&[(
            "call_1",
            "note",
            r#"{"text": "remember me"}"#,
        )]));
        server.push(Reply::hang());
    }
}

/// Proves: `runs cancel` of a run whose agent waits on the model aborts the request in
/// flight (the server sees the connection closed) and stops the run `cancelled`.
#[test]
fn runs_cancel_aborts_the_model_request_in_flight() {
    let rt = server_rt();
    let server = rt.block_on(ChatServer::start([]));
    for b in Bench::each(bin().as_ref()) {
        let before = server.requests().len();
        server.push(Reply::hang());
        b.file("note.py", NOTE_PY);
        let wf = b.file("wf.json", &workflow(&server.base_url()));
        let mut child = b.spawn(&["run", wf.to_str().expect("utf-8"), "--name", "c"], "run");
        assert!(rt.block_on(server.wait_requests(before + 1, Duration::from_secs(30))));
        let r = b.run(&["runs", "cancel", "c"]);
        assert_eq!(r.code, 0, "{}", r.err);
        assert!(
            rt.block_on(server.wait_closed(before, Duration::from_secs(20))),
            "the request in flight was aborted"
        );
        let status = child.wait().expect("the run ends");
        assert!(!status.success(), "a cancelled run is not a success");
        let shown: Value = b.show("c");
        assert_eq!(shown["run"]["status"], "stopped");
        assert_eq!(shown["run"]["termination_reason"], "cancelled");
    }
}

/// Proves: the shipped example `agent_supervisor_policy.json` runs through `pactgraph run`
/// against the scripted server (its model address from `OPENAI_BASE_URL`): the policy
/// agent routes `research`, then `write` (two agent nodes answering through
/// `final_report`), then `stop_global`; each decision's request offers `route` with the
/// allow ids and the stops, its templates rendered from the state and `allow`.
#[test]
fn the_shipped_supervisor_policy_example_runs() {
    let rt = server_rt();
    let route = |id: &str, decision: &str| {
        let args = json!({"decision": decision, "reason": format!("next: {decision}")});
        Reply::tool_calls(&[(id, "route", &args.to_string())])
    };
    let report =
        |id: &str, args: Value| Reply::tool_calls(&[(id, "final_report", &args.to_string())]);
    let server = rt.block_on(ChatServer::start([
        route("r1", "research"),
        report(
            "n1",
            json!({"notes": {"points": ["Water boils at 100 C at sea level."]}}),
        ),
        route("r2", "write"),
        report("a1", json!({"answer": {"text": "At sea level, 100 C."}})),
        route("r3", "stop_global"),
    ]));
    let b = Bench::new(bin());
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workflows/agents/agent_supervisor_policy.json");
    let out = b
        .command(&[
            "run",
            file.to_str().expect("utf-8"),
            "--input",
            r#"{"question": {"text": "When does water boil?"}}"#,
        ])
        .env("OPENAI_BASE_URL", server.base_url())
        .env("PACTGRAPH_MODEL", "scripted-model")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outcome: Value = serde_json::from_str(&stdout).expect("the outcome is JSON");
    assert_eq!(outcome["status"], "completed");
    assert_eq!(outcome["termination_reason"], "stop_global");
    assert_eq!(outcome["state"]["answer"]["text"], "At sea level, 100 C.");
    // What the five model calls cost (11 tokens in, 7 out each), without `--full`; the
    // example's model has no price, so no `cost_usd`.
    assert_eq!(
        outcome["usage"],
        json!({"input_tokens": 55, "output_tokens": 35}),
        "{stdout}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "three decisions and two agent nodes");
    let first = &requests[0].body;
    assert_eq!(first["model"], "scripted-model");
    assert_eq!(
        first["tools"][0]["function"]["parameters"]["properties"]["decision"]["enum"],
        json!(["research", "write", "stop_local", "stop_global"])
    );
    let system = first["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("among research, write"), "{system}");
    assert_eq!(
        first["messages"][1]["content"],
        "Question: When does water boil?\nNotes: null\nAnswer: null"
    );
    let last = requests[4].body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(last.contains("At sea level, 100 C."), "{last}");
}

/// Proves: the shipped example `agent_subagent_tool.json` runs through `pactgraph run`
/// against the scripted server: `writer` calls the agent tool `researcher`, whose session
/// (its prompt from the call's arguments) returns its `final_report` result as the
/// writer's `tool` message; the writer then answers.
#[test]
fn the_shipped_subagent_tool_example_runs() {
    let rt = server_rt();
    let call =
        |id: &str, name: &str, args: Value| Reply::tool_calls(&[(id, name, &args.to_string())]);
    let server = rt.block_on(ChatServer::start([
        call("c1", "researcher", json!({"topic": "boiling water"})),
        call(
            "r1",
            "final_report",
            json!({"result": {"facts": ["100 C at sea level"]}}),
        ),
        call(
            "c2",
            "final_report",
            json!({"answer": {"text": "At 100 C."}}),
        ),
    ]));
    let b = Bench::new(bin());
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workflows/agents/agent_subagent_tool.json");
    let out = b
        .command(&[
            "run",
            file.to_str().expect("utf-8"),
            "--input",
            r#"{"question": {"text": "When does water boil?"}}"#,
        ])
        .env("OPENAI_BASE_URL", server.base_url())
        .env("PACTGRAPH_MODEL", "scripted-model")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outcome: Value = serde_json::from_str(&stdout).expect("the outcome is JSON");
    assert_eq!(outcome["status"], "completed");
    assert_eq!(outcome["state"]["answer"]["text"], "At 100 C.");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[1].body["messages"][1],
        json!({"role": "user", "content": "Topic: boiling water"})
    );
    assert_eq!(
        requests[2].body["messages"][3],
        json!({"role": "tool", "tool_call_id": "c1",
               "content": r#"{"result":{"facts":["100 C at sea level"]}}"#})
    );
}
