//! Per-step cost of the executor with contracts enforced and the trace recorded:
//! a supervisor/worker loop, and a subgraph call plus return.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use pactgraph::GraphBuilder;
use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::Executor;
use serde_json::{Value, json};

/// `step()` calls measured per iteration.
const CALLS: u32 = 1000;
/// Budget high enough that the measured calls never hit a guard.
const BUDGET: u32 = 1_000_000;

fn executor(doc: Value) -> Executor {
    let doc = WorkflowDocument::from_value(doc).expect("valid");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    Executor::builder(graph).build().expect("builds")
}

/// A rule-based supervisor that dispatches a `set` worker on every step.
fn worker_loop() -> Executor {
    executor(json!({
        "workflow": "loop",
        "slices": {"request": {}, "out": {"schema": {"type": "object"}}},
        "budgets": {"max_steps": BUDGET},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["work"]}},
        "nodes": {"work": {"supervisor": "boss", "reads": ["request"], "writes": ["out"],
            "triggers": [{"priority": 1, "when": {"path": "/request/go", "equals": true}}],
            "run": {"set": {"out": {"n": 1}}}}}
    }))
}

/// A root supervisor calling a subgraph whose supervisor returns at once.
fn call_return() -> Executor {
    executor(json!({
        "workflow": "calls",
        "slices": {"request": {}, "out": {}, "answer": {}},
        "budgets": {"max_steps": BUDGET, "max_reentry": BUDGET},
        "entry": "root",
        "supervisors": {"root": {"allow": ["g"]}, "inner": {"allow": []}},
        "subgraphs": {"g": {"entrypoint": "inner", "supervisors": ["inner"],
            "reads": ["request"], "writes": ["out"],
            "input_schema": {"type": "object", "required": ["request"]},
            "output_schema": {"type": "object"},
            "result_slice": "answer",
            "triggers": [{"priority": 1, "when": {"path": "/request/go", "equals": true}}]}},
        "nodes": {}
    }))
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let input = json!({"request": {"go": true}});
    // One `step()` of the loop = a rule-based decision, a node run with its boundary checks
    // and slice schema, and the dispatch/return trace items. One subgraph round trip = two
    // `step()`s: decide + enter (input schema, copy-on-call), decide + return (output
    // schema, commit, result slice).
    for (name, ex) in [
        ("supervisor_worker_loop/1000_steps", worker_loop()),
        ("subgraph_call_and_return/500_round_trips", call_return()),
    ] {
        c.bench_function(name, |b| {
            b.iter_batched(
                || ex.start(input.clone()).expect("valid input"),
                |mut run| {
                    rt.block_on(async {
                        for _ in 0..CALLS {
                            ex.step(&mut run).await;
                        }
                    });
                    assert!(run.is_running());
                    run
                },
                BatchSize::SmallInput,
            )
        });
    }
    // Ending a run writes the trace into `system.decision_trace` once.
    c.bench_function("finish_run_with_1000_step_trace", |b| {
        let ex = executor(json!({
            "workflow": "loop",
            "slices": {"request": {}, "out": {}},
            "budgets": {"max_steps": CALLS},
            "entry": "boss",
            "supervisors": {"boss": {"allow": ["work"]}},
            "nodes": {"work": {"supervisor": "boss", "writes": ["out"],
                "triggers": [{"priority": 1, "when": true}], "run": {"set": {"out": 1}}}}
        }));
        b.iter_batched(
            || {
                let mut run = ex.start(input.clone()).expect("valid input");
                rt.block_on(async {
                    for _ in 0..CALLS {
                        ex.step(&mut run).await;
                    }
                });
                run
            },
            |mut run| {
                rt.block_on(ex.step(&mut run));
                assert!(!run.is_running());
                run
            },
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
