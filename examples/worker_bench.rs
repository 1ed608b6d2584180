//! The worker's figures (issue 17), with the library's worker (`store::work`) on a SQLite
//! file in a temporary folder, release build:
//!
//! * **throughput**: 1,000 detached runs of a 10-step loop (`set` nodes) drained by one
//!   worker (concurrency 1): runs per second and the cost per step;
//! * **scheduling overhead**: with a worker running (polling every 20 ms, the CLI's
//!   default), from a run A's last trace item to the first trace item of B (created
//!   `after` A), over 20 pairs: median and max.
//!
//! ```text
//! cargo run --release --example worker_bench -- [RUNS] [PAIRS]
//! ```

use std::time::{Duration, Instant};

use pactgraph::graph::{GraphBuilder, synth};
use pactgraph::runtime::{Executor, RunId, RunRecord};
use pactgraph::store::{CreateOptions, Dependencies, RunStore, SqliteStore, WorkerOptions, work};
use pactgraph::validator::ValidGraph;
use serde_json::json;

fn executor(steps: u32) -> (Executor, pactgraph::WorkflowDocument) {
    let graph = GraphBuilder::from_document(synth::supervisor_loop(steps))
        .build()
        .expect("synthetic workflows compile");
    let graph = ValidGraph::new(graph).expect("synthetic workflows are valid");
    let document = graph.to_document();
    (Executor::builder(graph).build().expect("builds"), document)
}

async fn create(
    store: &SqliteStore,
    ex: &Executor,
    doc: &pactgraph::WorkflowDocument,
    options: CreateOptions,
) -> RunId {
    let record = RunRecord::new(doc.clone(), ex.start(json!({})).expect("starts"));
    store.create(&record, &options).await.expect("creates").id
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let pairs: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        // Throughput.
        let dir = tempfile::tempdir().expect("a temp dir");
        let url = format!("sqlite:{}", dir.path().join("store.db").display());
        let store = SqliteStore::open(&url).await.expect("opens");
        let (ex, doc) = executor(10);
        for _ in 0..runs {
            create(&store, &ex, &doc, CreateOptions::default()).await;
        }
        let t = Instant::now();
        let summary = work(
            &store,
            &WorkerOptions::default().once(true),
            |_| Ok(executor(10).0),
            |_| {},
            std::future::pending(),
        )
        .await
        .expect("works");
        let took = t.elapsed();
        let steps = store
            .list(&Default::default())
            .await
            .expect("lists")
            .iter()
            .map(|i| u64::from(i.steps))
            .sum::<u64>();
        println!(
            "throughput: {} runs ({steps} steps) in {:.2} s: {:.0} runs/s, {:.0} µs per step (all in)",
            summary.finished,
            took.as_secs_f64(),
            summary.finished as f64 / took.as_secs_f64(),
            took.as_micros() as f64 / steps as f64
        );

        // Scheduling overhead: a worker runs in the background of this task.
        let dir = tempfile::tempdir().expect("a temp dir");
        let url = format!("sqlite:{}", dir.path().join("store.db").display());
        let store = SqliteStore::open(&url).await.expect("opens");
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let options = WorkerOptions::default().concurrency(2);
        let worker = work(
            &store,
            &options,
            |_| Ok(executor(10).0),
            |_| {},
            async {
                let _ = stop_rx.await;
            },
        );
        let measure = async {
            let mut gaps = Vec::new();
            for _ in 0..pairs {
                let a = create(&store, &ex, &doc, CreateOptions::default()).await;
                let b = create(&store, &ex, &doc, CreateOptions::default().after(Dependencies::new(vec![a]))).await;
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    if store.info(b).await.expect("info").status.is_ended() {
                        break;
                    }
                }
                let a_run = store.load(a).await.expect("loads").record.run;
                let b_run = store.load(b).await.expect("loads").record.run;
                let a_end = a_run.trace().to_items().into_iter().last().expect("items").at_ms;
                let b_start = b_run.trace().to_items().into_iter().next().expect("items").at_ms;
                gaps.push(b_start.saturating_sub(a_end));
            }
            let _ = stop_tx.send(());
            gaps
        };
        let (gaps, _) = tokio::join!(measure, worker);
        let mut sorted = gaps.clone();
        sorted.sort_unstable();
        println!(
            "scheduling: A's last step to B's first step over {pairs} pairs: median {} ms, max {} ms (poll 20 ms)",
            sorted[sorted.len() / 2],
            sorted[sorted.len() - 1]
        );
    });
}
