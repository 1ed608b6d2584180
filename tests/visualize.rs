//! Visualization: snapshots of DOT and Mermaid output, parse-back of every DOT output
//! (graphviz-rust's parser, and Graphviz's `dot` itself when installed), hostile ids and
//! the trace overlay.

use std::path::Path;
use std::process::{Command, Stdio};

use graphviz_rust::dot_structures::{Edge, EdgeTy, Graph, Id, Stmt, Subgraph, Vertex};
use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::{DecisionTrace, TerminationReason, TraceItem, TraceKind};
use pactgraph::visualize::{DotOptions, to_dot, to_mermaid, unmatched_trace_items};
use pactgraph::{CompiledGraph, GraphBuilder, NodeContract, SubgraphContract, SupervisorContract};

fn load(path: &str) -> CompiledGraph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (doc, map) = WorkflowDocument::load(root.join(path)).unwrap();
    GraphBuilder::from_document(doc)
        .source_map(map)
        .build()
        .unwrap()
}

fn flat() -> CompiledGraph {
    load("examples/workflows/support_triage.yaml")
}
fn fashion() -> CompiledGraph {
    load("examples/workflows/fashion.json")
}
fn recursive() -> CompiledGraph {
    load("tests/fixtures/recursive.json")
}

/// Ids and descriptions with every character that could break out of a label or an id.
fn hostile() -> CompiledGraph {
    let sup = "boss \"quoted\" \\ back\\";
    let inner_sup = "inner}{sup";
    let sub = "sub \"a\"\nline two";
    let sub2 = "sub\\\"a\"\\nline two"; // looks like `sub`'s escaped form
    let n1 = "node<b>&amp;</b>\\N";
    let n2 = "時尚 👗 \"x\"";
    let n3 = "n3\r\nwith\ttab";
    GraphBuilder::new("hostile \"wf\" \\ 🚧")
        .description("line one\nline \"two\" \\G <not html>")
        .entry(sup)
        .supervisor(
            SupervisorContract::new(sup)
                .allow([sub, n1, sub2])
                .fallback(n2)
                .description("decides {everything} | <all>\\"),
        )
        .supervisor(SupervisorContract::new(inner_sup).allow([n3, sub]))
        .supervisor(SupervisorContract::new("s2").allow(["leaf"]))
        .subgraph(
            SubgraphContract::new(sub)
                .entrypoint(inner_sup)
                .reads(["r \"1\""])
                .writes(["w\\2", "#quot;"])
                .exitpoints([n3])
                .description("a \"cluster\"\n{with} braces"),
        )
        .subgraph(SubgraphContract::new(sub2).entrypoint("s2"))
        .node(
            NodeContract::new(n1)
                .supervisor(sup)
                .reads(["a;b", "%%c"])
                .writes(["`d`"])
                .handoff(n2)
                .description("\"quoted\" and \\backslashed\\"),
        )
        .node(NodeContract::new(n2).supervisor(sup).terminal(true))
        .node(NodeContract::new(n3).supervisor(inner_sup))
        .node(NodeContract::new("leaf").supervisor("s2"))
        .build()
        .unwrap()
}

fn item(kind: TraceKind, step: u32, source: Option<&str>, target: Option<&str>) -> TraceItem {
    let mut i = TraceItem::new(kind, step, 0);
    i.source = source.map(str::to_string);
    i.target = target.map(str::to_string);
    i
}

/// A run of the fashion example: the domain supervisor calls `fashion`, `trend` runs and
/// returns, the subgraph returns, then an allowlist violation falls back to `reply`.
fn fashion_trace() -> DecisionTrace {
    let mut items = vec![
        item(TraceKind::Decision, 0, None, Some("fashion")),
        item(
            TraceKind::Call,
            0,
            Some("domain_supervisor"),
            Some("fashion"),
        ),
        item(TraceKind::Decision, 1, None, Some("trend")),
        item(
            TraceKind::Dispatch,
            1,
            Some("fashion_supervisor"),
            Some("trend"),
        ),
        item(
            TraceKind::Return,
            2,
            Some("trend"),
            Some("fashion_supervisor"),
        ),
        item(
            TraceKind::Return,
            2,
            Some("fashion"),
            Some("domain_supervisor"),
        ),
        item(TraceKind::Fallback, 2, None, Some("reply")),
        item(
            TraceKind::Dispatch,
            2,
            Some("domain_supervisor"),
            Some("reply"),
        ),
        item(TraceKind::End, 3, None, None),
    ];
    let sups = [
        "domain_supervisor",
        "domain_supervisor",
        "fashion_supervisor",
        "fashion_supervisor",
        "fashion_supervisor",
        "domain_supervisor",
        "domain_supervisor",
        "domain_supervisor",
        "domain_supervisor",
    ];
    for (i, s) in items.iter_mut().zip(sups) {
        i.supervisor = Some(s.to_string());
    }
    items[6].reason = Some("allowlist_violation: chose `shoes`".into());
    DecisionTrace { items }
}

/// The recursive workflow recursing until the depth guard stops it.
fn recursive_trace() -> DecisionTrace {
    let mut stop = item(TraceKind::GuardStop, 3, Some("research_supervisor"), None);
    stop.supervisor = Some("research_supervisor".into());
    stop.termination_reason = Some(TerminationReason::MaxDepthExceeded);
    DecisionTrace {
        items: vec![
            item(TraceKind::Call, 0, Some("root"), Some("research")),
            item(
                TraceKind::Call,
                1,
                Some("research_supervisor"),
                Some("research"),
            ),
            item(
                TraceKind::Call,
                2,
                Some("research_supervisor"),
                Some("research"),
            ),
            stop,
        ],
    }
}

// ---------------------------------------------------------------- parse-back helpers

#[derive(Debug, Default)]
struct Parsed {
    /// `(cluster id, parent cluster id)` in document order.
    clusters: Vec<(String, Option<String>)>,
    /// Vertex ids declared, in order, with the cluster they were declared in.
    vertices: Vec<(String, Option<String>)>,
    edges: usize,
}

/// Decodes a DOT quoted ID written by `escape::dot_id`.
fn decode(id: &Id) -> String {
    let raw = match id {
        Id::Escaped(s) => s
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap(),
        Id::Plain(s) => return s.clone(),
        other => panic!("unexpected id {other:?}"),
    };
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next().unwrap() {
            '\\' => out.push('\\'),
            '"' => out.push('"'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'u' => {
                let hex: String = chars.by_ref().skip(1).take_while(|&c| c != '}').collect();
                out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
            }
            c => panic!("unexpected escape \\{c} in {raw}"),
        }
    }
    out
}

fn walk(stmts: &[Stmt], cluster: Option<&str>, p: &mut Parsed) {
    for s in stmts {
        match s {
            Stmt::Node(n) => p
                .vertices
                .push((decode(&n.id.0), cluster.map(str::to_string))),
            Stmt::Subgraph(Subgraph { id, stmts }) => {
                let name = decode(id);
                let id = name.strip_prefix("cluster_").unwrap().to_string();
                p.clusters.push((id.clone(), cluster.map(str::to_string)));
                walk(stmts, Some(&id), p);
            }
            Stmt::Edge(Edge {
                ty: EdgeTy::Pair(Vertex::N(_), Vertex::N(_)),
                ..
            }) => p.edges += 1,
            Stmt::Edge(e) => panic!("unexpected edge form {e:?}"),
            Stmt::Attribute(_) | Stmt::GAttribute(_) => {}
        }
    }
}

fn parse_back(dot: &str) -> Parsed {
    let graph = graphviz_rust::parse(dot).unwrap_or_else(|e| panic!("{e}\n{dot}"));
    let Graph::DiGraph { stmts, .. } = graph else {
        panic!("not a digraph")
    };
    let mut p = Parsed::default();
    walk(&stmts, None, &mut p);
    p
}

/// Edges drawn without a trace: the graph's edges plus one per fallback node that is not
/// also in its supervisor's allowlist.
fn expected_edges(g: &CompiledGraph) -> usize {
    let extra_fallbacks = g
        .registry()
        .supervisors()
        .filter(|s| {
            s.fallback
                .as_ref()
                .is_some_and(|f| !s.allow.contains(f) && g.registry().get_node(f).is_some())
        })
        .count();
    g.edges().count() + extra_fallbacks
}

/// Checks the parsed DOT against the graph: every cluster once with the right parent,
/// every vertex once in the right cluster, with its id decoded back exactly.
fn check_structure(g: &CompiledGraph, dot: &str, extra_edges: usize, markers: usize) {
    let p = parse_back(dot);
    let clusters: Vec<(String, Option<String>)> = g
        .clusters()
        .values()
        .map(|c| (c.subgraph_id.clone(), c.parent.clone()))
        .collect();
    let mut got = p.clusters.clone();
    got.sort();
    let mut want = clusters;
    want.sort();
    assert_eq!(got, want, "clusters\n{dot}");
    let mut want_vertices: Vec<(String, Option<String>)> = g
        .registry()
        .supervisors()
        .map(|s| {
            let c = g.subgraph_of_supervisor(&s.id).map(str::to_string);
            (s.id.clone(), c)
        })
        .chain(g.registry().nodes().map(|n| {
            let c = g.subgraph_of_node(&n.id).map(str::to_string);
            (n.id.clone(), c)
        }))
        .collect();
    want_vertices.sort();
    let mut got_vertices = p.vertices;
    got_vertices.sort();
    assert_eq!(
        got_vertices.len(),
        want_vertices.len() + markers,
        "vertices\n{dot}"
    );
    for v in &want_vertices {
        assert!(got_vertices.contains(v), "{v:?} missing\n{dot}");
    }
    assert_eq!(p.edges, expected_edges(g) + extra_edges, "edges\n{dot}");
    check_with_graphviz(dot, g.clusters().len(), expected_edges(g) + extra_edges);
}

/// When Graphviz is installed, `dot` must accept the text and see the same clusters and
/// edges.
fn check_with_graphviz(dot: &str, clusters: usize, edges: usize) {
    let Ok(mut child) = Command::new("dot")
        .arg("-Tjson")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        return; // not installed: graphviz-rust's parse above is the check
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dot.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dot failed: {stderr}\n{dot}");
    // No errors, and no warnings about clusters (e.g. an `ltail` Graphviz would ignore).
    assert!(
        !stderr.contains("Error") && !stderr.contains("syntax") && !stderr.contains("cluster"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let objects = json["objects"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let got_clusters = objects
        .iter()
        .filter(|o| {
            o["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("cluster_"))
        })
        .count();
    assert_eq!(got_clusters, clusters, "graphviz clusters\n{dot}");
    let got_edges = json["edges"].as_array().map_or(0, Vec::len);
    assert_eq!(got_edges, edges, "graphviz edges\n{dot}");
}

/// Mermaid has no Rust parser: check its structure line by line.
fn check_mermaid(g: &CompiledGraph, text: &str, extra_edges: usize) {
    let all: Vec<&str> = text.lines().collect();
    // Front matter: the title is the workflow's name as a JSON (= YAML) string.
    assert_eq!((all[0], all[2], all[3]), ("---", "---", "flowchart TB"));
    let title: String = serde_json::from_str(all[1].strip_prefix("title: ").unwrap()).unwrap();
    assert_eq!(title, g.workflow());
    let lines = &all[3..];
    let opens = lines
        .iter()
        .filter(|l| l.trim_start().starts_with("subgraph g"))
        .count();
    let ends = lines.iter().filter(|l| l.trim() == "end").count();
    assert_eq!((opens, ends), (g.clusters().len(), g.clusters().len()));
    let edges = lines
        .iter()
        .filter(|l| {
            l.split_whitespace().nth(1).is_some_and(|t| {
                t.starts_with("-->") || t.starts_with("==>") || t.starts_with("-.->")
            })
        })
        .count();
    assert_eq!(edges, expected_edges(g) + extra_edges, "{text}");
    for l in lines {
        assert_eq!(l.matches('"').count() % 2, 0, "unbalanced quotes: {l}");
        assert!(!l.contains('\n') && !l.contains('\r'));
        let head = l.trim_start();
        let id: String = head
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        assert!(
            [
                "flowchart",
                "subgraph",
                "end",
                "linkStyle",
                "classDef",
                "class"
            ]
            .contains(&id.as_str())
                || (id.len() > 1
                    && id.starts_with(['n', 'g', 'x'])
                    && id[1..].chars().all(|c| c.is_ascii_digit())),
            "unexpected line {l}"
        );
    }
}

// ---------------------------------------------------------------- tests

#[test]
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
fn hostile_trace_overlay_parses_back() {
    let g = hostile();
    let mut stop = item(TraceKind::GuardStop, 1, Some("inner}{sup"), None);
    stop.reason = Some("weird \"reason\"\n\\".into());
    let trace = DecisionTrace {
        items: vec![
            item(
                TraceKind::Call,
                0,
                Some("boss \"quoted\" \\ back\\"),
                Some("sub \"a\"\nline two"),
            ),
            stop,
            item(TraceKind::Dispatch, 2, Some("nobody"), Some("nothing")),
        ],
    };
    assert_eq!(unmatched_trace_items(&g, &trace), 1);
    let dot = to_dot(&g, &DotOptions::with_trace(&trace));
    check_structure(&g, &dot, 1, 1);
    let mermaid = to_mermaid(&g, &DotOptions::with_trace(&trace));
    check_mermaid(&g, &mermaid, 1);
}

#[test]
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
    let trace = DecisionTrace {
        items: vec![decision, fallback, stop, end],
    };
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
    let trace = DecisionTrace {
        items: vec![
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
        ],
    };
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
