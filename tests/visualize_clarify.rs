//! Pictures of clarifications: a dashed `clarify` edge from a supervisor whose default
//! clarifies a `chat` subgraph to the subgraph's entrypoint, and a run's clarification
//! painted on it by the trace overlay.

mod support;

use pactgraph::runtime::{Clock, Executor, RunStatus};
use pactgraph::visualize::{DotOptions, to_dot, to_mermaid, unmatched_trace_items};
use serde_json::json;
use support::visualize::*;

const CLARIFY: &str = "examples/workflows/clarify_child.json";

#[test]
fn a_clarifying_default_draws_a_dashed_clarify_edge() {
    let g = load(CLARIFY);
    let dot = to_dot(&g, &DotOptions::default());
    assert!(
        dot.contains(
            r#""editor" -> "research_supervisor" [style=dashed, penwidth=1.5, label="clarify", tooltip="clarify research"]"#
        ),
        "{dot}"
    );
    check_structure(&g, &dot, 0, 0);
    check_with_graphviz(&dot, 1, expected_edges(&g));
    insta::assert_snapshot!("clarify_child_dot", dot);

    let mermaid = to_mermaid(&g, &DotOptions::default());
    assert_eq!(
        mermaid.matches(r#"-.->|"clarify"|"#).count(),
        1,
        "{mermaid}"
    );
    check_mermaid(&g, &mermaid, 0);
    insta::assert_snapshot!("clarify_child_mermaid", mermaid);
}

#[test]
fn the_overlay_paints_the_clarification_taken() {
    let g = load(CLARIFY);
    let valid = pactgraph::validator::ValidGraph::new(g.clone()).expect("valid");
    let ex = Executor::builder(valid)
        .clock(Clock::Frozen)
        .base_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows"))
        .build()
        .expect("builds");
    let outcome = support::runtime::run_with_io(
        &ex,
        json!({"question": {"text": "When is high tide tomorrow?"}}),
    )
    .outcome();
    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.message
    );
    let trace = outcome.trace.without_timing();
    assert_eq!(unmatched_trace_items(&g, &trace), 0);
    let dot = to_dot(&g, &DotOptions::with_trace(&trace));
    // 1 the call, 2 dig, 3 its return, 4 the clarification, 5 answer, 6 its return, 7
    // draft, 8 its handoff to polish.
    assert!(
        dot.contains(r##""editor" -> "research_supervisor" [style=dashed, color="#d62728", fontcolor="#d62728", penwidth=2.5, label="clarify\n4", tooltip="clarify research"]"##),
        "{dot}"
    );
    check_structure(&g, &dot, 1, 0);
    insta::assert_snapshot!("clarify_child_trace_dot", dot);
    let mermaid = to_mermaid(&g, &DotOptions::with_trace(&trace));
    check_mermaid(&g, &mermaid, 1);
    insta::assert_snapshot!("clarify_child_trace_mermaid", mermaid);
}
