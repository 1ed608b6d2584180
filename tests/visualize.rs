//! Visualization: snapshots of DOT and Mermaid output, parse-back of every DOT output
//! (graphviz-rust's parser, and Graphviz's `dot` itself when installed), hostile ids and
//! the trace overlay.

mod support;

use pactgraph::visualize::{DotOptions, to_dot, to_mermaid, unmatched_trace_items};
use support::visualize::*;

#[test]
#[cfg(feature = "yaml")]
fn flat_workflow_has_no_clusters() {
    let g = flat();
    let dot = to_dot(&g, &DotOptions::default());
    assert!(!dot.contains("subgraph") && !dot.contains("cluster") && !dot.contains("compound"));
    check_structure(&g, &dot, 0, 0);
    insta::assert_snapshot!("flat_dot", dot);
}

#[test]
fn hierarchical_example() {
    let g = fashion();
    let dot = to_dot(&g, &DotOptions::default());
    assert!(dot.contains(
        r#""domain_supervisor" -> "fashion_supervisor" [style=dotted, penwidth=1.5, label="call""#
    ));
    assert!(dot.contains(r#""domain_supervisor" -> "reply" [style=solid, label="fallback"]"#));
    check_structure(&g, &dot, 0, 0);
    insta::assert_snapshot!("fashion_dot", dot);
}

#[test]
fn recursive_workflow_nests_by_parent_and_draws_recursion_as_edges() {
    let g = recursive();
    let dot = to_dot(&g, &DotOptions::default());
    assert!(dot.contains(r#""research_supervisor" -> "research_supervisor" [style=dotted"#));
    assert!(dot.contains(r#""deeper_supervisor" -> "research_supervisor" [style=dotted"#));
    // `deeper` is declared inside `research`, once.
    assert_eq!(dot.matches("subgraph \"cluster_deeper\"").count(), 1);
    assert!(dot.contains(r##""root" -> "give_up" [style=dashed, color="#b35900", fontcolor="#b35900", label="fallback"]"##));
    check_structure(&g, &dot, 0, 0);
    insta::assert_snapshot!("recursive_dot", dot);
}

#[test]
fn trace_overlay_paints_numbers_and_greys() {
    let g = fashion();
    let trace = fashion_trace();
    assert_eq!(unmatched_trace_items(&g, &trace), 0);
    let dot = to_dot(&g, &DotOptions::with_trace(&trace));
    // Path: 1 call, 2 dispatch trend, 3 trend returns, 4 subgraph returns, 5 reply.
    assert!(dot.contains(r##""domain_supervisor" -> "fashion_supervisor" [style=dotted, color="#d62728", fontcolor="#d62728", penwidth=2.5, label="call\n1""##), "{dot}");
    assert!(dot.contains(r##""fashion_supervisor" -> "trend" [style=solid, color="#d62728", fontcolor="#d62728", penwidth=2.5, label="2"]"##), "{dot}");
    assert!(dot.contains(r##"label="3"]"##));
    assert!(dot.contains(r##""fashion_supervisor" -> "domain_supervisor" [style=dashed, color="#d62728", fontcolor="#d62728", penwidth=2.5, label="return\n4", ltail="cluster_fashion"]"##), "{dot}");
    // The fallback went through the dispatch edge that is also the fallback.
    assert!(dot.contains(r##""domain_supervisor" -> "reply" [style=solid, color="#b35900", fontcolor="#b35900", penwidth=2.5, label="fallback\n5"]"##), "{dot}");
    assert!(dot.contains("compound=true"));
    // Every vertex was visited: nothing greyed.
    assert!(!dot.contains("#999999"));
    check_structure(&g, &dot, 1, 0);
    insta::assert_snapshot!("fashion_trace_dot", dot);

    let mermaid = to_mermaid(&g, &DotOptions::with_trace(&trace));
    check_mermaid(&g, &mermaid, 1);
    insta::assert_snapshot!("fashion_trace_mermaid", mermaid);
}

#[test]
fn guard_stops_are_marked_and_unvisited_vertices_greyed() {
    let g = recursive();
    let trace = recursive_trace();
    let dot = to_dot(&g, &DotOptions::with_trace(&trace));
    // The self-call was taken twice.
    assert!(dot.contains(r#"label="call\n2, 3""#), "{dot}");
    assert!(
        dot.contains(r#""stop_1" [shape=octagon"#)
            && dot.contains("guard stop\\nmax_depth_exceeded")
    );
    assert!(dot.contains(r##""research_supervisor" -> "stop_1" [style=bold, color="#d62728", fontcolor="#d62728", label="4"]"##));
    for unvisited in ["answer", "give_up", "search", "deeper_supervisor", "dig"] {
        let line = dot
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("\"{unvisited}\" [")))
            .unwrap();
        assert!(
            line.contains(r##"color="#bbbbbb", fontcolor="#999999""##),
            "{line}"
        );
    }
    for visited in ["root", "research_supervisor"] {
        let line = dot
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("\"{visited}\" [")))
            .unwrap();
        assert!(!line.contains("#999999"), "{line}");
    }
    check_structure(&g, &dot, 1, 1);
    insta::assert_snapshot!("recursive_trace_dot", dot);
    let mermaid = to_mermaid(&g, &DotOptions::with_trace(&trace));
    assert!(
        mermaid.contains("class n2,n3,n4,n5,n6 unvisited"),
        "{mermaid}"
    );
    check_mermaid(&g, &mermaid, 1);
}

#[test]
#[cfg(feature = "yaml")]
fn mermaid_output() {
    for (name, g) in [
        ("fashion_mermaid", fashion()),
        ("flat_mermaid", flat()),
        ("recursive_mermaid", recursive()),
    ] {
        let text = to_mermaid(&g, &DotOptions::default());
        check_mermaid(&g, &text, 0);
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn hostile_ids_and_descriptions_round_trip() {
    let g = hostile();
    let dot = to_dot(&g, &DotOptions::default());
    check_structure(&g, &dot, 0, 0);
    // Two subgraph ids that look alike after escaping stay two clusters.
    assert_eq!(parse_back(&dot).clusters.len(), 2);
    insta::assert_snapshot!("hostile_dot", dot);
    let mermaid = to_mermaid(&g, &DotOptions::default());
    check_mermaid(&g, &mermaid, 0);
    assert!(mermaid.contains("時尚 👗 #34;x#34;"));
    insta::assert_snapshot!("hostile_mermaid", mermaid);
}

#[test]
#[cfg(feature = "yaml")]
fn output_is_byte_identical_across_runs() {
    for make in [flat, fashion, recursive, hostile] {
        let a = make();
        let b = make();
        let trace = fashion_trace();
        for opts in [DotOptions::default(), DotOptions::with_trace(&trace)] {
            assert_eq!(to_dot(&a, &opts), to_dot(&b, &opts));
            assert_eq!(to_mermaid(&a, &opts), to_mermaid(&b, &opts));
        }
    }
}

#[test]
fn descriptions_can_be_left_out_of_labels() {
    let g = fashion();
    let opts = DotOptions {
        descriptions: false,
        ..DotOptions::default()
    };
    let dot = to_dot(&g, &opts);
    assert!(!dot.contains("label=\"reply\\nAnswers"));
    assert!(dot.contains("tooltip=\"Answers anything"));
}
