//! Pictures of teams: the members and lead in a dashed cluster next to the team node,
//! around a broadcast hub; a run's turns painted by the trace overlay, and the cycles
//! counted on the cluster.

mod support;

use pactgraph::runtime::{Clock, Executor, RunStatus};
use pactgraph::visualize::{DotOptions, to_dot, to_mermaid, unmatched_trace_items};
use serde_json::json;
use support::visualize::*;

const TEAM: &str = "examples/workflows/team_review.json";

/// The team cluster holds the hub, both members and the lead; the team node keeps its
/// place at its level with one dotted `team` edge per participant; the hub edges are
/// drawn; Graphviz accepts it (one cluster, the graph's edges plus three hub edges).
#[test]
fn a_team_is_drawn_as_a_cluster_around_a_broadcast_hub() {
    let g = load(TEAM);
    let dot = to_dot(&g, &DotOptions::default());
    let cluster = dot
        .split("subgraph \"cluster_team_review\" {")
        .nth(1)
        .and_then(|rest| rest.split("\n  }\n").next())
        .expect("a team cluster");
    for v in [
        "\"review_broadcast\" [shape=circle",
        "\"critic\" [",
        "\"editor\" [",
        "\"chair\" [",
    ] {
        assert!(cluster.contains(v), "{v} not in the cluster:\n{cluster}");
    }
    assert!(
        !cluster.contains("\"review\" ["),
        "the team node stays outside"
    );
    for p in ["critic", "editor", "chair"] {
        let edge = format!(
            "\"review\" -> \"{p}\" [style=dotted, color=\"#6a51a3\", fontcolor=\"#6a51a3\", label=\"team\"]"
        );
        assert!(dot.contains(&edge), "{edge} missing in\n{dot}");
    }
    assert!(dot.contains("\"critic\" -> \"review_broadcast\" [style=dashed, dir=both"));
    assert!(dot.contains("\"review_broadcast\" -> \"chair\" [style=dashed"));
    assert_eq!(dot.matches("\"critic\" [shape").count(), 1, "drawn once");
    check_with_graphviz(&dot, 1, expected_edges(&g) + 3);
    assert_eq!(dot, to_dot(&g, &DotOptions::default()), "deterministic");
    insta::assert_snapshot!("team_review_dot", dot);

    let mermaid = to_mermaid(&g, &DotOptions::default());
    assert!(
        mermaid.contains("subgraph t0[\"team review\"]"),
        "{mermaid}"
    );
    assert!(mermaid.contains("h0((\"broadcast\"))"), "{mermaid}");
    assert_eq!(mermaid.matches(" <-.-> h0").count(), 2, "{mermaid}");
    assert_eq!(mermaid.matches("-.->|\"team\"|").count(), 3, "{mermaid}");
    insta::assert_snapshot!("team_review_mermaid", mermaid);
}

/// With the example's trace laid over it, every turn numbers its participant's `team`
/// edge in order and the cluster's label says how many cycles the team ran.
#[test]
fn the_overlay_numbers_turns_and_counts_cycles() {
    let g = load(TEAM);
    let valid = pactgraph::validator::ValidGraph::new(g.clone()).expect("valid");
    let ex = Executor::builder(valid)
        .clock(Clock::Frozen)
        .base_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows"))
        .build()
        .expect("builds");
    let outcome =
        support::runtime::run_with_io(&ex, json!({"draft": {"text": "Ship it next week."}}))
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
    // Turns: critic 1, editor 2, chair 3, critic 4, chair 5; the team node's dispatch 6.
    let painted = |p: &str, steps: &str| {
        format!(
            "\"review\" -> \"{p}\" [style=dotted, color=\"#d62728\", fontcolor=\"#d62728\", penwidth=2.5, label=\"team\\n{steps}\"]"
        )
    };
    for (p, steps) in [("critic", "1, 4"), ("editor", "2"), ("chair", "3, 5")] {
        assert!(
            dot.contains(&painted(p, steps)),
            "{}\n{dot}",
            painted(p, steps)
        );
    }
    assert!(dot.contains("label=\"team review\\n2 cycle(s)\""), "{dot}");
    insta::assert_snapshot!("team_review_trace_dot", dot);
    let mermaid = to_mermaid(&g, &DotOptions::with_trace(&trace));
    assert!(mermaid.contains("team review<br/>2 cycle(s)"), "{mermaid}");
    insta::assert_snapshot!("team_review_trace_mermaid", mermaid);
}
