//! Forks of agent sessions (ADR 0040): what a fork of agent advisors costs in time.
//!
//! - `agent_advisors_fork/8_agents_server_200ms`: the fork step of 8 advisor agents, each
//!   answered with its `final_report` by the scripted Chat Completions server on loopback
//!   after 200 ms (real HTTP, one request per advisor): the step performs the fork's
//!   first round, in which every advisor reports, and commits the join. Target: under
//!   250 ms, that is, the 8 requests are in flight together (one after the other would
//!   take 1.6 s).
//! - `agent_tools_fork/4_agent_tools_server_200ms`: the step answering an agent's reply
//!   that called 4 agent tools (ADR 0046), each answered with its `final_report` by the
//!   scripted server after 200 ms: the 4 sessions' first model calls run in one fork and
//!   each answers its caller's call. Target: under 250 ms (one after the other, as before
//!   ADR 0046, would take 800 ms).

#[path = "../tests/support/chat_server.rs"]
mod chat_server;

use std::time::Duration;

use chat_server::{ChatServer, Reply};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use pactgraph::GraphBuilder;
use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::{Executor, TraceKind};
use pactgraph::validator::ValidGraph;
use serde_json::json;

/// A `set` primary advised by `members` agents talking to `base_url`.
fn advised(members: usize, base_url: &str) -> Executor {
    let ids: Vec<String> = (0..members).map(|i| format!("a{i}")).collect();
    let mut nodes = serde_json::Map::new();
    for id in &ids {
        nodes.insert(
            id.clone(),
            json!({"supervisor": "boss", "reads": ["request"],
                   "run": {"agent": {"prompt": "{{ request.q }}", "max_turns": 2}}}),
        );
    }
    nodes.insert(
        "primary".into(),
        json!({"supervisor": "boss", "reads": ["request", "advice"], "writes": ["out"],
               "run": {"set": {"out": 1}},
               "advisors": {"members": ids, "slice": "advice"},
               "triggers": [{"priority": 1, "when": {"path": "/out", "exists": false}}]}),
    );
    executor(
        "agent-advisors",
        json!({"request": {}, "advice": {}, "out": {}}),
        "primary",
        nodes,
        base_url,
    )
}

/// The bench workflow `workflow`: `slices`, one supervisor `boss` allowed `allowed`, `nodes`,
/// and one model `default` at `base_url` (no key, no retries).
fn executor(
    workflow: &str,
    slices: serde_json::Value,
    allowed: &str,
    nodes: serde_json::Map<String, serde_json::Value>,
    base_url: &str,
) -> Executor {
    let doc = WorkflowDocument::from_value(json!({
        "workflow": workflow,
        "slices": slices,
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_BENCH_NO_KEY", "max_retries": 0}},
        "budgets": {"max_steps": 100},
        "entry": "boss",
        "supervisors": {"boss": {"allow": [allowed], "default": {"stop_global": {}}}},
        "nodes": nodes
    }))
    .expect("valid");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    Executor::builder(ValidGraph::new(graph).expect("the bench workflow is valid"))
        .build()
        .expect("builds")
}

/// The runtime both benches drive their executor on (two workers, as the machine's cores).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn agent_advisors(c: &mut Criterion) {
    let rt = runtime();
    let server = rt.block_on(ChatServer::start([]));
    let members = 8;
    let ex = advised(members, &server.base_url());
    let report = Reply::tool_calls(&[("r", "final_report", r#"{"report": "looks fine"}"#)])
        .delay(Duration::from_millis(200));
    let mut g = c.benchmark_group("agent_advisors_fork");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.bench_function("8_agents_server_200ms", |b| {
        b.iter_batched(
            || {
                for _ in 0..members {
                    server.push(report.clone());
                }
                ex.start(json!({"request": {"q": "ship it?"}}))
                    .expect("starts")
            },
            // The fork step only: the 8 model calls and the join.
            |mut run| {
                rt.block_on(ex.step(&mut run));
                let joined = run
                    .trace()
                    .to_items()
                    .iter()
                    .any(|i| i.kind == TraceKind::Join);
                assert!(joined, "the fork joined in one step: {:?}", run.message());
                run
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

/// An agent node whose model may call `tools` agent tools `t0`.. (each with the prompt
/// `Tool ID task`, the needle the server routes its requests by).
fn with_agent_tools(tools: usize, base_url: &str) -> Executor {
    let ids: Vec<String> = (0..tools).map(|i| format!("t{i}")).collect();
    let mut nodes = serde_json::Map::new();
    for id in &ids {
        nodes.insert(
            id.clone(),
            json!({"supervisor": "boss",
                   "run": {"agent": {"prompt": format!("Tool {id} task"), "max_turns": 2}},
                   "tool": {"description": "A sub-agent.",
                            "parameters": {"type": "object", "properties": {}}}}),
        );
    }
    nodes.insert(
        "agent".into(),
        json!({"supervisor": "boss", "writes": ["out"],
               "run": {"agent": {"prompt": "go", "tools": ids}},
               "triggers": [{"priority": 1, "when": {"path": "/out", "exists": false}}]}),
    );
    executor("agent-tools", json!({"out": {}}), "agent", nodes, base_url)
}

fn agent_tools(c: &mut Criterion) {
    let rt = runtime();
    let server = rt.block_on(ChatServer::start([]));
    let tools = 4;
    let ex = with_agent_tools(tools, &server.base_url());
    let ids: Vec<String> = (0..tools).map(|i| format!("t{i}")).collect();
    let calls: Vec<(&str, &str, serde_json::Value)> = ids
        .iter()
        .map(|id| (id.as_str(), id.as_str(), json!({})))
        .collect();
    let asked = Reply::calls(&calls);
    let result = Reply::tool_calls(&[("r", "final_report", r#"{"result": "done"}"#)])
        .delay(Duration::from_millis(200));
    let mut g = c.benchmark_group("agent_tools_fork");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.bench_function("4_agent_tools_server_200ms", |b| {
        b.iter_batched(
            || {
                server.push(asked.clone());
                for id in &ids {
                    server.route(&format!("Tool {id} task"), result.clone());
                }
                let mut run = ex.start(json!({})).expect("starts");
                // Up to the agent's reply calling the tools.
                while !run
                    .trace()
                    .to_items()
                    .iter()
                    .any(|i| i.kind == TraceKind::ModelCall)
                {
                    rt.block_on(ex.step(&mut run));
                }
                run
            },
            // The agent tools' step only: 4 model calls at once, each answering.
            |mut run| {
                rt.block_on(ex.step(&mut run));
                let answered = run.sessions()[0]
                    .messages
                    .iter()
                    .filter(|m| m.tool_call_id.is_some())
                    .count();
                assert_eq!(answered, tools, "every agent tool answered in one step");
                run
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

criterion_group!(benches, agent_advisors, agent_tools);
criterion_main!(benches);
