//! Pictures of routers: one `route` edge per destination (a node, or a subgraph's
//! entrypoint), and a run's route painted by the trace overlay.

mod support;

use pactgraph::runtime::{Clock, Executor, RunStatus};
use pactgraph::visualize::{DotOptions, to_dot, to_mermaid, unmatched_trace_items};
use serde_json::json;
use support::visualize::*;

const TRIAGE: &str = "examples/workflows/router_triage.json";

#[test]
fn a_router_draws_one_route_edge_per_destination() {
    let g = load(TRIAGE);
    let dot = to_dot(&g, &DotOptions::default());
    assert!(
        dot.contains(r#""triage" -> "billing_reply" [style=bold, label="route"]"#),
        "{dot}"
    );
    assert!(dot.contains(
        r#""triage" -> "investigation_lead" [style=bold, label="route", tooltip="route to investigation"]"#
    ));
    // The router's own handoff is drawn as every handoff is; a router has no return edge.
    assert!(dot.contains(r#""triage" -> "close" [style=bold]"#));
    assert!(!dot.contains(r#""triage" -> "desk""#));
    assert!(dot.contains("router"));
    check_structure(&g, &dot, 0, 0);
    check_with_graphviz(&dot, 1, expected_edges(&g));
    insta::assert_snapshot!("router_triage_dot", dot);

    let mermaid = to_mermaid(&g, &DotOptions::default());
    assert_eq!(mermaid.matches(r#"==>|"route"|"#).count(), 2, "{mermaid}");
    check_mermaid(&g, &mermaid, 0);
    insta::assert_snapshot!("router_triage_mermaid", mermaid);
}

#[test]
fn the_overlay_paints_the_route_taken() {
    let g = load(TRIAGE);
    let valid = pactgraph::validator::ValidGraph::new(g.clone()).expect("valid");
    let ex = Executor::builder(valid)
        .clock(Clock::Frozen)
        .base_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows"))
        .build()
        .expect("builds");
    let outcome = support::runtime::run_with_io(
        &ex,
        json!({"ticket": {"text": "The export button crashes the app"}}),
    )
    .outcome();
    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.message
    );
    let trace = outcome.trace;
    assert_eq!(unmatched_trace_items(&g, &trace), 0);
    let dot = to_dot(&g, &DotOptions::with_trace(&trace));
    // 1 dispatch of the router, 2 its route into the subgraph, 3 the investigation,
    // 4 the subgraph's return, 5 the router's handoff.
    assert!(dot.contains(r##""triage" -> "investigation_lead" [style=bold, color="#d62728", fontcolor="#d62728", penwidth=2.5, label="route\n2""##), "{dot}");
    assert!(
        dot.contains(r##""triage" -> "billing_reply" [style=bold, color="#bbbbbb""##),
        "{dot}"
    );
    assert!(dot.contains(r##""triage" -> "close" [style=bold, color="#d62728", fontcolor="#d62728", penwidth=2.5, label="5"]"##), "{dot}");
    check_structure(&g, &dot, 1, 0);
    insta::assert_snapshot!("router_triage_trace_dot", dot);
    let mermaid = to_mermaid(&g, &DotOptions::with_trace(&trace));
    check_mermaid(&g, &mermaid, 1);
    insta::assert_snapshot!("router_triage_trace_mermaid", mermaid);
}
