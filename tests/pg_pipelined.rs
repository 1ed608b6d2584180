//! PostgreSQL's checkpoints of `--checkpoints steps`, two at a time on a connection of
//! their own (ADR 0080), on a real server: they go through that connection (named
//! `pactgraph checkpoints`), every step is one checkpoint written once and in order, the
//! run loads as driven; and when the lease lapses with two in flight, the one the fence
//! refuses stops the drive with `LeaseLost`, the one behind it is refused with it, and the
//! store keeps exactly the checkpoints before (each once, the run loadable). Skipped
//! without `PG_URL` (fails with `CI=true`).
#![cfg(feature = "store")]

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use pactgraph::runtime::{RunState, RunStatus};
use pactgraph::store::{
    Checkpoints, Clock, DriveOptions, PgOptions, PgStore, RunStore, StoreError, drive,
};
use sqlx::Connection;
use support::runtime::{created_ticker, rt};
use support::stores::{Schema, pg_url};

/// A schema of this test's own on `PG_URL`'s server, or `None` (said) without one.
fn schema() -> Option<Schema> {
    if pg_url().is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but PG_URL is not set"
        );
        eprintln!("PG_URL is not set: skipped");
        return None;
    }
    Some(Schema::new())
}

/// The connections of the database open with `application_name` `name`.
async fn connections_named(c: &mut sqlx::PgConnection, name: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_stat_activity \
         WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(name)
    .fetch_one(c)
    .await
    .expect("reads pg_stat_activity")
}

/// Proves that a run checkpointed every step on PostgreSQL writes its checkpoints on the
/// connection they are pipelined on (one `pactgraph checkpoints` connection while the
/// store is open, none before its first checkpoint), one checkpoint a step, in order and
/// once (the stop's after the 300 steps: `seq` 301), its events numbered without a gap,
/// and that it loads as driven.
#[test]
fn every_step_is_one_checkpoint_sent_on_the_pipelined_connection() {
    let Some(schema) = schema() else { return };
    rt().block_on(async {
        let store = PgStore::open(&schema.url).await.expect("opens");
        let mut c = sqlx::PgConnection::connect(&schema.url)
            .await
            .expect("connects");
        assert_eq!(connections_named(&mut c, "pactgraph checkpoints").await, 0);
        let (ex, record) = created_ticker(&store, 300).await;
        let id = record.run_id;
        let options = DriveOptions::default().checkpoints(Checkpoints::Steps);
        let run = drive(&ex, &store, id, "w", &options).await.expect("drives");
        assert_eq!(run.status(), RunStatus::Stopped);
        assert_eq!(connections_named(&mut c, "pactgraph checkpoints").await, 1);
        let info = store.info(id).await.expect("reads");
        assert_eq!(info.seq, 301, "one checkpoint a step, and the stop's");
        assert_eq!(info.steps, 300);
        let checkpoints: Vec<i64> =
            sqlx::query_scalar("SELECT seq FROM event_chunks WHERE run_id = $1 ORDER BY seq")
                .bind(id.to_string())
                .fetch_all(&mut c)
                .await
                .expect("reads the chunks");
        assert_eq!(
            checkpoints,
            (1..=301).collect::<Vec<i64>>(),
            "each once, in order"
        );
        let gaps: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM (SELECT first_seq, LAG(last_seq) OVER (ORDER BY first_seq) \
             AS before FROM event_chunks WHERE run_id = $1) AS c \
             WHERE before IS NOT NULL AND first_seq <> before + 1",
        )
        .bind(id.to_string())
        .fetch_one(&mut c)
        .await
        .expect("reads the chunks");
        assert_eq!(gaps, 0, "events numbered on without a gap");
        let loaded = store.load(id).await.expect("loads");
        assert_eq!(loaded.record.run, run);
        store.close().await;
    });
}

/// The store's manual clock, for [`lapse_at_step_40`].
static CLOCK: OnceLock<Clock> = OnceLock::new();

/// Before step 40, moves the store's clock past the lease: the checkpoint of that step
/// is fenced on a lapsed lease (and those behind it on a `seq` that did not commit).
fn lapse_at_step_40(run: &RunState) {
    if run.steps() == 39 {
        CLOCK
            .get()
            .expect("set by the test")
            .advance(Duration::from_secs(600));
    }
}

/// Proves that when the lease lapses with checkpoints in flight, the drive stops with
/// `LeaseLost` and the store keeps exactly the checkpoints before: the one fenced on the
/// lapsed lease is refused (and again when written alone), the one sent behind it is
/// refused by its `seq`, nothing of either is written, and the run loads as it was after
/// its 39th step, with one chunk a checkpoint.
#[test]
fn a_lapsed_lease_with_two_in_flight_keeps_exactly_the_checkpoints_before() {
    let Some(schema) = schema() else { return };
    let clock = CLOCK
        .get_or_init(|| Clock::manual(1_800_000_000_000))
        .clone();
    rt().block_on(async {
        let store = PgStore::open_with(&schema.url, PgOptions::default().clock(clock))
            .await
            .expect("opens");
        let (ex, record) = created_ticker(&store, 300).await;
        let id = record.run_id;
        let options = DriveOptions::default()
            .checkpoints(Checkpoints::Steps)
            .lease(Duration::from_secs(60))
            .before_step(lapse_at_step_40);
        let stopped = drive(&ex, &store, id, "w", &options).await;
        assert!(
            matches!(stopped, Err(StoreError::LeaseLost { .. })),
            "{stopped:?}"
        );
        let info = store.info(id).await.expect("reads");
        assert_eq!(
            info.seq, 39,
            "the checkpoints of the 39 steps before, no more"
        );
        assert_eq!(info.steps, 39);
        let mut c = sqlx::PgConnection::connect(&schema.url)
            .await
            .expect("connects");
        let chunks: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM event_chunks WHERE run_id = $1")
            .bind(id.to_string())
            .fetch_one(&mut c)
            .await
            .expect("counts the chunks");
        assert_eq!(chunks, 39, "one chunk a committed checkpoint");
        let loaded = store.load(id).await.expect("loads");
        assert_eq!(loaded.record.run.steps(), 39);
        assert!(loaded.record.run.is_running());
        store.close().await;
    });
}
