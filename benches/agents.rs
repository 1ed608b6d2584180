//! Agent sessions: the engine's overhead per model call beyond the server's own time
//! (target: under 100 µs: the request built, the response parsed, the step committed in
//! memory), against the scripted Chat Completions server on loopback answering at once.
//!
//! - `agent_model_call/engine_10_calls`: a whole run in memory whose agent makes 10 model
//!   calls (9 text replies, each answered with a request for the exit tool, then the
//!   exit), from `start` to the end;
//! - `agent_model_call/raw_10_requests`: the same 10 request bodies (captured from a run)
//!   sent with a bare `reqwest` client to the same server, each response read and parsed
//!   as JSON: the server's and the transport's own time.
//!
//! The overhead per model call is `(engine_10_calls - raw_10_requests) / 10`
//! (docs/performance.md, "Agents"). On a loaded machine the wall time of a loopback
//! request (milliseconds of scheduling) swamps a difference of microseconds, so the group
//! `agent_model_call_cpu` measures the same two functions in **CPU time** (of every
//! thread of the process, server included, read from `/proc/self/task/*/schedstat`,
//! Linux): what the engine adds to a call's work, whatever the scheduler does meanwhile.
//! Its "time" column is CPU time.

#[path = "../tests/support/chat_server.rs"]
mod chat_server;

use std::time::{Duration, Instant};

use chat_server::{ChatServer, Reply};
use criterion::{Criterion, criterion_group, criterion_main};
use pactgraph::GraphBuilder;
use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::{Executor, RunStatus};
use pactgraph::validator::ValidGraph;
use serde_json::{Value, json};

/// Model calls per run.
const CALLS: usize = 10;

/// The script of one run: 9 text replies (not an exit: the answer is an integer), then
/// the exit.
fn script(server: &ChatServer) {
    for _ in 1..CALLS {
        server.push(Reply::text("thinking it over"));
    }
    server.push(Reply::tool_calls(&[(
        "call_exit",
        "final_report",
        r#"{"answer": 42}"#,
    )]));
}

fn executor(base_url: &str) -> Executor {
    let doc = WorkflowDocument::from_value(json!({
        "workflow": "agent-bench",
        "slices": {"question": {}, "answer": {"schema": {"type": "integer"}}},
        "models": {"default": {"base_url": base_url, "model": "m",
                               "api_key_env": "PACTGRAPH_BENCH_NO_KEY", "max_retries": 0}},
        "budgets": {"max_steps": 100},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"], "default": {"stop_global": {}}}},
        "nodes": {"agent": {"supervisor": "root", "reads": ["question"], "writes": ["answer"],
                            "run": {"agent": {"instructions": "Answer with a number.",
                                              "prompt": "{{ question }}",
                                              "max_turns": CALLS}},
                            "triggers": [{"priority": 1,
                                          "when": {"path": "/answer", "exists": false}}]}}
    }))
    .expect("valid");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    Executor::builder(ValidGraph::new(graph).expect("the bench workflow is valid"))
        .build()
        .expect("builds")
}

fn model_call(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = rt.block_on(ChatServer::start([]));
    let ex = executor(&server.base_url());
    let input = json!({"question": "What is six times seven?"});
    let run_once = || {
        script(&server);
        let outcome = rt.block_on(ex.run(ex.start(input.clone()).expect("valid input")));
        assert_eq!(
            outcome.status,
            RunStatus::Completed,
            "{:?}",
            outcome.message
        );
        assert_eq!(outcome.steps, CALLS as u32, "one step per model call");
    };
    run_once();
    let bodies: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.raw_body.clone())
        .collect();
    assert_eq!(bodies.len(), CALLS);
    let url = format!("{}/chat/completions", server.base_url());
    let http = reqwest::Client::new();
    let raw_once = || {
        script(&server);
        rt.block_on(async {
            for body in &bodies {
                let response = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .expect("the server answers");
                let bytes = response.bytes().await.expect("a body");
                let v: Value = serde_json::from_slice(&bytes).expect("JSON");
                assert!(v.get("choices").is_some(), "{v}");
            }
        });
    };
    let mut g = c.benchmark_group("agent_model_call");
    g.bench_function("engine_10_calls", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                run_once();
            }
            start.elapsed()
        })
    });
    g.bench_function("raw_10_requests", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                raw_once();
            }
            start.elapsed()
        })
    });
    g.finish();
    if cpu_now().is_none() {
        return;
    }
    let mut g = c.benchmark_group("agent_model_call_cpu");
    let cpu = |f: &dyn Fn(), iters: u64| {
        let start = cpu_now().unwrap_or_default();
        for _ in 0..iters {
            f();
        }
        cpu_now().unwrap_or_default().saturating_sub(start)
    };
    g.bench_function("engine_10_calls", |b| b.iter_custom(|n| cpu(&run_once, n)));
    g.bench_function("raw_10_requests", |b| b.iter_custom(|n| cpu(&raw_once, n)));
    g.finish();
}

/// The CPU time every thread of this process has run so far (the first field of each
/// `/proc/self/task/*/schedstat`, in nanoseconds); `None` where there is no such file.
fn cpu_now() -> Option<Duration> {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let text = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        ns += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(ns))
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3));
    targets = model_call
}
criterion_main!(benches);
