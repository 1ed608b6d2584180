//! The contract types and the workflow document.
//!
//! Everything a workflow declares lives here, as plain data with serde round-trips and
//! builder methods for writing contracts in Rust. Both entry points (Rust code and a
//! JSON/YAML document) produce the same types.

mod advisors;
mod agent;
mod behaviour;
mod budgets;
pub(crate) mod compiled_condition;
pub(crate) mod condition;
mod decision;
mod document;
mod format;
pub(crate) mod load;
pub(crate) mod lookup;
mod models;
mod node;
pub(crate) mod pointer;
mod retry;
mod router;
mod schema;
mod slice;
pub(crate) mod source_map;
mod subgraph;
mod supervisor;
mod team;
pub(crate) mod template;

pub use advisors::Advisors;
pub use agent::{AgentSpec, ToolSpec};
pub use behaviour::{ExecSpec, NodeBehaviour, SupervisorPolicy};
pub use budgets::Budgets;
pub use condition::{Condition, Trigger, json_equal, slice_of_path};
pub use decision::{ClarifyRequest, RoutingDecision, StopGlobal, StopLocal, SupervisorOutput};
pub use document::WorkflowDocument;
pub use format::DocumentFormat;
pub use load::{LoadError, MAX_ALIAS_BYTES, MAX_ALIAS_NODES, MAX_DEPTH};
pub use models::{ModelSpec, Price};
pub use node::NodeContract;
pub use retry::{RetryOn, RetryPolicy};
pub use router::RouterSpec;
pub use schema::document_schema;
pub use slice::{CLARIFICATION_SLICE, SYSTEM_SLICE, SliceDecl};
pub use source_map::{SourceMap, Span};
pub use subgraph::SubgraphContract;
pub use supervisor::SupervisorContract;
pub use team::Team;

/// Turns any iterable of string-likes into owned strings (used by the builder methods).
pub(crate) fn strings<I, S>(items: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    items.into_iter().map(Into::into).collect()
}
