//! Fixtures shared by the runtime's unit tests.

use serde_json::json;

use super::Executor;
use crate::contracts::WorkflowDocument;
use crate::graph::GraphBuilder;
use crate::validator::ValidGraph;

/// The smallest workflow that runs: `root` dispatches `reply`, a terminal `set` node.
/// Returns its document (as the graph gives it back) and an executor for it.
pub(crate) fn reply_workflow() -> (WorkflowDocument, Executor) {
    let doc = WorkflowDocument::from_value(json!({
        "workflow": "w", "slices": {"answer": {}}, "entry": "root",
        "supervisors": {"root": {"allow": ["reply"]}},
        "nodes": {"reply": {"supervisor": "root", "writes": ["answer"], "terminal": true,
            "triggers": [{"priority": 1, "when": true}],
            "run": {"set": {"answer": "hi"}}}}
    }))
    .expect("a valid document");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    let doc = graph.to_document();
    let ex = Executor::builder(ValidGraph::new(graph).expect("valid"))
        .build()
        .expect("builds");
    (doc, ex)
}
