//! Pickup on PostgreSQL (issue 28 item 7): how long an idle worker takes to start a run
//! once its creation committed, polling only (every 20 ms) and listening for the store's
//! notifications (`LISTEN`/`NOTIFY`, polling kept), rounds interleaved on one server.
//!
//! In one process: a `store::work` worker on its own `PgStore`, runs created one at a
//! time on another, 100-200 ms apart (each run ends before the next: no queue); the gap
//! is from `create` returning to the worker's `Started` event for that run (both on this
//! machine's monotonic clock).
//!
//! ```text
//! PG_URL=postgres://... cargo run --example pg_pickup -- [RUNS] [ROUNDS]
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pactgraph::GraphBuilder;
use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::{Executor, RunId, RunRecord};
use pactgraph::store::{
    CreateOptions, PgOptions, PgStore, RunStore, StoredRun, WorkEvent, WorkerOptions, work,
};
use pactgraph::validator::ValidGraph;
use sqlx::Connection;

fn graph() -> ValidGraph {
    let doc = WorkflowDocument::from_value(serde_json::json!({
        "workflow": "pickup",
        "slices": {"n": {}},
        "budgets": {"max_steps": 2},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["set"], "default": {"stop_global": {}}}},
        "nodes": {"set": {"supervisor": "boss", "writes": ["n"],
            "triggers": [{"priority": 1, "when": true}], "run": {"set": {"n": 1}}}}
    }))
    .expect("a document");
    let g = GraphBuilder::from_document(doc).build().expect("compiles");
    ValidGraph::new(g).unwrap_or_else(|_| panic!("the validator accepts it"))
}

async fn admin(url: &str, sql: &str) {
    let mut c = sqlx::PgConnection::connect(url).await.expect("connects");
    sqlx::raw_sql(sql).execute(&mut c).await.expect("runs");
}

/// Median, min and max pickup in ms of `runs` runs, with the worker listening or not.
async fn measure(base: &str, runs: usize, listen: bool) -> (f64, f64, f64) {
    let schema = format!("pickup_{}", RunId::new().to_string().to_ascii_lowercase());
    admin(base, &format!("CREATE SCHEMA {schema}")).await;
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    let creator = PgStore::open(&url).await.expect("opens");
    let worker_store = PgStore::open_with(&url, PgOptions::default().max_connections(3))
        .await
        .expect("opens");
    let valid = graph();
    let created: Arc<Mutex<HashMap<RunId, Instant>>> = Arc::default();
    let gaps: Arc<Mutex<Vec<f64>>> = Arc::default();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let options = WorkerOptions::default()
        .poll(Duration::from_millis(20))
        .listen(listen);
    let executor_for = |_: &StoredRun| -> Result<Executor, String> {
        Executor::builder(valid.clone())
            .build()
            .map_err(|e| e.to_string())
    };
    let report = |event: WorkEvent<'_>| {
        if let WorkEvent::Started { id, .. } = event {
            let at = Instant::now();
            if let Some(t) = created.lock().expect("not poisoned").remove(&id) {
                let gap = at.saturating_duration_since(t);
                gaps.lock()
                    .expect("not poisoned")
                    .push(gap.as_secs_f64() * 1e3);
            }
        }
    };
    let stop = async {
        let _ = stop_rx.await;
    };
    // The worker and the creator in one task (the worker's future borrows its store).
    let worker = work(&worker_store, &options, executor_for, report, stop);
    let creating = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ex = Executor::builder(valid.clone()).build().expect("builds");
        let document = valid.graph().to_document();
        for i in 0..runs {
            let record = RunRecord::new(
                document.clone(),
                ex.start(serde_json::json!({})).expect("starts"),
            );
            creator
                .create(&record, &CreateOptions::default())
                .await
                .expect("creates");
            created
                .lock()
                .expect("not poisoned")
                .insert(record.run_id, Instant::now());
            // 100-200 ms apart (each run ends before the next, no queue), at random
            // points of the poll.
            let pause = 100 + (i * 37 + record.run_id.created_ms() as usize) % 101;
            tokio::time::sleep(Duration::from_millis(pause as u64)).await;
        }
        // Let the last ones start.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = stop_tx.send(());
    };
    let (worked, ()) = tokio::join!(worker, creating);
    worked.expect("works");
    creator.close().await;
    admin(base, &format!("DROP SCHEMA {schema} CASCADE")).await;
    let mut g = gaps.lock().expect("not poisoned").clone();
    g.sort_by(f64::total_cmp);
    assert!(!g.is_empty(), "no run was picked up");
    (g[g.len() / 2], g[0], g[g.len() - 1])
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(30);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2);
    let base = std::env::var("PG_URL").expect("PG_URL names a PostgreSQL database");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        for round in 1..=rounds {
            for listen in [false, true] {
                let (median, min, max) = measure(&base, runs, listen).await;
                println!(
                    "round {round}, {}: pickup over {runs} runs: median {median:.2} ms, \
                     min {min:.2} ms, max {max:.2} ms",
                    if listen {
                        "LISTEN/NOTIFY + poll 20 ms"
                    } else {
                        "poll 20 ms only"
                    }
                );
            }
        }
    });
}
