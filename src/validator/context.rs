//! What every rule needs, computed once per validation.

use std::collections::{HashMap, HashSet};

use crate::contracts::{SYSTEM_SLICE, SubgraphContract, SupervisorContract};
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
        Self {
            graph,
            reg,
            boundaries,
        }
    }

    /// True when `slice` is declared (or is the reserved `system`).
    pub fn slice_known(&self, slice: &str) -> bool {
        slice == SYSTEM_SLICE || self.graph.slices().contains_key(slice)
    }

    /// The level (subgraph id, `None` for the root) a supervisor belongs to.
    pub fn level_of_supervisor(&self, id: &str) -> Option<&'a str> {
        self.graph.subgraph_of_supervisor(id)
    }

    /// The level of a node through its owner, or `Err(())` when the owner is unknown.
    pub fn level_of_node(&self, id: &str) -> Result<Option<&'a str>, ()> {
        let n = self.reg.get_node(id).ok_or(())?;
        if self.reg.get_supervisor(&n.supervisor).is_none() {
            return Err(());
        }
        Ok(self.graph.subgraph_of_supervisor(&n.supervisor))
    }

    /// The kind an id names.
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
