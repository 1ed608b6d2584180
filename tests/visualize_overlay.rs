//! The trace overlay against traces shaped like the executor's, recursion and random
//! ids: every output parses back.

mod support;

use std::path::Path;

use pactgraph::runtime::{DecisionTrace, TerminationReason, TraceKind};
use pactgraph::visualize::{DotOptions, to_dot, to_mermaid, unmatched_trace_items};
use pactgraph::{GraphBuilder, NodeContract, SubgraphContract, SupervisorContract};
use support::visualize::*;

#[test]
fn hostile_trace_overlay_parses_back() {
    let g = hostile();
    let mut stop = item(TraceKind::GuardStop, 1, Some("inner}{sup"), None);
    stop.reason = Some("weird \"reason\"\n\\".into());
    let trace = DecisionTrace::from(vec![
        item(
            TraceKind::Call,
            0,
            Some("boss \"quoted\" \\ back\\"),
            Some("sub \"a\"\nline two"),
        ),
        stop,
        item(TraceKind::Dispatch, 2, Some("nobody"), Some("nothing")),
    ]);
    assert_eq!(unmatched_trace_items(&g, &trace), 1);
    let dot = to_dot(&g, &DotOptions::with_trace(&trace));
    check_structure(&g, &dot, 1, 1);
    let mermaid = to_mermaid(&g, &DotOptions::with_trace(&trace));
    check_mermaid(&g, &mermaid, 1);
}

/// Items shaped the way the executor writes them: decisions whose target is a choice
/// label, a fallback without a fallback node (target `stop_local`), a guard stop and an
/// end whose target is the run's status.
#[test]
fn executor_shaped_items_are_not_mismatches() {
    let g = fashion();
    let mut decision = item(TraceKind::Decision, 0, None, Some("subgraph fashion"));
    decision.supervisor = Some("domain_supervisor".into());
    let mut fallback = item(TraceKind::Fallback, 0, None, Some("stop_local"));
    fallback.supervisor = Some("fashion_supervisor".into());
    let mut stop = item(TraceKind::GuardStop, 5, None, Some("stopped"));
    stop.supervisor = Some("fashion_supervisor".into());
    stop.termination_reason = Some(TerminationReason::MaxStepsExceeded);
    let mut end = item(TraceKind::End, 5, None, Some("completed"));
    end.supervisor = Some("domain_supervisor".into());
    let trace = DecisionTrace::from(vec![decision, fallback, stop, end]);
    assert_eq!(unmatched_trace_items(&g, &trace), 0);
    let dot = to_dot(&g, &DotOptions::with_trace(&trace));
    assert!(dot.contains(r##""fashion_supervisor" -> "stop_1" [style=bold, color="#d62728", fontcolor="#d62728", label="1"]"##), "{dot}");
    // Nothing was taken, so no edge is painted.
    assert!(!dot.contains("penwidth=2.5"), "{dot}");
    check_structure(&g, &dot, 1, 1);
}

/// A trace the executor wrote for `fashion.json` with `{"request": {"topic": "fashion"}}`
/// (frozen clock), read back as `--trace` reads it.
#[test]
fn an_executor_trace_file_overlays_cleanly() {
    let g = fashion();
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fashion_trace.json"),
    )
    .unwrap();
    let trace: DecisionTrace = serde_json::from_str(&text).unwrap();
    assert_eq!(unmatched_trace_items(&g, &trace), 0);
    let dot = to_dot(&g, &DotOptions::with_trace(&trace));
    assert!(dot.contains(r#"label="call\n1""#), "{dot}");
    assert!(
        dot.contains(r#"label="return\n4", ltail="cluster_fashion""#),
        "{dot}"
    );
    let reply = dot
        .lines()
        .find(|l| l.starts_with("  \"reply\" ["))
        .unwrap();
    assert!(reply.contains(r##"fontcolor="#999999""##), "{reply}");
    check_structure(&g, &dot, 1, 0);
}

mod random_ids {
    use super::*;
    use proptest::prelude::*;

    /// Any text, control characters and astral-plane characters included.
    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(any::<char>(), 1..12).prop_map(|v| v.into_iter().collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the ids and descriptions, the DOT parses back with the same clusters,
        /// vertices (ids decoded exactly) and edges, and the Mermaid stays well-formed.
        #[test]
        fn any_ids_round_trip(
            ids in prop::collection::hash_set(text(), 5),
            description in text(),
        ) {
            let ids: Vec<String> = ids.into_iter().collect();
            let [sup, sub, inner, node, leaf] = [0, 1, 2, 3, 4].map(|i| ids[i].clone());
            let g = GraphBuilder::new(description.clone())
                .description(description.clone())
                .entry(&sup)
                .supervisor(SupervisorContract::new(&sup).allow([&sub, &node]).fallback(&leaf)
                    .description(description.clone()))
                .supervisor(SupervisorContract::new(&inner).allow([&leaf, &sub]))
                .subgraph(SubgraphContract::new(&sub).entrypoint(&inner)
                    .reads([description.clone()]).exitpoints([&leaf]))
                .node(NodeContract::new(&node).supervisor(&sup).handoff(&leaf)
                    .description(description.clone()))
                .node(NodeContract::new(&leaf).supervisor(&inner).writes([description.clone()]))
                .build()
                .unwrap();
            let dot = to_dot(&g, &DotOptions::default());
            check_structure(&g, &dot, 0, 0);
            check_mermaid(&g, &to_mermaid(&g, &DotOptions::default()), 0);
        }
    }
}

/// A recursive call returning into its own cluster, and the outer return to the root.
#[test]
fn returns_into_the_same_cluster_have_no_ltail() {
    let g = recursive();
    let trace = DecisionTrace::from(vec![
        item(TraceKind::Call, 0, Some("root"), Some("research")),
        item(
            TraceKind::Call,
            1,
            Some("research_supervisor"),
            Some("research"),
        ),
        item(
            TraceKind::Return,
            2,
            Some("research"),
            Some("research_supervisor"),
        ),
        item(
            TraceKind::Call,
            2,
            Some("research_supervisor"),
            Some("deeper"),
        ),
        item(
            TraceKind::Call,
            3,
            Some("deeper_supervisor"),
            Some("research"),
        ),
        item(
            TraceKind::Return,
            4,
            Some("research"),
            Some("deeper_supervisor"),
        ),
        item(
            TraceKind::Return,
            4,
            Some("deeper"),
            Some("research_supervisor"),
        ),
        item(TraceKind::Return, 4, Some("research"), Some("root")),
    ]);
    assert_eq!(unmatched_trace_items(&g, &trace), 0);
    let dot = to_dot(&g, &DotOptions::with_trace(&trace));
    let line = |from: &str, to: &str| {
        dot.lines()
            .find(|l| l.starts_with(&format!("  \"{from}\" -> \"{to}\" [style=dashed")))
            .unwrap_or_else(|| panic!("{from} -> {to}\n{dot}"))
            .to_string()
    };
    // research -> research_supervisor (same cluster): no ltail.
    assert!(!line("research_supervisor", "research_supervisor").contains("ltail"));
    // research returning into deeper (nested inside research): the head is inside.
    assert!(!line("research_supervisor", "deeper_supervisor").contains("ltail"));
    // deeper -> research_supervisor (outside deeper) and research -> root: ltail.
    assert!(line("deeper_supervisor", "research_supervisor").contains(r#"ltail="cluster_deeper""#));
    assert!(line("research_supervisor", "root").contains(r#"ltail="cluster_research""#));
    assert!(line("research_supervisor", "root").contains(r#"label="return\n8""#));
    check_structure(&g, &dot, 4, 0);
}
