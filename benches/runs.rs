//! Runs the runtime bench (`benches/runtime.rs`) does not cover: a linear handoff chain
//! (per step), a three-level recursive call (per run), and saving and restoring a run
//! state. Run: `cargo bench --bench runs`.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use pactgraph::WorkflowDocument;
use pactgraph::graph::{GraphBuilder, synth};
use pactgraph::runtime::{Executor, RunState, RunStatus};
use pactgraph::validator::ValidGraph;
use serde_json::json;

fn executor(doc: WorkflowDocument) -> Executor {
    let graph = GraphBuilder::from_document(doc)
        .build()
        .expect("synthetic workflows compile");
    Executor::builder(ValidGraph::new(graph).expect("synthetic workflows are valid"))
        .build()
        .expect("no handlers needed")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Times whole runs of `doc` from a fresh start; each must complete.
fn bench_runs(c: &mut Criterion, group: &str, name: &str, doc: WorkflowDocument, steps: u64) {
    let exec = executor(doc);
    let rt = rt();
    let mut group = c.benchmark_group(group);
    group.throughput(Throughput::Elements(steps));
    group.bench_function(name, |b| {
        b.iter_batched(
            || exec.start(json!({})).expect("valid input"),
            |mut run| {
                rt.block_on(exec.run_in_place(&mut run));
                assert_eq!(run.status(), RunStatus::Completed);
                run
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn chain(c: &mut Criterion) {
    bench_runs(
        c,
        "handoff_chain",
        "1000_steps",
        synth::handoff_chain(1_000),
        1_000,
    );
}

fn nested(c: &mut Criterion) {
    // Three nested calls, one node at the bottom, three returns: one run.
    bench_runs(c, "three_level_call", "run", synth::nested_levels(3), 1);
}

fn save_restore(c: &mut Criterion) {
    // A run paused mid-way: 200 loop steps taken, trace included.
    let exec = executor(synth::supervisor_loop(400));
    let rt = rt();
    let mut run = exec.start(json!({"task": {"id": 1}})).expect("valid input");
    rt.block_on(async {
        for _ in 0..200 {
            exec.step(&mut run).await;
        }
    });
    let text = serde_json::to_string(&run).expect("plain data");
    let mut group = c.benchmark_group("run_state_200_steps");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("serialize", |b| {
        b.iter(|| serde_json::to_string(black_box(&run)).expect("plain data"))
    });
    group.bench_function("restore", |b| {
        b.iter(|| serde_json::from_str::<RunState>(black_box(&text)).expect("valid"))
    });
    group.finish();
}

criterion_group!(benches, chain, nested, save_restore);
criterion_main!(benches);
