//! Validation cost on generated workflows of 10k, 100k and 1M nodes (100 nodes per
//! subgraph, subgraphs nested ten to a level, handoff chains and schemas). The cost
//! should grow linearly; the 100k-node case should stay under 0.5 s on one core.

#[path = "../tests/support/valid_workflow.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use common::{Shape, valid_workflow};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use pactgraph::GraphBuilder;
use pactgraph::validator::Validator;

fn shape(nodes: usize) -> Shape {
    Shape {
        subgraphs: nodes / 100,
        nodes_per_subgraph: 100,
        fanout: 10,
        handoffs: true,
        schemas: true,
        policy_every: 0,
    }
}

/// CPU time this thread has used, in nanoseconds (Linux `schedstat`), so the figures
/// hold on a machine shared with other builds; `None` elsewhere.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Median CPU time of `runs` validations.
fn cpu_median(graph: &pactgraph::CompiledGraph, runs: usize) -> Option<Duration> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let before = thread_cpu_ns()?;
        black_box(Validator::new().validate(black_box(graph)));
        times.push(thread_cpu_ns()? - before);
    }
    times.sort_unstable();
    Some(Duration::from_nanos(times[runs / 2]))
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("validate");
    for nodes in [10_000usize, 100_000, 1_000_000] {
        let built = Instant::now();
        let graph = GraphBuilder::from_document(valid_workflow(&shape(nodes)))
            .build()
            .expect("generated workflows resolve");
        let report = Validator::new().validate(&graph);
        assert!(!report.has_errors(), "generated workflow must be valid");
        println!(
            "validate/{nodes}: {} contracts, {} diagnostics (info), generated and built in {:?}",
            graph.registry().len(),
            report.diagnostics.len(),
            built.elapsed()
        );
        if let Some(cpu) = cpu_median(&graph, if nodes >= 1_000_000 { 3 } else { 5 }) {
            println!("validate/{nodes}: median CPU time {cpu:?} (one core)");
        }
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(if nodes >= 1_000_000 {
            60
        } else {
            10
        }));
        group.bench_with_input(BenchmarkId::from_parameter(nodes), &graph, |b, g| {
            b.iter(|| black_box(Validator::new().validate(black_box(g))))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
