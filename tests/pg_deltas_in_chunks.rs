//! PostgreSQL's format 13 (ADR 0079): a checkpoint without a snapshot keeps its delta in
//! its event chunk's row, not in a step row. Proved on a real server: a run driven step by
//! step writes no step row after its create yet loads, lists its deltas and measures its
//! storage as before; and a run written at format 12 (its deltas in step rows) loads the
//! same after the store is migrated, then goes on with its deltas in chunks, its load
//! replaying both kinds in checkpoint order. Skipped without `PG_URL` (fails with
//! `CI=true`).
#![cfg(feature = "store")]

mod support;

use pactgraph::runtime::{Executor, RunId, RunState};
use pactgraph::store::{Checkpoints, Continue, DriveOptions, PgOptions, PgStore, RunStore, drive};
use sqlx::Connection;
use support::runtime::{created_ticker, rt};
use support::stores::pg_schema_or_skip;

/// The store at `url` (migrated on open), a snapshot only by weight.
async fn opened(url: &str) -> PgStore {
    PgStore::open_with(url, PgOptions::default().snapshot_every(1_000))
        .await
        .expect("opens (and migrates)")
}

/// Drives run `id` checkpointing every step, `checkpoints` times.
async fn drive_steps(ex: &Executor, store: &PgStore, id: RunId, checkpoints: u64) -> RunState {
    let options = DriveOptions::default()
        .checkpoints(Checkpoints::Steps)
        .max_checkpoints(checkpoints);
    drive(ex, store, id, "w", &options, Continue::AsStored)
        .await
        .expect("drives")
}

/// Run `id`'s rows: step rows, and chunks holding a delta.
async fn kinds_of(c: &mut sqlx::PgConnection, id: RunId) -> (i64, i64) {
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql).bind(id.to_string());
    let steps = count("SELECT COUNT(*) FROM steps WHERE run_id = $1")
        .fetch_one(&mut *c)
        .await
        .expect("counts step rows");
    let chunks = count("SELECT COUNT(*) FROM event_chunks WHERE run_id = $1 AND delta IS NOT NULL")
        .fetch_one(&mut *c)
        .await
        .expect("counts chunks with a delta");
    (steps, chunks)
}

/// Asserts that `a` and `b` are the same run state, byte for byte as JSON.
fn assert_same_run(a: &RunState, b: &RunState) {
    assert_eq!(
        serde_json::to_string(a).expect("serializes"),
        serde_json::to_string(b).expect("serializes")
    );
}

/// Proves that a run checkpointed every step keeps its deltas in its chunks only (no step
/// row), and that a load, `deltas` and `storage` read them: the run loads as driven, its
/// deltas are the checkpoints after its snapshot, and `storage` counts them.
#[test]
fn a_checkpoint_keeps_its_delta_in_its_chunk() {
    let Some(schema) = pg_schema_or_skip() else {
        return;
    };
    rt().block_on(async {
        let store = opened(&schema.url).await;
        let mut c = sqlx::PgConnection::connect(&schema.url)
            .await
            .expect("connects");
        let (ex, record) = created_ticker(&store, 50).await;
        let id = record.run_id;
        let run = drive_steps(&ex, &store, id, 8).await;
        let (steps, chunks) = kinds_of(&mut c, id).await;
        assert_eq!(steps, 0, "no step row at format 13");
        let loaded = store.load(id).await.expect("loads");
        assert_same_run(&loaded.record.run, &run);
        assert_eq!(loaded.record.seq, 8);
        let storage = store.storage(id).await.expect("measures");
        let deltas = store.deltas(id).await.expect("reads the deltas");
        let seqs: Vec<u64> = deltas.iter().map(|(seq, _)| *seq).collect();
        let after: Vec<u64> = (storage.snapshot_seq + 1..=8).collect();
        assert_eq!(seqs, after, "the deltas after the snapshot, in order");
        assert!(chunks >= i64::try_from(after.len()).expect("small"));
        assert_eq!(storage.steps, u64::try_from(after.len()).expect("small"));
        assert!(storage.step_bytes > 0);
        store.close().await;
    });
}

/// Proves that a run written at format 12 (its deltas in step rows) loads byte for byte
/// the same once the store is migrated to 13; that a run holding both kinds (step rows,
/// then deltas in chunks) loads the same, its load and `deltas` replaying them in
/// checkpoint order; and that it goes on to its end writing no step row.
#[test]
fn a_run_of_format_12_loads_and_goes_on_with_deltas_in_chunks() {
    let Some(schema) = pg_schema_or_skip() else {
        return;
    };
    rt().block_on(async {
        let store = opened(&schema.url).await;
        let (ex, record) = created_ticker(&store, 50).await;
        let id = record.run_id;
        drive_steps(&ex, &store, id, 6).await;
        let before = store.load(id).await.expect("loads");
        let deltas_before = store.deltas(id).await.expect("reads the deltas");
        let storage_before = store.storage(id).await.expect("measures");
        assert!(deltas_before.len() >= 3, "{}", deltas_before.len());
        store.close().await;

        // Back to format 12: the deltas after the snapshot in step rows (as format 12 wrote
        // them; a snapshot deleted those before it), the chunks' column dropped, migration
        // 13 forgotten.
        support::stores::admin(
            &schema.url,
            "INSERT INTO steps (run_id, seq, delta, created_ms) \
               SELECT c.run_id, c.seq, c.delta, 0 FROM event_chunks c \
               WHERE c.delta IS NOT NULL AND c.seq > \
                 (SELECT MAX(s.seq) FROM snapshots s WHERE s.run_id = c.run_id); \
             ALTER TABLE event_chunks DROP COLUMN delta; \
             DELETE FROM _sqlx_migrations WHERE version > 12",
        );
        let mut c = sqlx::PgConnection::connect(&schema.url)
            .await
            .expect("connects");
        let old_rows = i64::try_from(deltas_before.len()).expect("small");

        // Migrated again on open: the run reads as it did.
        let store = opened(&schema.url).await;
        assert_eq!(kinds_of(&mut c, id).await, (old_rows, 0));
        let again = store.load(id).await.expect("a run of format 12 loads");
        assert_same_run(&again.record.run, &before.record.run);
        assert_eq!(again.record.seq, before.record.seq);
        let deltas_again = store.deltas(id).await.expect("reads the deltas");
        assert_eq!(deltas_again, deltas_before);
        assert_eq!(store.storage(id).await.expect("measures"), storage_before);

        // Both kinds in one run (a run written at format 12 up to a checkpoint and at 13
        // after it): the last step row's delta moved into its chunk, the rest kept as step
        // rows; a load replays them in checkpoint order, to the same run.
        let last = deltas_before.last().expect("at least three").0;
        support::stores::admin(
            &schema.url,
            &format!(
                "UPDATE event_chunks c SET delta = s.delta FROM steps s \
                   WHERE s.run_id = '{id}' AND c.run_id = s.run_id AND s.seq = {last} \
                   AND c.seq = s.seq; \
                 DELETE FROM steps WHERE run_id = '{id}' AND seq = {last}"
            ),
        );
        assert_eq!(kinds_of(&mut c, id).await, (old_rows - 1, 1));
        let mixed = store.load(id).await.expect("loads both kinds");
        assert_same_run(&mixed.record.run, &before.record.run);
        assert_eq!(
            store.deltas(id).await.expect("reads the deltas"),
            deltas_before
        );
        assert_eq!(store.storage(id).await.expect("measures"), storage_before);

        // Goes on to its end: its checkpoints keep their deltas in chunks, and it loads
        // as driven.
        let run = drive_steps(&ex, &store, id, 100).await;
        assert!(!run.is_running());
        let (steps, _) = kinds_of(&mut c, id).await;
        assert!(steps < old_rows, "no new step row: {steps}");
        let loaded = store.load(id).await.expect("loads");
        assert_same_run(&loaded.record.run, &run);
        store.close().await;
    });
}
