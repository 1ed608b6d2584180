//! Crash safety, on both stores (a SQLite file, and PostgreSQL at `PG_URL`): a process
//! driving a run is killed with SIGKILL mid-run. Every step it committed is in the store, none twice; the run shows as
//! `interrupted` once its lease lapses; and finishing it from the store gives exactly the
//! state and trace (timing aside) of an uninterrupted run.
//!
//! The child is this same test binary, run with `PACTGRAPH_STORE_CRASH_CHILD` set to
//! `URL RUN_ID`: the test sees the variable and drives the run instead of testing.
#![cfg(all(feature = "store", unix))]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pactgraph::runtime::{Executor, RunId, RunRecord, TerminationReason, sync_node};
use pactgraph::store::{
    AnyStore, Continue, CreateOptions, DriveOptions, Durability, RunStore, StoreError,
    StoredStatus, drive,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph, rt};
use support::stores::{backends, open};

const CHILD: &str = "PACTGRAPH_STORE_CRASH_CHILD";
const STEPS: u32 = 60;
/// The child's lease: short, so the parent can take over soon after the kill, and long
/// next to a step (~10 ms), so a loaded machine does not make the child lose it.
const CHILD_LEASE: Duration = Duration::from_millis(1500);

/// A counter: node `tick` (a Rust handler that takes ~10 ms) adds 1 to `n` every step,
/// until `max_steps` stops the run.
fn counter() -> Value {
    json!({
        "workflow": "counter",
        "slices": {"n": {}},
        "budgets": {"max_steps": STEPS},
        "entry": "root",
        "supervisors": {"root": {"allow": ["tick"], "default": {"stop_global": {}}}},
        "nodes": {"tick": {"supervisor": "root", "reads": ["n"], "writes": ["n"],
            "triggers": [{"priority": 1, "when": true}],
            "run": {"handler": "tick"}}}
    })
}

fn executor() -> (Executor, pactgraph::WorkflowDocument) {
    let g = graph(counter());
    let document = g.to_document();
    let ex = builder(g)
        .node_handler(
            "tick",
            sync_node(|input| {
                std::thread::sleep(Duration::from_millis(10));
                let n = input.view.get("n").and_then(Value::as_u64).unwrap_or(0);
                let mut w = serde_json::Map::new();
                w.insert("n".into(), json!(n + 1));
                Ok(w)
            }),
        )
        .build()
        .expect("builds");
    (ex, document)
}

/// The child: drive the run until killed.
fn child(spec: &str) {
    let (url, id) = spec.split_once(' ').expect("URL RUN_ID");
    let id: RunId = id.parse().expect("a run id");
    let (ex, _) = executor();
    rt().block_on(async {
        let store = AnyStore::open(url, Durability::Normal)
            .await
            .expect("opens");
        let options = DriveOptions::default().lease(CHILD_LEASE);
        drive(&ex, &store, id, "child", &options, Continue::AsStored)
            .await
            .expect("drives");
    });
}

#[test]
fn a_run_killed_mid_step_resumes_exactly_from_its_last_commit() {
    if let Ok(spec) = std::env::var(CHILD) {
        return child(&spec);
    }
    let (ex, document) = executor();
    let rt = rt();
    let mut whole = ex.start(json!({"n": 0})).unwrap();
    rt.block_on(ex.run_in_place(&mut whole));
    assert_eq!(
        whole.termination_reason(),
        Some(TerminationReason::MaxStepsExceeded)
    );

    for backend in backends() {
        let held = rt.block_on(open(backend));
        let url = held.url.clone();
        rt.block_on(async {
            let store = held.store.clone();
            let record = RunRecord::new(document.clone(), ex.start(json!({"n": 0})).unwrap());
            let id = record.run_id;
            store
                .create(&record, &CreateOptions::default())
                .await
                .unwrap();

            let mut proc = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "a_run_killed_mid_step_resumes_exactly_from_its_last_commit",
                ])
                .env(CHILD, format!("{url} {id}"))
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            // Kill it once it has committed some steps, well before the end.
            let t0 = Instant::now();
            loop {
                let info = store.info(id).await.unwrap();
                if info.seq >= 15 {
                    break;
                }
                assert!(
                    proc.try_wait().unwrap().is_none(),
                    "the child exited early: {info:?}"
                );
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "the child makes no progress"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            proc.kill().unwrap(); // SIGKILL
            proc.wait().unwrap();

            let info = store.info(id).await.unwrap();
            assert!(
                info.seq >= 15 && info.steps < STEPS,
                "killed mid-run: {info:?}"
            );
            assert_eq!(info.owner.as_deref(), Some("child"));
            // Until its lease lapses the dead owner still holds the run; then the run is
            // interrupted and can be claimed.
            match store.claim(id, "parent", CHILD_LEASE).await {
                Err(StoreError::LeaseHeld { holder, .. }) => assert_eq!(holder, "child"),
                other => panic!("expected the dead child's lease to hold, got {other:?}"),
            }
            let killed = Instant::now();
            while store.info(id).await.unwrap().status != StoredStatus::Interrupted {
                assert!(killed.elapsed() < CHILD_LEASE * 4, "the lease never lapses");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }

            // Every committed step is there, numbered 1..=seq, none twice.
            let loaded = store.load(id).await.unwrap();
            let seqs: Vec<u64> = store
                .deltas(id)
                .await
                .unwrap()
                .into_iter()
                .map(|(s, _)| s)
                .collect();
            assert_eq!(
                seqs,
                (store.storage(id).await.unwrap().snapshot_seq + 1..=loaded.record.seq)
                    .collect::<Vec<_>>()
            );
            let part = &loaded.record.run;
            assert_eq!(part.steps(), loaded.info.steps);
            assert_eq!(
                part.state().get("n"),
                Some(&json!(part.steps())),
                "one increment per committed step"
            );
            let prefix = whole.trace().without_timing().to_items()[..part.trace().len()].to_vec();
            assert_eq!(
                part.trace().without_timing().to_items(),
                prefix,
                "the trace so far is the uninterrupted one's"
            );

            // Finishing it gives the uninterrupted run.
            let finished = drive(
                &ex,
                &store,
                id,
                "parent",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            assert_eq!(finished.state(), whole.state());
            assert_eq!(finished.status(), whole.status());
            assert_eq!(finished.termination_reason(), whole.termination_reason());
            assert_eq!(
                finished.trace().without_timing(),
                whole.trace().without_timing()
            );
            assert_eq!(
                (finished.steps(), &finished.visits()),
                (whole.steps(), &whole.visits())
            );
            let info = store.info(id).await.unwrap();
            assert_eq!(info.status, StoredStatus::Stopped);
            let seqs: Vec<u64> = store
                .deltas(id)
                .await
                .unwrap()
                .into_iter()
                .map(|(s, _)| s)
                .collect();
            assert_eq!(
                seqs,
                (store.storage(id).await.unwrap().snapshot_seq + 1..=info.seq).collect::<Vec<_>>()
            );
        });
    }
}
