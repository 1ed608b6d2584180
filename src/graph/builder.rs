//! `GraphBuilder`: compiles contracts into a [`CompiledGraph`].

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::fmt;

use indexmap::IndexMap;
use petgraph::graph::DiGraph;

use super::compiled::{Cluster, CompiledGraph, EdgeKind, Vertex, VertexKind};
use super::registry::{Contract, ContractKind, Registry, RegistryError};
use crate::contracts::pointer::join;
use crate::contracts::source_map::SourceMap;
use crate::contracts::{
    Budgets, ModelSpec, NodeContract, SliceDecl, SubgraphContract, SupervisorContract,
    WorkflowDocument,
};

/// What the builder expected an id to name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// A supervisor.
    Supervisor,
    /// A node.
    Node,
    /// A node or a subgraph (allowlist entries).
    NodeOrSubgraph,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::Supervisor => "supervisor",
            Expected::Node => "node",
            Expected::NodeOrSubgraph => "node or subgraph",
        })
    }
}

/// A problem that keeps the builder from resolving the graph.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Two contracts share an id.
    #[error(transparent)]
    Collision(#[from] RegistryError),
    /// A reference names nothing, or the wrong kind of thing.
    #[error("{}", describe_unresolved(id, *expected, *found, pointer))]
    Unresolved {
        /// The id referenced.
        id: String,
        /// What it should name.
        expected: Expected,
        /// What it names instead, if anything.
        found: Option<ContractKind>,
        /// JSON Pointer of the reference.
        pointer: String,
    },
}

fn describe_unresolved(
    id: &str,
    expected: Expected,
    found: Option<ContractKind>,
    pointer: &str,
) -> String {
    match found {
        None => format!("unknown {expected} `{id}` referenced at {pointer}"),
        Some(k) => format!("`{id}` referenced at {pointer} is a {k}, expected a {expected}"),
    }
}

impl BuildError {
    /// JSON Pointer of the offending place.
    pub fn pointer(&self) -> String {
        match self {
            BuildError::Collision(e) => e.rejected.kind().pointer(&e.id),
            BuildError::Unresolved { pointer, .. } => pointer.clone(),
        }
    }
}

/// The builder could not resolve every id. The graph built from what did resolve is
/// handed back, so the validator can still report everything at once.
#[derive(Debug, thiserror::Error)]
#[error("{} problem(s) building workflow `{}`: {}", errors.len(), partial.workflow(),
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct BuildFailure {
    /// Every problem, in declaration order.
    pub errors: Vec<BuildError>,
    /// The graph without the unresolved edges (its `problems()` lists the same errors).
    pub partial: Box<CompiledGraph>,
}

impl BuildFailure {
    /// The partial graph.
    pub fn into_partial(self) -> CompiledGraph {
        *self.partial
    }
}

/// Collects contracts and compiles them.
///
/// ```
/// use pactgraph::{GraphBuilder, NodeContract, SliceDecl, SupervisorContract};
/// let graph = GraphBuilder::new("hello")
///     .slice("answer", SliceDecl::new())
///     .entry("root")
///     .supervisor(SupervisorContract::new("root").allow(["reply"]))
///     .node(NodeContract::new("reply").supervisor("root").writes(["answer"]))
///     .build()
///     .expect("all ids resolve");
/// assert_eq!(graph.edges().count(), 2); // dispatch and return
/// ```
#[derive(Debug, Clone, Default)]
pub struct GraphBuilder {
    workflow: String,
    description: Option<String>,
    retention: Option<String>,
    slices: IndexMap<String, SliceDecl>,
    budgets: Budgets,
    models: IndexMap<String, ModelSpec>,
    entry: String,
    registry: Registry,
    collisions: Vec<BuildError>,
    source: Option<SourceMap>,
}

impl GraphBuilder {
    /// A builder for workflow `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            workflow: name.into(),
            ..Self::default()
        }
    }

    /// A builder holding every contract of a document (ids from the keys).
    pub fn from_document(doc: WorkflowDocument) -> Self {
        let mut b = Self::new(doc.workflow);
        b.description = doc.description;
        b.retention = doc.retention;
        b.slices = doc.slices;
        b.budgets = doc.budgets;
        b.models = doc.models;
        b.entry = doc.entry;
        b.registry
            .reserve(doc.nodes.len(), doc.supervisors.len(), doc.subgraphs.len());
        for (id, s) in doc.supervisors {
            b = b.supervisor(s.with_id(id));
        }
        for (id, s) in doc.subgraphs {
            b = b.subgraph(s.with_id(id));
        }
        for (id, n) in doc.nodes {
            b = b.node(n.with_id(id));
        }
        b
    }

    /// Attaches the source map of the document the contracts came from.
    pub fn source_map(mut self, map: SourceMap) -> Self {
        self.source = Some(map);
        self
    }
    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
    /// Sets the default retention of stored runs (`30m`, `24h`, `7d`).
    pub fn retention(mut self, duration: impl Into<String>) -> Self {
        self.retention = Some(duration.into());
        self
    }
    /// Declares a slice.
    pub fn slice(mut self, name: impl Into<String>, decl: SliceDecl) -> Self {
        self.slices.insert(name.into(), decl);
        self
    }
    /// Sets the budgets.
    pub fn budgets(mut self, budgets: Budgets) -> Self {
        self.budgets = budgets;
        self
    }
    /// Declares a model endpoint under `key` (agents name it in `model`).
    pub fn model(mut self, key: impl Into<String>, spec: ModelSpec) -> Self {
        self.models.insert(key.into(), spec);
        self
    }
    /// Sets the entry supervisor.
    pub fn entry(mut self, supervisor: impl Into<String>) -> Self {
        self.entry = supervisor.into();
        self
    }
    /// Adds a node (an id collision is reported by `build`).
    pub fn node(self, c: NodeContract) -> Self {
        self.add(Contract::Node(c))
    }
    /// Adds a supervisor (an id collision is reported by `build`).
    pub fn supervisor(self, c: SupervisorContract) -> Self {
        self.add(Contract::Supervisor(c))
    }
    /// Adds a subgraph (an id collision is reported by `build`).
    pub fn subgraph(self, c: SubgraphContract) -> Self {
        self.add(Contract::Subgraph(c))
    }

    fn add(mut self, c: Contract) -> Self {
        if let Err(e) = self.registry.register(c) {
            self.collisions.push(BuildError::Collision(e));
        }
        self
    }

    /// Compiles the contracts. Fails when an id collides or a reference does not resolve;
    /// the failure carries every problem and the partial graph.
    ///
    /// Complexity: O(V + E) in contracts and references.
    pub fn build(self) -> Result<CompiledGraph, BuildFailure> {
        let graph = self.compile();
        if graph.problems.is_empty() {
            Ok(graph)
        } else {
            Err(BuildFailure {
                errors: graph.problems.clone(),
                partial: Box::new(graph),
            })
        }
    }

    fn compile(self) -> CompiledGraph {
        let reg = &self.registry;
        let mut problems = self.collisions;
        let mut graph = DiGraph::with_capacity(reg.len(), reg.len() * 2);
        let mut index = HashMap::with_capacity(reg.len());
        for s in reg.supervisors() {
            let ix = graph.add_node(Vertex {
                id: s.id.clone(),
                kind: VertexKind::Supervisor,
            });
            index.insert(s.id.clone(), ix);
        }
        for n in reg.nodes() {
            let ix = graph.add_node(Vertex {
                id: n.id.clone(),
                kind: VertexKind::Node,
            });
            index.insert(n.id.clone(), ix);
        }

        // The pointer is only built for a reference that fails.
        let mut check = |id: &str, expected: Expected, pointer: &dyn Fn() -> String| -> bool {
            let found = reg.kind_of(id);
            let ok = matches!(
                (expected, found),
                (Expected::Supervisor, Some(ContractKind::Supervisor))
                    | (Expected::Node, Some(ContractKind::Node))
                    | (
                        Expected::NodeOrSubgraph,
                        Some(ContractKind::Node | ContractKind::Subgraph)
                    )
            );
            if !ok {
                problems.push(BuildError::Unresolved {
                    id: id.to_string(),
                    expected,
                    found,
                    pointer: pointer(),
                });
            }
            ok
        };

        check(&self.entry, Expected::Supervisor, &|| "/entry".into());

        // Clusters and membership.
        let mut clusters = IndexMap::with_capacity(reg.subgraphs().len());
        let mut supervisor_cluster: HashMap<String, String> = HashMap::new();
        for g in reg.subgraphs() {
            let at = |field: &str| join(["subgraphs", g.id.as_str(), field]);
            check(&g.entrypoint, Expected::Supervisor, &|| at("entrypoint"));
            for (i, s) in g.supervisors.iter().enumerate() {
                if check(s, Expected::Supervisor, &|| {
                    format!("{}/{i}", at("supervisors"))
                }) {
                    supervisor_cluster
                        .entry(s.clone())
                        .or_insert_with(|| g.id.clone());
                }
            }
            for (i, n) in g.exitpoints.iter().enumerate() {
                check(n, Expected::Node, &|| format!("{}/{i}", at("exitpoints")));
            }
        }
        let mut members: HashMap<&str, Vec<String>> = HashMap::new();
        for n in reg.nodes() {
            if let Some(g) = supervisor_cluster.get(&n.supervisor) {
                members.entry(g.as_str()).or_default().push(n.id.clone());
            }
        }
        for g in reg.subgraphs() {
            clusters.insert(
                g.id.clone(),
                Cluster {
                    subgraph_id: g.id.clone(),
                    entrypoint: g.entrypoint.clone(),
                    exitpoints: g.exitpoints.clone(),
                    supervisors: g.supervisors.clone(),
                    nodes: members.remove(g.id.as_str()).unwrap_or_default(),
                    reads: g.reads.clone(),
                    writes: g.writes.clone(),
                    callers: Vec::new(),
                    parent: None,
                    depth: None,
                },
            );
        }
        let exitpoints: HashSet<&str> = reg
            .subgraphs()
            .flat_map(|g| g.exitpoints.iter().map(String::as_str))
            .collect();

        // Supervisor edges: dispatch and call.
        for s in reg.supervisors() {
            let from = index[&s.id];
            for (i, target) in s.allow.iter().enumerate() {
                let ptr = || join(["supervisors", s.id.as_str(), "allow", &i.to_string()]);
                if !check(target, Expected::NodeOrSubgraph, &ptr) {
                    continue;
                }
                match reg.kind_of(target) {
                    Some(ContractKind::Node) => {
                        graph.add_edge(from, index[target], EdgeKind::Dispatch);
                    }
                    Some(ContractKind::Subgraph) => {
                        if let Some(c) = clusters.get_mut(target) {
                            c.callers.push(s.id.clone());
                        }
                        let sub = reg.get_subgraph(target).expect("kind says subgraph");
                        if let Some(&to) = reg
                            .get_supervisor(&sub.entrypoint)
                            .and_then(|e| index.get(&e.id))
                        {
                            graph.add_edge(
                                from,
                                to,
                                EdgeKind::Call {
                                    subgraph: target.clone(),
                                },
                            );
                        }
                    }
                    _ => {}
                }
            }
            if let Some(fb) = &s.fallback {
                check(fb, Expected::Node, &|| {
                    join(["supervisors", s.id.as_str(), "fallback"])
                });
            }
        }

        // Node edges: route, return and handoff.
        for n in reg.nodes() {
            let from = index[&n.id];
            let owner_ok = check(&n.supervisor, Expected::Supervisor, &|| {
                join(["nodes", n.id.as_str(), "supervisor"])
            });
            if let Some(r) = &n.router {
                for (i, d) in r.destinations.iter().enumerate() {
                    let ptr = || {
                        let at = join(["nodes", n.id.as_str(), "router", "destinations"]);
                        format!("{at}/{i}")
                    };
                    if !check(d, Expected::NodeOrSubgraph, &ptr) {
                        continue;
                    }
                    if let Some(&to) = index.get(d) {
                        graph.add_edge(from, to, EdgeKind::Route { subgraph: None });
                        continue;
                    }
                    // A subgraph: entered from the router's level, as if its supervisor
                    // had called it.
                    if let Some(c) = clusters.get_mut(d)
                        && owner_ok
                        && !c.callers.contains(&n.supervisor)
                    {
                        c.callers.push(n.supervisor.clone());
                    }
                    if let Some(&to) = reg.get_subgraph(d).and_then(|g| index.get(&g.entrypoint)) {
                        let kind = EdgeKind::Route {
                            subgraph: Some(d.clone()),
                        };
                        graph.add_edge(from, to, kind);
                    }
                }
            }
            if let Some(h) = &n.handoff {
                if check(h, Expected::Node, &|| {
                    join(["nodes", n.id.as_str(), "handoff"])
                }) {
                    graph.add_edge(from, index[h], EdgeKind::Handoff);
                }
            } else if owner_ok
                && !n.terminal
                && n.router.is_none()
                && !exitpoints.contains(n.id.as_str())
            {
                graph.add_edge(from, index[&n.supervisor], EdgeKind::Return);
            }
            // Advisors: the validator names members that are not nodes (PG0820).
            for m in n.advisors.iter().flat_map(|a| &a.members) {
                if let Some(&to) = index.get(m.as_str())
                    && reg.get_node(m).is_some()
                    && *m != n.id
                {
                    graph.add_edge(from, to, EdgeKind::Advice);
                }
            }
            // Teams: members, then the lead (the validator names bad ones, PG0830-PG0831).
            let team = n
                .team
                .iter()
                .flat_map(|t| t.members.iter().chain([&t.lead]));
            for m in team {
                if let Some(&to) = index.get(m.as_str())
                    && reg.get_node(m).is_some()
                    && *m != n.id
                {
                    graph.add_edge(from, to, EdgeKind::Team);
                }
            }
        }

        nest_clusters(&mut clusters, &supervisor_cluster, reg);

        CompiledGraph {
            workflow: self.workflow,
            description: self.description,
            retention: self.retention,
            slices: self.slices,
            budgets: self.budgets,
            models: self.models,
            entry: self.entry,
            graph,
            index,
            clusters,
            supervisor_cluster,
            source: self.source,
            problems,
            registry: self.registry,
        }
    }
}

/// Assigns each cluster its parent and static depth, breadth-first from the root level.
fn nest_clusters(
    clusters: &mut IndexMap<String, Cluster>,
    supervisor_cluster: &HashMap<String, String>,
    reg: &Registry,
) {
    // Subgraphs called from the root level (supervisors in no subgraph) come first.
    let mut queue: VecDeque<(String, Option<String>, u32)> = VecDeque::new();
    for s in reg.supervisors() {
        if supervisor_cluster.contains_key(&s.id) {
            continue;
        }
        for t in &s.allow {
            if clusters.contains_key(t) {
                queue.push_back((t.clone(), None, 1));
            }
        }
    }
    let mut seen = HashSet::new();
    while let Some((id, parent, depth)) = queue.pop_front() {
        if !seen.insert(id.clone()) {
            continue;
        }
        let Some(c) = clusters.get_mut(&id) else {
            continue;
        };
        c.parent = parent;
        c.depth = Some(depth);
        let supervisors = c.supervisors.clone();
        for s in supervisors {
            let Some(sc) = reg.get_supervisor(&s) else {
                continue;
            };
            if supervisor_cluster.get(&s) != Some(&id) {
                continue;
            }
            for t in &sc.allow {
                if clusters.contains_key(t) && !seen.contains(t) {
                    queue.push_back((t.clone(), Some(id.clone()), depth + 1));
                }
            }
        }
    }
}
