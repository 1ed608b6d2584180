//! When steps are committed (brief section 13, ADR 0035): the durable step at effects
//! (the default) and every step, against the commit floor of the same store.
//!
//! * `commit_sqlite/{effects,steps}`: one step of a 1,000-step supervisor loop of `set`
//!   steps (no effects) driven by `store::drive` on SQLite (WAL, `synchronous=NORMAL`, a
//!   file in a temp folder), with `--checkpoints effects` and `--checkpoints steps`.
//! * `commit_sqlite/floor`: one SQLite transaction, a run-row update and a step insert of
//!   a 700-byte delta, through sqlx on a file in the same folder, same settings, same
//!   process. Target: `steps` within 1.5x of it.
//! * `commit_postgres/{effects,steps,floor}`: the same on PostgreSQL at `PG_URL`
//!   (`synchronous_commit=off`, the store's `normal`); the floor is one round trip with
//!   commit (an autocommitted update of one row). Skipped without `PG_URL`.
//! * `cli_pure_step/{sqlite,sqlite_steps,postgres,postgres_steps}`: `pactgraph run` of a
//!   2,000-step `set` loop whose state holds a constant 100 KB slice, with the store minus
//!   with `--store none`, per step, the two runs interleaved in every iteration. Targets:
//!   SQLite < 5 µs, PostgreSQL < 10 µs (at effects).
//!
//! Run one group at a time, short: `cargo bench --bench commit -- commit_sqlite
//! --measurement-time 2`. Figures in docs/performance.md.

use std::path::Path;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use pactgraph::graph::{GraphBuilder, synth};
use pactgraph::runtime::{Executor, RunRecord, RunStatus};
use pactgraph::store::{
    Checkpoints, Continue, CreateOptions, DriveOptions, PgStore, RunStore, SqliteStore, drive,
};
use pactgraph::validator::ValidGraph;
use serde_json::json;
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};

const LOOP_STEPS: u32 = 1_000;
const CLI_STEPS: u32 = 2_000;

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

/// Creates and drives a loop run with `checkpoints`; the time per step.
async fn loop_step(
    store: &impl RunStore,
    ex: &Executor,
    doc: &pactgraph::WorkflowDocument,
    checkpoints: Checkpoints,
) -> Duration {
    let record = RunRecord::new(doc.clone(), ex.start(json!({})).expect("valid input"));
    let id = record.run_id;
    store
        .create(&record, &CreateOptions::default())
        .await
        .expect("creates");
    let t = Instant::now();
    let options = DriveOptions::default().checkpoints(checkpoints);
    let run = drive(ex, store, id, "bench", &options, Continue::AsStored)
        .await
        .expect("drives");
    let took = t.elapsed();
    assert_eq!(run.status(), RunStatus::Stopped);
    took / LOOP_STEPS
}

/// A fresh schema of the PostgreSQL server at `base`: its URL and name.
async fn pg_schema(base: &str) -> (String, String) {
    let schema = format!("bench_{}", pactgraph::runtime::RunId::new()).to_lowercase();
    admin(base, &format!("CREATE SCHEMA {schema}")).await;
    let sep = if base.contains('?') { '&' } else { '?' };
    (
        format!("{base}{sep}options=-c%20search_path%3D{schema}"),
        schema,
    )
}

async fn admin(url: &str, sql: &str) {
    let mut c = sqlx::PgConnection::connect(url)
        .await
        .expect("connects to PG_URL");
    sqlx::raw_sql(sql).execute(&mut c).await.expect("runs");
}

fn modes(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &tokio::runtime::Runtime,
    store: &impl RunStore,
) {
    let (ex, doc) = executor(LOOP_STEPS);
    for (label, checkpoints) in [
        ("effects", Checkpoints::Effects),
        ("steps", Checkpoints::Steps),
    ] {
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| rt.block_on(loop_step(store, &ex, &doc, checkpoints)))
                    .sum()
            })
        });
    }
}

fn commit_sqlite(c: &mut Criterion) {
    let rt = rt();
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("sqlite:{}", dir.path().join("store.db").display());
    let store = rt.block_on(SqliteStore::open(&url)).expect("opens");
    let mut group = c.benchmark_group("commit_sqlite");
    group.sample_size(10);
    modes(&mut group, &rt, &store);
    // The floor: one transaction of a run-row update and a step insert, same settings.
    let floor_path = dir.path().join("floor.db");
    let mut conn = rt
        .block_on(sqlx::SqliteConnection::connect_with(
            &SqliteConnectOptions::from_str(&format!("sqlite:{}", floor_path.display()))
                .expect("a URL")
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal),
        ))
        .expect("opens the floor's file");
    rt.block_on(
        sqlx::raw_sql(
            "CREATE TABLE runs (id TEXT PRIMARY KEY, seq INTEGER, steps INTEGER, \
             status TEXT, updated_ms INTEGER); \
             CREATE TABLE steps (run_id TEXT, seq INTEGER, delta TEXT, created_ms INTEGER, \
             PRIMARY KEY (run_id, seq)); \
             INSERT INTO runs VALUES ('r', 0, 0, 'running', 0);",
        )
        .execute(&mut conn),
    )
    .expect("makes the floor's tables");
    let delta = "x".repeat(700);
    let mut seq: i64 = 0;
    group.bench_function("floor", |b| {
        b.iter(|| {
            seq += 1;
            rt.block_on(async {
                sqlx::raw_sql("BEGIN IMMEDIATE")
                    .execute(&mut conn)
                    .await
                    .expect("begins");
                sqlx::query(
                    "UPDATE runs SET seq = ?1, steps = ?1, status = 'running', \
                     updated_ms = ?2 WHERE id = 'r'",
                )
                .bind(seq)
                .bind(seq)
                .execute(&mut conn)
                .await
                .expect("updates");
                sqlx::query("INSERT INTO steps VALUES ('r', ?1, ?2, ?3)")
                    .bind(seq)
                    .bind(&delta)
                    .bind(seq)
                    .execute(&mut conn)
                    .await
                    .expect("inserts");
                sqlx::raw_sql("COMMIT")
                    .execute(&mut conn)
                    .await
                    .expect("commits");
            })
        })
    });
    group.finish();
}

fn commit_postgres(c: &mut Criterion) {
    let Ok(base) = std::env::var("PG_URL") else {
        println!("commit_postgres: PG_URL is not set, skipped");
        return;
    };
    let rt = rt();
    let (url, schema) = rt.block_on(pg_schema(&base));
    let store = rt.block_on(PgStore::open(&url)).expect("opens");
    let mut group = c.benchmark_group("commit_postgres");
    group.sample_size(10);
    modes(&mut group, &rt, &store);
    let mut conn = rt
        .block_on(sqlx::PgConnection::connect(&url))
        .expect("connects");
    rt.block_on(
        sqlx::raw_sql(
            "SET synchronous_commit = off; \
             CREATE TABLE floor (id TEXT PRIMARY KEY, seq BIGINT); \
             INSERT INTO floor VALUES ('r', 0);",
        )
        .execute(&mut conn),
    )
    .expect("makes the floor's table");
    group.bench_function("floor", |b| {
        b.iter(|| {
            rt.block_on(
                sqlx::query("UPDATE floor SET seq = seq + 1 WHERE id = 'r'").execute(&mut conn),
            )
            .expect("one round trip with commit")
        })
    });
    group.finish();
    rt.block_on(store.close());
    rt.block_on(admin(&base, &format!("DROP SCHEMA {schema} CASCADE")));
}

/// Runs `pactgraph run` of the chain in `dir` with `args`; its wall time.
fn cli_run(dir: &Path, args: &[&str]) -> Duration {
    let t = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        .current_dir(dir)
        .args(["run", "chain.json", "--input", "@input.json", "--quiet"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the binary runs");
    let took = t.elapsed();
    // A loop stopped by `max_steps` exits 3 (stopped by a guard); anything else but a
    // completed run is a failure.
    assert!(matches!(status.code(), Some(0 | 3)), "{status}");
    took
}

fn cli_pure_step(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let doc = synth::supervisor_loop(CLI_STEPS);
    std::fs::write(
        dir.path().join("chain.json"),
        serde_json::to_string(&doc).expect("a document"),
    )
    .expect("writes");
    // A constant slice of ~100 KB that no step writes.
    let big: Vec<String> = (0..10_000).map(|i| format!("item-{i:04}")).collect();
    std::fs::write(
        dir.path().join("input.json"),
        json!({ "task": big }).to_string(),
    )
    .expect("writes");
    let sqlite = format!("sqlite:{}", dir.path().join("store.db").display());
    let mut stores = vec![("sqlite", sqlite)];
    let rt = rt();
    let pg = std::env::var("PG_URL")
        .ok()
        .map(|base| (rt.block_on(pg_schema(&base)), base));
    if let Some(((url, _), _)) = &pg {
        stores.push(("postgres", url.clone()));
    }
    let mut group = c.benchmark_group("cli_pure_step");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for (label, url) in &stores {
        for (suffix, checkpoints) in [("", "effects"), ("_steps", "steps")] {
            group.bench_function(format!("{label}{suffix}"), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let none = cli_run(dir.path(), &["--store", "none"]);
                        let stored =
                            cli_run(dir.path(), &["--store", url, "--checkpoints", checkpoints]);
                        total += stored.saturating_sub(none) / CLI_STEPS;
                    }
                    total
                })
            });
        }
    }
    group.finish();
    if let Some(((_, schema), base)) = pg {
        rt.block_on(admin(&base, &format!("DROP SCHEMA {schema} CASCADE")));
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_secs(1));
    targets = commit_sqlite, commit_postgres, cli_pure_step
}
criterion_main!(benches);
