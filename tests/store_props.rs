//! The run store against the in-memory executor, over random valid workflows: a run
//! checkpointed after every step reloads exactly (`==`) the run state that was in memory
//! after each checkpoint, and a run stopped after any step `k`, reloaded and finished
//! (by another owner, through `store::drive`) ends exactly as the uninterrupted run.
#![cfg(feature = "store")]

mod support;

use pactgraph::runtime::RunRecord;
use pactgraph::store::{
    Before, Checkpoint, Continue, CreateOptions, DriveOptions, RunStore, StepDelta, StoredStatus,
    drive,
};
use proptest::prelude::*;
use std::time::Duration;
use support::random_workflow::{input, workflow};
use support::runtime::{builder, graph, rt};
use support::stores::{backends, open_with};

proptest! {
    // Each case opens a fresh store on each backend; 64 cases run in a few seconds.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn checkpointed_runs_reload_exactly_and_finish_as_uninterrupted_runs(
        seed in any::<u64>(),
        k in 0u64..40,
        every in 1u64..6,
    ) {
        let (doc, _) = workflow(seed);
        let g = graph(doc);
        let document = g.to_document();
        let ex = builder(g).build().unwrap();
        let rt = rt();
        let initial = input(seed);

        // The uninterrupted in-memory run.
        let mut whole = ex.start(initial.clone()).unwrap();
        rt.block_on(ex.run_in_place(&mut whole));

        for backend in backends() {
        let (document, initial) = (document.clone(), initial.clone());
        rt.block_on(async {
            // Small snapshot intervals: loads replay deltas across snapshots.
            let held = open_with(backend, Some(every)).await;
            let store = held.store.clone();
            let record = RunRecord::new(document, ex.start(initial).unwrap());
            let id = record.run_id;
            let info = store.create(&record, &CreateOptions::default()).await.unwrap();
            prop_assert_eq!(info.status, StoredStatus::Queued);
            prop_assert_eq!(&store.load(id).await.unwrap().record, &record);

            // Owner `a` takes k steps by hand, checking every reload.
            store.claim(id, "a", Duration::from_secs(60)).await.unwrap();
            let mut run = record.run.clone();
            let mut seq = 0;
            while run.is_running() && seq < k {
                let before = Before::of(&run);
                let mut replayed = run.clone();
                ex.step(&mut run).await;
                let delta = StepDelta::between(&before, &run);
                // Applying the delta to the run before gives the run after, exactly.
                delta.apply(&mut replayed).unwrap();
                prop_assert_eq!(&replayed, &run);
                seq += 1;
                store.checkpoint(id, "a", Checkpoint::new(seq, &delta, &run)).await.unwrap();
                let loaded = store.load(id).await.unwrap();
                prop_assert_eq!(loaded.record.seq, seq);
                prop_assert_eq!(&loaded.record.run, &run);
                // Byte for byte, as the run state serializes.
                prop_assert_eq!(
                    serde_json::to_string(&loaded.record.run).unwrap(),
                    serde_json::to_string(&run).unwrap()
                );
            }
            store.release(id, "a").await.unwrap();

            // Owner `b` reloads and finishes it.
            let finished = drive(&ex, &store, id, "b", &DriveOptions::default(), Continue::AsStored).await.unwrap();
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
            prop_assert_eq!(loaded.info.status, StoredStatus::of(whole.status()));
            prop_assert_eq!(loaded.info.steps, whole.steps());
            prop_assert!(loaded.info.owner.is_none());
            // One step row per checkpoint, numbered 1..=seq: none twice, none skipped.
            let seqs: Vec<u64> = store.deltas(id).await.unwrap().into_iter().map(|(s, _)| s).collect();
            prop_assert_eq!(seqs, (store.storage(id).await.unwrap().snapshot_seq + 1..=loaded.record.seq).collect::<Vec<_>>());
            Ok(())
        })?;
        }
    }
}
