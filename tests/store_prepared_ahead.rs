//! What ADR 0071 changed about a drive's checkpoints, on both stores: a checkpoint is
//! prepared before the checkpoint in flight is answered (what it carries depends on the run
//! alone, and the wait for the one before, the create of a run created beside its first
//! steps or a slow write, is spent making it); the checkpoint that stops a run gives its
//! lease up in the same statement where the store can (PostgreSQL), with no release after.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::runtime::{RunRecord, RunState};
use pactgraph::store::{
    Continue, CreateOptions, DriveOptions, PreparedCreate, RunStore, drive, drive_creating_then,
};
use serde_json::json;
use support::runtime::{builder, graph, rt, ticker};
use support::stores::{
    Backend, add_counter, backends, count_snapshot_writes, open, snapshot_writes, two_counts,
};

/// Proves: checkpoints prepared while the run's create is in flight weigh the run as the
/// store will have it. A run created beside its first steps (`drive_creating_then`), in
/// batches of two pure steps so that its first checkpoints are prepared before the
/// create's answer comes, writes exactly the snapshots of the same run created first and
/// then driven: the snapshot rule sees the created state's weight before the create is
/// answered. (With the weight recorded at the create's answer, the first checkpoint found
/// the run unweighed and carried a whole snapshot of its 40 KB input.) Both runs end as
/// the run in memory and reload as they ended.
#[test]
fn checkpoints_prepared_while_the_create_is_in_flight_weigh_the_created_run() {
    const STEPS: u32 = 60;
    let mut doc = ticker(STEPS);
    doc["slices"]["big"] = json!({});
    let g = graph(doc);
    let document = g.to_document();
    let ex = builder(g).build().expect("builds");
    let big: Vec<String> = (0..4_000).map(|i| format!("item-{i:05}")).collect();
    let input = json!({"big": big});
    let rt = rt();
    let mut whole = ex.start(input.clone()).expect("starts");
    rt.block_on(ex.run_in_place(&mut whole));
    assert_eq!(whole.steps(), STEPS);
    let options = DriveOptions::default().batch(2, Duration::from_secs(3600));
    for backend in backends() {
        rt.block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            count_snapshot_writes(backend, &held.url).await;

            // Created, then driven: the create is answered before the first step.
            let record = RunRecord::new(document.clone(), ex.start(input.clone()).unwrap());
            let first = record.run_id;
            store
                .create(&record, &CreateOptions::default())
                .await
                .expect("creates");
            let run = drive(&ex, &store, first, "a", &options)
                .await
                .expect("drives");
            assert_eq!(run.state(), whole.state(), "{backend}");
            assert_eq!(store.load(first).await.unwrap().record.run, run);
            let (created_first, _) = snapshot_writes(backend, &held.url).await;
            assert!(
                created_first >= 1,
                "{backend}: the create's snapshot at least"
            );

            // Created beside its first steps: its first checkpoints are prepared while
            // the create is in flight.
            let record = RunRecord::new(document.clone(), ex.start(input.clone()).unwrap());
            let beside = record.run_id;
            let prepared = PreparedCreate::of(&record).expect("prepares");
            let (run, steps) = drive_creating_then(
                &ex,
                &store,
                record,
                prepared,
                &CreateOptions::default(),
                "a",
                &options,
                Continue::AsStored,
                |run: &RunState| run.steps(),
            )
            .await
            .expect("drives");
            assert_eq!(steps, STEPS, "{backend}");
            assert_eq!(run.state(), whole.state(), "{backend}");
            assert_eq!(
                run.trace().without_timing(),
                whole.trace().without_timing(),
                "{backend}"
            );
            assert_eq!(store.load(beside).await.unwrap().record.run, run);
            let info = store.info(beside).await.unwrap();
            assert_eq!(
                info.seq,
                store.info(first).await.unwrap().seq,
                "{backend}: as many checkpoints as the run created first"
            );
            assert!(
                info.seq >= u64::from(STEPS / 2),
                "{backend}: batches of two"
            );
            let (both, _) = snapshot_writes(backend, &held.url).await;
            assert_eq!(
                both - created_first,
                created_first,
                "{backend}: the run created beside its steps wrote {} snapshots, the run \
                 created first {created_first}",
                both - created_first
            );
        });
    }
}

/// Counts, on the store at `url`, the updates of a run row that take its owner away: as a
/// release does (`seq` unchanged) and as a checkpoint does (`seq` one more).
async fn count_lets_go(backend: Backend, url: &str) {
    add_counter(
        backend,
        url,
        "CREATE TABLE lets_go (released INTEGER NOT NULL, with_checkpoint INTEGER NOT NULL); \
         INSERT INTO lets_go VALUES (0, 0); \
         CREATE TRIGGER let_go AFTER UPDATE ON runs \
           WHEN OLD.owner IS NOT NULL AND NEW.owner IS NULL BEGIN \
           UPDATE lets_go SET released = released + (NEW.seq = OLD.seq), \
             with_checkpoint = with_checkpoint + (NEW.seq = OLD.seq + 1); \
         END;",
        "CREATE TABLE lets_go (released BIGINT NOT NULL, with_checkpoint BIGINT NOT NULL); \
         INSERT INTO lets_go VALUES (0, 0); \
         CREATE FUNCTION let_go() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF OLD.owner IS NOT NULL AND NEW.owner IS NULL THEN \
             UPDATE lets_go SET \
               released = released + CASE WHEN NEW.seq = OLD.seq THEN 1 ELSE 0 END, \
               with_checkpoint = with_checkpoint \
                 + CASE WHEN NEW.seq = OLD.seq + 1 THEN 1 ELSE 0 END; \
           END IF; RETURN NULL; END $$; \
         CREATE TRIGGER let_go AFTER UPDATE ON runs \
           FOR EACH ROW EXECUTE FUNCTION let_go();",
    )
    .await;
}

/// What [`count_lets_go`] counted: (by a release, with a checkpoint).
async fn lets_go(backend: Backend, url: &str) -> (i64, i64) {
    two_counts(
        backend,
        url,
        "SELECT released, with_checkpoint FROM lets_go",
    )
    .await
}

/// Proves: a drive whose run stops (here it ends) gives its lease up with the run's last
/// checkpoint on PostgreSQL (one update of the run row takes the owner away and advances
/// its `seq`; no release after it), and with a release after that checkpoint on SQLite
/// (whose checkpoint is a trigger of its schema); both leave the run without an owner or a
/// lease, ended as the run in memory, at effects and with `--checkpoints steps`.
#[test]
fn the_checkpoint_that_stops_a_run_gives_its_lease_up_where_the_store_can() {
    const STEPS: u32 = 40;
    let g = graph(ticker(STEPS));
    let document = g.to_document();
    let ex = builder(g).build().expect("builds");
    let rt = rt();
    let mut whole = ex.start(json!({})).expect("starts");
    rt.block_on(ex.run_in_place(&mut whole));
    for backend in backends() {
        for options in [
            DriveOptions::default(),
            DriveOptions::default().checkpoints(pactgraph::store::Checkpoints::Steps),
        ] {
            rt.block_on(async {
                let held = open(backend).await;
                let store = held.store.clone();
                count_lets_go(backend, &held.url).await;
                let record = RunRecord::new(document.clone(), ex.start(json!({})).unwrap());
                let id = record.run_id;
                store
                    .create(&record, &CreateOptions::default())
                    .await
                    .expect("creates");
                let run = drive(&ex, &store, id, "a", &options).await.expect("drives");
                assert_eq!(run.state(), whole.state(), "{backend}");
                let info = store.info(id).await.unwrap();
                assert!(info.status.is_ended(), "{backend}: {info:?}");
                assert_eq!(info.owner, None, "{backend}: let go");
                assert_eq!(info.lease_expires_ms, None, "{backend}: let go");
                assert_eq!(store.load(id).await.unwrap().record.run, run);
                let counted = lets_go(backend, &held.url).await;
                let expected = match backend {
                    Backend::Postgres => (0, 1),
                    Backend::Sqlite => (1, 0),
                };
                assert_eq!(
                    counted, expected,
                    "{backend}: (released, let go with a checkpoint) after {options:?}"
                );
            });
        }
    }
}
