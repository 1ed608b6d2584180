//! What every rule needs, computed once per validation: the registry itself for id
//! look-ups, plus what is derived from it (boundaries as sets, the level of each
//! supervisor and node).

use foldhash::{HashMap, HashMapExt, HashSet};

use crate::contracts::{NodeContract, SYSTEM_SLICE, SubgraphContract, SupervisorContract};
use crate::graph::{CompiledGraph, ContractKind, Registry};

/// A subgraph's boundary as sets.
pub(crate) struct Boundary<'a> {
    /// `reads` and `writes`: every slice the subgraph can see.
    pub visible: HashSet<&'a str>,
    /// `writes`.
    pub writes: HashSet<&'a str>,
}

/// Shared, precomputed facts about the graph under validation.
pub(crate) struct Context<'a> {
    /// The graph.
    pub graph: &'a CompiledGraph,
    /// Its registry.
    pub reg: &'a Registry,
    /// Boundary sets by subgraph id.
    pub boundaries: HashMap<&'a str, Boundary<'a>>,
    /// Level of each supervisor (`None`: the root).
    sup_level: HashMap<&'a str, Option<&'a str>>,
    /// Level of each node whose owner is a known supervisor.
    node_level: HashMap<&'a str, Option<&'a str>>,
}

impl<'a> Context<'a> {
    pub(crate) fn new(graph: &'a CompiledGraph) -> Self {
        let reg = graph.registry();
        let boundaries = reg
            .subgraphs()
            .map(|g| {
                let writes: HashSet<&str> = g.writes.iter().map(String::as_str).collect();
                let mut visible = writes.clone();
                visible.extend(g.reads.iter().map(String::as_str));
                (g.id.as_str(), Boundary { visible, writes })
            })
            .collect();
        let mut sup_level = HashMap::with_capacity(reg.supervisors().len());
        for s in reg.supervisors() {
            sup_level.insert(s.id.as_str(), graph.subgraph_of_supervisor(&s.id));
        }
        let mut node_level = HashMap::with_capacity(reg.nodes().len());
        for n in reg.nodes() {
            if let Some(level) = sup_level.get(n.supervisor.as_str()) {
                node_level.insert(n.id.as_str(), *level);
            }
        }
        Self {
            graph,
            reg,
            boundaries,
            sup_level,
            node_level,
        }
    }

    /// True when `slice` is declared (or is the reserved `system`).
    pub fn slice_known(&self, slice: &str) -> bool {
        slice == SYSTEM_SLICE || self.graph.slices().contains_key(slice)
    }

    /// The level (subgraph id, `None` for the root) a supervisor belongs to.
    pub fn level_of_supervisor(&self, id: &str) -> Option<&'a str> {
        self.sup_level.get(id).copied().flatten()
    }

    /// The level of a node through its owner, or `Err(())` when the owner is unknown.
    pub fn level_of_node(&self, id: &str) -> Result<Option<&'a str>, ()> {
        self.node_level.get(id).copied().ok_or(())
    }

    /// The node `id` (the registry's look-up).
    pub fn node(&self, id: &str) -> Option<&'a NodeContract> {
        self.reg.get_node(id)
    }

    /// The kind an id names (the registry's look-up).
    pub fn kind_of(&self, id: &str) -> Option<ContractKind> {
        self.reg.kind_of(id)
    }

    /// The subgraph `id`.
    pub fn subgraph(&self, id: &str) -> Option<&'a SubgraphContract> {
        self.reg.get_subgraph(id)
    }

    /// The supervisor `id`.
    pub fn supervisor(&self, id: &str) -> Option<&'a SupervisorContract> {
        self.reg.get_supervisor(id)
    }
}
