//! PostgreSQL's deltas in chunks (ADR 0079): a checkpoint without a snapshot keeps its
//! delta in its event chunk's row, not in a step row. Proved on a real server: a run
//! driven step by step writes no step row yet loads, lists its deltas and measures its
//! storage. Skipped without `PG_URL` (fails with `CI=true`).
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
/// deltas are the checkpoints after its snapshot, and `storage` counts them; driven on to
/// its end, it still writes no step row and loads as driven.
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
        assert_eq!(steps, 0, "no step row");
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

        // Goes on to its end, still writing no step row, and loads as driven.
        let run = drive_steps(&ex, &store, id, 100).await;
        assert!(!run.is_running());
        assert_eq!(kinds_of(&mut c, id).await.0, 0, "no step row");
        let loaded = store.load(id).await.expect("loads");
        assert_same_run(&loaded.record.run, &run);
        store.close().await;
    });
}
