//! The prune/create race: a prune deleting the documents no run uses, at the moment
//! another store creates a run of one of them, never deletes that document under the new
//! run (on PostgreSQL the create failed with a foreign key violation, or the run was left
//! without its document). Both stores; two store instances, as two processes would be.
//!
//! The first test runs the two at the same moment, on both stores; the window it aims at
//! (a create between its document and its run row) is so narrow on PostgreSQL that it
//! passes without the lock that closes it. The second holds a create in that window on
//! purpose and prunes then: it fails without the lock.
#![cfg(feature = "store")]

mod support;

use std::pin::Pin;
use std::time::{Duration, Instant};

use pactgraph::runtime::RunRecord;
use pactgraph::store::{AnyStore, CreateOptions, PruneFilter, RunStore};
use serde_json::{Value, json};
use sqlx::Connection;
use support::runtime::{builder, graph, rt};
use support::stores::{Backend, admin, backends, open, pg_url, reopen};

/// A one-node workflow named `name` (its document's digest differs by name).
fn workflow(name: &str) -> Value {
    json!({
        "workflow": name,
        "slices": {"n": {}},
        "budgets": {"max_steps": 1},
        "entry": "root",
        "supervisors": {"root": {"allow": ["x"], "default": {"stop_global": {}}}},
        "nodes": {"x": {"supervisor": "root", "writes": ["n"],
            "triggers": [{"priority": 1, "when": true}], "run": {"set": {"n": 1}}}}
    })
}

/// A run of `doc` made now (not stored).
fn record(doc: Value) -> RunRecord {
    let g = graph(doc);
    let document = g.to_document();
    let ex = builder(g).build().expect("builds");
    RunRecord::new(document, ex.start(json!({})).expect("starts"))
}

/// Smoke test: 40 rounds of (a run of document D that expired at once; then, at the same
/// moment, a prune of expired runs and a create of a new run of D from another store)
/// all leave the new run loadable, its create and the prune both succeeding. It rarely
/// hits the window on PostgreSQL (see the next test, which does every time).
#[test]
fn a_prune_never_deletes_the_document_of_a_run_being_created() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let pruner = held.store.clone();
            let creator = reopen(backend, &held.url, None).await;
            let g = graph(workflow("doc_d"));
            let document = g.to_document();
            let ex = builder(g).build().expect("builds");
            let record = || RunRecord::new(document.clone(), ex.start(json!({})).expect("starts"));
            for round in 0..40 {
                // The document's only run, expired at once: a prune now deletes both.
                pruner
                    .create(&record(), &CreateOptions::default().expires_at(1))
                    .await
                    .expect("creates the expired run");
                let fresh = record();
                let (plain, expired) = (CreateOptions::default(), PruneFilter::default().expired());
                let (created, pruned) =
                    tokio::join!(creator.create(&fresh, &plain), pruner.prune(&expired),);
                created.unwrap_or_else(|e| panic!("round {round}: the create failed: {e}"));
                pruned.unwrap_or_else(|e| panic!("round {round}: the prune failed: {e}"));
                let loaded = creator
                    .load(fresh.run_id)
                    .await
                    .unwrap_or_else(|e| panic!("round {round}: the new run loads: {e}"));
                assert_eq!(loaded.record.document, document, "round {round}");
            }
        });
    }
}

/// The count `q` (one bound text) reads on `c`.
async fn count(c: &mut sqlx::PgConnection, q: &str, bound: &str) -> i64 {
    sqlx::query_scalar(q)
        .bind(bound)
        .fetch_one(c)
        .await
        .unwrap_or_else(|e| panic!("{q}: {e}"))
}

/// Polls `fut` (its output kept in `out` once it finishes) while it polls `q` on `c`,
/// until `q` counts at least one or `fut` has finished; panics after ten seconds with
/// `what`.
async fn until<F: Future>(
    c: &mut sqlx::PgConnection,
    (q, bound): (&str, &str),
    mut fut: Pin<&mut F>,
    out: &mut Option<F::Output>,
    what: &str,
) {
    let start = Instant::now();
    while out.is_none() && count(c, q, bound).await < 1 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what} within 10 s"
        );
        tokio::select! {
            r = fut.as_mut() => *out = Some(r),
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
}

/// Proves, on PostgreSQL, that a prune run while a create stands between its document's
/// insert (a no-op: the document is there, used only by an expired run) and the check of
/// its run row's foreign key to it waits for that create, and then keeps the document:
/// the create commits, the prune deletes the expired run only.
///
/// The single-statement create (ADR 0060) inserts the document last, just before its
/// foreign key is checked at the statement's end: a window of microseconds that the
/// smoke test above cannot hit. A trigger the test adds to `runs` (fired at the
/// statement's end before the foreign key's, triggers firing in name order) holds the
/// create there on an advisory lock a third connection holds; the prune starts once the
/// create waits, and the lock is let go once the prune waits in turn. Without the
/// documents lock the create takes shared, the prune finishes first and deletes the
/// document, and the create fails on its foreign key: this test fails (checked, with the
/// lock taken out of `begin_create`).
#[test]
fn a_prune_while_a_create_is_held_between_document_and_run_keeps_the_document() {
    if !backends().contains(&Backend::Postgres) {
        return;
    }
    let base = pg_url().expect("PG_URL is set");
    rt().block_on(async {
        let held = open(Backend::Postgres).await;
        let pruner: AnyStore = held.store.clone();
        let creator = reopen(Backend::Postgres, &held.url, None).await;
        let mut monitor = sqlx::PgConnection::connect(&base).await.expect("connects");
        let mut blocker = sqlx::PgConnection::connect(&held.url)
            .await
            .expect("connects");

        // D's only run, expired at once.
        let d = workflow("doc_d");
        let expired = record(d.clone());
        pruner
            .create(&expired, &CreateOptions::default().expires_at(1))
            .await
            .expect("creates the expired run");
        let fresh = record(d);
        let fresh_id = fresh.run_id.to_string();

        // The seam: a trigger on the run row's insert, fired at the statement's end before
        // its foreign key is checked (triggers fire in name order: `A` before `R`), that
        // waits on an advisory lock keyed by the run's id, held by the third connection.
        admin(
            &held.url,
            "CREATE FUNCTION hold_create() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN PERFORM pg_advisory_xact_lock(hashtext(NEW.id)); RETURN NULL; END $$; \
             CREATE TRIGGER \"A_hold_create\" AFTER INSERT ON runs \
             FOR EACH ROW EXECUTE FUNCTION hold_create();",
        );
        sqlx::query("SELECT pg_advisory_lock(hashtext($1))")
            .bind(&fresh_id)
            .execute(&mut blocker)
            .await
            .expect("holds the create's lock");
        let holder: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut blocker)
            .await
            .expect("reads its pid");
        let waits_on = "SELECT count(*) FROM pg_stat_activity \
             WHERE $1::INT = ANY(pg_blocking_pids(pid))";

        // The create, held after its document's insert (nothing to insert: it is there).
        let options = CreateOptions::default();
        let create = creator.create(&fresh, &options);
        let mut created = None;
        tokio::pin!(create);
        let holder = holder.to_string();
        let q = (waits_on, holder.as_str());
        until(
            &mut monitor,
            q,
            create.as_mut(),
            &mut created,
            "the create waits",
        )
        .await;
        assert!(created.is_none(), "the create waits on the held lock");
        let creating: i32 = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE $1::INT = ANY(pg_blocking_pids(pid))",
        )
        .bind(&holder)
        .fetch_one(&mut monitor)
        .await
        .expect("finds the create's backend");

        // The prune, now: it waits on the create (the documents lock), or finishes first.
        let filter = PruneFilter::default().expired();
        let prune = pruner.prune(&filter);
        let mut pruned = None;
        tokio::pin!(prune);
        let creating = creating.to_string();
        let q = (waits_on, creating.as_str());
        let what = "the prune waits or finishes";
        until(&mut monitor, q, prune.as_mut(), &mut pruned, what).await;
        assert!(
            pruned.is_none(),
            "the prune finished ({pruned:?}) while a create stood between its document's insert and \
             its foreign key's check: it did not wait for the create's documents lock"
        );
        sqlx::query("SELECT pg_advisory_unlock(hashtext($1))")
            .bind(&fresh_id)
            .execute(&mut blocker)
            .await
            .expect("lets the create go on");

        let (created, pruned) = match (created, pruned) {
            (None, None) => tokio::join!(create, prune),
            (None, Some(p)) => (create.await, p),
            (Some(c), None) => (c, prune.await),
            (Some(c), Some(p)) => (c, p),
        };
        created.unwrap_or_else(|e| panic!("the create, held while a prune ran, failed: {e}"));
        assert_eq!(
            pruned.expect("the prune succeeds"),
            1,
            "the prune deleted the expired run"
        );
        let loaded = held
            .load(fresh.run_id)
            .await
            .unwrap_or_else(|e| panic!("the new run loads: {e}"));
        assert_eq!(loaded.record.document, fresh.document);
    });
}
