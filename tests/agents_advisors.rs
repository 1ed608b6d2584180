//! Advisors that are agents (brief 5.4, 10.2), through the library against the scripted
//! Chat Completions server on loopback (real HTTP): the advisors' sessions run at once
//! (one fork, each live session advanced by one call per step), each exit's arguments
//! become its report, the reports open the primary's prompt as nonce-tagged blocks, and
//! an advisor that fails or passes its time limit is a failure report while the primary
//! still runs.
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use std::time::Duration;

use chat_server::{ChatServer, Reply};
use pactgraph::runtime::{Executor, RunState, RunStatus, TraceKind as K};
use serde_json::{Value, json};
use support::runtime::{builder, graph};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Root dispatches agent `reviewer` (writes `decision`, a string) once, after its
/// advisors `advisors` (agents reading `draft`, each told `You are ID.`, the needle the
/// server routes their replies by; `fixed` is a `set` tool they may call), then stops.
fn doc(base_url: &str, advisors: &[&str], timeout_ms: Option<u64>) -> Value {
    let mut nodes = serde_json::Map::new();
    for id in advisors {
        nodes.insert(
            (*id).to_string(),
            json!({"supervisor": "desk", "reads": ["draft"],
                   "run": {"agent": {"instructions": format!("You are {id}."),
                                     "prompt": "{{ draft.text }}",
                                     "tools": ["fixed"], "max_turns": 3}}}),
        );
    }
    let mut spec = json!({"members": advisors, "slice": "advice"});
    if let Some(t) = timeout_ms {
        spec["timeout_ms"] = t.into();
    }
    nodes.insert(
        "reviewer".into(),
        json!({"supervisor": "desk", "reads": ["draft", "advice"], "writes": ["decision"],
               "advisors": spec,
               "run": {"agent": {"instructions": "You decide.", "max_turns": 2}},
               "triggers": [{"when": {"path": "/decision", "exists": false}}]}),
    );
    nodes.insert(
        "fixed".into(),
        json!({"supervisor": "desk", "run": {"set": {"house_style": "short sentences"}},
               "tool": {"description": "The house style.",
                        "parameters": {"type": "object", "properties": {}}}}),
    );
    json!({
        "workflow": "agent-advisors",
        "slices": {"draft": {}, "advice": {}, "decision": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["reviewer"],
                                 "default": {"stop_global": {"reason": "reviewed"}}}},
        "nodes": nodes
    })
}

fn run(rt: &tokio::runtime::Runtime, ex: &Executor) -> RunState {
    let mut state = ex
        .start(json!({"draft": {"text": "We ship on Monday, guaranteed."}}))
        .expect("a valid input");
    rt.block_on(ex.run_in_place(&mut state));
    state
}

fn report(text: &str) -> Reply {
    let args = json!({"report": text}).to_string();
    Reply::tool_calls(&[("exit", "final_report", &args)])
}

fn needle(id: &str) -> String {
    format!("You are {id}.")
}

/// The requests whose body holds `id`'s system message, in arrival order.
fn requests_of(server: &ChatServer, id: &str) -> Vec<chat_server::Request> {
    let needle = needle(id);
    server
        .requests()
        .into_iter()
        .filter(|r| r.raw_body.contains(&needle))
        .collect()
}

/// Proves: both advisors' first model calls are in flight together (each answer takes
/// 300 ms, yet the second request arrives before the first is answered); `risk` calls a
/// tool and reports on its next turn while `style` has reported; each exit's `report`
/// is its report, tagged into the reviewer's default prompt; every call is a step with
/// its own `model_call`/`tool_call` item; the reviewer runs once, after the join.
#[test]
fn agent_advisors_run_at_once_and_their_reports_open_the_primarys_prompt() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([]));
    let delay = Duration::from_millis(300);
    server.route(&needle("style"), report("Too many commas.").delay(delay));
    server.route(
        &needle("risk"),
        Reply::tool_calls(&[("t1", "fixed", "{}")]).delay(delay),
    );
    server.route(&needle("risk"), report("Monday is a promise."));
    server.push(Reply::tool_calls(&[(
        "exit",
        "final_report",
        r#"{"decision": "revise"}"#,
    )]));
    let ex = builder(graph(doc(&server.base_url(), &["style", "risk"], None)))
        .build()
        .expect("the executor builds");
    let state = run(&rt, &ex);
    assert_eq!(
        state.status(),
        RunStatus::Completed,
        "{:?}",
        state.message()
    );
    assert_eq!(state.state()["decision"], "revise");

    let (style, risk) = (requests_of(&server, "style"), requests_of(&server, "risk"));
    assert_eq!((style.len(), risk.len()), (1, 2), "one session each");
    let gap = if style[0].at > risk[0].at {
        style[0].at - risk[0].at
    } else {
        risk[0].at - style[0].at
    };
    assert!(
        gap < delay,
        "the advisors' first requests overlap: {gap:?} apart, each answered after {delay:?}"
    );
    // risk's second turn carries its tool's result after its first reply.
    let m = &risk[1].body["messages"];
    assert_eq!(m[3]["role"], "tool");
    assert_eq!(m[3]["content"], r#"{"house_style":"short sentences"}"#);
    // The reviewer's prompt opens with the tagged reports, in members' order.
    let all = server.requests();
    let reviewer = all.last().expect("the reviewer's request");
    let prompt = reviewer.body["messages"][1]["content"]
        .as_str()
        .expect("a user message");
    assert!(prompt.starts_with("<original_user_request__"), "{prompt}");
    let style_at = prompt
        .find(
            r#"agent="style">
{"report":"Too many commas."}"#,
        )
        .expect("style's report is tagged");
    let risk_at = prompt
        .find(
            r#"agent="risk">
{"report":"Monday is a promise."}"#,
        )
        .expect("risk's report is tagged");
    assert!(style_at < risk_at, "{prompt}");

    let kinds: Vec<K> = state.trace().to_items().iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [
            K::Decision,
            K::Fork,
            K::ModelCall, // style, turn 1: reports
            K::Advisor,
            K::ModelCall, // risk, turn 1: calls `fixed`
            K::ToolCall,  // risk's tool call (answered while planning: a `set` tool)
            K::ModelCall, // risk, turn 2: reports
            K::Advisor,
            K::Join,
            K::ModelCall, // the reviewer
            K::Dispatch,
            K::Return,
            K::Decision,
            K::End
        ]
    );
    let advice = &state.state()["advice"];
    assert_eq!(advice["reports"][0]["status"], "ok");
    assert_eq!(
        advice["reports"][1]["output"],
        json!({"report": "Monday is a promise."})
    );
    // Five model calls and one tool call, each a step; the reviewer's session ends in
    // the step of its model call.
    assert_eq!(state.steps(), 5);
    assert_eq!(state.sessions().len(), 3, "style, risk and the reviewer");
}

/// Proves: an advisor whose model answers HTTP 400 reports `failed` (naming the status),
/// one whose model hangs past the advisors' `timeout_ms` reports `timeout` and its HTTP
/// request is aborted (the server sees the connection closed); the join completes, the
/// failures are tagged into the reviewer's prompt, and the reviewer still runs.
#[test]
fn an_advisor_that_fails_or_times_out_reports_so_and_the_primary_still_runs() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([]));
    server.route(&needle("bad"), Reply::error(400, "no such model"));
    server.route(&needle("slow"), Reply::hang());
    server.push(Reply::tool_calls(&[(
        "exit",
        "final_report",
        r#"{"decision": "ship"}"#,
    )]));
    let ex = builder(graph(doc(&server.base_url(), &["bad", "slow"], Some(400))))
        .build()
        .expect("the executor builds");
    let state = run(&rt, &ex);
    assert_eq!(
        state.status(),
        RunStatus::Completed,
        "{:?}",
        state.message()
    );
    assert_eq!(state.state()["decision"], "ship");
    let reports = &state.state()["advice"]["reports"];
    assert_eq!(reports[0]["status"], "failed");
    let error = reports[0]["error"].as_str().expect("an error");
    assert!(
        error.contains("400") && error.contains("no such model"),
        "{error}"
    );
    assert_eq!(reports[1]["status"], "timeout", "{reports}");
    let slow = server
        .requests()
        .iter()
        .position(|r| r.raw_body.contains(&needle("slow")))
        .expect("slow's request");
    assert!(
        rt.block_on(server.wait_closed(slow, Duration::from_secs(5))),
        "the time limit closed slow's HTTP request"
    );
    let prompt = server
        .requests()
        .last()
        .expect("the reviewer's request")
        .body["messages"][1]["content"]
        .as_str()
        .expect("a user message")
        .to_string();
    assert!(prompt.contains("Advisor `bad` failed"), "{prompt}");
    assert!(prompt.contains("Advisor `slow` failed"), "{prompt}");
    let join = state
        .trace()
        .iter()
        .find(|i| i.kind == K::Join)
        .expect("a join");
    assert_eq!(
        join.reason(),
        Some("2 report(s): 0 ok, 1 failed, 1 timeout")
    );
}

/// Proves: an advisor whose prompt template cannot be rendered reports `failed`, its
/// error naming the template and the advisor once, without a request to the model; its
/// planned step is counted (the run's steps are the failed opening, `style`'s call and
/// the reviewer's call), and the reviewer still runs after the join.
#[test]
fn an_advisor_whose_template_fails_reports_so_and_counts_its_step() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([]));
    server.route(&needle("style"), report("Fine."));
    server.push(Reply::tool_calls(&[(
        "exit",
        "final_report",
        r#"{"decision": "ship"}"#,
    )]));
    let mut d = doc(&server.base_url(), &["broken", "style"], None);
    d["nodes"]["broken"]["run"]["agent"]["prompt"] = json!("{{ draft.text | no_such_filter }}");
    let ex = builder(graph(d)).build().expect("the executor builds");
    let state = run(&rt, &ex);
    assert_eq!(
        state.status(),
        RunStatus::Completed,
        "{:?}",
        state.message()
    );
    assert!(
        requests_of(&server, "broken").is_empty(),
        "broken never asked"
    );
    let reports = &state.state()["advice"]["reports"];
    assert_eq!(reports[0]["status"], "failed", "{reports}");
    let error = reports[0]["error"].as_str().expect("an error");
    assert!(
        error.contains("the `prompt` template of agent node `broken` cannot be rendered")
            && error.matches("broken").count() == 1,
        "{error}"
    );
    assert_eq!(reports[1]["status"], "ok", "{reports}");
    assert_eq!(
        state.steps(),
        3,
        "broken's opening, style's call, the reviewer's"
    );
    let steps: Vec<u32> = state
        .trace()
        .iter()
        .filter(|i| i.kind == K::ModelCall)
        .map(|i| i.step)
        .collect();
    assert_eq!(steps, [2, 3], "style's call after broken's counted step");
}
