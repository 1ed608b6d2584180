//! Visualization: DOT (Graphviz) and Mermaid export of a [`CompiledGraph`], with an
//! optional [`DecisionTrace`] overlay.
//!
//! * [`to_dot`] / [`write_dot`]: one `subgraph "cluster_<id>"` per subgraph, nested the
//!   way [`Cluster::parent`](crate::graph::Cluster::parent) says; supervisors are
//!   hexagons, nodes rounded boxes; dispatch edges solid, return edges thin, handoff
//!   edges bold, call edges dotted and labelled `call`, the fallback edge labelled
//!   `fallback`; exitpoints have a double border; labels show descriptions and
//!   reads/writes.
//! * [`to_mermaid`] / [`write_mermaid`]: the same information as a Mermaid `flowchart`.
//! * With [`DotOptions::trace`] set, the edges the run took are painted and numbered in
//!   order, fallbacks and guard stops are marked and vertices never visited are greyed.
//! * A team node's members and lead are drawn in a dashed cluster next to it, around a
//!   `broadcast` hub vertex (members to the hub both ways, the hub to the lead); the edges
//!   from the team node to its participants are dotted and labelled `team`. With a trace,
//!   each turn numbers its participant's `team` edge and the cluster's label counts the
//!   team's cycles.
//! * [`render()`] runs Graphviz's `dot` to make an SVG, PNG or PDF.
//!
//! Output is deterministic: everything is written in declaration order, so the same
//! graph (and trace) gives byte-identical text. Writing is linear in the size of the
//! graph and allocates no string per label.
//!
//! ```
//! use pactgraph::{GraphBuilder, NodeContract, SupervisorContract};
//! use pactgraph::visualize::{DotOptions, to_dot, to_mermaid};
//! let graph = GraphBuilder::new("hello")
//!     .entry("root")
//!     .supervisor(SupervisorContract::new("root").allow(["reply"]))
//!     .node(NodeContract::new("reply").supervisor("root").writes(["answer"]))
//!     .build()
//!     .expect("all ids resolve");
//! let dot = to_dot(&graph, &DotOptions::default());
//! assert!(dot.contains(r#""root" -> "reply""#));
//! assert!(to_mermaid(&graph, &DotOptions::default()).contains("\nflowchart TB\n"));
//! ```

mod dot;
mod escape;
mod mermaid;
mod overlay;
mod render;
mod team;

use std::collections::HashSet;
use std::fmt;

pub use dot::write_dot;
pub use mermaid::write_mermaid;
pub use render::{ImageFormat, RenderError, render};

use crate::contracts::{NodeContract, SupervisorContract};
use crate::graph::CompiledGraph;
use crate::runtime::DecisionTrace;

/// What to draw besides the graph itself. Used by both formats.
#[derive(Debug, Clone, Copy)]
pub struct DotOptions<'a> {
    /// A run's trace to paint over the graph.
    pub trace: Option<&'a DecisionTrace>,
    /// Show the first line of each contract's description in its label (default: true).
    /// The full description is always in the tooltip (DOT).
    pub descriptions: bool,
}

impl Default for DotOptions<'_> {
    fn default() -> Self {
        Self {
            trace: None,
            descriptions: true,
        }
    }
}

impl<'a> DotOptions<'a> {
    /// Options that paint `trace` over the graph.
    pub fn with_trace(trace: &'a DecisionTrace) -> Self {
        Self {
            trace: Some(trace),
            ..Self::default()
        }
    }
}

/// The graph as DOT text.
///
/// Complexity: O(V + E) in the graph, plus O(T) in the trace.
pub fn to_dot(graph: &CompiledGraph, options: &DotOptions<'_>) -> String {
    let mut out = String::with_capacity(estimate(graph));
    // Writing into a `String` cannot fail.
    let _ = write_dot(&mut out, graph, options);
    out
}

/// The graph as a Mermaid flowchart.
///
/// Complexity: O(V + E) in the graph, plus O(T) in the trace.
pub fn to_mermaid(graph: &CompiledGraph, options: &DotOptions<'_>) -> String {
    let mut out = String::with_capacity(estimate(graph));
    // Writing into a `String` cannot fail.
    let _ = write_mermaid(&mut out, graph, options);
    out
}

/// How many trace items name ids (or moves) that `graph` does not have: a trace from
/// another workflow, or from an older version of this one.
pub fn unmatched_trace_items(graph: &CompiledGraph, trace: &DecisionTrace) -> usize {
    overlay::overlay(graph, trace).unmatched
}

fn estimate(graph: &CompiledGraph) -> usize {
    graph.graph().node_count() * 120 + graph.graph().edge_count() * 48 + 256
}

/// Longest description line shown in a label.
const DESCRIPTION_CHARS: usize = 48;

/// Cluster nesting: top-level clusters and each cluster's children, by position in
/// `clusters()`, in declaration order.
pub(crate) struct Nesting {
    pub roots: Vec<usize>,
    pub children: Vec<Vec<usize>>,
}

impl Nesting {
    pub fn of(g: &CompiledGraph) -> Self {
        let clusters = g.clusters();
        let mut roots = Vec::new();
        let mut children = vec![Vec::new(); clusters.len()];
        for (i, c) in clusters.values().enumerate() {
            match c
                .parent
                .as_deref()
                .and_then(|p| clusters.get_index_of(p))
                .filter(|&p| p != i)
            {
                Some(p) => children[p].push(i),
                None => roots.push(i),
            }
        }
        Self { roots, children }
    }

    /// Visits clusters depth-first in declaration order without recursion:
    /// `open(index, level)` before a cluster's children, `close(level)` after. A cluster
    /// is visited once even if the nesting were cyclic.
    pub fn walk<W>(
        &self,
        w: &mut W,
        mut open: impl FnMut(&mut W, usize, usize) -> fmt::Result,
        mut close: impl FnMut(&mut W, usize) -> fmt::Result,
    ) -> fmt::Result {
        enum Step {
            Open(usize, usize),
            Close(usize),
        }
        let mut seen = vec![false; self.children.len()];
        let mut stack: Vec<Step> = self.roots.iter().rev().map(|&r| Step::Open(r, 1)).collect();
        while let Some(step) = stack.pop() {
            match step {
                Step::Open(i, level) => {
                    if std::mem::replace(&mut seen[i], true) {
                        continue;
                    }
                    open(w, i, level)?;
                    stack.push(Step::Close(level));
                    for &c in self.children[i].iter().rev() {
                        stack.push(Step::Open(c, level + 1));
                    }
                }
                Step::Close(level) => close(w, level)?,
            }
        }
        Ok(())
    }
}

/// A supervisor or node being drawn, with its contract.
#[derive(Clone, Copy)]
pub(crate) enum VertexRef<'a> {
    Supervisor(&'a SupervisorContract),
    Node(&'a NodeContract),
}

impl<'a> VertexRef<'a> {
    pub fn id(self) -> &'a str {
        match self {
            VertexRef::Supervisor(s) => &s.id,
            VertexRef::Node(n) => &n.id,
        }
    }
    pub fn description(self) -> Option<&'a str> {
        match self {
            VertexRef::Supervisor(s) => s.description.as_deref(),
            VertexRef::Node(n) => n.description.as_deref(),
        }
    }
}

/// The members of cluster `i`: its supervisors (those that belong to it and to no
/// earlier subgraph) and its nodes.
pub(crate) fn members(g: &CompiledGraph, i: usize) -> impl Iterator<Item = VertexRef<'_>> {
    let reg = g.registry();
    let c = g.clusters().get_index(i).map(|(_, c)| c);
    let id = c.map(|c| c.subgraph_id.as_str());
    let sups = c
        .into_iter()
        .flat_map(|c| c.supervisors.iter())
        .filter(move |s| g.subgraph_of_supervisor(s) == id)
        .filter_map(|s| reg.get_supervisor(s).map(VertexRef::Supervisor));
    let nodes = c
        .into_iter()
        .flat_map(|c| c.nodes.iter())
        .filter_map(|n| reg.get_node(n).map(VertexRef::Node));
    sups.chain(nodes)
}

/// Vertices at the root level (in no cluster), supervisors then nodes.
pub(crate) fn root_members(g: &CompiledGraph) -> impl Iterator<Item = VertexRef<'_>> {
    let reg = g.registry();
    // Without subgraphs nothing needs looking up.
    let flat = g.clusters().is_empty();
    let sups = reg
        .supervisors()
        .filter(move |s| flat || g.subgraph_of_supervisor(&s.id).is_none())
        .map(VertexRef::Supervisor);
    let nodes = reg
        .nodes()
        .filter(move |n| flat || g.subgraph_of_supervisor(&n.supervisor).is_none())
        .map(VertexRef::Node);
    sups.chain(nodes)
}

/// Every exitpoint of every subgraph.
pub(crate) fn exitpoints(g: &CompiledGraph) -> HashSet<&str> {
    g.clusters()
        .values()
        .flat_map(|c| c.exitpoints.iter().map(String::as_str))
        .collect()
}

/// A label being written: text runs (escaped by the format) and line breaks.
pub(crate) trait LabelSink {
    /// Writes text, escaped.
    fn text(&mut self, s: &str) -> fmt::Result;
    /// Writes a line break.
    fn br(&mut self) -> fmt::Result;
}

fn list(sink: &mut impl LabelSink, name: &str, items: &[String]) -> fmt::Result {
    sink.br()?;
    sink.text(name)?;
    if items.is_empty() {
        return sink.text("none");
    }
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            sink.text(", ")?;
        }
        sink.text(s)?;
    }
    Ok(())
}

fn description(sink: &mut impl LabelSink, text: Option<&str>, on: bool) -> fmt::Result {
    if let (true, Some(d)) = (on, text) {
        let (line, cut) = escape::shorten(d, DESCRIPTION_CHARS);
        if !line.is_empty() {
            sink.br()?;
            sink.text(line)?;
            if cut {
                sink.text("…")?;
            }
        }
    }
    Ok(())
}

/// The label of a supervisor or node: id, description, reads/writes and marks.
pub(crate) fn vertex_label(
    sink: &mut impl LabelSink,
    g: &CompiledGraph,
    v: VertexRef<'_>,
    exit: bool,
    opts: &DotOptions<'_>,
) -> fmt::Result {
    sink.text(v.id())?;
    match v {
        VertexRef::Supervisor(s) => {
            if g.entry() == s.id {
                sink.br()?;
                sink.text("(entry)")?;
            }
            description(sink, s.description.as_deref(), opts.descriptions)
        }
        VertexRef::Node(n) => {
            description(sink, n.description.as_deref(), opts.descriptions)?;
            list(sink, "reads: ", &n.reads)?;
            list(sink, "writes: ", &n.writes)?;
            if let Some(r) = &n.router {
                sink.br()?;
                sink.text(if r.may_answer {
                    "router (may answer)"
                } else {
                    "router"
                })?;
            }
            match (n.terminal, exit) {
                (true, true) => {
                    sink.br()?;
                    sink.text("terminal, exitpoint")
                }
                (true, false) => {
                    sink.br()?;
                    sink.text("terminal")
                }
                (false, true) => {
                    sink.br()?;
                    sink.text("exitpoint")
                }
                (false, false) => Ok(()),
            }
        }
    }
}

/// The label of cluster `i`: `subgraph <id>`, description and boundary.
pub(crate) fn cluster_label(
    sink: &mut impl LabelSink,
    g: &CompiledGraph,
    i: usize,
    opts: &DotOptions<'_>,
) -> fmt::Result {
    let Some((_, c)) = g.clusters().get_index(i) else {
        return Ok(());
    };
    sink.text("subgraph ")?;
    sink.text(&c.subgraph_id)?;
    let d = g
        .registry()
        .get_subgraph(&c.subgraph_id)
        .and_then(|s| s.description.as_deref());
    description(sink, d, opts.descriptions)?;
    list(sink, "reads: ", &c.reads)?;
    list(sink, "writes: ", &c.writes)
}
