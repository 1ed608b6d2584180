//! DOT and Mermaid export of generated workflows: a handoff chain and a clustered
//! workflow (subgraphs of 100 nodes, nested ten deep), at 10k, 100k and 1M nodes.
//!
//! Run with `cargo bench --bench dot`. Target: DOT for 100,000 nodes in under 0.5 s,
//! linear in size.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pactgraph::visualize::{DotOptions, to_dot, to_mermaid};
use pactgraph::{CompiledGraph, GraphBuilder, NodeContract, SubgraphContract, SupervisorContract};

/// `root` dispatches `n0`, which hands off to `n1`, ... ; the last node is terminal.
fn chain(n: usize) -> CompiledGraph {
    let mut b = GraphBuilder::new("chain")
        .entry("root")
        .supervisor(SupervisorContract::new("root").allow(["n0"]));
    for i in 0..n {
        let mut node = NodeContract::new(format!("n{i}"))
            .supervisor("root")
            .reads(["input"])
            .writes(["output"]);
        node = if i + 1 < n {
            node.handoff(format!("n{}", i + 1))
        } else {
            node.terminal(true)
        };
        b = b.node(node);
    }
    b.build().expect("the chain resolves")
}

/// Subgraphs of 100 nodes each; subgraph `k`'s supervisor also calls subgraph `k + 1`
/// unless `k + 1` starts a new group of ten, which the root calls.
fn clustered(n: usize) -> CompiledGraph {
    const PER: usize = 100;
    let groups = n.div_ceil(PER);
    let mut b = GraphBuilder::new("clustered").entry("root");
    let root_allow: Vec<String> = (0..groups).step_by(10).map(|k| format!("g{k}")).collect();
    b = b.supervisor(SupervisorContract::new("root").allow(root_allow));
    for k in 0..groups {
        let nodes: Vec<String> = (0..PER)
            .map(|j| k * PER + j)
            .take_while(|&i| i < n)
            .map(|i| format!("n{i}"))
            .collect();
        let mut allow = nodes.clone();
        if (k + 1) % 10 != 0 && k + 1 < groups {
            allow.push(format!("g{}", k + 1));
        }
        let sup = format!("s{k}");
        b = b
            .supervisor(SupervisorContract::new(&sup).allow(allow))
            .subgraph(
                SubgraphContract::new(format!("g{k}"))
                    .entrypoint(&sup)
                    .reads(["input"])
                    .writes(["output"])
                    .exitpoints([nodes[nodes.len() - 1].clone()]),
            );
        for id in nodes {
            b = b.node(
                NodeContract::new(id)
                    .supervisor(&sup)
                    .reads(["input"])
                    .writes(["output"]),
            );
        }
    }
    b.build().expect("the clustered workflow resolves")
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("dot");
    for &n in &[10_000usize, 100_000, 1_000_000] {
        if n >= 1_000_000 {
            group.sample_size(10);
            group.measurement_time(Duration::from_secs(20));
        } else {
            group.sample_size(20);
            group.measurement_time(Duration::from_secs(5));
        }
        group.throughput(Throughput::Elements(n as u64));
        let g = chain(n);
        group.bench_with_input(BenchmarkId::new("chain", n), &g, |b, g| {
            b.iter(|| black_box(to_dot(g, &DotOptions::default())))
        });
        drop(g);
        let g = clustered(n);
        group.bench_with_input(BenchmarkId::new("clustered", n), &g, |b, g| {
            b.iter(|| black_box(to_dot(g, &DotOptions::default())))
        });
        if n == 100_000 {
            group.bench_with_input(BenchmarkId::new("clustered_mermaid", n), &g, |b, g| {
                b.iter(|| black_box(to_mermaid(g, &DotOptions::default())))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
