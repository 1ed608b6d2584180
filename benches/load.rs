//! Document loading (strict JSON with a source map) and graph building, at 10k, 100k and
//! 1M nodes. Run: `cargo bench --bench load`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pactgraph::contracts::{DocumentFormat, WorkflowDocument};
use pactgraph::graph::{GraphBuilder, synth};

const SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("load_json");
    group.sample_size(10).warm_up_time(Duration::from_secs(1));
    for n in SIZES {
        let text = synth::clustered(n, n / 100).to_json_pretty();
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
            b.iter(|| {
                WorkflowDocument::parse(black_box(text), DocumentFormat::Json).expect("valid")
            })
        });
    }
    group.finish();
}

fn build(c: &mut Criterion) {
    let mut group = c.benchmark_group("build_graph");
    group.sample_size(10).warm_up_time(Duration::from_secs(1));
    for n in SIZES {
        let doc = synth::clustered(n, n / 100);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &doc, |b, doc| {
            b.iter(|| {
                GraphBuilder::from_document(black_box(doc.clone()))
                    .build()
                    .expect("valid")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, load, build);
criterion_main!(benches);
