//! Commit at effects (brief section 13, ADR 0035), on both stores: pure steps are
//! committed in batches, a step that performed an effect at once with the pure steps
//! before it; a run checkpointed at random batch boundaries, reloaded and continued from
//! each by another owner, ends exactly as the uninterrupted run.
#![cfg(feature = "store")]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pactgraph::runtime::{Executor, RunRecord, RunState, TraceKind, sync_node};
use pactgraph::store::{
    AnyStore, Checkpoints, Continue, CreateOptions, DriveOptions, RunStore, StoreError,
    StoredStatus, drive,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::random_workflow::{input, workflow};
use support::runtime::{builder, graph, rt};
use support::stores::{Backend, admin, backends, open, open_with};

/// A mixed chain: `p1` and `p2` (`set` nodes, pure) then `tick` (a handler: an effect),
/// over and over, until `tick` has run `ticks` times.
fn mixed(ticks: u32) -> Value {
    let not_done = json!({"not": {"path": "/done", "equals": true}});
    let phase = |p: &str| json!({"all": [not_done, {"path": "/phase", "equals": p}]});
    json!({
        "workflow": "mixed",
        "slices": {"n": {}, "done": {}, "phase": {}, "big": {}},
        "budgets": {"max_steps": ticks * 3 + 10},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["p1", "p2", "tick"],
            "default": {"stop_global": {"reason": "counted"}}}},
        "nodes": {
            "p1": {"supervisor": "boss", "reads": ["phase"], "writes": ["phase"],
                "triggers": [{"priority": 3, "when": phase("a")}],
                "run": {"set": {"phase": "b"}}},
            "p2": {"supervisor": "boss", "reads": ["phase"], "writes": ["phase"],
                "triggers": [{"priority": 2, "when": phase("b")}],
                "run": {"set": {"phase": "x"}}},
            "tick": {"supervisor": "boss", "reads": ["n", "phase"],
                "writes": ["n", "done", "phase"],
                "triggers": [{"priority": 1, "when": phase("x")}],
                "run": {"handler": "tick"}}
        }
    })
}

/// What `tick` writes: `n` one more, `done` once it reaches `ticks`, `phase` back to `a`.
fn tick_writes(
    view: &serde_json::Map<String, Value>,
    ticks: u32,
) -> serde_json::Map<String, Value> {
    let n = view.get("n").and_then(Value::as_u64).unwrap_or(0) + 1;
    let mut w = serde_json::Map::new();
    w.insert("n".into(), json!(n));
    w.insert("done".into(), json!(n >= u64::from(ticks)));
    w.insert("phase".into(), json!("a"));
    w
}

/// The mixed chain's executor; `calls` counts the handler's calls (its effects).
fn mixed_executor(ticks: u32, calls: Arc<AtomicU32>) -> (Executor, pactgraph::WorkflowDocument) {
    let g = graph(mixed(ticks));
    let document = g.to_document();
    let ex = builder(g)
        .node_handler(
            "tick",
            sync_node(move |input| {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(tick_writes(&input.view, ticks))
            }),
        )
        .build()
        .expect("builds");
    (ex, document)
}

/// The mixed chain's executor (`ticks` ticks) whose `tick` handler first reads its run's
/// row from `store` (as another process would) and logs what `note` makes of it (the
/// step it runs at, the row or the error reading it), if anything.
fn reading_executor<T: Send + 'static>(
    ticks: u32,
    store: &AnyStore,
    log: &Arc<std::sync::Mutex<Vec<T>>>,
    note: fn(u32, Result<pactgraph::store::RunInfo, StoreError>) -> Option<T>,
) -> Executor {
    let (reader, log) = (store.clone(), Arc::clone(log));
    builder(graph(mixed(ticks)))
        .node_handler("tick", move |input: pactgraph::runtime::NodeInput| {
            let (reader, log) = (reader.clone(), Arc::clone(&log));
            async move {
                if let Some(noted) = note(input.step, reader.info(input.run_id).await) {
                    log.lock().unwrap().push(noted);
                }
                Ok(tick_writes(&input.view, ticks))
            }
        })
        .build()
        .unwrap()
}

fn mixed_input() -> Value {
    let big: Vec<String> = (0..2_000).map(|i| format!("item-{i:05}")).collect();
    json!({"n": 0, "phase": "a", "big": big})
}

/// A run of the mixed chain on its input, created in `store`: its id.
async fn create_mixed(
    store: &AnyStore,
    document: &pactgraph::WorkflowDocument,
    ex: &Executor,
) -> pactgraph::runtime::RunId {
    let record = RunRecord::new(document.clone(), ex.start(mixed_input()).unwrap());
    store
        .create(&record, &CreateOptions::default())
        .await
        .unwrap();
    record.run_id
}

/// The steps (by number) each checkpoint of run `id` carries, from its step rows.
async fn steps_per_checkpoint(store: &AnyStore, id: pactgraph::runtime::RunId) -> Vec<Vec<u32>> {
    store
        .deltas(id)
        .await
        .expect("reads the step rows")
        .into_iter()
        .map(|(_, d)| {
            let mut steps: Vec<u32> = d.trace.iter().map(|i| i.step).collect();
            steps.dedup();
            steps
        })
        .collect()
}

/// The steps at which `tick` (the effect) was dispatched.
fn tick_steps(run: &RunState) -> Vec<u32> {
    run.trace()
        .iter()
        .filter(|i| i.kind == TraceKind::Dispatch && i.target() == Some("tick"))
        .map(|i| i.step)
        .collect()
}

fn assert_same_end(finished: &RunState, whole: &RunState) {
    assert_eq!(finished.state(), whole.state());
    assert_eq!(finished.status(), whole.status());
    assert_eq!(finished.termination_reason(), whole.termination_reason());
    assert_eq!(
        finished.trace().without_timing(),
        whole.trace().without_timing()
    );
    assert_eq!(finished.steps(), whole.steps());
    assert_eq!(finished.visits(), whole.visits());
}

/// Proves: at effects (the default), every step that performed an effect ends the
/// checkpoint that carries it (it is committed before the next effect starts), each
/// checkpoint carries at most one of them, and the pure steps before it ride along in
/// the same checkpoint: 3 steps a tick, one checkpoint a tick (plus the end). With
/// `--checkpoints steps` every step is a checkpoint. Both end alike, the effect run once
/// a tick, and the large slice no step writes is in no step row.
#[test]
fn effects_are_committed_at_once_with_the_pure_steps_before_them() {
    const TICKS: u32 = 20;
    let calls = Arc::new(AtomicU32::new(0));
    let (ex, document) = mixed_executor(TICKS, Arc::clone(&calls));
    let rt = rt();
    let mut whole = ex.start(mixed_input()).unwrap();
    rt.block_on(ex.run_in_place(&mut whole));
    assert_eq!(calls.swap(0, Ordering::SeqCst), TICKS);
    let ticks = tick_steps(&whole);
    assert_eq!(ticks.len(), TICKS as usize);
    for backend in backends() {
        for mode in [Checkpoints::Effects, Checkpoints::Steps] {
            rt.block_on(async {
                let held = open(backend).await;
                let store = held.store.clone();
                let id = create_mixed(&store, &document, &ex).await;
                let options = DriveOptions::default().checkpoints(mode);
                let run = drive(&ex, &store, id, "a", &options, Continue::AsStored)
                    .await
                    .unwrap();
                assert_same_end(&run, &whole);
                assert_eq!(calls.swap(0, Ordering::SeqCst), TICKS, "one effect a tick");
                let info = store.info(id).await.unwrap();
                assert_eq!(info.status, StoredStatus::Completed);
                assert_eq!(store.load(id).await.unwrap().record.run, run);
                let per = steps_per_checkpoint(&store, id).await;
                let stored = store.storage(id).await.unwrap();
                match mode {
                    Checkpoints::Steps => {
                        // The stop that ends the run is a step that takes no step number.
                        assert_eq!(info.seq, u64::from(run.steps()) + 1, "a checkpoint a step")
                    }
                    _ => {
                        // A tick's three steps, one checkpoint; the stop after the last
                        // tick is one more.
                        assert_eq!(info.seq, u64::from(TICKS) + 1, "{per:?}");
                        for steps in &per {
                            let effects = steps.iter().filter(|s| ticks.contains(s)).count();
                            assert!(effects <= 1, "two effects in one checkpoint: {per:?}");
                            if effects == 1 {
                                assert!(
                                    ticks.contains(steps.last().unwrap()),
                                    "an effect not committed at once: {per:?}"
                                );
                            }
                        }
                    }
                }
                // No step row holds the large slice.
                assert!(
                    stored.step_bytes / info.seq.max(1) < 4_000,
                    "{stored:?} for {} checkpoints",
                    info.seq
                );
            });
        }
    }
}

/// Proves: pure steps are committed every `batch_steps` steps (256 by default) or at the
/// end, not every step: a 600-step run of `set` steps (601 with the stop that ends it) is
/// 3 checkpoints at the default, and ceil(601 / k) with batches of k.
#[test]
fn pure_steps_are_committed_in_batches() {
    let g = graph(json!({
        "workflow": "pure",
        "slices": {"task": {}, "result": {}},
        "budgets": {"max_steps": 600},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["work"]}},
        "nodes": {"work": {"supervisor": "boss", "reads": ["task"], "writes": ["result"],
            "triggers": [{"priority": 1, "when": true}],
            "run": {"set": {"result": {"ok": true}}}}}
    }));
    let document = g.to_document();
    let ex = builder(g).build().unwrap();
    let rt = rt();
    let mut whole = ex.start(json!({"task": 1})).unwrap();
    rt.block_on(ex.run_in_place(&mut whole));
    assert_eq!(whole.steps(), 600);
    for backend in backends() {
        for (k, checkpoints) in [(256, 3), (100, 7), (7, 86), (1, 601)] {
            rt.block_on(async {
                let held = open(backend).await;
                let store = held.store.clone();
                let record =
                    RunRecord::new(document.clone(), ex.start(json!({"task": 1})).unwrap());
                let id = record.run_id;
                store
                    .create(&record, &CreateOptions::default())
                    .await
                    .unwrap();
                // No time limit: the count is the steps' alone.
                let options = DriveOptions::default().batch(k, Duration::from_secs(3600));
                let run = drive(&ex, &store, id, "a", &options, Continue::AsStored)
                    .await
                    .unwrap();
                assert_same_end(&run, &whole);
                assert_eq!(
                    store.info(id).await.unwrap().seq,
                    checkpoints,
                    "batches of {k}"
                );
                assert_eq!(store.load(id).await.unwrap().record.run, run);
            });
        }
    }
}

/// Proves: no effect starts while a batch of pure steps is still being written (ADR 0068:
/// a full batch of pure steps is written while the next steps are taken). With batches
/// of two, each tick's two pure steps fill a batch, written as `tick` is planned; when
/// `tick`'s handler runs (the effect), the store already holds every step before it: its
/// `steps` is the handler's `step` (steps taken before this one), on both stores. The run
/// ends as the uninterrupted one and reloads as it ended.
#[test]
fn no_effect_starts_while_pure_steps_are_being_written() {
    const TICKS: u32 = 30;
    let g = graph(mixed(TICKS));
    let document = g.to_document();
    let rt = rt();
    for backend in backends() {
        rt.block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            // (the step the handler ran at, the steps the store held then); the reference
            // run in memory is in no store: nothing to see.
            let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
            let ex = reading_executor(TICKS, &store, &seen, |step, held| {
                held.ok().map(|held| (step, held.steps))
            });
            let mut whole = ex.start(mixed_input()).unwrap();
            ex.run_in_place(&mut whole).await;
            seen.lock().unwrap().clear();
            let id = create_mixed(&store, &document, &ex).await;
            let options = DriveOptions::default().batch(2, Duration::from_secs(3600));
            let run = drive(&ex, &store, id, "a", &options, Continue::AsStored)
                .await
                .unwrap();
            assert_same_end(&run, &whole);
            assert_eq!(store.load(id).await.unwrap().record.run, run);
            let seen = seen.lock().unwrap().clone();
            assert_eq!(seen.len(), TICKS as usize, "{backend:?}");
            for (step, held) in seen {
                assert_eq!(
                    u64::from(held),
                    u64::from(step),
                    "{backend:?}: the effect at step {step} started with {held} steps committed"
                );
            }
        });
    }
}

/// Makes every update that ends a run fail on `url`'s store (`refuse`), or lifts that.
fn refuse_ends(backend: Backend, url: &str, refuse: bool) {
    match backend {
        Backend::Sqlite => {
            let sql = if refuse {
                "CREATE TRIGGER refuse_end BEFORE UPDATE OF status ON runs \
                 WHEN NEW.status IN ('completed', 'stopped', 'failed') \
                 BEGIN SELECT RAISE(ABORT, 'injected: no run may end'); END"
            } else {
                "DROP TRIGGER refuse_end"
            };
            let (url, sql) = (url.to_string(), sql.to_string());
            std::thread::spawn(move || {
                rt().block_on(async {
                    use sqlx::Connection;
                    let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
                    sqlx::raw_sql(&sql).execute(&mut c).await.unwrap();
                })
            })
            .join()
            .unwrap();
        }
        Backend::Postgres => admin(
            url,
            if refuse {
                "CREATE FUNCTION refuse_end() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'injected: no run may end'; END $$; \
                 CREATE TRIGGER refuse_end BEFORE UPDATE ON runs FOR EACH ROW \
                 WHEN (NEW.status IN ('completed', 'stopped', 'failed')) \
                 EXECUTE FUNCTION refuse_end()"
            } else {
                "DROP TRIGGER refuse_end ON runs; DROP FUNCTION refuse_end()"
            },
        ),
    }
}

/// Proves, on both stores: when the last checkpoint fails (every update that ends a run
/// refused by a trigger), the store's error comes back, the run is kept as its previous
/// checkpoint left it, `interrupted`, and a later drive (the trigger dropped) ends it as
/// the uninterrupted run, each effect run once.
#[test]
fn a_refused_last_checkpoint_leaves_the_run_interrupted_and_a_later_drive_ends_it() {
    const TICKS: u32 = 4;
    let rt = rt();
    for backend in backends() {
        rt.block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let calls = Arc::new(AtomicU32::new(0));
            let (ex, document) = mixed_executor(TICKS, Arc::clone(&calls));
            let mut whole = ex.start(mixed_input()).unwrap();
            ex.run_in_place(&mut whole).await;
            calls.store(0, Ordering::SeqCst);
            let options = DriveOptions::default();

            let id = create_mixed(&store, &document, &ex).await;
            refuse_ends(backend, &held.url, true);
            let refused = drive(&ex, &store, id, "a", &options, Continue::AsStored).await;
            match refused {
                Err(e @ StoreError::Database { .. }) => {
                    assert!(e.to_string().contains("injected"), "{backend:?}: {e}");
                }
                other => panic!("{backend:?}: the last checkpoint refused, got {other:?}"),
            }
            let info = store.info(id).await.unwrap();
            assert_eq!(info.status, StoredStatus::Interrupted, "{backend:?}");
            assert!(
                store.load(id).await.unwrap().record.run.is_running(),
                "{backend:?}: the last batch (the end) is not kept"
            );
            assert_eq!(calls.load(Ordering::SeqCst), TICKS, "{backend:?}");

            refuse_ends(backend, &held.url, false);
            let finished = drive(&ex, &store, id, "b", &options, Continue::AsStored)
                .await
                .unwrap();
            assert_same_end(&finished, &whole);
            assert_eq!(store.load(id).await.unwrap().record.run, finished);
            let info = store.info(id).await.unwrap();
            assert_eq!(info.status, StoredStatus::Completed, "{backend:?}");
            assert_eq!(info.owner, None, "{backend:?}: let go");
            assert_eq!(
                calls.load(Ordering::SeqCst),
                TICKS,
                "{backend:?}: no effect ran again (the last batch was pure steps)"
            );
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Proves: a run checkpointed at random batch boundaries (each hop a random batch
    /// size and a random number of checkpoints, by a new owner that reloads the run from
    /// the store, as after a crash, which loses only what the last checkpoint did not
    /// carry) ends exactly as the uninterrupted run; every reload equals the run the hop
    /// ended with; the step rows are numbered 1..=seq, none twice.
    #[test]
    fn runs_checkpointed_at_random_batch_boundaries_finish_as_uninterrupted_runs(
        seed in any::<u64>(),
        hops in proptest::collection::vec((1u32..40, 1u64..4), 1..12),
        every in 1u64..6,
    ) {
        let (doc, _) = workflow(seed);
        let g = graph(doc);
        let document = g.to_document();
        let ex = builder(g).build().unwrap();
        let rt = rt();
        let initial = input(seed);
        let mut whole = ex.start(initial.clone()).unwrap();
        rt.block_on(ex.run_in_place(&mut whole));
        for backend in backends() {
            let (document, initial) = (document.clone(), initial.clone());
            rt.block_on(async {
                let held = open_with(backend, Some(every)).await;
                let store = held.store.clone();
                let record = RunRecord::new(document, ex.start(initial).unwrap());
                let id = record.run_id;
                store.create(&record, &CreateOptions::default()).await.unwrap();
                let mut run = record.run.clone();
                for (i, (k, n)) in hops.iter().enumerate() {
                    if !run.is_running() {
                        break;
                    }
                    let options = DriveOptions::default()
                        .batch(*k, Duration::from_secs(3600))
                        .max_checkpoints(*n);
                    run = drive(&ex, &store, id, &format!("hop{i}"), &options, Continue::AsStored).await.unwrap();
                    let loaded = store.load(id).await.unwrap();
                    prop_assert_eq!(&loaded.record.run, &run);
                }
                let finished = drive(&ex, &store, id, "last", &DriveOptions::default(), Continue::AsStored)
                    .await
                    .unwrap();
                let loaded = store.load(id).await.unwrap();
                prop_assert_eq!(&loaded.record.run, &finished);
                prop_assert_eq!(&finished.state(), &whole.state());
                prop_assert_eq!(finished.status(), whole.status());
                prop_assert_eq!(finished.termination_reason(), whole.termination_reason());
                prop_assert_eq!(finished.trace().without_timing(), whole.trace().without_timing());
                prop_assert_eq!(finished.steps(), whole.steps());
                prop_assert_eq!(&finished.visits(), &whole.visits());
                prop_assert_eq!(&finished.entries(), &whole.entries());
                prop_assert_eq!(&finished.uncommitted(), &whole.uncommitted());
                let seqs: Vec<u64> =
                    store.deltas(id).await.unwrap().into_iter().map(|(s, _)| s).collect();
                let from = store.storage(id).await.unwrap().snapshot_seq + 1;
                prop_assert_eq!(seqs, (from..=loaded.record.seq).collect::<Vec<_>>());
                Ok(())
            })?;
        }
    }
}
