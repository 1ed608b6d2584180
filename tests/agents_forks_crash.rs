//! `pactgraph run` killed (SIGKILL) in the middle of a fork of agent sessions (advisors,
//! a team's cycle), then `runs resume`: the scripted server sees each committed model
//! call exactly once, and only the call in flight (a tool program) runs again, same
//! step, higher attempt; each store the tests run on.
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

/// The tool program: appends `STEP ATTEMPT` to `side.txt`, sleeps the seconds in `slow`
/// (if that file exists), then answers `{"checked": true}`.
const WORK_PY: &str = r#"import json, os, sys, time
req = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "side.txt"), "a") as f:
    f.write(f"{req['step']} {req['attempt']}\n")
slow = os.path.join(here, "slow")
if os.path.exists(slow):
    time.sleep(float(open(slow).read()))
print(json.dumps({"checked": True}))
"#;

/// Advisors `quick` and `careful` (agents; `careful` may call tool `work`) advise agent
/// `reviewer`, which writes `decision`.
fn workflow(base_url: &str) -> String {
    let advisor = |id: &str| {
        json!({"supervisor": "desk", "reads": ["draft"],
               "run": {"agent": {"instructions": format!("You are {id}."),
                                 "prompt": "{{ draft }}", "tools": ["work"]}}})
    };
    json!({
        "workflow": "advisors-crash",
        "slices": {"draft": {}, "advice": {}, "decision": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["reviewer"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "reviewer": {"supervisor": "desk", "reads": ["draft", "advice"],
                         "writes": ["decision"],
                         "advisors": {"members": ["quick", "careful"], "slice": "advice"},
                         "run": {"agent": {"instructions": "You decide."}},
                         "triggers": [{"when": {"path": "/decision", "exists": false}}]},
            "quick": advisor("quick"),
            "careful": advisor("careful"),
            "work": {"supervisor": "desk",
                     "run": {"exec": {"argv": ["python3", "work.py"]}},
                     "tool": {"description": "Checks the draft.",
                              "parameters": {"type": "object", "properties": {}}}}
        }
    })
    .to_string()
}

/// Runs `workflow` as run `name` (the draft as input), kills it (SIGKILL) once a tool
/// program has started (work.py sleeps a minute), and makes the program quick for the
/// resume.
fn killed_in_tool(b: &Bench, workflow: &str, name: &str) {
    b.file("work.py", WORK_PY);
    b.file("slow", "60");
    b.remove("side.txt");
    let wf = b.file("wf.json", workflow);
    let args = [
        "run",
        wf.to_str().expect("utf-8"),
        "--name",
        name,
        "--input",
        r#"{"draft": "We ship Monday."}"#,
    ];
    b.kill_when(&args, "the tool program starts", || {
        !b.side_text().is_empty()
    });
    b.remove("slow");
}

fn report(text: &str) -> Reply {
    let args = json!({"report": text}).to_string();
    Reply::tool_calls(&[("exit", "final_report", &args)])
}

/// Proves: killed while `careful`'s tool call runs (the fork's second round, `quick`
/// having reported and both first model calls committed), `runs resume` makes no
/// committed model call again (the server sees quick's and careful's first calls once
/// each), runs the tool call in flight again as the same step with attempt 2, and ends
/// with both reports and the reviewer's decision.
#[test]
fn a_run_killed_mid_fork_resumes_without_repeating_a_committed_call() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = rt.block_on(ChatServer::start([]));
    for b in Bench::each(bin().as_ref()) {
        let before = server.requests().len();
        server.route("You are quick.", report("Fine."));
        server.route(
            "You are careful.",
            Reply::tool_calls(&[("w", "work", "{}")]),
        );
        killed_in_tool(&b, &workflow(&server.base_url()), "k");
        let side = || b.side_text();
        server.route("You are careful.", report("Checked."));
        server.push(Reply::tool_calls(&[(
            "exit",
            "final_report",
            r#"{"decision": "ship"}"#,
        )]));
        let r = b.run(&["runs", "resume", "k", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
        let lines: Vec<String> = side().lines().map(str::to_string).collect();
        // Steps 0 and 1 were the two first model calls; the tool call is step 2.
        assert_eq!(lines, ["2 1", "2 2"], "the tool call in flight ran again");
        let requests = &server.requests()[before..];
        let count = |needle: &str| {
            requests
                .iter()
                .filter(|r| r.raw_body.contains(needle))
                .count()
        };
        assert_eq!(count("You are quick."), 1, "quick's turn was made once");
        assert_eq!(
            count("You are careful."),
            2,
            "careful's committed first turn was not made again"
        );
        assert_eq!(requests.len(), 4, "and the reviewer's one call");
        let careful_second = requests
            .iter()
            .filter(|r| r.raw_body.contains("You are careful."))
            .nth(1)
            .expect("careful's second turn");
        assert_eq!(
            careful_second.body["messages"][3],
            json!({"role": "tool", "content": r#"{"checked":true}"#, "tool_call_id": "w"})
        );
        let shown = b.show("k");
        assert_eq!(shown["run"]["status"], "completed");
        assert_eq!(shown["state"]["decision"], "ship");
        let reports = &shown["state"]["advice"]["reports"];
        assert_eq!(reports[0]["output"], json!({"report": "Fine."}));
        assert_eq!(reports[1]["output"], json!({"report": "Checked."}));
    }
}

/// Team node `panel` (writes `decision`) with agent members `quick` and `careful` (which
/// may call tool `work`) and agent lead `chair`.
fn team_workflow(base_url: &str) -> String {
    let agent = |id: &str| {
        json!({"supervisor": "desk", "reads": ["draft"],
               "run": {"agent": {"instructions": format!("You are {id}."),
                                 "prompt": "{{ draft }}", "tools": ["work"]}}})
    };
    json!({
        "workflow": "team-crash",
        "slices": {"draft": {}, "team": {}, "decision": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["panel"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "panel": {"supervisor": "desk", "reads": ["draft"], "writes": ["decision"],
                      "team": {"members": ["quick", "careful"], "lead": "chair",
                               "slice": "team"},
                      "triggers": [{"when": {"path": "/decision", "exists": false}}]},
            "quick": agent("quick"),
            "careful": agent("careful"),
            "chair": agent("chair"),
            "work": {"supervisor": "desk",
                     "run": {"exec": {"argv": ["python3", "work.py"]}},
                     "tool": {"description": "Checks the draft.",
                              "parameters": {"type": "object", "properties": {}}}}
        }
    })
    .to_string()
}

/// Proves: killed while `careful`'s tool call runs (the cycle's second round, both
/// members' turns committed), `runs resume` asks no member again (the server sees each
/// member's turn once), runs the tool call in flight again as the same step with attempt
/// 2, then the lead's turn, whose `final_report` is the team's decision.
#[test]
fn a_team_killed_mid_cycle_resumes_without_repeating_a_committed_turn() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = rt.block_on(ChatServer::start([]));
    for b in Bench::each(bin().as_ref()) {
        let before = server.requests().len();
        let args = json!({"message": "Looks fine.", "exit": true}).to_string();
        server.route(
            "You are quick.",
            Reply::tool_calls(&[("q", "team_broadcast", &args)]),
        );
        server.route(
            "You are careful.",
            Reply::tool_calls(&[("w", "work", "{}")]),
        );
        killed_in_tool(&b, &team_workflow(&server.base_url()), "t");
        let side = || b.side_text();
        server.route(
            "You are chair.",
            Reply::tool_calls(&[("f", "final_report", r#"{"decision": "ship"}"#)]),
        );
        let r = b.run(&["runs", "resume", "t", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
        let lines: Vec<String> = side().lines().map(str::to_string).collect();
        assert_eq!(lines, ["2 1", "2 2"], "the tool call in flight ran again");
        let requests = &server.requests()[before..];
        let count = |needle: &str| {
            requests
                .iter()
                .filter(|r| r.raw_body.contains(needle))
                .count()
        };
        assert_eq!(count("You are quick."), 1);
        assert_eq!(count("You are careful."), 1, "careful's committed turn");
        assert_eq!(count("You are chair."), 1);
        let shown = b.show("t");
        assert_eq!(shown["run"]["status"], "completed");
        assert_eq!(shown["state"]["decision"], "ship");
    }
}

/// Advisor `scout` (an agent) may call agent tool `helper`, which may call tool `work`
/// (work.py); agent `reviewer` writes `decision`.
fn advisor_tool_workflow(base_url: &str) -> String {
    json!({
        "workflow": "advisor-tool-crash",
        "slices": {"draft": {}, "advice": {}, "decision": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["reviewer"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "reviewer": {"supervisor": "desk", "reads": ["draft", "advice"],
                         "writes": ["decision"],
                         "advisors": {"members": ["scout"], "slice": "advice"},
                         "run": {"agent": {"instructions": "You decide."}},
                         "triggers": [{"when": {"path": "/decision", "exists": false}}]},
            "scout": {"supervisor": "desk", "reads": ["draft"],
                      "run": {"agent": {"instructions": "You are scout.",
                                        "prompt": "{{ draft }}", "tools": ["helper"]}}},
            "helper": {"supervisor": "desk",
                       "run": {"agent": {"prompt": "Helper task {{ input.q }}",
                                         "tools": ["work"]}},
                       "tool": {"description": "Helps.",
                                "parameters": {"type": "object",
                                               "properties": {"q": {"type": "string"}},
                                               "required": ["q"]}}},
            "work": {"supervisor": "desk",
                     "run": {"exec": {"argv": ["python3", "work.py"]}},
                     "tool": {"description": "Checks the draft.",
                              "parameters": {"type": "object", "properties": {}}}}
        }
    })
    .to_string()
}

/// Proves: killed while an advisor's agent tool runs its own tool program (inside the
/// advisors' fork: scout's and the helper's first model calls committed), `runs resume`
/// runs that program again (step 2, attempt 2) and makes no committed model call again
/// (the server sees scout's two turns, the helper's two and the reviewer's one, once
/// each); the helper's result reaches scout, whose report reaches the reviewer.
#[test]
fn an_advisors_agent_tool_killed_mid_session_resumes_without_repeating_a_committed_call() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = rt.block_on(ChatServer::start([]));
    for b in Bench::each(bin().as_ref()) {
        let before = server.requests().len();
        server.route(
            "You are scout.",
            Reply::tool_calls(&[("c", "helper", r#"{"q": "x"}"#)]),
        );
        server.route("Helper task x", Reply::tool_calls(&[("w", "work", "{}")]));
        killed_in_tool(&b, &advisor_tool_workflow(&server.base_url()), "h");
        let side = || b.side_text();
        server.route(
            "Helper task x",
            Reply::tool_calls(&[("he", "final_report", r#"{"result": "ok"}"#)]),
        );
        server.route("You are scout.", report("Helped."));
        server.route(
            "You decide.",
            Reply::tool_calls(&[("d", "final_report", r#"{"decision": "ship"}"#)]),
        );
        let r = b.run(&["runs", "resume", "h", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
        let lines: Vec<String> = side().lines().map(str::to_string).collect();
        assert_eq!(lines, ["2 1", "2 2"], "the tool call in flight ran again");
        let requests = &server.requests()[before..];
        let count = |needle: &str| {
            requests
                .iter()
                .filter(|r| r.raw_body.contains(needle))
                .count()
        };
        assert_eq!(count("You are scout."), 2, "scout's two turns, once each");
        assert_eq!(
            count("Helper task x"),
            2,
            "the helper's two turns, once each"
        );
        assert_eq!(requests.len(), 5, "and the reviewer's one call");
        let scout_second = requests
            .iter()
            .filter(|r| r.raw_body.contains("You are scout."))
            .nth(1)
            .expect("scout's second turn");
        assert_eq!(
            scout_second.body["messages"][3],
            json!({"role": "tool", "tool_call_id": "c", "content": r#"{"result":"ok"}"#})
        );
        let shown = b.show("h");
        assert_eq!(shown["run"]["status"], "completed");
        assert_eq!(shown["state"]["decision"], "ship");
    }
}
