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
use support::stores::pg_schema_or_skip;

/// This binary's tests, one at a time: the first looks for the pipelined connection its
/// store opened among the server's, which the other's store would open too.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// This binary's turn (held until dropped) and a schema of its own, or `None` (said)
/// without `PG_URL`.
fn turn() -> Option<(std::sync::MutexGuard<'static, ()>, support::stores::Schema)> {
    let one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some((one, pg_schema_or_skip()?))
}

/// The backends of the pipelined connections open on the server (`pactgraph
/// checkpoints`), and the last statement of each.
async fn pipelined(c: &mut sqlx::PgConnection) -> Vec<(i32, String)> {
    sqlx::query_as(
        "SELECT pid, query FROM pg_stat_activity \
         WHERE application_name = 'pactgraph checkpoints' ORDER BY pid",
    )
    .fetch_all(c)
    .await
    .expect("reads pg_stat_activity")
}

/// Proves that a run checkpointed every step on PostgreSQL writes its checkpoints on the
/// connection they are pipelined on (one new `pactgraph checkpoints` connection, whose
/// last statement is a checkpoint, closed with the store; none opened by a run at
/// effects before it), one checkpoint a step, in order and
/// once (the stop's after the 300 steps: `seq` 301), its events numbered without a gap,
/// and that it loads as driven; and that the store, shown (`Debug`), names the pipe but
/// not the URL's password (the store's own connect options showed it before ADR 0080).
#[test]
fn every_step_is_one_checkpoint_sent_on_the_pipelined_connection() {
    let Some((_one, schema)) = turn() else {
        return;
    };
    rt().block_on(async {
        let store = PgStore::open(&schema.url).await.expect("opens");
        let mut c = sqlx::PgConnection::connect(&schema.url)
            .await
            .expect("connects");
        let before = pipelined(&mut c).await;
        // At effects (the default) nothing is pipelined: no connection of its own.
        let (ex, record) = created_ticker(&store, 300).await;
        drive(&ex, &store, record.run_id, "w", &DriveOptions::default())
            .await
            .expect("drives at effects");
        assert_eq!(pipelined(&mut c).await, before, "a pipe opened at effects");
        let (ex, record) = created_ticker(&store, 300).await;
        let id = record.run_id;
        let options = DriveOptions::default().checkpoints(Checkpoints::Steps);
        let run = drive(&ex, &store, id, "w", &options).await.expect("drives");
        assert_eq!(run.status(), RunStatus::Stopped);
        // One new pipelined connection, this store's, whose last statement was a checkpoint.
        let new: Vec<(i32, String)> = pipelined(&mut c)
            .await
            .into_iter()
            .filter(|p| !before.contains(p) && !before.iter().any(|b| b.0 == p.0))
            .collect();
        assert_eq!(new.len(), 1, "{new:?}");
        assert!(new[0].1.starts_with("WITH up AS (UPDATE runs"), "{new:?}");
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
        // The pipe's settings (its URL's password among them) are not shown.
        let password = schema
            .url
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('@'))
            .and_then(|(user, _)| user.split_once(':'))
            .map(|(_, password)| password.to_string());
        if let Some(password) = password.filter(|p| !p.is_empty()) {
            let shown = format!("{store:?}");
            assert!(shown.contains("pactgraph checkpoints"), "{shown}");
            assert!(!shown.contains(&password), "the password is shown: {shown}");
        }
        store.close().await;
        // Closed with the store.
        let gone = async {
            for _ in 0..50 {
                if !pipelined(&mut c).await.iter().any(|p| p.0 == new[0].0) {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            false
        };
        assert!(gone.await, "the pipelined connection outlived the store");
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
    let Some((_one, schema)) = turn() else {
        return;
    };
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

/// Proves that runs driven side by side at `--checkpoints steps` on one store share its
/// pipes and keep their order: with one connection (so one pipe), two runs of 200 steps
/// driven at once both end with one checkpoint a step, each written once, and load as
/// driven.
#[test]
fn runs_side_by_side_share_a_pipe_and_keep_their_order() {
    let Some((_one, schema)) = turn() else {
        return;
    };
    rt().block_on(async {
        let store = PgStore::open_with(&schema.url, PgOptions::default().max_connections(1))
            .await
            .expect("opens");
        let (ex_a, a) = created_ticker(&store, 200).await;
        let (ex_b, b) = created_ticker(&store, 200).await;
        let options = DriveOptions::default().checkpoints(Checkpoints::Steps);
        let (run_a, run_b) = tokio::join!(
            drive(&ex_a, &store, a.run_id, "w", &options),
            drive(&ex_b, &store, b.run_id, "w", &options)
        );
        for (id, run) in [(a.run_id, run_a), (b.run_id, run_b)] {
            let run = run.expect("drives");
            let info = store.info(id).await.expect("reads");
            assert_eq!((info.seq, info.steps), (201, 200), "{id}");
            assert_eq!(store.load(id).await.expect("loads").record.run, run);
        }
        store.close().await;
    });
}
