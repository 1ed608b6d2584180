//! The compiled graph: a petgraph `DiGraph` of supervisors and nodes, with one cluster
//! record per subgraph.

use foldhash::HashMap;

use indexmap::IndexMap;
use petgraph::graph::{DiGraph, NodeIndex};

use super::builder::BuildError;
use super::registry::Registry;
use crate::contracts::source_map::{SourceMap, Span};
use crate::contracts::{Budgets, ModelSpec, SliceDecl, WorkflowDocument};

/// What a vertex of the compiled graph is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VertexKind {
    /// A supervisor.
    Supervisor,
    /// A node.
    Node,
}

/// A vertex: a supervisor or a node, by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vertex {
    /// The contract id.
    pub id: String,
    /// Supervisor or node.
    pub kind: VertexKind,
}

/// The kinds of edge.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EdgeKind {
    /// Supervisor to a node in its allowlist.
    Dispatch,
    /// Node back to its owning supervisor.
    Return,
    /// Supervisor to the entrypoint of a subgraph in its allowlist.
    Call {
        /// The subgraph called.
        subgraph: String,
    },
    /// Node to the node it hands off to.
    Handoff,
    /// Router to one of its destinations: a node, or (for a subgraph destination) the
    /// subgraph's entrypoint supervisor.
    Route {
        /// The subgraph entered, for a subgraph destination.
        subgraph: Option<String>,
    },
    /// A primary node to one of its advisors (they run before it; pictures draw the edge
    /// the other way, the advice flowing in).
    Advice,
    /// A team node to one of its members or its lead (they run when it runs; pictures
    /// draw them in the team's cluster around a broadcast hub).
    Team,
}

impl EdgeKind {
    /// `dispatch`, `return`, `call`, `handoff`, `route`, `advice` or `team`.
    pub fn name(&self) -> &'static str {
        match self {
            EdgeKind::Dispatch => "dispatch",
            EdgeKind::Return => "return",
            EdgeKind::Call { .. } => "call",
            EdgeKind::Handoff => "handoff",
            EdgeKind::Route { .. } => "route",
            EdgeKind::Advice => "advice",
            EdgeKind::Team => "team",
        }
    }
}

/// One subgraph as a cluster of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The subgraph's id.
    pub subgraph_id: String,
    /// Its entrypoint supervisor.
    pub entrypoint: String,
    /// Nodes after which it returns.
    pub exitpoints: Vec<String>,
    /// Member supervisors, as declared.
    pub supervisors: Vec<String>,
    /// Nodes owned by member supervisors, in node declaration order.
    pub nodes: Vec<String>,
    /// Boundary: slices it may see.
    pub reads: Vec<String>,
    /// Boundary: slices it may change.
    pub writes: Vec<String>,
    /// Supervisors whose allowlist names this subgraph, in declaration order.
    pub callers: Vec<String>,
    /// The cluster this one nests in: the subgraph of the first caller found walking the
    /// calls breadth-first from the root level (`None` at the root or when unreached).
    pub parent: Option<String>,
    /// Static nesting depth from the root level (1 for a subgraph the root calls), or
    /// `None` when no chain of calls from the root reaches it.
    pub depth: Option<u32>,
}

/// A compiled workflow: contracts, the graph and the clusters.
#[derive(Debug, Clone)]
pub struct CompiledGraph {
    pub(super) workflow: String,
    pub(super) description: Option<String>,
    pub(super) retention: Option<String>,
    pub(super) slices: IndexMap<String, SliceDecl>,
    pub(super) budgets: Budgets,
    pub(super) models: IndexMap<String, ModelSpec>,
    pub(super) entry: String,
    pub(super) registry: Registry,
    pub(super) graph: DiGraph<Vertex, EdgeKind>,
    pub(super) index: HashMap<String, NodeIndex>,
    pub(super) clusters: IndexMap<String, Cluster>,
    pub(super) supervisor_cluster: HashMap<String, String>,
    pub(super) source: Option<SourceMap>,
    pub(super) problems: Vec<BuildError>,
}

impl CompiledGraph {
    /// The workflow's name.
    pub fn workflow(&self) -> &str {
        &self.workflow
    }
    /// The workflow's description.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// How long a stored run of this workflow is kept by default (the document's
    /// `retention`, such as `7d`).
    pub fn retention(&self) -> Option<&str> {
        self.retention.as_deref()
    }
    /// The model endpoints agents call, by key.
    pub fn models(&self) -> &IndexMap<String, ModelSpec> {
        &self.models
    }
    /// Declared slices.
    pub fn slices(&self) -> &IndexMap<String, SliceDecl> {
        &self.slices
    }
    /// Run budgets.
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }
    /// Replaces the run budgets (e.g. a command-line override).
    pub fn set_budgets(&mut self, budgets: Budgets) {
        self.budgets = budgets;
    }
    /// Replaces the model endpoints (e.g. `run --model NAME=MODEL`).
    pub fn set_models(&mut self, models: IndexMap<String, ModelSpec>) {
        self.models = models;
    }
    /// The entry supervisor.
    pub fn entry(&self) -> &str {
        &self.entry
    }
    /// The contracts.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
    /// The petgraph graph.
    pub fn graph(&self) -> &DiGraph<Vertex, EdgeKind> {
        &self.graph
    }
    /// The graph index of a supervisor or node.
    pub fn index_of(&self, id: &str) -> Option<NodeIndex> {
        self.index.get(id).copied()
    }
    /// Clusters by subgraph id, in declaration order.
    pub fn clusters(&self) -> &IndexMap<String, Cluster> {
        &self.clusters
    }
    /// The cluster of subgraph `id`.
    pub fn cluster(&self, id: &str) -> Option<&Cluster> {
        self.clusters.get(id)
    }
    /// The subgraph a supervisor belongs to (`None` at the root level).
    pub fn subgraph_of_supervisor(&self, supervisor: &str) -> Option<&str> {
        self.supervisor_cluster.get(supervisor).map(String::as_str)
    }
    /// The subgraph a node belongs to, through its owning supervisor.
    pub fn subgraph_of_node(&self, node: &str) -> Option<&str> {
        let owner = &self.registry.get_node(node)?.supervisor;
        self.subgraph_of_supervisor(owner)
    }
    /// Where the document was loaded from, when it was.
    pub fn source(&self) -> Option<&SourceMap> {
        self.source.as_ref()
    }
    /// Line and column of a JSON Pointer (or its nearest ancestor) in the source.
    pub fn span_of(&self, pointer: &str) -> Option<Span> {
        self.source.as_ref()?.locate(pointer)
    }
    /// Problems found while building (empty for a graph `build()` returned `Ok`).
    pub fn problems(&self) -> &[BuildError] {
        &self.problems
    }
    /// Edges as `(from id, to id, kind)` in insertion order.
    pub fn edges(&self) -> impl Iterator<Item = (&str, &str, &EdgeKind)> {
        self.graph.raw_edges().iter().map(|e| {
            (
                self.graph[e.source()].id.as_str(),
                self.graph[e.target()].id.as_str(),
                &e.weight,
            )
        })
    }
    /// The contracts back as a document.
    pub fn to_document(&self) -> WorkflowDocument {
        WorkflowDocument {
            schema: None,
            workflow: self.workflow.clone(),
            description: self.description.clone(),
            retention: self.retention.clone(),
            slices: self.slices.clone(),
            budgets: self.budgets,
            models: self.models.clone(),
            entry: self.entry.clone(),
            supervisors: self
                .registry
                .supervisors()
                .map(|s| (s.id.clone(), s.clone()))
                .collect(),
            subgraphs: self
                .registry
                .subgraphs()
                .map(|s| (s.id.clone(), s.clone()))
                .collect(),
            nodes: self
                .registry
                .nodes()
                .map(|s| (s.id.clone(), s.clone()))
                .collect(),
        }
    }
}
