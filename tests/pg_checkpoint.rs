//! PostgreSQL's checkpoint (ADRs 0054, 0057): step rows, snapshots and event chunks are
//! written without a foreign key checked per row, so what the foreign key guaranteed is
//! proved here on a real server: a checkpoint writes nothing for a run it does not fence
//! (a missing run, another owner's), and a run's step rows, snapshots and event chunks go
//! with it when it is deleted (one statement-level trigger in place of `ON DELETE
//! CASCADE` and of `prune`'s own delete of the chunks), those of other runs staying.
//! Skipped without `PG_URL`.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::runtime::{Executor, RunId, RunState, RunStatus};
use pactgraph::store::{
    Before, Checkpoint, Checkpoints, Continue, DriveOptions, PgStore, PruneFilter, RunStore,
    StepDelta, StoreError, StoredStatus, drive,
};
use sqlx::{Connection, Row};
use support::runtime::{created_ticker, rt};
use support::stores::{Schema, pg_url};

const LEASE: Duration = Duration::from_secs(60);

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
    drive(ex, store, id, "w", &options, Continue::AsStored)
        .await
        .expect("drives")
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

/// The deltas (step rows, and the deltas kept in event chunks, ADR 0079),
/// snapshots and event chunks run `id` has in the store's schema.
async fn rows_of(url: &str, id: RunId) -> (i64, i64, i64) {
    let mut c = sqlx::PgConnection::connect(url)
        .await
        .expect("connects to the schema");
    let mut counts = [0; 3];
    for (rows, count) in [
        "steps WHERE run_id = $1 UNION ALL SELECT 1 FROM event_chunks WHERE run_id = $1 \
         AND delta IS NOT NULL",
        "snapshots WHERE run_id = $1",
        "event_chunks WHERE run_id = $1",
    ]
    .iter()
    .zip(&mut counts)
    {
        *count = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM (SELECT 1 FROM {rows}) AS r"))
            .bind(id.to_string())
            .fetch_one(&mut c)
            .await
            .unwrap_or_else(|e| panic!("counts the rows of {rows}: {e}"));
    }
    (counts[0], counts[1], counts[2])
}

/// The highest checkpoint run `id` has a delta (a step row, or one kept in an event chunk)
/// or a snapshot of (0: its create's).
async fn last_written(url: &str, id: RunId) -> i64 {
    let mut c = sqlx::PgConnection::connect(url)
        .await
        .expect("connects to the schema");
    sqlx::query_scalar(
        "SELECT COALESCE(MAX(seq), -1) FROM (SELECT seq FROM steps WHERE run_id = $1 \
         UNION ALL SELECT seq FROM event_chunks WHERE run_id = $1 AND delta IS NOT NULL \
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
        let (ex, record) = created_ticker(&store, 10).await;
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
        assert_eq!(rows_of(&schema.url, missing).await, (0, 0, 0));
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

/// Proves that pruning a run deletes its step rows, snapshots and event chunks with it
/// (the trigger on `runs`, ADR 0057: `prune` itself deletes only runs), and only its own: a run driven step by step (step rows,
/// snapshots and chunks kept) is pruned and leaves none; another run's rows are all still
/// there and it loads as before.
#[test]
fn a_pruned_run_takes_its_step_rows_snapshots_and_event_chunks_along() {
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
            let (ex, record) = created_ticker(&store, 10).await;
            let run = drive_steps(&ex, &store, record.run_id, checkpoints).await;
            assert_eq!(run.status() == RunStatus::Stopped, checkpoints.is_none());
            ids.push(record.run_id);
        }
        let (doomed, kept) = (ids[0], ids[1]);
        let kept_rows = rows_of(&schema.url, kept).await;
        let doomed_rows = rows_of(&schema.url, doomed).await;
        assert!(
            doomed_rows.0 > 0 && doomed_rows.1 > 0 && doomed_rows.2 > 0,
            "step rows, a snapshot and event chunks kept: {doomed_rows:?}"
        );
        assert!(
            kept_rows.0 > 0 && kept_rows.1 > 0 && kept_rows.2 > 0,
            "{kept_rows:?}"
        );
        let kept_run = store.load(kept).await.expect("loads");
        let pruned = store
            .prune(&PruneFilter::default().status(StoredStatus::Stopped))
            .await
            .expect("prunes");
        assert_eq!(pruned, 1);
        assert_eq!(rows_of(&schema.url, doomed).await, (0, 0, 0));
        assert_eq!(rows_of(&schema.url, kept).await, kept_rows);
        let again = store.load(kept).await.expect("still loads");
        assert_same_run(&again.record.run, &kept_run.record.run);
        assert_eq!(again.record.seq, kept_run.record.seq);
        store.close().await;
    });
}

/// Whether the server offers lz4 (its `default_toast_compression` setting lists it).
async fn lz4_offered(c: &mut sqlx::PgConnection) -> bool {
    sqlx::query_scalar(
        "SELECT COALESCE('lz4' = ANY(enumvals), false) FROM pg_settings \
         WHERE name = 'default_toast_compression' \
         UNION ALL SELECT false LIMIT 1",
    )
    .fetch_one(c)
    .await
    .expect("reads the server's compressions")
}

/// Proves that the store keeps snapshots compressed with lz4 when the server has it (its
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
        let offered = lz4_offered(&mut c).await;
        let method: String = sqlx::query_scalar(
            "SELECT attcompression::TEXT FROM pg_attribute \
             WHERE attrelid = 'snapshots'::regclass AND attname = 'run_state'",
        )
        .fetch_one(&mut c)
        .await
        .expect("reads the column's compression");
        assert_eq!(method == "l", offered, "compression {method:?}");

        let (ex, record) = created_ticker(&store, 300).await;
        let run = drive_steps(&ex, &store, record.run_id, None).await;
        let loaded = store.load(record.run_id).await.expect("loads");
        assert_same_run(&loaded.record.run, &run);
        store.close().await;
    });
}

/// Proves the checkpoint's notifications (the answer's `told` and `woke` columns): a
/// committed checkpoint wakes the run's followers (`event_wakeups`); one that leaves the
/// run running wakes no worker, one that ends it wakes the workers (`wakeups`: runs
/// depending on it may be runnable); a refused checkpoint wakes nobody; a store that
/// migrated the schema and one that found it current tell on the same channel. Real
/// `LISTEN`/`NOTIFY`; the waits for silence are 700 ms, for a word 10 s.
#[test]
fn a_checkpoint_tells_followers_and_at_the_end_workers() {
    let Some(schema) = schema() else { return };
    rt().block_on(async {
        let store = PgStore::open(&schema.url).await.expect("opens");
        // One step, then the guard stops the run at the second.
        let (ex, record) = created_ticker(&store, 1).await;
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
        // The run ends: both. Written by a store opened on the schema now current, which
        // read the events channel's name in its open's probe (the first store, on a new
        // schema, read it after the migration; both bind it to their checkpoints, ADR
        // 0067): the followers listening since hear it on the same channel.
        let reopened = PgStore::open(&schema.url).await.expect("opens again");
        let before = Before::of(&run);
        ex.step(&mut run).await;
        assert_eq!(run.status(), RunStatus::Stopped);
        let delta = StepDelta::between(&before, &run);
        reopened
            .checkpoint(id, "a", Checkpoint::new(2, &delta, &run))
            .await
            .expect("checkpoints the end");
        tokio::time::timeout(said, followers.next())
            .await
            .expect("the followers are told of the end");
        tokio::time::timeout(said, workers.next())
            .await
            .expect("the workers are told the run stopped running");
        reopened.close().await;
        store.close().await;
    });
}

/// How run `id`'s largest event chunk is kept: whether packed in the client (ADR 0063),
/// and the server's compression of the value (`None`: kept as it came).
async fn largest_chunk(c: &mut sqlx::PgConnection, id: RunId) -> (bool, Option<String>) {
    let row = sqlx::query(
        "SELECT packed IS NOT NULL AS packed, CASE WHEN packed IS NULL \
           THEN pg_column_compression(events) ELSE pg_column_compression(packed) END AS how \
         FROM event_chunks WHERE run_id = $1 \
         ORDER BY COALESCE(octet_length(packed), octet_length(events)) DESC LIMIT 1",
    )
    .bind(id.to_string())
    .fetch_one(c)
    .await
    .expect("reads a chunk");
    (row.get("packed"), row.get("how"))
}

/// The compression the `events` column (text chunks) is set to: `l` for lz4 (ADR 0057),
/// empty for the server's default.
async fn events_compression(c: &mut sqlx::PgConnection) -> String {
    let how: i8 = sqlx::query_scalar(
        "SELECT attcompression FROM pg_attribute \
         WHERE attrelid = 'event_chunks'::regclass AND attname = 'events'",
    )
    .fetch_one(c)
    .await
    .expect("reads the column's compression");
    if how == 0 {
        String::new()
    } else {
        char::from(u8::try_from(how).expect("an ASCII letter")).to_string()
    }
}

/// Proves that a run deleted by any statement, a plain `DELETE` or a prune, takes all of
/// its rows along (the trigger on `runs`: step rows, snapshots and event chunks), other
/// runs' rows staying; that the text chunks' column is compressed with lz4 wherever the
/// server offers it; and that a run's chunk (its 300 steps' events, far over the 2 KB
/// that makes PostgreSQL compress a value) is packed in the client and kept as it came
/// (ADR 0063).
#[test]
fn deleted_runs_take_their_chunks_and_chunks_are_kept_as_they_came() {
    let Some(schema) = schema() else { return };
    rt().block_on(async {
        let store = PgStore::open(&schema.url).await.expect("opens");
        let mut runs = Vec::new();
        for _ in 0..2 {
            let (ex, record) = created_ticker(&store, 300).await;
            let run = drive(
                &ex,
                &store,
                record.run_id,
                "w",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .expect("drives");
            runs.push((record.run_id, run));
        }
        let mut c = sqlx::PgConnection::connect(&schema.url)
            .await
            .expect("connects to the schema");
        let offered = lz4_offered(&mut c).await;
        assert_eq!(largest_chunk(&mut c, runs[0].0).await, (true, None));
        assert_eq!(
            events_compression(&mut c).await,
            if offered { "l" } else { "" }
        );
        for (id, run) in &runs {
            let loaded = store.load(*id).await.expect("loads");
            assert_same_run(&loaded.record.run, run);
        }
        // A plain `DELETE`, then a prune: each run's rows all gone, the other's kept.
        let (deleted, pruned) = (runs[0].0, runs[1].0);
        let pruned_rows = rows_of(&schema.url, pruned).await;
        assert!(pruned_rows.2 > 0, "{pruned_rows:?}");
        support::stores::admin(
            &schema.url,
            &format!("DELETE FROM runs WHERE id = '{deleted}'"),
        );
        assert_eq!(rows_of(&schema.url, deleted).await, (0, 0, 0));
        assert_eq!(rows_of(&schema.url, pruned).await, pruned_rows);
        let count = store
            .prune(&PruneFilter::default().status(StoredStatus::Stopped))
            .await
            .expect("prunes");
        assert_eq!(count, 1, "the run left, stopped by max_steps");
        assert_eq!(rows_of(&schema.url, pruned).await, (0, 0, 0));
        store.close().await;
    });
}
