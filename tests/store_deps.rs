//! Run dependencies and the worker from Rust: `CreateOptions::after`, `store::settle`
//! through `drive`, the runnable query, and `store::work` driving several runs at once in
//! one task. A real SQLite file in a temporary folder.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::runtime::{Executor, RunRecord, TerminationReason};
use pactgraph::store::{
    AnyStore, Continue, CreateOptions, Dependencies, DriveOptions, OnDepFailure, RunStore,
    StoreError, StoredStatus, WorkEvent, WorkerOptions, drive, local_owner, work,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph, rt};
use support::stores::{backends, open};

/// Writes `out` once (a handler that echoes its run's `n` input), then stops.
fn emit() -> Value {
    json!({
        "workflow": "emit",
        "slices": {"out": {}, "n": {}, "deps": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["emit"], "default": {"stop_global": {}}}},
        "nodes": {"emit": {"supervisor": "root", "reads": ["n"], "writes": ["out"],
            "triggers": [{"when": {"path": "/out", "exists": false}}],
            "run": {"set": {"out": {"done": true}}}}}
    })
}

fn executor() -> (Executor, pactgraph::WorkflowDocument) {
    let g = graph(emit());
    let document = g.to_document();
    (builder(g).build().expect("builds"), document)
}

async fn create(
    store: &AnyStore,
    ex: &Executor,
    doc: &pactgraph::WorkflowDocument,
    n: u64,
    options: CreateOptions,
) -> Result<pactgraph::runtime::RunId, StoreError> {
    let record = RunRecord::new(doc.clone(), ex.start(json!({"n": n})).expect("starts"));
    store.create(&record, &options).await.map(|i| i.id)
}

/// Proves the store API: a run created after another is `waiting`, is not runnable
/// while its dependency is not final, becomes runnable once it is, and `drive` starts
/// it with the dependency's result (root state without `system`) in its slice; an
/// unknown dependency is `NotFound` and creates nothing; `abort` after a cancelled
/// dependency ends the run `dependency_failed` without a step.
#[test]
fn dependencies_from_rust() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let (ex, doc) = executor();
            let a = create(&store, &ex, &doc, 1, CreateOptions::default())
                .await
                .unwrap();
            let b = create(
                &store,
                &ex,
                &doc,
                2,
                CreateOptions::default().after(Dependencies::new(vec![a]).result_slice("deps")),
            )
            .await
            .unwrap();
            assert_eq!(store.info(b).await.unwrap().status, StoredStatus::Waiting);
            let spec = store.dependency_spec(b).await.unwrap().expect("a spec");
            assert_eq!(spec.after, vec![a]);
            assert_eq!(spec.on_failure, OnDepFailure::Abort);
            let runnable: Vec<_> = store
                .runnable(10)
                .await
                .unwrap()
                .into_iter()
                .map(|i| i.id)
                .collect();
            assert_eq!(runnable, vec![a], "B is not runnable while A is queued");
            assert_eq!(store.dependents(a).await.unwrap()[0].id, b);

            let ran_a = drive(
                &ex,
                &store,
                a,
                "w",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            let runnable: Vec<_> = store
                .runnable(10)
                .await
                .unwrap()
                .into_iter()
                .map(|i| i.id)
                .collect();
            assert_eq!(runnable, vec![b], "B is runnable once A ended");
            let ran_b = drive(
                &ex,
                &store,
                b,
                "w",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            let result = &ran_b.state()["deps"][a.to_string().as_str()];
            assert_eq!(result["status"], "completed");
            assert_eq!(result["workflow"], "emit");
            let mut expected = ran_a.state().clone();
            expected.shift_remove("system");
            assert_eq!(result["state"], Value::Object(expected));

            let missing = pactgraph::runtime::RunId::new();
            let e = create(
                &store,
                &ex,
                &doc,
                3,
                CreateOptions::default().after(Dependencies::new(vec![missing])),
            )
            .await
            .unwrap_err();
            assert!(
                matches!(e, StoreError::NotFound { ref key } if *key == missing.to_string()),
                "{e}"
            );
            assert_eq!(
                store.list(&Default::default()).await.unwrap().len(),
                2,
                "nothing created"
            );

            let c = create(&store, &ex, &doc, 4, CreateOptions::default())
                .await
                .unwrap();
            let d = create(
                &store,
                &ex,
                &doc,
                5,
                CreateOptions::default()
                    .after(Dependencies::new(vec![c]).timeout(Duration::from_secs(60))),
            )
            .await
            .unwrap();
            store.cancel(c).await.unwrap();
            let ended = pactgraph::store::settle_dependents(&store, c, "x", Duration::from_secs(5))
                .await
                .unwrap();
            assert_eq!(ended, vec![(d, TerminationReason::DependencyFailed)]);
            let info = store.info(d).await.unwrap();
            assert_eq!((info.status, info.steps), (StoredStatus::Failed, 0));
        });
    }
}

/// Proves `store::work` with concurrency 4 in one task drains 40 runs (20 pairs, the
/// second of each after the first): each completed once, each dependent's first step
/// after its dependency's last (trace times in the store), and returns with
/// `once` when nothing is runnable; the report sees one start and one end per run.
/// (Every store call of a run happens inside that run's future: a claim awaited
/// outside them once deadlocked on the write connection a suspended drive held.)
#[test]
fn work_drains_chains_with_several_runs_at_once() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let (ex, doc) = executor();
            let mut ids = Vec::new();
            for i in 0..40u64 {
                let options = if i % 2 == 1 {
                    CreateOptions::default().after(Dependencies::new(vec![ids[ids.len() - 1]]))
                } else {
                    CreateOptions::default()
                };
                ids.push(create(&store, &ex, &doc, i, options).await.unwrap());
            }
            let mut started = Vec::new();
            let mut ended = Vec::new();
            let mut events = Vec::new();
            let summary = work(
                &store,
                &WorkerOptions::default().concurrency(4).once(true),
                |_| {
                    let (ex, _) = executor();
                    Ok(ex)
                },
                |event| match event {
                    WorkEvent::Started { id, .. } => {
                        started.push(id);
                        events.push(("started", id));
                    }
                    WorkEvent::Ended { id, result } => {
                        assert!(result.is_ok(), "{result:?}");
                        ended.push(id);
                        events.push(("ended", id));
                    }
                    _ => {}
                },
                std::future::pending(),
            )
            .await
            .unwrap();
            assert_eq!(summary.finished, 40);
            let mut sorted = started.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), 40, "each run started once");
            assert_eq!(ended.len(), 40);
            // A dependent's first step comes after its dependency's last: the run A ended
            // in the store before B stepped (B's report line may come before A's: A's
            // end is reported once its driver let it go, B may be taken meanwhile).
            for pair in ids.chunks(2) {
                let a = store.load(pair[0]).await.unwrap().record.run;
                let b = store.load(pair[1]).await.unwrap().record.run;
                let a_end = a.trace().iter().last().expect("A stepped").at_ms;
                let b_first = b.trace().iter().next().expect("B stepped").at_ms;
                assert!(
                    a_end <= b_first,
                    "a dependent steps after its dependency ended ({a_end} > {b_first})"
                );
            }
            assert_eq!(events.len(), 80, "one start and one end per run");
            for id in &ids {
                assert_eq!(
                    store.info(*id).await.unwrap().status,
                    StoredStatus::Completed
                );
            }
        });
    }
}

/// Proves a run whose owner is a gone process of this host is runnable at once, under a
/// lease of a minute still current (a killed worker's runs are taken over without waiting
/// for their leases), and another owner claims it; a run held by a live owner (this
/// process) is not runnable.
#[test]
fn a_gone_local_owners_runs_are_runnable_at_once() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let (ex, doc) = executor();
            let orphan = create(&store, &ex, &doc, 1, CreateOptions::default())
                .await
                .unwrap();
            let kept = create(&store, &ex, &doc, 2, CreateOptions::default())
                .await
                .unwrap();
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let dead = child.id();
            child.wait().unwrap();
            let me = local_owner();
            let host = me.rsplit_once(':').unwrap().0;
            let gone = format!("{host}:{dead}#1");
            let minute = Duration::from_secs(60);
            store.claim(orphan, &gone, minute).await.unwrap();
            store.claim(kept, &me, minute).await.unwrap();
            let runnable = store.runnable(10).await.unwrap();
            let ids: Vec<_> = runnable.iter().map(|i| i.id).collect();
            assert_eq!(ids, vec![orphan], "only the gone owner's run");
            assert_eq!(runnable[0].status, StoredStatus::Interrupted);
            store.claim(orphan, "another", minute).await.unwrap();
            assert!(store.runnable(10).await.unwrap().is_empty());
        });
    }
}

/// Proves that PostgreSQL's wakeups are per schema: a worker's `wakeups()` on one schema
/// is told of a run created on its own schema (well before a poll would matter: the
/// wait is on the wakeup alone), and is not woken by runs created on another schema of
/// the same database. Real `LISTEN`/`NOTIFY` on the `PG_URL` server; skipped without it
/// (SQLite sends no wakeups: `wakeups()` is `None` there).
#[test]
fn wakeups_come_from_the_workers_own_schema_only() {
    if support::stores::pg_url().is_none() {
        eprintln!("PG_URL is not set: skipped");
        return;
    }
    rt().block_on(async {
        let mine = open(support::stores::Backend::Postgres).await;
        let other = open(support::stores::Backend::Postgres).await;
        let wakeups = mine
            .store
            .wakeups()
            .await
            .expect("PostgreSQL listens for runnable runs");
        let (ex, doc) = executor();
        // Runs made runnable on another schema (created, and claimed then let go): no
        // word reaches this schema's listener.
        for n in 0..3 {
            let id = create(&other.store, &ex, &doc, n, CreateOptions::default())
                .await
                .expect("creates on the other schema");
            let owner = local_owner();
            other
                .store
                .claim(id, &owner, Duration::from_secs(30))
                .await
                .expect("claims");
            other.store.release(id, &owner).await.expect("lets go");
        }
        let woken = tokio::time::timeout(Duration::from_millis(700), wakeups.next()).await;
        assert!(
            woken.is_err(),
            "a worker was woken by runs of another schema"
        );
        // A run created on its own schema wakes it.
        create(&mine.store, &ex, &doc, 9, CreateOptions::default())
            .await
            .expect("creates");
        tokio::time::timeout(Duration::from_secs(10), wakeups.next())
            .await
            .expect("a run created on the worker's own schema wakes it");
    });
}
