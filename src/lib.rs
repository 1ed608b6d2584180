//! # pactgraph
//!
//! A Rust engine for declarative agent workflows. A workflow is a set of contracts
//! ([`contracts::NodeContract`], [`contracts::SupervisorContract`],
//! [`contracts::SubgraphContract`]) written in Rust or in a JSON/YAML
//! [`contracts::WorkflowDocument`]. The [`graph::GraphBuilder`] compiles them into a
//! clustered [`graph::CompiledGraph`]; the [`validator`] proves the contracts hold before
//! anything runs; the [`runtime`] executes routing decisions with budgets, a call stack and
//! a decision trace; [`visualize`] exports the graph.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod contracts;
pub mod graph;
pub mod runtime;
#[cfg(feature = "store")]
pub mod store;
pub mod validator;
pub mod visualize;

pub use contracts::{
    Advisors, Budgets, Condition, NodeBehaviour, NodeContract, RetryOn, RetryPolicy,
    RoutingDecision, SliceDecl, SubgraphContract, SupervisorContract, Team, Trigger,
    WorkflowDocument,
};
pub use graph::{CompiledGraph, GraphBuilder, Registry};

/// The README's Rust examples, compiled and run as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The patterns guide's Rust examples (`docs/guides/patterns.md`), compiled and run as
/// doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/guides/patterns.md")]
struct PatternsDoctests;
