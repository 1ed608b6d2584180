//! Registry, builder and the compiled, clustered graph.
//!
//! The [`Registry`] holds contracts by id and refuses collisions; the [`GraphBuilder`]
//! resolves every reference and compiles a [`CompiledGraph`]: a petgraph `DiGraph` of
//! supervisors and nodes with dispatch, return, call and handoff edges, plus one
//! [`Cluster`] per subgraph.

mod builder;
mod compiled;
mod registry;
#[cfg(feature = "bench")]
pub mod synth;

pub use builder::{BuildError, BuildFailure, Expected, GraphBuilder};
pub use compiled::{Cluster, CompiledGraph, EdgeKind, Vertex, VertexKind};
pub use registry::{Contract, ContractKind, Registry, RegistryError, Resolved};

#[cfg(test)]
mod tests;
