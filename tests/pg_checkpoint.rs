//! PostgreSQL's checkpoint at format 9 (ADR 0054): step rows and snapshots are written
//! without a foreign key checked per row, so what the foreign key guaranteed is proved
//! here on a real server: a checkpoint writes nothing for a run it does not fence (a
//! missing run, another owner's), and a run's step rows and snapshots go with it when it
//! is pruned (a statement-level trigger in place of `ON DELETE CASCADE`), those of other
//! runs staying. Skipped without `PG_URL`.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::runtime::{Executor, RunId, RunRecord, RunState, RunStatus};
use pactgraph::store::{
    Before, Checkpoint, Checkpoints, CreateOptions, DriveOptions, PgStore, PruneFilter, RunStore,
    StepDelta, StoreError, StoredStatus, drive,
};
use serde_json::json;
use sqlx::Connection;
use support::runtime::{builder, graph, rt};
use support::stores::{Schema, pg_url};

const LEASE: Duration = Duration::from_secs(60);

/// A loop of `max_steps` `set` steps.
fn ticker(max_steps: u32) -> serde_json::Value {
    json!({
        "workflow": "ticker",
        "slices": {"n": {}},
        "budgets": {"max_steps": max_steps},
        "entry": "root",
        "supervisors": {"root": {"allow": ["tick"]}},
        "nodes": {"tick": {"supervisor": "root", "reads": ["n"], "writes": ["n"],
            "triggers": [{"priority": 1, "when": true}],
            "run": {"set": {"n": 1}}}}
    })
}

/// The executor of a ticker of `max_steps` and a new run of it, created in `store`.
async fn created(store: &PgStore, max_steps: u32) -> (Executor, RunRecord) {
    let g = graph(ticker(max_steps));
    let document = g.to_document();
    let ex = builder(g).build().expect("builds");
    let record = RunRecord::new(document, ex.start(json!({})).expect("starts"));
    store
        .create(&record, &CreateOptions::default())
        .await
        .expect("creates");
    (ex, record)
}

/// Drives run `id` checkpointing every step, at most `checkpoints` times when given.
async fn drive_steps(
    ex: &Executor,
    store: &PgStore,
    id: RunId,
    checkpoints: Option<u64>,
) -> RunState {
    let options = DriveOptions::default().checkpoints(Checkpoints::Steps);
    let options = match checkpoints {
        Some(n) => options.max_checkpoints(n),
        None => options,
    };
    drive(ex, store, id, "w", &options).await.expect("drives")
}

/// Asserts that `a` and `b` are the same run state, byte for byte as JSON.
fn assert_same_run(a: &RunState, b: &RunState) {
    assert_eq!(
        serde_json::to_value(a).expect("serializes"),
        serde_json::to_value(b).expect("serializes")
    );
}

/// A schema of this test's own on `PG_URL`'s server, or `None` (said) without one.
fn schema() -> Option<Schema> {
    if pg_url().is_none() {
        eprintln!("PG_URL is not set: skipped");
        return None;
    }
    Some(Schema::new())
}

/// The step rows and snapshots run `id` has in the store's schema.
async fn rows_of(url: &str, id: RunId) -> (i64, i64) {
    let mut c = sqlx::PgConnection::connect(url)
        .await
        .expect("connects to the schema");
    let count = |table: &str| format!("SELECT COUNT(*) FROM {table} WHERE run_id = $1");
    let steps: i64 = sqlx::query_scalar(&count("steps"))
        .bind(id.to_string())
        .fetch_one(&mut c)
        .await
        .expect("counts step rows");
    let snapshots: i64 = sqlx::query_scalar(&count("snapshots"))
        .bind(id.to_string())
        .fetch_one(&mut c)
        .await
        .expect("counts snapshots");
    (steps, snapshots)
}

/// The highest checkpoint run `id` has a step row or a snapshot of (0: its create's).
async fn last_written(url: &str, id: RunId) -> i64 {
    let mut c = sqlx::PgConnection::connect(url)
        .await
        .expect("connects to the schema");
    sqlx::query_scalar(
        "SELECT COALESCE(MAX(seq), -1) FROM (SELECT seq FROM steps WHERE run_id = $1 \
         UNION ALL SELECT seq FROM snapshots WHERE run_id = $1) AS written",
    )
    .bind(id.to_string())
    .fetch_one(&mut c)
    .await
    .expect("reads the rows written")
}

/// Proves that a checkpoint fences its step row without the foreign key: one for a run
/// that was never created, and one by an owner that does not hold the run, are refused
/// and write nothing; the holder's checkpoint writes its row (a step row, or the snapshot
/// that the run's first checkpoint carries).
#[test]
fn a_checkpoint_writes_a_step_row_only_for_the_run_it_fences() {
    let Some(schema) = schema() else { return };
    rt().block_on(async {
        let store = PgStore::open(&schema.url).await.expect("opens");
        let (ex, record) = created(&store, 10).await;
        let (id, mut run) = (record.run_id, record.run);
        store.claim(id, "a", LEASE).await.expect("claims");
        let before = Before::of(&run);
        ex.step(&mut run).await;
        let delta = StepDelta::between(&before, &run);

        // A run never created: refused, no row (the foreign key refused one before).
        let missing = RunId::new();
        let refused = store
            .checkpoint(missing, "a", Checkpoint::new(1, &delta, &run))
            .await;
        assert!(
            matches!(refused, Err(StoreError::NotFound { .. })),
            "{refused:?}"
        );
        assert_eq!(rows_of(&schema.url, missing).await, (0, 0));
        assert_eq!(last_written(&schema.url, missing).await, -1);

        // Not the holder: refused, nothing after the create's snapshot.
        let written = rows_of(&schema.url, id).await;
        assert_eq!(last_written(&schema.url, id).await, 0);
        let refused = store
            .checkpoint(id, "b", Checkpoint::new(1, &delta, &run))
            .await;
        assert!(
            matches!(refused, Err(StoreError::LeaseLost { .. })),
            "{refused:?}"
        );
        assert_eq!(rows_of(&schema.url, id).await, written);
        assert_eq!(last_written(&schema.url, id).await, 0);

        // The holder: its checkpoint's row.
        let info = store
            .checkpoint(id, "a", Checkpoint::new(1, &delta, &run))
            .await
            .expect("the holder checkpoints");
        assert_eq!(info.seq, 1);
        assert_eq!(last_written(&schema.url, id).await, 1);
        store.close().await;
    });
}

/// Proves that pruning a run deletes its step rows and snapshots with it (the trigger
/// that replaced the cascade), and only its own: a run driven step by step (step rows and
/// snapshots kept) is pruned and leaves none; another run's rows are all still there and
/// it loads as before.
#[test]
fn a_pruned_run_takes_its_step_rows_and_snapshots_along() {
    let Some(schema) = schema() else { return };
    rt().block_on(async {
        // A snapshot every 4 checkpoints: both tables have rows of each run.
        let store = PgStore::open_with(
            &schema.url,
            pactgraph::store::PgOptions::default().snapshot_every(4),
        )
        .await
        .expect("opens");
        // Two runs: one driven to its end (`stopped` by `max_steps`), the other for six
        // checkpoints and let go (`interrupted`), so a prune of stopped runs takes one.
        let mut ids = Vec::new();
        for checkpoints in [None, Some(6)] {
            let (ex, record) = created(&store, 10).await;
            let run = drive_steps(&ex, &store, record.run_id, checkpoints).await;
            assert_eq!(run.status() == RunStatus::Stopped, checkpoints.is_none());
            ids.push(record.run_id);
        }
        let (doomed, kept) = (ids[0], ids[1]);
        let kept_rows = rows_of(&schema.url, kept).await;
        let doomed_rows = rows_of(&schema.url, doomed).await;
        assert!(
            doomed_rows.0 > 0 && doomed_rows.1 > 0,
            "step rows and a snapshot kept: {doomed_rows:?}"
        );
        assert!(kept_rows.0 > 0 && kept_rows.1 > 0, "{kept_rows:?}");
        let kept_run = store.load(kept).await.expect("loads");
        let pruned = store
            .prune(&PruneFilter::default().status(StoredStatus::Stopped))
            .await
            .expect("prunes");
        assert_eq!(pruned, 1);
        assert_eq!(rows_of(&schema.url, doomed).await, (0, 0));
        assert_eq!(rows_of(&schema.url, kept).await, kept_rows);
        let again = store.load(kept).await.expect("still loads");
        assert_same_run(&again.record.run, &kept_run.record.run);
        assert_eq!(again.record.seq, kept_run.record.seq);
        store.close().await;
    });
}

/// Proves that format 9 stores snapshots compressed with lz4 when the server has it (its
/// `default_toast_compression` setting offers `lz4`), and that a snapshot so stored loads
/// back whole: a run of 300 steps with a snapshot every 100 checkpoints is reloaded as
/// it ended.
#[test]
fn snapshots_are_compressed_with_lz4_where_the_server_has_it() {
    let Some(schema) = schema() else { return };
    rt().block_on(async {
        let store = PgStore::open_with(
            &schema.url,
            pactgraph::store::PgOptions::default().snapshot_every(100),
        )
        .await
        .expect("opens");
        let mut c = sqlx::PgConnection::connect(&schema.url)
            .await
            .expect("connects to the schema");
        let offered: bool = sqlx::query_scalar(
            "SELECT COALESCE('lz4' = ANY(enumvals), false) FROM pg_settings \
             WHERE name = 'default_toast_compression' \
             UNION ALL SELECT false LIMIT 1",
        )
        .fetch_one(&mut c)
        .await
        .expect("reads the server's compressions");
        let method: String = sqlx::query_scalar(
            "SELECT attcompression::TEXT FROM pg_attribute \
             WHERE attrelid = 'snapshots'::regclass AND attname = 'run_state'",
        )
        .fetch_one(&mut c)
        .await
        .expect("reads the column's compression");
        assert_eq!(method == "l", offered, "compression {method:?}");

        let (ex, record) = created(&store, 300).await;
        let run = drive_steps(&ex, &store, record.run_id, None).await;
        let loaded = store.load(record.run_id).await.expect("loads");
        assert_same_run(&loaded.record.run, &run);
        store.close().await;
    });
}

/// Proves the checkpoint's notifications (the answer's `told` and `woke` columns): a
/// committed checkpoint wakes the run's followers (`event_wakeups`); one that leaves the
/// run running wakes no worker, one that ends it wakes the workers (`wakeups`: runs
/// depending on it may be runnable); a refused checkpoint wakes nobody. Real
/// `LISTEN`/`NOTIFY`; the waits for silence are 700 ms, for a word 10 s.
#[test]
fn a_checkpoint_tells_followers_and_at_the_end_workers() {
    let Some(schema) = schema() else { return };
    rt().block_on(async {
        let store = PgStore::open(&schema.url).await.expect("opens");
        // One step, then the guard stops the run at the second.
        let (ex, record) = created(&store, 1).await;
        let (id, mut run) = (record.run_id, record.run);
        store.claim(id, "a", LEASE).await.expect("claims");
        let followers = store.event_wakeups(id).await.expect("listens for events");
        let workers = store.wakeups().await.expect("listens for runnable runs");
        let silent = Duration::from_millis(700);
        let said = Duration::from_secs(10);

        let before = Before::of(&run);
        ex.step(&mut run).await;
        assert!(run.is_running());
        let delta = StepDelta::between(&before, &run);
        // Refused (not the holder): nobody is told.
        assert!(
            store
                .checkpoint(id, "b", Checkpoint::new(1, &delta, &run))
                .await
                .is_err()
        );
        assert!(
            tokio::time::timeout(silent, followers.next())
                .await
                .is_err(),
            "a refused checkpoint woke the run's followers"
        );
        // Committed, still running: the followers, not the workers.
        store
            .checkpoint(id, "a", Checkpoint::new(1, &delta, &run))
            .await
            .expect("checkpoints");
        tokio::time::timeout(said, followers.next())
            .await
            .expect("the followers are told of the checkpoint");
        assert!(
            tokio::time::timeout(silent, workers.next()).await.is_err(),
            "a checkpoint of a running run woke the workers"
        );
        // The run ends: both.
        let before = Before::of(&run);
        ex.step(&mut run).await;
        assert_eq!(run.status(), RunStatus::Stopped);
        let delta = StepDelta::between(&before, &run);
        store
            .checkpoint(id, "a", Checkpoint::new(2, &delta, &run))
            .await
            .expect("checkpoints the end");
        tokio::time::timeout(said, followers.next())
            .await
            .expect("the followers are told of the end");
        tokio::time::timeout(said, workers.next())
            .await
            .expect("the workers are told the run stopped running");
        store.close().await;
    });
}
