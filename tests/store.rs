//! The SQLite and PostgreSQL run store: fencing by sequence number, storage that grows
//! with what steps write, cancelling, pausing and resuming, and opening by URL (leases:
//! `store_leases.rs`; listing, finding and pruning: `store_listing.rs`). Every test uses
//! a real database file in a temporary folder unless it says otherwise.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::runtime::{RunId, RunStatus, TerminationReason, TraceKind};
use pactgraph::store::{
    Before, Checkpoint, Checkpoints, Continue, CreateOptions, DriveOptions, RunStore, SqliteStore,
    StepDelta, StoreError, StoredStatus, drive,
};
use serde_json::{Value, json};
use support::runtime::{created_doc, created_ticker, rt, started, step_delta, ticker_named};
use support::stores::{backends, count_snapshot_writes, open, snapshot_writes};

const LEASE: Duration = Duration::from_secs(60);

/// A workflow that pauses at once with `ask_clarification`.
fn asker() -> Value {
    json!({
        "workflow": "asker",
        "slices": {"clarification": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["x"], "default": {"ask_clarification": {"question": "which?"}}}},
        "nodes": {"x": {"supervisor": "root", "writes": ["clarification"], "terminal": true,
            "triggers": [{"priority": 1, "when": {"path": "/clarification", "exists": true}}],
            "run": {"set": {"clarification": 1}}}}
    })
}

/// Proves a record whose digest does not match its document is refused by `create`,
/// writing nothing.
#[test]
fn a_create_refuses_a_wrong_digest() {
    rt().block_on(async {
        for backend in backends() {
            let held = open(backend).await;
            let store = &held.store;
            let (_, a) = started(ticker_named(3, "a"), json!({"big": "x"}));
            let (_, b) = started(ticker_named(3, "b"), json!({"big": "y"}));
            let mut wrong = a.clone();
            wrong.digest = b.digest.clone();
            let err = store
                .create(&wrong, &CreateOptions::default())
                .await
                .expect_err("a digest that does not match");
            assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
            assert!(store.info(a.run_id).await.is_err(), "nothing written");
        }
    });
}

/// Proves sequence fencing: a checkpoint whose number is not the next one (a duplicate
/// or a skip) is refused with `SeqMismatch` and writes nothing.
#[test]
fn a_duplicate_or_skipped_seq_is_refused_and_writes_nothing() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let (ex, record) = created_ticker(&store, 10).await;
            let id = record.run_id;
            store.claim(id, "a", LEASE).await.unwrap();
            let mut run = record.run.clone();
            let d1 = step_delta(&ex, &mut run).await;
            store
                .checkpoint(id, "a", Checkpoint::new(1, &d1, &run))
                .await
                .unwrap();
            let after_one = run.clone();
            let d2 = step_delta(&ex, &mut run).await;
            for bad in [1, 3, 0] {
                match store
                    .checkpoint(id, "a", Checkpoint::new(bad, &d2, &run))
                    .await
                {
                    Err(StoreError::SeqMismatch {
                        run_id,
                        expected: 2,
                        given,
                    }) => {
                        assert_eq!((run_id, given), (id, bad));
                    }
                    other => panic!("seq {bad}: expected SeqMismatch, got {other:?}"),
                }
            }
            let e = store
                .checkpoint(id, "a", Checkpoint::new(3, &d2, &run))
                .await
                .unwrap_err();
            assert!(
                e.to_string().contains(&id.to_string()),
                "the error names the run: {e}"
            );
            // Nothing of the refused writes is there.
            let loaded = store.load(id).await.unwrap();
            assert_eq!(loaded.record.seq, 1);
            assert_eq!(loaded.record.run, after_one);
            let kept = store.storage(id).await.unwrap();
            assert_eq!(kept.snapshot_seq + kept.steps, 1, "{kept:?}");
            // The right number goes through.
            store
                .checkpoint(id, "a", Checkpoint::new(2, &d2, &run))
                .await
                .unwrap();
            assert_eq!(store.load(id).await.unwrap().record.run, run);
        });
    }
}

/// Proves storage grows with what steps write: a run with a 20 KB slice no step writes
/// and 200 small steps stores less than a tenth of 200 x the slice: no delta holds the
/// slice, a delta is under 2 KB (its trace items and counters), and one
/// snapshot is kept (the slice once, plus the trace), taken by weight (loading replays
/// no more than it holds); the checkpoints it replaced cannot be loaded (`Compacted`).
#[test]
fn storage_grows_with_what_steps_write_not_with_state_size() {
    for backend in backends() {
        rt().block_on(async {
        let held = open(backend).await;
        let store = held.store.clone();
        let big: Vec<String> = (0..1500).map(|i| format!("item-{i:06}")).collect();
        let big = json!(big);
        let big_bytes = big.to_string().len() as u64;
        assert!(big_bytes > 20_000);
        let (ex, record) = started(ticker_named(200, "t"), json!({"big": big}));
        let id = record.run_id;
        store.create(&record, &CreateOptions::default()).await.unwrap();
        // One checkpoint a step (`--checkpoints steps`): what one step row weighs.
        let steps = DriveOptions::default().checkpoints(Checkpoints::Steps);
        let run = drive(&ex, &store, id, "a", &steps, Continue::AsStored).await.unwrap();
        assert_eq!(run.steps(), 200);
        assert_eq!(run.termination_reason(), Some(TerminationReason::MaxStepsExceeded));
        let use_ = store.storage(id).await.unwrap();
        let info = store.info(id).await.unwrap();
        // The step rows are the checkpoints after the one snapshot kept.
        assert_eq!(use_.steps, info.seq - use_.snapshot_seq);
        assert!(info.seq >= 200, "{info:?}");
        // Older snapshots are dropped when a newer one is written; a run stopped by its
        // last step writes none at its end, so the one before stays (`runs resume` reopens
        // the run from it).
        assert_eq!(use_.snapshots, 1);
        let total = use_.step_bytes + use_.snapshot_bytes;
        eprintln!(
            "{} steps: {} bytes of deltas ({} per step), {} bytes of snapshots; the slice is {} bytes",
            use_.steps,
            use_.step_bytes,
            use_.step_bytes / use_.steps,
            use_.snapshot_bytes,
            big_bytes
        );
        assert!(use_.step_bytes / use_.steps < 2_000, "{use_:?}");
        // The one snapshot holds the slice once, plus the trace of the checkpoints it
        // replaced (under 2 KB each, as their deltas were).
        assert!(
            use_.snapshot_bytes < big_bytes + 2_000 * use_.snapshot_seq,
            "{use_:?}"
        );
        assert!(total * 10 < 200 * big_bytes, "{total} bytes for {} steps", use_.steps);
        // Snapshots come by weight: a load replays no more delta bytes than its snapshot
        // holds (give or take the last delta), and the checkpoints the snapshot replaced
        // are gone, with a clear error for asking.
        let largest = store
            .deltas(id)
            .await
            .unwrap()
            .iter()
            .map(|(_, d)| serde_json::to_string(d).unwrap().len() as u64)
            .max()
            .unwrap_or(0);
        assert!(
            use_.step_bytes <= use_.snapshot_bytes + largest,
            "{use_:?}"
        );
        assert!(use_.snapshot_seq > 0, "{use_:?}");
        match store.load_at(id, use_.snapshot_seq - 1).await {
            Err(pactgraph::store::StoreError::Compacted {
                run_id,
                seq,
                snapshot_seq,
            }) => {
                assert_eq!((run_id, seq, snapshot_seq), (id, use_.snapshot_seq - 1, use_.snapshot_seq));
            }
            other => panic!("expected Compacted, got {other:?}"),
        }
        // No delta holds the slice.
        for (seq, delta) in store.deltas(id).await.unwrap() {
            assert!(!delta.root.set.contains_key("big"), "step {seq} stored the slice");
        }
        assert_eq!(store.load(id).await.unwrap().record.run, run);
    });
    }
}

/// Proves the snapshot rule weighs deltas without their trace items (ADR 0049): a run of
/// 1,000 pure steps at effects (batches of 256) over a 20 KB slice no step
/// writes, whose steps add little but trace, keeps the snapshot it was created with (or
/// of its first checkpoint) and is not snapshotted again while its trace grows (before
/// format 7 a snapshot, the whole trace rewritten, fell at almost every batch); its
/// deltas hold no trace item (format 8 keeps them once, in the `step` events); a load
/// replays every delta after it, its trace items put back from the events, and gives the
/// run exactly as driven.
#[test]
fn trace_growth_alone_takes_no_snapshot() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let big: Vec<String> = (0..1500).map(|i| format!("item-{i:06}")).collect();
            let (ex, record) = started(ticker_named(1000, "t"), json!({"big": big}));
            let id = record.run_id;
            store
                .create(&record, &CreateOptions::default())
                .await
                .unwrap();
            // Batches of 256 steps, never cut by time (a loaded machine would cut many).
            let options = DriveOptions::default().batch(256, Duration::from_secs(600));
            let run = drive(&ex, &store, id, "a", &options, Continue::AsStored)
                .await
                .unwrap();
            assert_eq!(run.steps(), 1000);
            let use_ = store.storage(id).await.unwrap();
            let info = store.info(id).await.unwrap();
            assert!(info.seq >= 4, "batches of 256 steps: {info:?}");
            // One snapshot, at the first checkpoint at most: every later checkpoint is a
            // step row, its trace items replayed on load.
            assert_eq!(use_.snapshots, 1, "{use_:?}");
            assert!(use_.snapshot_seq <= 1, "{use_:?}");
            assert_eq!(use_.steps, info.seq - use_.snapshot_seq, "{use_:?}");
            // The trace items are kept once, in the `step` events (format 8, ADR 0053):
            // 1,000 steps of deltas weigh well under the 20 KB snapshot.
            assert!(use_.step_bytes < use_.snapshot_bytes / 4, "{use_:?}");
            assert_eq!(store.load(id).await.unwrap().record.run, run);
        });
    }
}

/// Proves the snapshot rule stays geometric under `--checkpoints steps` (ADR 0020, 0049,
/// 0053), without a clock: a run of 1,500 pure steps, each its own checkpoint, over a
/// small state whose snapshot grows with the trace, writes few snapshots and few bytes
/// of them, counted by a trigger on the real `snapshots` table. Snapshots at
/// geometrically spaced checkpoints (each due when the deltas since the last weigh a
/// quarter of it) weigh together a small multiple of the last one; a rule gone
/// quadratic (ADR 0049's regression: a small state's snapshot due every few
/// checkpoints, each rewriting the whole trace) writes hundreds of snapshots and dozens
/// of times the last one's bytes, and fails both bounds.
#[test]
fn snapshots_under_checkpoints_steps_stay_geometric() {
    const STEPS: u32 = 1500;
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            count_snapshot_writes(backend, &held.url).await;
            let (ex, record) = started(ticker_named(STEPS, "g"), json!({}));
            let id = record.run_id;
            store
                .create(&record, &CreateOptions::default())
                .await
                .unwrap();
            let options = DriveOptions::default().checkpoints(Checkpoints::Steps);
            let run = drive(&ex, &store, id, "a", &options, Continue::AsStored)
                .await
                .unwrap();
            assert_eq!(run.steps(), STEPS);
            let info = store.info(id).await.unwrap();
            assert!(
                info.seq >= u64::from(STEPS),
                "a checkpoint a step: {info:?}"
            );
            let (written, bytes) = snapshot_writes(backend, &held.url).await;
            let last = store.storage(id).await.unwrap().snapshot_bytes;
            eprintln!("{backend}: {written} snapshots, {bytes} bytes, the last {last} bytes");
            assert!(
                written <= 40,
                "{written} snapshots over {STEPS} checkpoints"
            );
            assert!(
                u64::try_from(bytes).unwrap() <= 8 * last,
                "snapshots of {bytes} bytes written, the last weighs {last}"
            );
            assert_eq!(store.load(id).await.unwrap().record.run, run);
        });
    }
}

/// Proves cancelling: a queued run and a paused run are stopped with reason `cancelled`
/// as one more checkpoint (the reloaded state says so, its trace ends with the guard
/// stop); an ended run and a run held under a current lease are refused.
#[test]
fn cancel_stops_queued_and_paused_runs_only() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let (_, queued) = started(ticker_named(5, "t"), json!({}));
            store
                .create(&queued, &CreateOptions::default())
                .await
                .unwrap();
            let info = store.cancel(queued.run_id).await.unwrap();
            assert_eq!((info.status, info.seq), (StoredStatus::Stopped, 1));
            assert_eq!(info.termination_reason, Some(TerminationReason::Cancelled));
            let run = store.load(queued.run_id).await.unwrap().record.run;
            assert_eq!(run.status(), RunStatus::Stopped);
            assert_eq!(run.termination_reason(), Some(TerminationReason::Cancelled));
            assert_eq!(
                run.trace().to_items().into_iter().last().map(|i| i.kind),
                Some(TraceKind::GuardStop)
            );
            assert!(matches!(
                store.cancel(queued.run_id).await,
                Err(StoreError::WrongStatus {
                    status: StoredStatus::Stopped,
                    ..
                })
            ));

            let (ex, paused) = started(asker(), json!({}));
            store
                .create(&paused, &CreateOptions::default())
                .await
                .unwrap();
            let run = drive(
                &ex,
                &store,
                paused.run_id,
                "a",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            assert_eq!(run.status(), RunStatus::AwaitingInput);
            assert_eq!(
                store.info(paused.run_id).await.unwrap().status,
                StoredStatus::AwaitingInput
            );
            assert_eq!(
                store.cancel(paused.run_id).await.unwrap().status,
                StoredStatus::Stopped
            );

            let (_, held) = started(ticker_named(5, "t"), json!({}));
            store
                .create(&held, &CreateOptions::default())
                .await
                .unwrap();
            store.claim(held.run_id, "a", LEASE).await.unwrap();
            // A run held under a current lease is not stopped under its owner: the cancel is
            // asked, and its driver stops it at its next step (tests/cli_runs.rs).
            let asked = store.cancel(held.run_id).await.unwrap();
            assert_eq!(asked.status, StoredStatus::Running);
            assert!(asked.cancel_requested);
        });
    }
}

/// Proves a pause and its resume go through the store: the paused run is snapshotted,
/// the resume (answer written, trace item, deadline restarted) is checkpointed as one
/// more transition, and the reloaded run finishes as the same run kept in memory.
#[test]
fn a_paused_run_resumes_through_the_store() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let (ex, record) = started(asker(), json!({}));
            let id = record.run_id;
            store
                .create(&record, &CreateOptions::default())
                .await
                .unwrap();
            let paused = drive(
                &ex,
                &store,
                id,
                "a",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            assert_eq!(paused.question(), Some("which?"));
            let stored = store.load(id).await.unwrap();
            assert_eq!(stored.record.run, paused);
            // The resume, as one checkpoint.
            store.claim(id, "a", LEASE).await.unwrap();
            let before = Before::of(&stored.record.run);
            let resumed = ex.resume(stored.record.run, "the blue one").unwrap();
            let delta = StepDelta::between(&before, &resumed);
            assert!(delta.root.set.contains_key("clarification"));
            assert_eq!(delta.trace.last().map(|i| i.kind), Some(TraceKind::Resume));
            let seq = stored.record.seq + 1;
            store
                .checkpoint(id, "a", Checkpoint::new(seq, &delta, &resumed))
                .await
                .unwrap();
            store.release(id, "a").await.unwrap();
            assert_eq!(store.load(id).await.unwrap().record.run, resumed);
            assert_eq!(
                store.info(id).await.unwrap().status,
                StoredStatus::Interrupted
            );
            // Finished from the store, as in memory.
            let mut expected = resumed.clone();
            ex.run_in_place(&mut expected).await;
            let finished = drive(
                &ex,
                &store,
                id,
                "b",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            assert_eq!(finished, expected);
            assert_eq!(finished.status(), RunStatus::Completed);
            assert_eq!(
                store.info(id).await.unwrap().status,
                StoredStatus::Completed
            );
        });
    }
}

/// Proves opening by URL: the file and its folder are created, `sqlite::memory:` works,
/// and a bad URL or an unopenable path is a clear error naming it.
#[test]
fn opening_by_url() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/store.db");
        let url = format!("sqlite:{}", path.display());
        let store = SqliteStore::open(&url).await.unwrap();
        assert!(path.exists());
        let (_, record) = started(ticker_named(5, "t"), json!({}));
        store
            .create(&record, &CreateOptions::default())
            .await
            .unwrap();
        store.close().await;
        // Reopened (migrations already applied), the run is there.
        let again = SqliteStore::open(&url).await.unwrap();
        assert_eq!(again.load(record.run_id).await.unwrap().record, record);

        let mem = SqliteStore::open("sqlite::memory:").await.unwrap();
        mem.create(&record, &CreateOptions::default())
            .await
            .unwrap();
        assert_eq!(mem.load(record.run_id).await.unwrap().record, record);

        for bad in ["postgres://localhost/x", "sqlite:", "file.db"] {
            match SqliteStore::open(bad).await {
                Err(e @ StoreError::BadUrl { .. }) => assert!(e.to_string().contains(bad), "{e}"),
                other => panic!("{bad}: expected BadUrl, got {other:?}"),
            }
        }
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "not a folder").unwrap();
        let url = format!("sqlite:{}", blocker.join("store.db").display());
        match SqliteStore::open(&url).await {
            Err(e @ StoreError::Open { .. }) => assert!(e.to_string().contains(&url), "{e}"),
            other => panic!("expected Open, got {other:?}"),
        }
    });
}

/// Proves the reported `$usage` survives the store: a node that reports usage each step
/// is driven through the store, and the run loaded back (latest snapshot plus deltas) has
/// the same summed usage, and is equal to the run in memory.
#[test]
fn reported_usage_is_checkpointed_and_reloaded() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let mut doc = ticker_named(7, "usage");
            doc["nodes"]["tick"]["run"] = json!({"handler": "costly"});
            let (ex, id) = created_doc(&store, doc, |b| {
                b.node_handler(
                    "costly",
                    pactgraph::runtime::sync_node(|_| {
                        let mut w = serde_json::Map::new();
                        w.insert("n".into(), json!(1));
                        w.insert("$usage".into(), json!({"input_tokens": 3, "cost_usd": 0.5}));
                        Ok(w)
                    }),
                )
            })
            .await;
            // Stopped mid-run: the load replays deltas after the creation snapshot.
            let part = drive(
                &ex,
                &store,
                id,
                "a",
                &DriveOptions::default().max_checkpoints(4),
                Continue::AsStored,
            )
            .await
            .unwrap();
            assert!(part.is_running());
            assert_eq!(
                serde_json::to_value(part.usage_total()).unwrap(),
                json!({"input_tokens": 12, "cost_usd": 2.0})
            );
            assert_eq!(store.load(id).await.unwrap().record.run, part);
            let run = drive(
                &ex,
                &store,
                id,
                "a",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            assert_eq!(
                serde_json::to_value(run.usage_total()).unwrap(),
                json!({"input_tokens": 21, "cost_usd": 3.5})
            );
            assert_eq!(store.load(id).await.unwrap().record.run, run);
        });
    }
}

/// Proves that a node `retry` policy's later attempts are stored before they run: the
/// handler, at its third attempt, finds attempt 3 in the store (so a crash there would
/// run the step again as attempt 4), and the driven run completes with two `retry` items.
#[test]
fn retry_attempts_are_stored_before_they_run() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let mut doc = ticker_named(3, "retrying");
            doc["nodes"]["tick"]["run"] = json!({"handler": "flaky"});
            doc["nodes"]["tick"]["retry"] = json!({"max_attempts": 3});
            let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(u32, u32)>::new()));
            let (probe, log) = (store.clone(), std::sync::Arc::clone(&seen));
            let id_cell = std::sync::Arc::new(std::sync::OnceLock::<RunId>::new());
            let id_for_handler = std::sync::Arc::clone(&id_cell);
            let (ex, id) = created_doc(&store, doc, |b| {
                b.node_handler("flaky", move |input: pactgraph::runtime::NodeInput| {
                    let (probe, log, id) = (probe.clone(), log.clone(), id_for_handler.clone());
                    async move {
                        let id = *id.get().expect("set before the run is driven");
                        let stored = probe.info(id).await.expect("readable").attempt;
                        log.lock()
                            .expect("not poisoned")
                            .push((input.attempt, stored));
                        if input.step == 0 && input.attempt < 3 {
                            return Err(pactgraph::runtime::HandlerError::new("not yet"));
                        }
                        let mut w = serde_json::Map::new();
                        w.insert("n".into(), json!(1));
                        Ok(w)
                    }
                })
            })
            .await;
            id_cell.set(id).expect("set once");
            let run = drive(
                &ex,
                &store,
                id,
                "a",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            let retries = run
                .trace()
                .iter()
                .filter(|i| i.kind == TraceKind::Retry)
                .count();
            assert_eq!(retries, 2, "{:#?}", run.trace().to_items());
            let first_step: Vec<(u32, u32)> = seen.lock().unwrap()[..3].to_vec();
            assert_eq!(first_step, [(1, 1), (2, 2), (3, 3)]);
        });
    }
}
