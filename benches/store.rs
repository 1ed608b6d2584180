//! The run store's costs (SQLite, `synchronous=NORMAL`, WAL, a file in a temp folder):
//!
//! * `durable_step/supervisor_loop`: one step of the supervisor/worker loop driven by
//!   `store::drive`, checkpointed (one transaction per step). Target: under 50 µs a step.
//! * `storage`: bytes stored per step by a 1,000-step loop whose state holds a constant
//!   100 KB slice (printed, not timed). Target: under 1 KB a step.
//! * `list/100000_runs_*`: `RunStore::list` over 100,000 runs: the newest 100 (what
//!   `runs list` shows by default) and all of them. Target: under 100 ms.
//! * `load/10000_steps`: loading a 10,000-step run. Target: under 50 ms.
//! * `durable_step_postgres/{normal,full}`: the durable step on PostgreSQL (issue 18),
//!   when `PG_URL` names a server (on loopback for the figure): `normal` is
//!   `synchronous_commit=off` (a commit survives the worker dying), `full` is
//!   `synchronous_commit=on` (it survives the server crashing). Each in a schema of its
//!   own, dropped afterwards. Target: under 240 µs a step (`normal`).
//!
//! Run: `cargo bench --bench store -- --measurement-time 3`. Figures in
//! docs/performance.md.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use pactgraph::graph::{GraphBuilder, synth};
use pactgraph::runtime::{Executor, RunRecord, RunStatus};
use pactgraph::store::{
    Continue, CreateOptions, DriveOptions, Durability, PgOptions, PgStore, RunFilter, RunStore,
    SqliteStore, drive,
};
use pactgraph::validator::ValidGraph;
use serde_json::{Value, json};
use sqlx::Connection;

fn executor(steps: u32) -> (Executor, pactgraph::WorkflowDocument) {
    let doc = synth::supervisor_loop(steps);
    let graph = GraphBuilder::from_document(doc)
        .build()
        .expect("synthetic workflows compile");
    let graph = ValidGraph::new(graph).expect("synthetic workflows are valid");
    let document = graph.to_document();
    let ex = Executor::builder(graph)
        .build()
        .expect("no handlers needed");
    (ex, document)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

async fn open(dir: &tempfile::TempDir) -> SqliteStore {
    let url = format!("sqlite:{}", dir.path().join("store.db").display());
    SqliteStore::open(&url).await.expect("opens")
}

/// Creates and drives a loop of `steps` steps from `input`; returns the run id.
async fn loop_run(
    store: &impl RunStore,
    ex: &Executor,
    doc: &pactgraph::WorkflowDocument,
    input: Value,
) -> pactgraph::runtime::RunId {
    let run = ex.start(input).expect("valid input");
    let record = RunRecord::new(doc.clone(), run);
    let id = record.run_id;
    store
        .create(&record, &CreateOptions::default())
        .await
        .expect("creates");
    let run = drive(
        ex,
        store,
        id,
        "bench",
        &DriveOptions::default(),
        Continue::AsStored,
    )
    .await
    .expect("drives");
    assert_eq!(run.status(), RunStatus::Stopped);
    id
}

fn durable_step(c: &mut Criterion) {
    const STEPS: u32 = 1_000;
    let rt = rt();
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = rt.block_on(open(&dir));
    let (ex, doc) = executor(STEPS);
    let mut group = c.benchmark_group("durable_step");
    group.sample_size(10);
    group.bench_function("supervisor_loop", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                rt.block_on(loop_run(&store, &ex, &doc, json!({})));
                total += t.elapsed() / STEPS;
            }
            total
        })
    });
    group.finish();
}

/// Runs `sql` on `url` (creating or dropping the bench's schema).
async fn admin(url: &str, sql: &str) {
    let mut c = sqlx::PgConnection::connect(url)
        .await
        .expect("connects to PG_URL");
    sqlx::raw_sql(sql).execute(&mut c).await.expect("runs");
}

fn durable_step_postgres(c: &mut Criterion) {
    const STEPS: u32 = 1_000;
    let Ok(base) = std::env::var("PG_URL") else {
        println!("durable_step_postgres: PG_URL is not set, skipped");
        return;
    };
    let rt = rt();
    let (ex, doc) = executor(STEPS);
    let mut group = c.benchmark_group("durable_step_postgres");
    group.sample_size(10);
    for (label, durability) in [("normal", Durability::Normal), ("full", Durability::Full)] {
        let schema = format!("bench_{}", pactgraph::runtime::RunId::new()).to_lowercase();
        rt.block_on(admin(&base, &format!("CREATE SCHEMA {schema}")));
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
        let store = rt
            .block_on(PgStore::open_with(
                &url,
                PgOptions::default().durability(durability),
            ))
            .expect("opens");
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    rt.block_on(loop_run(&store, &ex, &doc, json!({})));
                    total += t.elapsed() / STEPS;
                }
                total
            })
        });
        rt.block_on(store.close());
        rt.block_on(admin(&base, &format!("DROP SCHEMA {schema} CASCADE")));
    }
    group.finish();
}

fn storage(_c: &mut Criterion) {
    const STEPS: u32 = 1_000;
    let rt = rt();
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = rt.block_on(open(&dir));
    let (ex, doc) = executor(STEPS);
    // A constant slice of ~100 KB that no step writes.
    let big: Vec<String> = (0..10_000).map(|i| format!("item-{i:04}")).collect();
    let big = json!(big);
    let slice_bytes = big.to_string().len();
    let id = rt.block_on(loop_run(&store, &ex, &doc, json!({"task": big})));
    let use_ = rt.block_on(store.storage(id)).expect("measures");
    let total = use_.step_bytes + use_.snapshot_bytes;
    println!(
        "storage/1000_steps_100kb_slice: {} step rows, {} B of deltas ({} B/step), {} snapshots \
         {} B; total {} B = {} B/step (slice {} B)",
        use_.steps,
        use_.step_bytes,
        use_.step_bytes / use_.steps.max(1),
        use_.snapshots,
        use_.snapshot_bytes,
        total,
        total / u64::from(STEPS),
        slice_bytes
    );
    let file = std::fs::metadata(dir.path().join("store.db")).map_or(0, |m| m.len())
        + std::fs::metadata(dir.path().join("store.db-wal")).map_or(0, |m| m.len());
    println!("storage/1000_steps_100kb_slice: database file + WAL {file} B");
}

fn list(c: &mut Criterion) {
    const RUNS: usize = 100_000;
    let rt = rt();
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = rt.block_on(open(&dir));
    let (ex, doc) = executor(5);
    let t = Instant::now();
    rt.block_on(async {
        for _ in 0..RUNS {
            let record = RunRecord::new(doc.clone(), ex.start(json!({})).expect("starts"));
            store
                .create(&record, &CreateOptions::default())
                .await
                .expect("creates");
        }
    });
    println!(
        "list: {RUNS} runs created in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let mut group = c.benchmark_group("list");
    group.sample_size(10);
    group.bench_function("100000_runs_newest_100", |b| {
        b.iter(|| {
            let runs = rt
                .block_on(store.list(&RunFilter::default().limit(100)))
                .expect("lists");
            assert_eq!(runs.len(), 100);
            runs
        })
    });
    group.bench_function("100000_runs_all", |b| {
        b.iter(|| {
            let runs = rt
                .block_on(store.list(&RunFilter::default()))
                .expect("lists");
            assert_eq!(runs.len(), RUNS);
            runs
        })
    });
    group.finish();
}

fn load(c: &mut Criterion) {
    const STEPS: u32 = 10_000;
    let rt = rt();
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = rt.block_on(open(&dir));
    let (ex, doc) = executor(STEPS);
    let id = rt.block_on(loop_run(&store, &ex, &doc, json!({})));
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.bench_function("10000_steps", |b| {
        b.iter(|| rt.block_on(store.load(id)).expect("loads"))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = durable_step, durable_step_postgres, storage, list, load
}
criterion_main!(benches);
