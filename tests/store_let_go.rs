//! The checkpoint that stops a run gives its lease up in the same statement where the store
//! can (PostgreSQL, ADR 0071), with no release after; on both stores the run ends without
//! an owner.
#![cfg(feature = "store")]

mod support;

use pactgraph::runtime::RunRecord;
use pactgraph::store::{Continue, CreateOptions, DriveOptions, RunStore, drive};
use serde_json::json;
use support::runtime::{builder, graph, rt, ticker};
use support::stores::{Backend, add_counter, backends, open, two_counts};

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
                let run = drive(&ex, &store, id, "a", &options, Continue::AsStored)
                    .await
                    .expect("drives");
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
