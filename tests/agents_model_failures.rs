//! A model call that fails for good (`model_error`: 5xx after every retry, 401, a hang
//! ended by `timeout_ms`, a malformed body) through `pactgraph run` against the scripted
//! Chat Completions server on loopback (real HTTP, a real process): the run (or the
//! advisor's report, the team member's turn, the agent tool's caller) gets a clear
//! reason naming the agent, the model and the status; the failed call's `model_call`
//! item carries its HTTP attempts as fields (status, error, duration, wait); and the API
//! key (a unique test value, sent as `Authorization: Bearer`) appears in no output,
//! trace, message list or store file.
#![cfg(all(target_os = "linux", feature = "cli", feature = "agents"))]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use chat_server::{ChatServer, Reply};
use serde_json::{Value, json};
use support::cli::{Bench, all_files};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pactgraph")
}

/// A unique API key: if it appears anywhere, it leaked.
const KEY: &str = "sk-pactgraph-failure-test-0b7c44e1d9a2";
const KEY_ENV: &str = "PACTGRAPH_MODEL_FAILURE_TEST_KEY";

/// The model every agent uses: the key from `KEY_ENV`, requests limited to 400 ms,
/// `retries` retries.
fn models(base_url: &str, retries: u32) -> Value {
    json!({"default": {"base_url": base_url, "model": "scripted-model",
                       "api_key_env": KEY_ENV, "max_retries": retries, "timeout_ms": 400}})
}

/// A workflow where the agent whose requests hold `FAILS` fails, reached by `path`:
/// `node` (an agent node), `policy` (a supervisor's policy agent), `advisor` (an agent
/// advisor of a `set` primary), `member` (an agent team member, with an agent lead) or
/// `tool` (an agent tool of an agent node).
fn doc(base_url: &str, path: &str, retries: u32) -> Value {
    let fails =
        |tools: Value| json!({"agent": {"instructions": "FAILS", "prompt": "go", "tools": tools}});
    let ok =
        |who: &str| json!({"agent": {"instructions": format!("You are {who}."), "prompt": "go"}});
    let (entry, nodes, supervisors) = match path {
        "node" => (
            "root",
            json!({"agent": {"supervisor": "root", "writes": ["answer"], "run": fails(json!([])),
                             "triggers": [{"when": {"path": "/answer", "exists": false}}]}}),
            json!({"root": {"allow": ["agent"], "default": {"stop_global": {"reason": "done"}}}}),
        ),
        "policy" => (
            "desk",
            json!({"answer": {"supervisor": "desk", "writes": ["answer"],
                              "run": {"set": {"answer": "set"}}}}),
            json!({"desk": {"allow": ["answer"], "policy": fails(json!([]))}}),
        ),
        "advisor" => (
            "root",
            json!({"scout": {"supervisor": "root", "run": fails(json!([]))},
                   "primary": {"supervisor": "root", "reads": ["advice"], "writes": ["answer"],
                               "advisors": {"members": ["scout"], "slice": "advice"},
                               "run": {"set": {"answer": "advised"}},
                               "triggers": [{"when": {"path": "/answer", "exists": false}}]}}),
            json!({"root": {"allow": ["primary"], "default": {"stop_global": {"reason": "done"}}}}),
        ),
        "member" => (
            "root",
            json!({"critic": {"supervisor": "root", "run": fails(json!([]))},
                   "chair": {"supervisor": "root", "run": ok("chair")},
                   "panel": {"supervisor": "root", "writes": ["answer"],
                             "team": {"members": ["critic"], "lead": "chair", "slice": "team",
                                      "member_max_turns": 2, "lead_max_turns": 2},
                             "triggers": [{"when": {"path": "/answer", "exists": false}}]}}),
            json!({"root": {"allow": ["panel"], "default": {"stop_global": {"reason": "done"}}}}),
        ),
        _ => (
            "root",
            json!({"helper": {"supervisor": "root", "run": fails(json!([])),
                              "tool": {"description": "Helps.",
                                       "parameters": {"type": "object", "properties": {}}}},
                   "agent": {"supervisor": "root", "writes": ["answer"],
                             "run": {"agent": {"instructions": "You are agent.", "prompt": "go",
                                               "tools": ["helper"]}},
                             "triggers": [{"when": {"path": "/answer", "exists": false}}]}}),
            json!({"root": {"allow": ["agent"], "default": {"stop_global": {"reason": "done"}}}}),
        ),
    };
    json!({
        "workflow": format!("model-failure-{path}"),
        "slices": {"answer": {"schema": {"type": "string"}}, "advice": {}, "team": {}},
        "models": models(base_url, retries),
        "entry": entry,
        "supervisors": supervisors,
        "nodes": nodes
    })
}

/// What one run showed: `runs show` as JSON and as text in all, its output.
struct Shown {
    json: Value,
    text: String,
}

/// Runs `doc` as run `name` with the key set, checks the key went out as the bearer
/// token and leaked nowhere, and gives what `runs show` says.
fn run(b: &Bench, server: &ChatServer, doc: &Value, name: &str) -> Shown {
    let before = server.requests().len();
    let wf = b.file(&format!("{name}.json"), &doc.to_string());
    let r = b
        .command(&["run", wf.to_str().expect("utf-8"), "--name", name])
        .env(KEY_ENV, KEY)
        .output()
        .expect("pactgraph run");
    let (out, err) = (
        String::from_utf8_lossy(&r.stdout).into_owned(),
        String::from_utf8_lossy(&r.stderr).into_owned(),
    );
    let json = b.show(name);
    let messages = b.run(&["runs", "show", name, "--messages"]);
    let requests = &server.requests()[before..];
    assert!(!requests.is_empty(), "{name}: the model was called");
    for q in requests {
        assert_eq!(
            q.header("authorization"),
            Some(format!("Bearer {KEY}").as_str()),
            "{name}: the key is sent"
        );
        assert!(
            !q.raw_body.contains(KEY),
            "{name}: the key is in a request body"
        );
    }
    let text = format!("{out}\n{err}\n{json}\n{}\n{}", messages.out, messages.err);
    for (what, t) in [("output", &text), ("store files", &all_files(&b.dir))] {
        assert!(!t.contains(KEY), "{name}: the key leaked into {what}");
    }
    Shown { json, text }
}

/// The failed `model_call` item of `source`: its `model_call` fields.
fn failed_call<'a>(shown: &'a Value, source: &str) -> &'a Value {
    shown["trace"]
        .as_array()
        .expect("trace")
        .iter()
        .filter(|i| i["kind"] == "model_call" && i["source"] == source)
        .map(|i| &i["model_call"])
        .find(|c| c.get("error").is_some())
        .unwrap_or_else(|| panic!("a failed model_call item of `{source}` in {shown}"))
}

/// Checks the failed call's attempts: `n` of them, each with `status` (`None`: no
/// answer), an error, and its duration and wait as numbers.
fn check_attempts(call: &Value, n: usize, status: Option<u64>) {
    let attempts = call["failed_attempts"].as_array().expect("failed_attempts");
    assert_eq!(attempts.len(), n, "{call}");
    for a in attempts {
        assert_eq!(a["status"].as_u64(), status, "{a}");
        assert!(!a["error"].as_str().unwrap_or_default().is_empty(), "{a}");
        assert!(a["duration_ms"].is_u64() && a["waited_ms"].is_u64(), "{a}");
    }
}

/// Proves, for an agent node, each way a model call fails for good: HTTP 503 on both
/// attempts (one retry), 401 (not retried), a hang ended by `timeout_ms`, a malformed
/// body. The run fails `model_error` with a message naming the node, the model and the
/// status (or the time limit); the failed call's item carries every attempt (status,
/// error, duration, wait); the key leaks nowhere.
#[test]
fn a_model_call_failing_for_good_names_node_model_and_status_and_keeps_its_attempts() {
    let rt = chat_server::runtime(1);
    let server = rt.block_on(ChatServer::start([]));
    let b = Bench::new(bin());
    // (run name, retries, the failing replies, what the message says, the attempts' status)
    type Case = (&'static str, u32, Vec<Reply>, &'static str, Option<u64>);
    let cases: Vec<Case> = vec![
        (
            "unavailable",
            1,
            vec![
                Reply::error(503, "overloaded"),
                Reply::error(503, "overloaded"),
            ],
            "HTTP 503",
            Some(503),
        ),
        (
            "unauthorized",
            0,
            vec![Reply::error(401, "bad key")],
            "HTTP 401",
            Some(401),
        ),
        (
            "hang",
            0,
            vec![Reply::hang()],
            "no complete reply within 400 ms",
            None,
        ),
        (
            "malformed",
            0,
            vec![Reply::raw(200, "application/json", "{not json")],
            "HTTP 200",
            Some(200),
        ),
    ];
    for (name, retries, replies, status, code) in cases {
        for r in replies {
            server.route("FAILS", r);
        }
        let shown = run(&b, &server, &doc(&server.base_url(), "node", retries), name);
        assert_eq!(shown.json["run"]["status"], "failed", "{name}");
        assert_eq!(
            shown.json["run"]["termination_reason"], "model_error",
            "{name}: {}",
            shown.json
        );
        let message = shown.json["message"].as_str().unwrap_or_default();
        for part in ["agent node `agent`", "model `default`", status] {
            assert!(message.contains(part), "{name}: `{part}` in {message}");
        }
        let call = failed_call(&shown.json, "agent");
        check_attempts(call, usize::try_from(retries).expect("small") + 1, code);
    }
}

/// Proves, on every other path a model call is made from (a supervisor's policy agent,
/// an agent advisor, an agent team member, an agent tool), that its 401 is told with the
/// agent, the model and the status where that path tells it (the run's end, the advice,
/// the member's turn, the caller's `tool` message), its item carries the attempt, and
/// the key leaks nowhere.
#[test]
fn a_model_error_is_named_on_every_path() {
    let rt = chat_server::runtime(1);
    let server = rt.block_on(ChatServer::start([]));
    let b = Bench::new(bin());
    let report = |args: Value| Reply::calls(&[("x", "final_report", args)]);
    for (path, who) in [
        ("policy", "desk"),
        ("advisor", "scout"),
        ("member", "critic"),
        ("tool", "helper"),
    ] {
        server.route("FAILS", Reply::error(401, "bad key"));
        match path {
            "member" => server.route("You are chair.", report(json!({"answer": "led"}))),
            "tool" => {
                server.route(
                    "You are agent.",
                    Reply::tool_calls(&[("h", "helper", "{}")]),
                );
                server.route("You are agent.", report(json!({"answer": "alone"})));
            }
            _ => {}
        }
        let shown = run(&b, &server, &doc(&server.base_url(), path, 0), path);
        let what = match path {
            "policy" => "the agent policy of supervisor `desk`".to_string(),
            // An agent tool's failure names it once, as the tool its caller called.
            "tool" => format!("agent tool `{who}` (model `default`)"),
            _ => format!("agent node `{who}`"),
        };
        for part in [what.as_str(), "model `default`", "HTTP 401", "bad key"] {
            assert!(
                shown.text.contains(part),
                "{path}: `{part}` in {}",
                shown.text
            );
        }
        if path == "policy" {
            assert_eq!(
                shown.json["run"]["termination_reason"], "model_error",
                "{}",
                shown.json
            );
        } else {
            assert_eq!(
                shown.json["run"]["status"], "completed",
                "{path}: {}",
                shown.json
            );
        }
        check_attempts(failed_call(&shown.json, who), 1, Some(401));
    }
}
