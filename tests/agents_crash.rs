//! A run killed (SIGKILL) while its agent's tool program runs, or its supervisor's policy
//! agent's (mid-decision): `runs resume` runs that tool call again (same step, higher
//! attempt) and never the committed model call before it; each store the tests run on.
#![cfg(all(target_os = "linux", feature = "cli", feature = "agents"))]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use chat_server::{ChatServer, Reply};
use serde_json::json;
use support::cli::Bench;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pactgraph")
}

/// The tool program: appends `STEP ATTEMPT` to `side.txt`, then sleeps the seconds in
/// `slow` (if that file exists), then answers `{"ok": true}`.
const SLOW_PY: &str = r#"import json, os, sys, time
req = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "side.txt"), "a") as f:
    f.write(f"{req['step']} {req['attempt']}\n")
slow = os.path.join(here, "slow")
if os.path.exists(slow):
    time.sleep(float(open(slow).read()))
print(json.dumps({"ok": True}))
"#;

/// What the tool program wrote: one `STEP ATTEMPT` line per run.
fn side(b: &Bench) -> String {
    b.side_text()
}

/// A runtime for the scripted server.
fn server_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Runs `workflow` as run `name` with the server scripted with `first`, kills it
/// (SIGKILL) once the tool program has started (it sleeps a minute), and makes the
/// program quick for the resume.
fn run_killed_in_program(
    b: &Bench,
    server: &ChatServer,
    workflow: &str,
    name: &str,
    first: Vec<Reply>,
) {
    run_killed_in_programs(b, server, (workflow, name), first, 1);
}

/// As [`run_killed_in_program`], killing once `starts` tool programs have started.
fn run_killed_in_programs(
    b: &Bench,
    server: &ChatServer,
    (workflow, name): (&str, &str),
    first: Vec<Reply>,
    starts: usize,
) {
    for r in first {
        server.push(r);
    }
    b.file("slow.py", SLOW_PY);
    b.file("slow", "60");
    let wf = b.file("wf.json", workflow);
    let args = ["run", wf.to_str().expect("utf-8"), "--name", name];
    b.kill_when(&args, "the tool programs start", || {
        side(b).lines().count() >= starts
    });
    b.remove("slow");
}

fn workflow(base_url: &str) -> String {
    json!({
        "workflow": "agent-crash",
        "slices": {"answer": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "agent": {"supervisor": "root", "writes": ["answer"],
                      "run": {"agent": {"prompt": "go", "tools": ["work"]}},
                      "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
            "work": {"supervisor": "root",
                     "run": {"exec": {"argv": ["python3", "slow.py"]}},
                     "tool": {"description": "Works.",
                              "parameters": {"type": "object", "properties": {}}}}
        }
    })
    .to_string()
}

/// Proves: SIGKILL while the tool program runs, then `runs resume`: the tool call runs
/// again as step 1 attempt 2, the first model call is not made again, and the run
/// completes with the second turn's exit.
#[test]
fn a_tool_call_in_flight_at_a_kill_runs_again_with_a_higher_attempt() {
    let rt = server_rt();
    let server = rt.block_on(ChatServer::start([]));
    for b in Bench::each(bin().as_ref()) {
        let before = server.requests().len();
        let first = vec![Reply::tool_calls(&[("w", "work", "{}")])];
        run_killed_in_program(&b, &server, &workflow(&server.base_url()), "k", first);
        server.push(Reply::tool_calls(&[(
            "e",
            "final_report",
            r#"{"answer": "worked"}"#,
        )]));
        let r = b.run(&["runs", "resume", "k", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
        assert_eq!(
            side(&b),
            "1 1\n1 2\n",
            "the tool call in flight ran again, attempt 2"
        );
        let requests = &server.requests()[before..];
        assert_eq!(
            requests.len(),
            2,
            "the committed first turn was not asked again"
        );
        assert_eq!(
            requests[1].body["messages"][2],
            json!({"role": "tool", "content": r#"{"ok":true}"#, "tool_call_id": "w"})
        );
        let shown = b.show("k");
        assert_eq!(shown["run"]["status"], "completed");
        assert_eq!(shown["state"]["answer"], "worked");
    }
}

/// Root `desk` decides with a policy agent that may call tool `work` (slow.py), among
/// `answer` (a `set` node).
fn policy_workflow(base_url: &str) -> String {
    json!({
        "workflow": "agent-policy-crash",
        "slices": {"answer": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["answer"],
                                 "policy": {"agent": {"prompt": "go", "tools": ["work"]}}}},
        "nodes": {
            "answer": {"supervisor": "desk", "writes": ["answer"],
                       "run": {"set": {"answer": "done"}}},
            "work": {"supervisor": "desk",
                     "run": {"exec": {"argv": ["python3", "slow.py"]}},
                     "tool": {"description": "Works.",
                              "parameters": {"type": "object", "properties": {}}}}
        }
    })
    .to_string()
}

/// Proves: SIGKILL while a policy agent's tool program runs (mid-decision), then `runs
/// resume`: the tool call runs again as step 1 attempt 2, the committed first model call
/// of the decision is not made again, the decision's next call sees the tool's result,
/// and its `route` is taken (the run dispatches `answer`, then stops).
#[test]
fn a_policy_killed_mid_decision_resumes_without_repeating_a_committed_call() {
    let rt = server_rt();
    let server = rt.block_on(ChatServer::start([]));
    for b in Bench::each(bin().as_ref()) {
        let before = server.requests().len();
        let first = vec![Reply::tool_calls(&[("w", "work", "{}")])];
        run_killed_in_program(
            &b,
            &server,
            &policy_workflow(&server.base_url()),
            "p",
            first,
        );
        let route = |id: &str, decision: &str| {
            let args = json!({"decision": decision, "reason": "r"}).to_string();
            Reply::tool_calls(&[(id, "route", &args)])
        };
        server.push(route("r1", "answer"));
        server.push(route("r2", "stop_global"));
        let r = b.run(&["runs", "resume", "p", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
        assert_eq!(
            side(&b),
            "1 1\n1 2\n",
            "the tool call in flight ran again, attempt 2"
        );
        let requests = &server.requests()[before..];
        assert_eq!(
            requests.len(),
            3,
            "the committed first call of the decision was not made again"
        );
        assert_eq!(
            requests[1].body["messages"][2],
            json!({"role": "tool", "content": r#"{"ok":true}"#, "tool_call_id": "w"})
        );
        let shown = b.show("p");
        assert_eq!(shown["run"]["status"], "completed");
        assert_eq!(shown["state"]["answer"], "done");
    }
}

/// Agent `agent` calls agent tool `helper`, which calls tool `work` (slow.py).
fn tool_agent_workflow(base_url: &str) -> String {
    json!({
        "workflow": "agent-tool-crash",
        "slices": {"answer": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "agent": {"supervisor": "root", "writes": ["answer"],
                      "run": {"agent": {"prompt": "go", "tools": ["helper"]}},
                      "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
            "helper": {"supervisor": "root",
                       "run": {"agent": {"prompt": "help with {{ input.q }}", "tools": ["work"]}},
                       "tool": {"description": "Helps.",
                                "parameters": {"type": "object",
                                               "properties": {"q": {"type": "string"}},
                                               "required": ["q"]}}},
            "work": {"supervisor": "root",
                     "run": {"exec": {"argv": ["python3", "slow.py"]}},
                     "tool": {"description": "Works.",
                              "parameters": {"type": "object", "properties": {}}}}
        }
    })
    .to_string()
}

/// Proves: SIGKILL while an agent tool's own tool program runs, then `runs resume`: that
/// program runs again (step 2, attempt 2), neither the caller's committed model call nor
/// the agent tool's is made again, the agent tool's next call sees the program's result,
/// and its `final_report` result reaches the caller, which completes.
#[test]
fn an_agent_tool_killed_mid_session_resumes_without_repeating_a_committed_call() {
    let rt = server_rt();
    let server = rt.block_on(ChatServer::start([]));
    for b in Bench::each(bin().as_ref()) {
        let before = server.requests().len();
        let first = vec![
            Reply::tool_calls(&[("c", "helper", r#"{"q": "x"}"#)]),
            Reply::tool_calls(&[("w", "work", "{}")]),
        ];
        let wf = tool_agent_workflow(&server.base_url());
        run_killed_in_program(&b, &server, &wf, "t", first);
        server.push(Reply::tool_calls(&[(
            "h",
            "final_report",
            r#"{"result": {"helped": true}}"#,
        )]));
        server.push(Reply::tool_calls(&[(
            "e",
            "final_report",
            r#"{"answer": "helped"}"#,
        )]));
        let r = b.run(&["runs", "resume", "t", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
        assert_eq!(side(&b), "2 1\n2 2\n", "the program in flight ran again");
        let requests = &server.requests()[before..];
        assert_eq!(requests.len(), 4, "no committed model call was made again");
        assert_eq!(
            requests[2].body["messages"][2],
            json!({"role": "tool", "content": r#"{"ok":true}"#, "tool_call_id": "w"})
        );
        assert_eq!(
            requests[3].body["messages"][2],
            json!({"role": "tool", "content": r#"{"result":{"helped":true}}"#,
                   "tool_call_id": "c"})
        );
        let shown = b.show("t");
        assert_eq!(shown["run"]["status"], "completed");
        assert_eq!(shown["state"]["answer"], "helped");
        let messages = b.run(&["runs", "show", "t", "--messages"]);
        assert!(
            messages
                .out
                .contains("session 1: node `helper` (visit 1, model `default`, 4 message(s), tool call c of session 0)"),
            "{}",
            messages.out
        );
    }
}

/// Agent `agent` calls agent tools `alpha` and `beta` (prompts with the words the server
/// routes their requests by), each of which calls tool `work` (slow.py).
fn two_tools_workflow(base_url: &str) -> String {
    let params = json!({"type": "object", "properties": {"q": {"type": "string"}},
                        "required": ["q"]});
    json!({
        "workflow": "agent-tools-crash",
        "slices": {"answer": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "agent": {"supervisor": "root", "writes": ["answer"],
                      "run": {"agent": {"prompt": "go", "tools": ["alpha", "beta"]}},
                      "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
            "alpha": {"supervisor": "root",
                      "run": {"agent": {"prompt": "Alpha task {{ input.q }}", "tools": ["work"]}},
                      "tool": {"description": "Alpha.", "parameters": params.clone()}},
            "beta": {"supervisor": "root",
                     "run": {"agent": {"prompt": "Beta task {{ input.q }}", "tools": ["work"]}},
                     "tool": {"description": "Beta.", "parameters": params}},
            "work": {"supervisor": "root",
                     "run": {"exec": {"argv": ["python3", "slow.py"]}},
                     "tool": {"description": "Works.",
                              "parameters": {"type": "object", "properties": {}}}}
        }
    })
    .to_string()
}

/// Proves: SIGKILL while two agent tools of one reply are both mid-session (each one's
/// tool program running, in the same step), then `runs resume`: both programs run
/// again (steps 3 and 4, attempt 2), and the server saw every committed model call
/// exactly once: the caller's first, each agent tool's two, the caller's second; both
/// results reach the caller in its reply's order, and it completes.
#[test]
fn two_agent_tools_killed_mid_session_resume_without_repeating_a_committed_call() {
    let rt = server_rt();
    let server = rt.block_on(ChatServer::start([]));
    let seen = |from: usize, needle: &str| {
        server.requests()[from..]
            .iter()
            .filter(|r| r.raw_body.contains(needle))
            .count()
    };
    for b in Bench::each(bin().as_ref()) {
        let before = server.requests().len();
        let first = vec![Reply::tool_calls(&[
            ("a", "alpha", r#"{"q": "x"}"#),
            ("c", "beta", r#"{"q": "y"}"#),
        ])];
        server.route("Alpha task", Reply::tool_calls(&[("aw", "work", "{}")]));
        server.route("Beta task", Reply::tool_calls(&[("bw", "work", "{}")]));
        let wf = two_tools_workflow(&server.base_url());
        run_killed_in_programs(&b, &server, (&wf, "two"), first, 2);
        assert_eq!(server.requests().len() - before, 3, "before the kill");
        server.route(
            "Alpha task",
            Reply::tool_calls(&[("ae", "final_report", r#"{"result": "A"}"#)]),
        );
        server.route(
            "Beta task",
            Reply::tool_calls(&[("be", "final_report", r#"{"result": "B"}"#)]),
        );
        server.push(Reply::tool_calls(&[(
            "e",
            "final_report",
            r#"{"answer": "both"}"#,
        )]));
        let r = b.run(&["runs", "resume", "two", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
        let mut ran: Vec<String> = side(&b).lines().map(str::to_string).collect();
        ran.sort();
        assert_eq!(
            ran,
            ["3 1", "3 2", "4 1", "4 2"],
            "both programs in flight ran again, attempt 2"
        );
        let requests = &server.requests()[before..];
        assert_eq!(requests.len(), 6, "no committed model call was made again");
        assert_eq!(
            seen(before, "Alpha task"),
            2,
            "alpha's two turns, once each"
        );
        assert_eq!(seen(before, "Beta task"), 2, "beta's two turns, once each");
        let back = &requests[5].body["messages"];
        assert_eq!(
            back[2],
            json!({"role": "tool", "content": r#"{"result":"A"}"#, "tool_call_id": "a"})
        );
        assert_eq!(
            back[3],
            json!({"role": "tool", "content": r#"{"result":"B"}"#, "tool_call_id": "c"})
        );
        let shown = b.show("two");
        assert_eq!(shown["run"]["status"], "completed");
        assert_eq!(shown["state"]["answer"], "both");
    }
}
