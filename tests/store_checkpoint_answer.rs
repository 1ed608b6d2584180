//! A checkpoint's answer is the run row as the store holds it after the checkpoint, on
//! both stores (SQLite's statement reads each column back with a subquery, ADR 0089).
//! Real databases: a SQLite file in a temporary folder, and PostgreSQL when `PG_URL` is
//! set.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::runtime::{RunRecord, RunState, TerminationReason};
use pactgraph::store::{Before, Checkpoint, CreateOptions, RunStore, StepDelta, StoredStatus};
use serde_json::json;
use support::runtime::{builder, graph, rt};
use support::stores::{backends, open};

const LEASE: Duration = Duration::from_secs(60);

/// Proves the answer of every checkpoint of a run (without a snapshot, after another
/// writer asked a cancel, after a renewed lease, and the last one, which ends the run with a snapshot) equals
/// the row read back with `info`, field for field, including a name and an owner whose
/// texts JSON must escape (quotes, a backslash, a line break, non-ASCII), NULL columns (no
/// expiry) and `cancel_requested` set by another statement between two checkpoints.
#[test]
fn every_checkpoint_answers_the_row_as_stored() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let store = held.store.clone();
            let g = graph(support::runtime::ticker(3));
            let document = g.to_document();
            let ex = builder(g).build().expect("builds");
            let record = RunRecord::new(document, ex.start(json!({})).expect("starts"));
            let id = record.run_id;
            let name = "a \"quoted\" name \\ with a\nline break, naïve ☃";
            let owner = "owner \"1\"\t\\ ü";
            let created = store
                .create(&record, &CreateOptions::default().name(name))
                .await
                .expect("creates");
            assert_eq!(created.name.as_deref(), Some(name));
            assert_eq!(created.expires_ms, None);
            store.claim(id, owner, LEASE).await.expect("claims");
            let mut run: RunState = record.run.clone();
            let mut seq = 0;
            while run.is_running() {
                let before = Before::of(&run);
                ex.step(&mut run).await;
                let delta = StepDelta::between(&before, &run);
                seq += 1;
                let answer = store
                    .checkpoint(id, owner, Checkpoint::new(seq, &delta, &run))
                    .await
                    .expect("checkpoints");
                let stored = store.info(id).await.expect("reads the row");
                assert_eq!(answer, stored, "checkpoint {seq} on {backend}");
                assert_eq!(answer.name.as_deref(), Some(name));
                assert_eq!(answer.owner.as_deref(), Some(owner));
                assert_eq!(answer.seq, seq);
                if seq == 1 {
                    assert!(!answer.cancel_requested);
                    // Another statement marks the cancel between two checkpoints: the
                    // next answer carries it.
                    let asked = store.cancel(id).await.expect("asks a cancel");
                    assert!(asked.cancel_requested, "{asked:?}");
                } else {
                    assert!(answer.cancel_requested, "checkpoint {seq}: {answer:?}");
                }
                if seq == 2 {
                    // A renewal moves the lease's expiry: the next answer shows it.
                    store.renew(id, owner, LEASE * 2).await.expect("renews");
                }
            }
            let last = store.info(id).await.expect("reads the row");
            assert_eq!(last.status, StoredStatus::Stopped);
            assert_eq!(
                last.termination_reason,
                Some(TerminationReason::MaxStepsExceeded)
            );
            assert!(seq >= 3, "the run took {seq} checkpoints");
        });
    }
}
