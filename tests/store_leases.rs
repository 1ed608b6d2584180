//! Leases, on both stores: fencing by owner (another owner's write refused, a lapsed
//! lease claimed), `drive` renewing its lease between steps and during a long effect (on
//! a manual clock), and leases on the database's clock: workers whose own clocks are off
//! by minutes (a store opened with `Clock::skewed`) never steal a live lease and never
//! keep one that lapsed. Real databases; the skewed-clock leases lapse in real time by the
//! database's clock, whatever the workers' clocks say.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::runtime::{Executor, RunId, TerminationReason};
use pactgraph::store::{
    AnyStore, Before, Checkpoint, Clock, Continue, CreateOptions, DriveOptions, PgOptions, PgStore,
    RunStore, SqliteOptions, SqliteStore, StepDelta, StoreError, StoredStatus, drive,
};
use serde_json::json;
use support::runtime::{
    builder, created_doc, created_ticker, graph, rt, step_delta, ticker, ticker_named,
};
use support::stores::{Backend, backends, open, open_clocked};

/// Five minutes, in milliseconds: how far the skewed workers' clocks are off.
const SKEW: i64 = 5 * 60 * 1000;

/// A lease no test outlives.
const LEASE: Duration = Duration::from_secs(60);

/// A new run of a ticker of `max_steps` in `store`, and its executor.
async fn created(store: &AnyStore, max_steps: u32) -> (Executor, RunId) {
    let (ex, record) = created_ticker(store, max_steps).await;
    (ex, record.run_id)
}

/// The store at `url` opened again by a worker whose clock is `clock`.
async fn worker_store(backend: Backend, url: &str, clock: Clock) -> AnyStore {
    match backend {
        Backend::Sqlite => SqliteStore::open_with(url, SqliteOptions::default().clock(clock))
            .await
            .expect("opens")
            .into(),
        Backend::Postgres => PgStore::open_with(url, PgOptions::default().clock(clock))
            .await
            .expect("opens")
            .into(),
    }
}

fn held_by_another(result: Result<impl std::fmt::Debug, StoreError>, who: &str) {
    match result {
        Err(StoreError::LeaseHeld { .. }) => {}
        other => panic!("{who}: expected LeaseHeld, got {other:?}"),
    }
}

fn lost(result: Result<impl std::fmt::Debug, StoreError>, who: &str) {
    match result {
        Err(StoreError::LeaseLost { .. }) => {}
        other => panic!("{who}: expected LeaseLost, got {other:?}"),
    }
}

/// Proves leases are fenced on the database's clock: with one worker's clock right and
/// two others' 5 minutes ahead and behind, (1) a live lease (60 s) taken by any of them
/// is refused to the other two and shown `running` by all; (2) a short lease (300 ms)
/// taken by a skewed worker lapses for everybody 300 ms later by the database's clock:
/// its holder can then neither renew it, nor note an attempt, nor checkpoint, and the
/// right worker takes the run over (before, the worker ahead held its run for 5 minutes
/// and the one behind could never lose its own, nor stop the others stealing it).
#[test]
fn a_worker_whose_clock_is_off_neither_steals_nor_keeps_a_lease() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let right = held.store.clone();
            let ahead = worker_store(backend, &held.url, Clock::skewed(SKEW)).await;
            let behind = worker_store(backend, &held.url, Clock::skewed(-SKEW)).await;
            let workers = [("right", &right), ("ahead", &ahead), ("behind", &behind)];
            let long = Duration::from_secs(60);

            // (1) A live lease, whoever took it, is live for all.
            for (holder, store) in workers {
                let (_, id) = created(&right, 5).await;
                store.claim(id, holder, long).await.expect("claims");
                for (other, other_store) in workers {
                    if other != holder {
                        held_by_another(
                            other_store.claim(id, other, long).await,
                            &format!("{other} claiming {holder}'s run"),
                        );
                    }
                    assert_eq!(
                        other_store.info(id).await.unwrap().status,
                        StoredStatus::Running,
                        "{other} sees {holder}'s run running"
                    );
                    let runnable = other_store.runnable(100).await.unwrap();
                    assert!(
                        runnable.iter().all(|r| r.id != id),
                        "{other} does not list {holder}'s run runnable"
                    );
                }
            }

            // (2) A short lease lapses on the database's clock, for its holder too.
            let short = Duration::from_millis(300);
            for (holder, store) in [("ahead", &ahead), ("behind", &behind)] {
                let (ex, id) = created(&right, 5).await;
                store.claim(id, holder, short).await.expect("claims");
                held_by_another(
                    right.claim(id, "right", long).await,
                    &format!("right claiming {holder}'s run at once"),
                );
                let loaded = store.load(id).await.unwrap();
                let mut run = loaded.record.run.clone();
                let before = Before::of(&run);
                ex.step(&mut run).await;
                let delta = StepDelta::between(&before, &run);
                tokio::time::sleep(Duration::from_millis(600)).await;
                assert_eq!(
                    store.info(id).await.unwrap().status,
                    StoredStatus::Interrupted,
                    "{holder} sees its own lapsed lease as lapsed"
                );
                lost(
                    store.renew(id, holder, long).await,
                    &format!("{holder} renewing"),
                );
                lost(
                    store.note_attempt(id, holder, 2).await,
                    &format!("{holder} noting an attempt"),
                );
                lost(
                    store
                        .checkpoint(
                            id,
                            holder,
                            Checkpoint::new(loaded.record.seq + 1, &delta, &run),
                        )
                        .await,
                    &format!("{holder} checkpointing"),
                );
                right
                    .claim(id, "right", long)
                    .await
                    .unwrap_or_else(|e| panic!("right takes {holder}'s lapsed run: {e}"));
            }

            // (3) Skewed workers drive runs to their end, renewing on time.
            for (holder, store) in [("ahead", &ahead), ("behind", &behind)] {
                let (ex, id) = created(&right, 30).await;
                let options = DriveOptions::default().lease(Duration::from_millis(400));
                let run = drive(&ex, store, id, holder, &options, Continue::AsStored)
                    .await
                    .unwrap_or_else(|e| panic!("{holder} drives: {e}"));
                assert_eq!(run.steps(), 30, "{holder}");
                assert_eq!(
                    right.info(id).await.unwrap().status,
                    StoredStatus::Stopped,
                    "{holder}'s run ended (max_steps)"
                );
            }
        });
    }
}

/// Proves a clean `release` is fenced like a checkpoint: once the owner's lease lapsed by
/// the database's clock (no one took it), `release` is refused (`LeaseLost`, no holder)
/// and writes nothing, the run shows `interrupted`; `interrupt` still gives it up,
/// counting the step in flight (attempt + 1), and a claim by another owner then works.
/// Within its lease the same release succeeds and adds nothing to the attempt.
#[test]
fn a_release_after_the_lease_lapsed_is_refused() {
    for backend in backends() {
        rt().block_on(async {
            let store = open(backend).await;
            let (_, id) = created(&store, 5).await;
            store
                .claim(id, "a", Duration::from_secs(60))
                .await
                .expect("claims");
            store
                .release(id, "a")
                .await
                .expect("a current lease is released");
            let attempt = store.info(id).await.expect("info").attempt;
            store
                .claim(id, "a", Duration::from_millis(200))
                .await
                .expect("claims again");
            tokio::time::sleep(Duration::from_millis(600)).await;
            match store.release(id, "a").await {
                Err(StoreError::LeaseLost { holder: None, .. }) => {}
                other => panic!("{backend}: expected LeaseLost without a holder, got {other:?}"),
            }
            let info = store.info(id).await.expect("info");
            assert_eq!(
                info.owner.as_deref(),
                Some("a"),
                "{backend}: nothing written"
            );
            assert_eq!(info.status, StoredStatus::Interrupted, "{backend}");
            store
                .interrupt(id, "a")
                .await
                .expect("interrupt gives it up");
            let info = store.info(id).await.expect("info");
            assert_eq!(info.owner, None, "{backend}");
            assert_eq!(
                info.attempt,
                attempt + 1,
                "{backend}: the step may have run"
            );
            store
                .claim(id, "b", Duration::from_secs(60))
                .await
                .expect("another owner claims it");
        });
    }
}

/// Proves the attempt counter never says less than the truth when an owner takes back
/// its own lease: claiming again within the lease (an extension) adds nothing, but once
/// the lease lapsed and was not given up (the owner was paused; its step in flight may
/// have run, and `interrupt` could not be written), claiming it back adds one, as a claim
/// by another owner does. Before, the same owner's claim never counted, so a worker
/// continued after a pause could run its step in flight again as the same attempt.
#[test]
fn an_owner_taking_back_its_own_lapsed_lease_counts_the_attempt() {
    for backend in backends() {
        rt().block_on(async {
            let store = open(backend).await;
            let (_, id) = created(&store, 5).await;
            store.claim(id, "a", LEASE).await.expect("claims");
            let attempt = store.info(id).await.expect("info").attempt;
            store.claim(id, "a", LEASE).await.expect("extends");
            let info = store.info(id).await.expect("info");
            assert_eq!(
                info.attempt, attempt,
                "{backend}: an extension counts nothing"
            );
            store
                .claim(id, "a", Duration::from_millis(200))
                .await
                .expect("shortens");
            tokio::time::sleep(Duration::from_millis(600)).await;
            store.claim(id, "a", LEASE).await.expect("claims it back");
            let info = store.info(id).await.expect("info");
            assert_eq!(info.owner.as_deref(), Some("a"), "{backend}");
            assert_eq!(info.status, StoredStatus::Running, "{backend}");
            assert_eq!(
                info.attempt,
                attempt + 1,
                "{backend}: the step in flight at the lapse may have run"
            );
        });
    }
}

/// Proves a run created claimed (`CreateOptions::claimed_by`, what `pactgraph run` does,
/// ADR 0069) is held from its create's own statement, on the database's clock: (1) it is
/// `running`, its owner the one named, its lease about the length asked from now; no
/// other worker (its clock right or 5 minutes off) can claim it or lists it runnable;
/// `drive_created` drives it as that owner without claiming it again (its attempt stays
/// one) to the end and lets it go. (2) A short lease taken by a create from a process whose
/// clock is 5 minutes ahead lapses 300 ms later by the database's clock, and another
/// worker takes the run over.
#[test]
fn a_run_created_claimed_is_held_from_its_create_on_the_databases_clock() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let right = held.store.clone();
            let ahead = worker_store(backend, &held.url, Clock::skewed(SKEW)).await;
            let g = graph(ticker(5));
            let ex = builder(g.clone()).build().unwrap();
            let new_record = || {
                pactgraph::runtime::RunRecord::new(
                    g.to_document(),
                    ex.start(serde_json::json!({})).unwrap(),
                )
            };

            // (1) Held from the create, driven without a second claim.
            let record = new_record();
            let id = record.run_id;
            let long = Duration::from_secs(60);
            let before = Clock::system().now_ms();
            right
                .create(&record, &CreateOptions::default().claimed_by("maker", long))
                .await
                .expect("creates");
            let info = right.info(id).await.unwrap();
            assert_eq!(info.status, StoredStatus::Running, "{backend:?}");
            assert_eq!(info.owner.as_deref(), Some("maker"), "{backend:?}");
            assert_eq!(info.attempt, 1, "{backend:?}");
            let lease = info.lease_expires_ms.expect("a lease");
            assert!(
                lease >= before + 59_000 && lease <= Clock::system().now_ms() + 61_000,
                "{backend:?}: the lease ({lease}) is 60 s from the create ({before})"
            );
            for (who, store) in [("right", &right), ("ahead", &ahead)] {
                held_by_another(store.claim(id, who, long).await, who);
                let runnable = store.runnable(100).await.unwrap();
                assert!(
                    runnable.iter().all(|r| r.id != id),
                    "{who} lists it runnable"
                );
            }
            let run = drive(
                &ex,
                &right,
                id,
                "maker",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .expect("drives");
            assert!(!run.is_running(), "{backend:?}: it ended");
            let info = right.info(id).await.unwrap();
            assert!(info.status.is_ended(), "{backend:?}: {}", info.status);
            assert_eq!(info.owner, None, "{backend:?}: let go");
            assert_eq!(info.attempt, 1, "{backend:?}: no second claim");

            // (2) A create's short lease lapses on the database's clock.
            let record = new_record();
            let id = record.run_id;
            let short = Duration::from_millis(300);
            ahead
                .create(
                    &record,
                    &CreateOptions::default().claimed_by("ahead", short),
                )
                .await
                .expect("creates");
            held_by_another(right.claim(id, "right", long).await, "right, at once");
            tokio::time::sleep(Duration::from_millis(600)).await;
            right
                .claim(id, "right", long)
                .await
                .expect("the create's lease lapsed by the database's clock");
            let run = drive(
                &ex,
                &right,
                id,
                "right",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .expect("drives");
            assert!(!run.is_running(), "{backend:?}: it ended");
        });
    }
}

/// Proves lease fencing: a claim fails while another owner holds an unexpired lease,
/// another owner's checkpoint is refused (`LeaseLost`, nothing written), an expired lease
/// can be claimed, and the old owner can then neither write nor renew.
#[test]
fn another_owners_write_is_refused_and_an_expired_lease_can_be_claimed() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let (ex, record) = created_ticker(&store, 10).await;
            let id = record.run_id;
            // No lease at all: a write is refused.
            let mut run = record.run.clone();
            let d1 = step_delta(&ex, &mut run).await;
            assert!(matches!(
                store
                    .checkpoint(id, "a", Checkpoint::new(1, &d1, &run))
                    .await,
                Err(StoreError::LeaseLost { holder: None, .. })
            ));
            store
                .claim(id, "a", Duration::from_millis(200))
                .await
                .unwrap();
            assert_eq!(store.info(id).await.unwrap().status, StoredStatus::Running);
            match store.claim(id, "b", LEASE).await {
                Err(StoreError::LeaseHeld { run_id, holder, .. }) => {
                    assert_eq!((run_id, holder.as_str()), (id, "a"));
                }
                other => panic!("expected LeaseHeld, got {other:?}"),
            }
            match store
                .checkpoint(id, "b", Checkpoint::new(1, &d1, &run))
                .await
            {
                Err(StoreError::LeaseLost { owner, holder, .. }) => {
                    assert_eq!((owner.as_str(), holder.as_deref()), ("b", Some("a")));
                }
                other => panic!("expected LeaseLost, got {other:?}"),
            }
            assert_eq!(store.info(id).await.unwrap().seq, 0, "nothing written");
            store
                .checkpoint(id, "a", Checkpoint::new(1, &d1, &run))
                .await
                .unwrap();
            // The lease lapses: the run shows as interrupted and `b` may claim it.
            tokio::time::sleep(Duration::from_millis(250)).await;
            assert_eq!(
                store.info(id).await.unwrap().status,
                StoredStatus::Interrupted
            );
            store.claim(id, "b", LEASE).await.unwrap();
            let d2 = step_delta(&ex, &mut run).await;
            assert!(matches!(
                store.checkpoint(id, "a", Checkpoint::new(2, &d2, &run)).await,
                Err(StoreError::LeaseLost { holder: Some(h), .. }) if h == "b"
            ));
            assert!(matches!(
                store.renew(id, "a", LEASE).await,
                Err(StoreError::LeaseLost { .. })
            ));
            assert!(matches!(
                store.release(id, "a").await,
                Err(StoreError::LeaseLost { .. })
            ));
            store.renew(id, "b", LEASE).await.unwrap();
            store
                .checkpoint(id, "b", Checkpoint::new(2, &d2, &run))
                .await
                .unwrap();
            store.release(id, "b").await.unwrap();
            assert_eq!(store.info(id).await.unwrap().owner, None);
        });
    }
}

/// The system's time now, where a manual clock starts (run ids carry real time).
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Proves `drive` renews its lease, on a manual clock that only the steps move (so a
/// loaded machine cannot lapse a lease): each of 40 steps moves it 20 ms under a 200 ms
/// lease, the run lasts four leases' worth of the store's time, and every checkpoint
/// (each fenced on a lease current at that time) lands. Also that of two owners claiming
/// at once exactly one gets the run.
#[test]
fn drive_renews_its_lease_and_claims_are_exclusive() {
    for backend in backends() {
        rt().block_on(async {
            let clock = Clock::manual(wall_ms());
            let held = open_clocked(backend, clock.clone()).await;
            let store = held.store.clone();
            let mut doc = ticker_named(40, "t");
            doc["nodes"]["tick"]["run"] = json!({"handler": "slow"});
            let steps_clock = clock.clone();
            let (ex, id) = created_doc(&store, doc, move |b| {
                b.node_handler(
                    "slow",
                    pactgraph::runtime::sync_node(move |_| {
                        steps_clock.advance(Duration::from_millis(20));
                        let mut w = serde_json::Map::new();
                        w.insert("n".into(), json!(1));
                        Ok(w)
                    }),
                )
            })
            .await;
            let (x, y) = tokio::join!(store.claim(id, "x", LEASE), store.claim(id, "y", LEASE));
            assert!(
                x.is_ok() != y.is_ok(),
                "exactly one claim wins: {x:?} {y:?}"
            );
            let winner = if x.is_ok() { "x" } else { "y" };
            store.release(id, winner).await.unwrap();

            let t0 = clock.now_ms();
            let lease = Duration::from_millis(200);
            let run = drive(
                &ex,
                &store,
                id,
                "a",
                &DriveOptions::default().lease(lease),
                Continue::AsStored,
            )
            .await
            .unwrap();
            assert!(
                Duration::from_millis(clock.now_ms() - t0) > lease * 3,
                "the run outlived several leases"
            );
            assert_eq!(run.steps(), 40);
            let kept = store.storage(id).await.unwrap();
            assert_eq!(
                store.info(id).await.unwrap().seq,
                kept.snapshot_seq + kept.steps
            );
            assert_eq!(store.load(id).await.unwrap().record.run, run);
        });
    }
}

/// Proves `drive` renews its lease while an effect runs: each of 3 node calls takes
/// 500 ms of the store's (manual) clock, moving it 25 ms at a time and awaiting between
/// (as an LLM call would), under a 200 ms lease; every checkpoint lands, so the lease was
/// renewed during each call. No real time is involved: a loaded machine cannot lapse it.
#[test]
fn drive_renews_its_lease_during_a_long_effect() {
    for backend in backends() {
        rt().block_on(async {
            let clock = Clock::manual(wall_ms());
            let held = open_clocked(backend, clock.clone()).await;
            let store = held.store.clone();
            let mut doc = ticker_named(3, "t");
            doc["nodes"]["tick"]["run"] = json!({"handler": "long"});
            let calls_clock = clock.clone();
            let (ex, id) = created_doc(&store, doc, move |b| {
                b.node_handler("long", move |_input: pactgraph::runtime::NodeInput| {
                    let clock = calls_clock.clone();
                    async move {
                        // 25 ms at a time: the driver looks at its lease between two
                        // polls of the call, and a poll moves the clock at most twice
                        // (50 ms), well within the half lease (100 ms) it renews at.
                        for _ in 0..20 {
                            clock.advance(Duration::from_millis(25));
                            tokio::task::yield_now().await;
                        }
                        let mut w = serde_json::Map::new();
                        w.insert("n".into(), json!(1));
                        Ok(w)
                    }
                })
            })
            .await;
            let t0 = clock.now_ms();
            let options = DriveOptions::default().lease(Duration::from_millis(200));
            let run = drive(&ex, &store, id, "a", &options, Continue::AsStored)
                .await
                .unwrap();
            assert_eq!(clock.now_ms() - t0, 1_500, "three calls of 500 ms each");
            assert_eq!(run.steps(), 3);
            assert_eq!(
                run.termination_reason(),
                Some(TerminationReason::MaxStepsExceeded)
            );
            assert_eq!(store.load(id).await.unwrap().record.run, run);
        });
    }
}

/// The store's manual clock, for [`lapse_at_step_40`] (a `before_step` hook is a plain
/// function).
static LAPSING: std::sync::OnceLock<Clock> = std::sync::OnceLock::new();

/// Before step 40, moves the store's clock past the lease: that step's checkpoint is
/// fenced on a lapsed lease.
fn lapse_at_step_40(run: &pactgraph::runtime::RunState) {
    if run.steps() == 39 {
        LAPSING
            .get()
            .expect("set by the test")
            .advance(Duration::from_secs(600));
    }
}

/// Proves that a lease lapsing between two checkpoints of `--checkpoints steps` stops the
/// drive with `LeaseLost` and that the store keeps exactly the checkpoints before: the
/// refused checkpoint writes nothing (no step, no event chunk), and the run loads as it
/// was after its 39th step, still running.
#[test]
fn a_lapsed_lease_at_checkpoints_steps_keeps_exactly_the_checkpoints_before() {
    let clock = LAPSING.get_or_init(|| Clock::manual(wall_ms())).clone();
    for backend in backends() {
        rt().block_on(async {
            let held = open_clocked(backend, clock.clone()).await;
            let store = held.store.clone();
            let (ex, id) = created(&store, 300).await;
            let options = DriveOptions::default()
                .checkpoints(pactgraph::store::Checkpoints::Steps)
                .lease(LEASE)
                .before_step(lapse_at_step_40);
            let stopped = drive(&ex, &store, id, "w", &options, Continue::AsStored).await;
            assert!(
                matches!(stopped, Err(StoreError::LeaseLost { .. })),
                "{backend}: {stopped:?}"
            );
            let info = store.info(id).await.expect("reads");
            assert_eq!(info.seq, 39, "{backend}: the 39 steps before, no more");
            assert_eq!(info.steps, 39, "{backend}");
            let loaded = store.load(id).await.expect("loads");
            let events = store.events(id, 0, usize::MAX).await.expect("reads events");
            let steps = events
                .iter()
                .filter(|e| matches!(e.kind, pactgraph::runtime::EventKind::Step { .. }))
                .count();
            assert_eq!(
                steps,
                loaded.record.run.trace().len(),
                "{backend}: a step event for each trace item kept, none of the refused step"
            );
            assert_eq!(loaded.record.run.steps(), 39, "{backend}");
            assert!(loaded.record.run.is_running(), "{backend}");
        });
    }
}
