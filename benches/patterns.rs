//! Orchestration patterns: what advisors cost per member, that their members run at the
//! same time, and what a team costs per member turn.
//!
//! - `advisors_fork/{0,8}_set_members`: a whole run that dispatches a primary once (its
//!   advisors, if any, are `set` nodes) and stops. The overhead per member is the
//!   difference divided by 8 (target: under 5 µs; LangGraph's `Send` fan-out measured
//!   about 335 µs per task).
//! - `advisors_fork/8_programs_sleeping_200ms`: the fork step of 8 `exec` members that
//!   each sleep 200 ms (target: under 400 ms, that is, concurrent).
//! - `team_cycle/{0,8}_members_{1,4}_cycles`: a whole run that dispatches a team node
//!   once and stops; members are handlers broadcasting a short string, the lead a handler
//!   that broadcasts until its last cycle and then answers. The engine overhead per member
//!   turn is `(8_members_4_cycles - 0_members_1_cycles) / 32` minus the three extra lead
//!   turns' share (target: under 5 µs); `8_members_1_cycles` shows one cycle's cost.

use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use pactgraph::GraphBuilder;
use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::{Executor, HandlerError, NodeInput, Writes, sync_node};
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

/// A team node with `members` handler members and a handler lead that answers on turn
/// `cycles` (or when no member is left).
fn team(members: usize, cycles: u64) -> Executor {
    let ids: Vec<String> = (0..members).map(|i| format!("m{i}")).collect();
    let mut nodes = serde_json::Map::new();
    for id in &ids {
        nodes.insert(
            id.clone(),
            json!({"supervisor": "boss", "reads": ["request"], "run": {"handler": "member"}}),
        );
    }
    nodes.insert(
        "lead".into(),
        json!({"supervisor": "boss", "reads": ["request"], "run": {"handler": "lead"}}),
    );
    nodes.insert(
        "panel".into(),
        json!({"supervisor": "boss", "reads": ["request"], "writes": ["out"],
               "triggers": [{"priority": 1, "when": {"path": "/out", "exists": false}}],
               "team": {"members": ids, "lead": "lead", "slice": "team"}}),
    );
    let doc = WorkflowDocument::from_value(json!({
        "workflow": "team",
        "slices": {"request": {}, "team": {}, "out": {}},
        "budgets": {"max_steps": 1000},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["panel"], "default": {"stop_global": {}}}},
        "nodes": nodes
    }))
    .expect("valid");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    Executor::builder(ValidGraph::new(graph).expect("the bench workflow is valid"))
        .node_handler(
            "member",
            sync_node(|_: NodeInput| {
                let mut w = Writes::new();
                w.insert("$broadcast".into(), Value::String("agreed".into()));
                Ok::<_, HandlerError>(w)
            }),
        )
        .node_handler(
            "lead",
            sync_node(move |input: NodeInput| {
                let t = &input.view["team"];
                let mut w = Writes::new();
                if t["turn"].as_u64() >= Some(cycles) || t["final_turn"] == Value::Bool(true) {
                    w.insert("$final".into(), Value::Bool(true));
                    w.insert("out".into(), json!(1));
                } else {
                    w.insert("$broadcast".into(), Value::String("again".into()));
                }
                Ok::<_, HandlerError>(w)
            }),
        )
        .build()
        .expect("builds")
}

fn team_cycle(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut g = c.benchmark_group("team_cycle");
    for (members, cycles) in [(0usize, 1u64), (8, 1), (8, 4)] {
        let ex = team(members, cycles);
        g.bench_function(format!("{members}_members_{cycles}_cycles"), |b| {
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
    g.finish();
}

criterion_group!(benches, advisors, team_cycle);
criterion_main!(benches);
