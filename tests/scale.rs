//! Large and deep workflows must not exhaust the stack anywhere on the way from document
//! to picture: no recursion proportional to the size of the workflow.

use pactgraph::graph::{GraphBuilder, synth};
use pactgraph::validator::Validator;
use pactgraph::visualize::{DotOptions, to_dot};

#[test]
fn a_30k_node_handoff_chain_builds_validates_and_draws() {
    let graph = GraphBuilder::from_document(synth::handoff_chain(30_000))
        .build()
        .expect("compiles");
    let report = Validator::new().validate(&graph);
    assert!(!report.has_errors(), "{:?}", report.diagnostics.first());
    let dot = to_dot(&graph, &DotOptions::default());
    assert!(dot.contains("\"n29999\""));
}

#[test]
fn a_large_clustered_workflow_validates_without_errors() {
    let graph = GraphBuilder::from_document(synth::clustered(5_000, 50))
        .build()
        .expect("compiles");
    let report = Validator::new().validate(&graph);
    assert!(
        !report.has_errors(),
        "{:?}",
        report
            .diagnostics
            .iter()
            .find(|d| d.severity == pactgraph::validator::Severity::Error)
    );
}
