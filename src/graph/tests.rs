//! Builder tests: cluster membership, edge kinds, unresolved references, collisions.

use super::*;
use crate::contracts::{
    Condition, NodeContract, SubgraphContract, SupervisorContract, Trigger, WorkflowDocument,
};

/// root -> {outer (sub_a) -> {inner (sub_b) -> leaf}, work}
fn two_level() -> GraphBuilder {
    GraphBuilder::new("two_level")
        .entry("root")
        .supervisor(SupervisorContract::new("root").allow(["outer", "top_node"]))
        .supervisor(SupervisorContract::new("sup_a").allow(["inner", "a1", "a2"]))
        .supervisor(SupervisorContract::new("sup_a2").allow(["a3"]))
        .supervisor(SupervisorContract::new("sup_b").allow(["leaf"]))
        .subgraph(
            SubgraphContract::new("outer")
                .entrypoint("sup_a")
                .supervisors(["sup_a", "sup_a2"])
                .reads(["x"])
                .writes(["y"])
                .exitpoints(["a2"]),
        )
        .subgraph(
            SubgraphContract::new("inner")
                .entrypoint("sup_b")
                .reads(["x"])
                .writes(["y"]),
        )
        .node(
            NodeContract::new("top_node")
                .supervisor("root")
                .terminal(true),
        )
        .node(NodeContract::new("a1").supervisor("sup_a").handoff("a3"))
        .node(NodeContract::new("a2").supervisor("sup_a"))
        .node(NodeContract::new("a3").supervisor("sup_a2"))
        .node(
            NodeContract::new("leaf")
                .supervisor("sup_b")
                .trigger(Trigger::new(1, Condition::exists("/x"))),
        )
}

#[test]
fn clusters_and_edges_of_a_two_level_graph_are_exact() {
    let g = two_level().build().unwrap();
    let outer = g.cluster("outer").unwrap();
    assert_eq!(outer.supervisors, ["sup_a", "sup_a2"]);
    assert_eq!(outer.nodes, ["a1", "a2", "a3"]);
    assert_eq!(outer.exitpoints, ["a2"]);
    assert_eq!(
        (outer.reads.as_slice(), outer.writes.as_slice()),
        (&["x".to_string()][..], &["y".to_string()][..])
    );
    assert_eq!(outer.callers, ["root"]);
    assert_eq!((outer.parent.as_deref(), outer.depth), (None, Some(1)));
    let inner = g.cluster("inner").unwrap();
    assert_eq!(inner.supervisors, ["sup_b"]);
    assert_eq!(inner.nodes, ["leaf"]);
    assert_eq!(
        (inner.parent.as_deref(), inner.depth),
        (Some("outer"), Some(2))
    );
    assert_eq!(g.subgraph_of_supervisor("sup_a2"), Some("outer"));
    assert_eq!(g.subgraph_of_node("leaf"), Some("inner"));
    assert_eq!(g.subgraph_of_node("top_node"), None);

    let edges: Vec<(String, String, String)> = g
        .edges()
        .map(|(a, b, k)| {
            let kind = match k {
                EdgeKind::Call { subgraph } => format!("call:{subgraph}"),
                k => k.name().to_string(),
            };
            (a.to_string(), b.to_string(), kind)
        })
        .collect();
    let expect = |a: &str, b: &str, k: &str| (a.to_string(), b.to_string(), k.to_string());
    assert_eq!(
        edges,
        vec![
            expect("root", "sup_a", "call:outer"),
            expect("root", "top_node", "dispatch"),
            expect("sup_a", "sup_b", "call:inner"),
            expect("sup_a", "a1", "dispatch"),
            expect("sup_a", "a2", "dispatch"),
            expect("sup_a2", "a3", "dispatch"),
            expect("sup_b", "leaf", "dispatch"),
            // top_node is terminal, a2 an exitpoint: no return edges for them.
            expect("a1", "a3", "handoff"),
            expect("a3", "sup_a2", "return"),
            expect("leaf", "sup_b", "return"),
        ]
    );
    assert_eq!(g.graph().node_count(), 9);
}

#[test]
fn build_is_deterministic() {
    let a: Vec<_> = two_level()
        .build()
        .unwrap()
        .edges()
        .map(|(a, b, k)| format!("{a}{b}{k:?}"))
        .collect();
    let b: Vec<_> = two_level()
        .build()
        .unwrap()
        .edges()
        .map(|(a, b, k)| format!("{a}{b}{k:?}"))
        .collect();
    assert_eq!(a, b);
}

#[test]
fn unresolved_references_name_the_id_and_the_place() {
    let failure = two_level()
        .node(
            NodeContract::new("orphan")
                .supervisor("ghost")
                .handoff("nowhere"),
        )
        .supervisor(
            SupervisorContract::new("bad")
                .allow(["root", "missing"])
                .fallback("outer"),
        )
        .build()
        .unwrap_err();
    let got: Vec<(String, String)> = failure
        .errors
        .iter()
        .map(|e| (e.pointer(), e.to_string()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("/supervisors/bad/allow/0".into(), "`root` referenced at /supervisors/bad/allow/0 is a supervisor, expected a node or subgraph".into()),
            ("/supervisors/bad/allow/1".into(), "unknown node or subgraph `missing` referenced at /supervisors/bad/allow/1".into()),
            ("/supervisors/bad/fallback".into(), "`outer` referenced at /supervisors/bad/fallback is a subgraph, expected a node".into()),
            ("/nodes/orphan/supervisor".into(), "unknown supervisor `ghost` referenced at /nodes/orphan/supervisor".into()),
            ("/nodes/orphan/handoff".into(), "unknown node `nowhere` referenced at /nodes/orphan/handoff".into()),
        ]
    );
    // The partial graph is handed back with the same problems.
    let partial = failure.into_partial();
    assert_eq!(partial.problems().len(), 5);
    assert!(partial.index_of("orphan").is_some());
}

#[test]
fn entry_and_subgraph_references_resolve() {
    let failure = GraphBuilder::new("w")
        .entry("nobody")
        .subgraph(
            SubgraphContract::new("g")
                .entrypoint("s0")
                .exitpoints(["n0"]),
        )
        .build()
        .unwrap_err();
    let pointers: Vec<String> = failure.errors.iter().map(BuildError::pointer).collect();
    assert_eq!(
        pointers,
        [
            "/entry",
            "/subgraphs/g/entrypoint",
            "/subgraphs/g/supervisors/0",
            "/subgraphs/g/exitpoints/0"
        ]
    );
}

#[test]
fn id_collisions_fail_the_build_naming_both_uses() {
    let failure = GraphBuilder::new("w")
        .entry("s")
        .supervisor(SupervisorContract::new("s"))
        .node(NodeContract::new("s").supervisor("s"))
        .build()
        .unwrap_err();
    assert_eq!(failure.errors.len(), 1);
    let msg = failure.errors[0].to_string();
    assert!(
        msg.contains("/supervisors/s") && msg.contains("/nodes/s"),
        "{msg}"
    );
}

#[test]
fn documents_and_rust_builders_compile_the_same_graph() {
    let (doc, map) = WorkflowDocument::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/workflows/fashion.json"
    ))
    .unwrap();
    let from_doc = GraphBuilder::from_document(doc.clone())
        .source_map(map)
        .build()
        .unwrap();
    let round = GraphBuilder::from_document(from_doc.to_document())
        .build()
        .unwrap();
    assert_eq!(from_doc.to_document(), doc);
    let e1: Vec<_> = from_doc
        .edges()
        .map(|(a, b, k)| (a.to_string(), b.to_string(), k.clone()))
        .collect();
    let e2: Vec<_> = round
        .edges()
        .map(|(a, b, k)| (a.to_string(), b.to_string(), k.clone()))
        .collect();
    assert_eq!(e1, e2);
    assert_eq!(from_doc.cluster("fashion").unwrap().nodes, ["trend"]);
    let span = from_doc.span_of("/nodes/trend/writes/0").unwrap();
    assert!(span.line > 1);
}
