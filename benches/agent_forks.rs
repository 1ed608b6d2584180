//! Forks of agent sessions (ADR 0040): what a fork of agent advisors costs in time.
//!
//! - `agent_advisors_fork/8_agents_server_200ms`: the fork step of 8 advisor agents, each
//!   answered with its `final_report` by the scripted Chat Completions server on loopback
//!   after 200 ms (real HTTP, one request per advisor): the step performs the fork's
//!   first round, in which every advisor reports, and commits the join. Target: under
//!   250 ms, that is, the 8 requests are in flight together (one after the other would
//!   take 1.6 s).

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
    let doc = WorkflowDocument::from_value(json!({
        "workflow": "agent-advisors",
        "slices": {"request": {}, "advice": {}, "out": {}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_BENCH_NO_KEY", "max_retries": 0}},
        "budgets": {"max_steps": 100},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["primary"], "default": {"stop_global": {}}}},
        "nodes": nodes
    }))
    .expect("valid");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    Executor::builder(ValidGraph::new(graph).expect("the bench workflow is valid"))
        .build()
        .expect("builds")
}

fn agent_advisors(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
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
                let joined = run.trace().items.iter().any(|i| i.kind == TraceKind::Join);
                assert!(joined, "the fork joined in one step: {:?}", run.message());
                run
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

criterion_group!(benches, agent_advisors);
criterion_main!(benches);
