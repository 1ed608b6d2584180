//! Orchestration patterns: what advisors cost per member, and that their members run at
//! the same time.
//!
//! - `advisors_fork/{0,8}_set_members`: a whole run that dispatches a primary once (its
//!   advisors, if any, are `set` nodes) and stops. The overhead per member is the
//!   difference divided by 8 (target: under 5 µs; LangGraph's `Send` fan-out measured
//!   about 335 µs per task).
//! - `advisors_fork/8_programs_sleeping_200ms`: the fork step of 8 `exec` members that
//!   each sleep 200 ms (target: under 400 ms, that is, concurrent).

use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use pactgraph::GraphBuilder;
use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::Executor;
use pactgraph::validator::ValidGraph;
use serde_json::{Value, json};

fn executor(doc: Value) -> Executor {
    let doc = WorkflowDocument::from_value(doc).expect("valid");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    Executor::builder(ValidGraph::new(graph).expect("the bench workflows are valid"))
        .build()
        .expect("builds")
}

/// A primary with `members` advisors, each running `member`.
fn advised(members: usize, member: &Value) -> Executor {
    let ids: Vec<String> = (0..members).map(|i| format!("a{i}")).collect();
    let mut nodes = serde_json::Map::new();
    for id in &ids {
        nodes.insert(
            id.clone(),
            json!({"supervisor": "boss", "reads": ["request"], "run": member}),
        );
    }
    let mut primary = json!({"supervisor": "boss", "reads": ["request", "advice"],
        "writes": ["out"], "run": {"set": {"out": 1}},
        "triggers": [{"priority": 1, "when": {"path": "/out", "exists": false}}]});
    if members > 0 {
        primary["advisors"] = json!({"members": ids, "slice": "advice"});
    }
    nodes.insert("primary".into(), primary);
    executor(json!({
        "workflow": "advisors",
        "slices": {"request": {}, "advice": {}, "out": {}},
        "budgets": {"max_steps": 100},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["primary"], "default": {"stop_global": {}}}},
        "nodes": nodes
    }))
}

fn advisors(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut g = c.benchmark_group("advisors_fork");
    let set = json!({"set": {"note": {"tip": "be brief", "score": 3}}});
    for members in [0usize, 8] {
        let ex = advised(members, &set);
        g.bench_function(format!("{members}_set_members"), |b| {
            b.iter_batched(
                || {
                    ex.start(json!({"request": {"q": "ship it?"}}))
                        .expect("starts")
                },
                |mut run| {
                    rt.block_on(ex.run_in_place(&mut run));
                    run
                },
                BatchSize::SmallInput,
            );
        });
    }
    let sleeper = json!({"exec": {"argv": ["sh", "-c", "sleep 0.2; echo '{}'"]}});
    let ex = advised(8, &sleeper);
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.bench_function("8_programs_sleeping_200ms", |b| {
        b.iter_batched(
            || ex.start(json!({"request": {}})).expect("starts"),
            // The fork step only: the members and their join.
            |mut run| {
                rt.block_on(ex.step(&mut run));
                run
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

criterion_group!(benches, advisors);
criterion_main!(benches);
