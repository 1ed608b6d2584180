//! Fixtures and checks shared by the visualization tests: workflows, hand-made traces,
//! parse-back of DOT (graphviz-rust, and Graphviz's `dot` when installed) and a
//! line-by-line check of Mermaid.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};

use graphviz_rust::dot_structures::{Edge, EdgeTy, Graph, Id, Stmt, Subgraph, Vertex};
use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::{DecisionTrace, TerminationReason, TraceItem, TraceKind};
use pactgraph::{CompiledGraph, GraphBuilder, NodeContract, SubgraphContract, SupervisorContract};

pub fn load(path: &str) -> CompiledGraph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (doc, map) = WorkflowDocument::load(root.join(path)).unwrap();
    GraphBuilder::from_document(doc)
        .source_map(map)
        .build()
        .unwrap()
}

pub fn flat() -> CompiledGraph {
    load("examples/workflows/support_triage.yaml")
}
pub fn fashion() -> CompiledGraph {
    load("examples/workflows/fashion.json")
}
pub fn recursive() -> CompiledGraph {
    load("tests/fixtures/recursive.json")
}

/// Ids and descriptions with every character that could break out of a label or an id.
pub fn hostile() -> CompiledGraph {
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

pub fn item(kind: TraceKind, step: u32, source: Option<&str>, target: Option<&str>) -> TraceItem {
    let mut i = TraceItem::new(kind, step, 0);
    i.source = source.map(Into::into);
    i.target = target.map(Into::into);
    i
}

/// A run of the fashion example: the domain supervisor calls `fashion`, `trend` runs and
/// returns, the subgraph returns, then an allowlist violation falls back to `reply`.
pub fn fashion_trace() -> DecisionTrace {
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
        i.supervisor = Some(s.into());
    }
    items[6].reason = Some("allowlist_violation: chose `shoes`".into());
    DecisionTrace::from(items)
}

/// The recursive workflow recursing until the depth guard stops it.
pub fn recursive_trace() -> DecisionTrace {
    let mut stop = item(TraceKind::GuardStop, 3, Some("research_supervisor"), None);
    stop.supervisor = Some("research_supervisor".into());
    stop.termination_reason = Some(TerminationReason::MaxDepthExceeded);
    DecisionTrace::from(vec![
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
    ])
}

// ---------------------------------------------------------------- parse-back helpers

#[derive(Debug, Default)]
pub struct Parsed {
    /// `(cluster id, parent cluster id)` in document order.
    pub clusters: Vec<(String, Option<String>)>,
    /// Vertex ids declared, in order, with the cluster they were declared in.
    pub vertices: Vec<(String, Option<String>)>,
    pub edges: usize,
}

/// Decodes a DOT quoted ID written by `escape::dot_id`.
pub fn decode(id: &Id) -> String {
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

pub fn walk(stmts: &[Stmt], cluster: Option<&str>, p: &mut Parsed) {
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

pub fn parse_back(dot: &str) -> Parsed {
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
pub fn expected_edges(g: &CompiledGraph) -> usize {
    let extra_fallbacks = g
        .registry()
        .supervisors()
        .filter(|s| {
            s.fallback
                .as_ref()
                .is_some_and(|f| !s.allow.contains(f) && g.registry().get_node(f).is_some())
        })
        .count();
    // One clarify edge per supervisor whose default clarifies a subgraph.
    let clarifies = g
        .registry()
        .supervisors()
        .filter(|s| match &s.default {
            Some(pactgraph::RoutingDecision::Clarify(c)) => {
                g.registry().get_subgraph(&c.subgraph).is_some()
            }
            _ => false,
        })
        .count();
    g.edges().count() + extra_fallbacks + clarifies
}

/// Checks the parsed DOT against the graph: every cluster once with the right parent,
/// every vertex once in the right cluster, with its id decoded back exactly.
pub fn check_structure(g: &CompiledGraph, dot: &str, extra_edges: usize, markers: usize) {
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
pub fn check_with_graphviz(dot: &str, clusters: usize, edges: usize) {
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
pub fn check_mermaid(g: &CompiledGraph, text: &str, extra_edges: usize) {
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
