//! The prune/create race: a prune deleting the documents no run uses, at the moment
//! another store creates a run of one of them, never deletes that document under the new
//! run (on PostgreSQL the create failed with a foreign key violation, or the run was left
//! without its document). Both stores; two store instances, as two processes would be.
#![cfg(feature = "store")]

mod support;

use pactgraph::runtime::RunRecord;
use pactgraph::store::{CreateOptions, PruneFilter, RunStore};
use serde_json::json;
use support::runtime::{builder, graph, rt};
use support::stores::{backends, open, reopen};

/// Proves 40 rounds of (a run of document D that expired at once; then, at the same
/// moment, a prune of expired runs and a create of a new run of D from another store)
/// all leave the new run loadable, its create and the prune both succeeding.
#[test]
fn a_prune_never_deletes_the_document_of_a_run_being_created() {
    for backend in backends() {
        rt().block_on(async {
            let held = open(backend).await;
            let pruner = held.store.clone();
            let creator = reopen(backend, &held.url, None).await;
            let g = graph(json!({
                "workflow": "doc_d",
                "slices": {"n": {}},
                "budgets": {"max_steps": 1},
                "entry": "root",
                "supervisors": {"root": {"allow": ["x"], "default": {"stop_global": {}}}},
                "nodes": {"x": {"supervisor": "root", "writes": ["n"],
                    "triggers": [{"priority": 1, "when": true}], "run": {"set": {"n": 1}}}}
            }));
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
