//! The registry: every node, supervisor and subgraph by id, with one id naming one thing.

use foldhash::HashMap;
use std::fmt;

use indexmap::IndexMap;

use crate::contracts::pointer::join;
use crate::contracts::{NodeContract, SubgraphContract, SupervisorContract};

/// The three kinds of contract an id can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContractKind {
    /// A `NodeContract`.
    Node,
    /// A `SupervisorContract`.
    Supervisor,
    /// A `SubgraphContract`.
    Subgraph,
}

impl ContractKind {
    /// The document section holding this kind (`nodes`, `supervisors`, `subgraphs`).
    pub fn section(self) -> &'static str {
        match self {
            ContractKind::Node => "nodes",
            ContractKind::Supervisor => "supervisors",
            ContractKind::Subgraph => "subgraphs",
        }
    }

    /// JSON Pointer of the contract `id` of this kind.
    pub fn pointer(self, id: &str) -> String {
        join([self.section(), id])
    }
}

impl fmt::Display for ContractKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ContractKind::Node => "node",
            ContractKind::Supervisor => "supervisor",
            ContractKind::Subgraph => "subgraph",
        })
    }
}

/// Any one contract (the payload handed back when registration fails).
// A transient value, moved once into the registry's typed tables: boxing the node
// variant (the largest, with its router, retry and advisors fields) would allocate per
// node registered.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Contract {
    /// A node.
    Node(NodeContract),
    /// A supervisor.
    Supervisor(SupervisorContract),
    /// A subgraph.
    Subgraph(SubgraphContract),
}

impl Contract {
    /// The contract's kind.
    pub fn kind(&self) -> ContractKind {
        match self {
            Contract::Node(_) => ContractKind::Node,
            Contract::Supervisor(_) => ContractKind::Supervisor,
            Contract::Subgraph(_) => ContractKind::Subgraph,
        }
    }
    /// The contract's id.
    pub fn id(&self) -> &str {
        match self {
            Contract::Node(c) => &c.id,
            Contract::Supervisor(c) => &c.id,
            Contract::Subgraph(c) => &c.id,
        }
    }
}

/// Registration refused: the id already names another contract. The rejected contract is
/// handed back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("id `{id}` is used twice: as a {existing} ({}) and as a {} ({})",
    existing.pointer(id), rejected.kind(), rejected.kind().pointer(id))]
pub struct RegistryError {
    /// The contested id.
    pub id: String,
    /// What the id already names.
    pub existing: ContractKind,
    /// The contract that was not registered.
    pub rejected: Box<Contract>,
}

/// A resolved id.
#[derive(Debug, Clone, Copy)]
pub enum Resolved<'a> {
    /// The id names a node.
    Node(&'a NodeContract),
    /// The id names a supervisor.
    Supervisor(&'a SupervisorContract),
    /// The id names a subgraph.
    Subgraph(&'a SubgraphContract),
}

/// Contracts of one kind by id, in registration order. The order (and so every output)
/// does not depend on the hasher, which is foldhash like the other id tables.
type ById<T> = IndexMap<String, T, foldhash::fast::RandomState>;

/// Nodes, supervisors and subgraphs by id, in registration order.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    nodes: ById<NodeContract>,
    supervisors: ById<SupervisorContract>,
    subgraphs: ById<SubgraphContract>,
    kinds: HashMap<String, ContractKind>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers any contract, refusing an id that already names something.
    pub fn register(&mut self, contract: Contract) -> Result<(), RegistryError> {
        if let Some(existing) = self.kinds.get(contract.id()) {
            return Err(RegistryError {
                id: contract.id().to_string(),
                existing: *existing,
                rejected: Box::new(contract),
            });
        }
        self.kinds
            .insert(contract.id().to_string(), contract.kind());
        match contract {
            Contract::Node(c) => {
                self.nodes.insert(c.id.clone(), c);
            }
            Contract::Supervisor(c) => {
                self.supervisors.insert(c.id.clone(), c);
            }
            Contract::Subgraph(c) => {
                self.subgraphs.insert(c.id.clone(), c);
            }
        }
        Ok(())
    }

    /// Registers a node.
    pub fn register_node(&mut self, c: NodeContract) -> Result<(), RegistryError> {
        self.register(Contract::Node(c))
    }
    /// Registers a supervisor.
    pub fn register_supervisor(&mut self, c: SupervisorContract) -> Result<(), RegistryError> {
        self.register(Contract::Supervisor(c))
    }
    /// Registers a subgraph.
    pub fn register_subgraph(&mut self, c: SubgraphContract) -> Result<(), RegistryError> {
        self.register(Contract::Subgraph(c))
    }

    /// The node `id`.
    pub fn get_node(&self, id: &str) -> Option<&NodeContract> {
        self.nodes.get(id)
    }

    /// Makes room for this many more contracts of each kind (no effect on behaviour; a
    /// builder that knows the document's size avoids growing the tables step by step).
    pub(crate) fn reserve(&mut self, nodes: usize, supervisors: usize, subgraphs: usize) {
        self.nodes.reserve(nodes);
        self.supervisors.reserve(supervisors);
        self.subgraphs.reserve(subgraphs);
        self.kinds.reserve(nodes + supervisors + subgraphs);
    }

    /// The `i`-th registered node (registration order, as [`Registry::nodes`] yields).
    pub(crate) fn node_at(&self, i: usize) -> Option<&NodeContract> {
        self.nodes.get_index(i).map(|(_, n)| n)
    }
    /// The position of node `id` in registration order (the `i` of [`Registry::node_at`]).
    pub(crate) fn node_index(&self, id: &str) -> Option<usize> {
        self.nodes.get_index_of(id)
    }
    /// The supervisor `id`.
    pub fn get_supervisor(&self, id: &str) -> Option<&SupervisorContract> {
        self.supervisors.get(id)
    }
    /// The subgraph `id`.
    pub fn get_subgraph(&self, id: &str) -> Option<&SubgraphContract> {
        self.subgraphs.get(id)
    }
    /// Nodes in registration order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = &NodeContract> {
        self.nodes.values()
    }
    /// Supervisors in registration order.
    pub fn supervisors(&self) -> impl ExactSizeIterator<Item = &SupervisorContract> {
        self.supervisors.values()
    }
    /// Subgraphs in registration order.
    pub fn subgraphs(&self) -> impl ExactSizeIterator<Item = &SubgraphContract> {
        self.subgraphs.values()
    }
    /// What `id` names, if anything.
    pub fn kind_of(&self, id: &str) -> Option<ContractKind> {
        self.kinds.get(id).copied()
    }
    /// Resolves `id` to its contract.
    pub fn resolve(&self, id: &str) -> Option<Resolved<'_>> {
        match self.kinds.get(id)? {
            ContractKind::Node => self.nodes.get(id).map(Resolved::Node),
            ContractKind::Supervisor => self.supervisors.get(id).map(Resolved::Supervisor),
            ContractKind::Subgraph => self.subgraphs.get(id).map(Resolved::Subgraph),
        }
    }
    /// Total number of contracts.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }
    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_gets_and_lists_each_kind() {
        let mut r = Registry::new();
        r.register_supervisor(SupervisorContract::new("s")).unwrap();
        r.register_subgraph(SubgraphContract::new("g")).unwrap();
        r.register_node(NodeContract::new("b")).unwrap();
        r.register_node(NodeContract::new("a")).unwrap();
        assert_eq!(r.get_node("a").unwrap().id, "a");
        assert!(r.get_node("s").is_none());
        assert_eq!(r.get_supervisor("s").unwrap().id, "s");
        assert_eq!(r.get_subgraph("g").unwrap().id, "g");
        let ids: Vec<_> = r.nodes().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["b", "a"]);
        assert_eq!(r.kind_of("g"), Some(ContractKind::Subgraph));
        assert!(matches!(r.resolve("s"), Some(Resolved::Supervisor(_))));
        assert_eq!(r.len(), 4);
    }

    #[test]
    fn refuses_every_kind_of_collision_and_hands_the_contract_back() {
        let kinds = [
            Contract::Node(NodeContract::new("x")),
            Contract::Supervisor(SupervisorContract::new("x")),
            Contract::Subgraph(SubgraphContract::new("x")),
        ];
        for first in &kinds {
            for second in &kinds {
                let mut r = Registry::new();
                r.register(first.clone()).unwrap();
                let err = r.register(second.clone()).unwrap_err();
                assert_eq!(err.existing, first.kind());
                assert_eq!(*err.rejected, *second);
                let msg = err.to_string();
                assert!(msg.contains(&first.kind().pointer("x")), "{msg}");
                assert!(msg.contains(&second.kind().pointer("x")), "{msg}");
                assert_eq!(r.len(), 1);
            }
        }
    }
}
