//! The run store's listing (newest first, filters, expired runs hidden unless asked),
//! finding (by id or unique prefix, by name) and pruning, on both stores. Every test uses
//! a real database (a SQLite file in a temporary folder; PostgreSQL when `PG_URL` is set).
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::runtime::RunId;
use pactgraph::store::{
    Continue, CreateOptions, DriveOptions, PruneFilter, RunFilter, RunStore, StoreError,
    StoredStatus, drive,
};
use serde_json::{Value, json};
use support::runtime::{rt, started, ticker_named};
use support::stores::{backends, open};

const LEASE: Duration = Duration::from_secs(60);

/// Proves listing (newest first, filters, expired hidden unless asked), finding (full
/// id, unique prefix, ambiguous prefix naming its candidates, names unique among
/// unexpired runs) and pruning (counts, dry runs, documents no run uses go too, and a
/// pruned run's events).
#[test]
fn list_find_and_prune() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let create = |doc: Value, opts: CreateOptions| {
                let store = &store;
                async move {
                    let (_, record) = started(doc, json!({}));
                    store.create(&record, &opts).await.map(|i| i.id)
                }
            };
            let a = create(ticker_named(5, "t"), CreateOptions::default().name("alpha"))
                .await
                .unwrap();
            let b = create(
                ticker_named(5, "t"),
                CreateOptions::default().name("beta").expires_at(1),
            )
            .await
            .unwrap();
            let c = create(
                ticker_named(5, "other"),
                CreateOptions::default().ttl(LEASE),
            )
            .await
            .unwrap();
            // Newest first; the expired run only when asked.
            let ids =
                |v: Vec<pactgraph::store::RunInfo>| v.into_iter().map(|i| i.id).collect::<Vec<_>>();
            assert_eq!(
                ids(store.list(&RunFilter::default()).await.unwrap()),
                vec![c, a]
            );
            assert_eq!(
                ids(store
                    .list(&RunFilter::default().include_expired())
                    .await
                    .unwrap()),
                vec![c, b, a]
            );
            assert_eq!(
                ids(store
                    .list(&RunFilter::default().workflow("other"))
                    .await
                    .unwrap()),
                vec![c]
            );
            assert_eq!(
                ids(store
                    .list(&RunFilter::default().status(StoredStatus::Queued))
                    .await
                    .unwrap()),
                vec![c, a]
            );
            assert!(
                store
                    .list(&RunFilter::default().status(StoredStatus::Completed))
                    .await
                    .unwrap()
                    .is_empty()
            );
            // Filters together, and pages: each filter given is a clause of its own
            // (ADR 0060: PostgreSQL plans them generically), the page's bound one more.
            assert_eq!(
                ids(store
                    .list(
                        &RunFilter::default()
                            .workflow("t")
                            .include_expired()
                            .status(StoredStatus::Queued)
                    )
                    .await
                    .unwrap()),
                vec![b, a]
            );
            assert_eq!(
                ids(store
                    .list(&RunFilter::default().workflow("t").before(b))
                    .await
                    .unwrap()),
                vec![a]
            );
            assert_eq!(
                ids(store
                    .list(&RunFilter::default().include_expired().before(c).limit(1))
                    .await
                    .unwrap()),
                vec![b]
            );
            assert_eq!(
                ids(store
                    .list(
                        &RunFilter::default()
                            .workflow("other")
                            .status(StoredStatus::Completed)
                    )
                    .await
                    .unwrap()),
                Vec::<RunId>::new()
            );
            // Finding by id, name and prefix.
            assert_eq!(store.find(&a.to_string()).await.unwrap(), a);
            assert_eq!(store.find(&a.to_string().to_lowercase()).await.unwrap(), a);
            assert_eq!(store.find("alpha").await.unwrap(), a);
            assert!(
                matches!(store.find("beta").await, Err(StoreError::NotFound { .. })),
                "expired names are not found"
            );
            assert!(matches!(
                store.find("nobody").await,
                Err(StoreError::NotFound { .. })
            ));
            // The ids share their time prefix (made in the same few ms): 6 characters match all.
            let prefix = &a.to_string()[..6];
            match store.find(prefix).await {
                Err(StoreError::Ambiguous { candidates, .. }) => {
                    assert_eq!(candidates, vec![c, b, a]);
                }
                other => panic!("expected Ambiguous, got {other:?}"),
            }
            let unique = |id: RunId, others: &[RunId]| {
                let s = id.to_string();
                (6..=26)
                    .map(|n| s[..n].to_string())
                    .find(|p| {
                        others
                            .iter()
                            .all(|o| !o.to_string().starts_with(p.as_str()))
                    })
                    .unwrap()
            };
            let p = unique(a, &[b, c]);
            assert_eq!(store.find(&p).await.unwrap(), a);
            // Names: taken while the holder is unexpired; an expired one's name is free.
            match create(ticker_named(5, "t"), CreateOptions::default().name("alpha")).await {
                Err(StoreError::NameTaken { name, holder }) => {
                    assert_eq!((name.as_str(), holder), ("alpha", a))
                }
                other => panic!("expected NameTaken, got {other:?}"),
            }
            let d = create(ticker_named(5, "t"), CreateOptions::default().name("beta"))
                .await
                .unwrap();
            assert_eq!(store.find("beta").await.unwrap(), d);
            // Creating the same run twice is refused.
            let (_, record) = started(ticker_named(5, "t"), json!({}));
            store
                .create(&record, &CreateOptions::default())
                .await
                .unwrap();
            assert!(matches!(
                store.create(&record, &CreateOptions::default()).await,
                Err(StoreError::Exists { run_id }) if run_id == record.run_id
            ));
            // Pruning.
            assert!(matches!(
                store.prune(&PruneFilter::default()).await,
                Err(StoreError::NoPruneFilter)
            ));
            assert_eq!(
                store
                    .prune(&PruneFilter::default().expired().dry_run())
                    .await
                    .unwrap(),
                1
            );
            assert_eq!(
                store
                    .list(&RunFilter::default().include_expired())
                    .await
                    .unwrap()
                    .len(),
                5
            );
            assert_eq!(
                store
                    .prune(&PruneFilter::default().expired())
                    .await
                    .unwrap(),
                1
            );
            assert!(matches!(
                store.load(b).await,
                Err(StoreError::NotFound { .. })
            ));
            assert_eq!(
                store
                    .prune(&PruneFilter::default().expired())
                    .await
                    .unwrap(),
                0
            );
            assert_eq!(
                store
                    .prune(&PruneFilter::default().older_than(Duration::from_secs(3600)))
                    .await
                    .unwrap(),
                0
            );
            assert_eq!(
                store
                    .prune(&PruneFilter::default().status(StoredStatus::Queued))
                    .await
                    .unwrap(),
                4
            );
            assert!(
                store
                    .list(&RunFilter::default().include_expired())
                    .await
                    .unwrap()
                    .is_empty()
            );
            // A pruned run's events go with it (on PostgreSQL its event chunks have no
            // foreign key: prune deletes them itself, format 8).
            let (ex, record) = started(ticker_named(5, "t"), json!({}));
            let e = record.run_id;
            store
                .create(&record, &CreateOptions::default())
                .await
                .unwrap();
            drive(
                &ex,
                &store,
                e,
                "a",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            assert!(store.last_event_seq(e).await.unwrap() > 5);
            assert_eq!(
                store
                    .prune(&PruneFilter::default().status(StoredStatus::Stopped))
                    .await
                    .unwrap(),
                1
            );
            assert_eq!(store.last_event_seq(e).await.unwrap(), 0);
            assert!(store.events(e, 0, 100).await.unwrap().is_empty());
        });
    }
}
