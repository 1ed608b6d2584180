//! # pactgraph
//!
//! A Rust engine for declarative agent workflows. A workflow is a set of contracts
//! ([`contracts::NodeContract`], [`contracts::SupervisorContract`],
//! [`contracts::SubgraphContract`]) written in Rust or in a JSON/YAML
//! [`contracts::WorkflowDocument`]. The [`graph::GraphBuilder`] compiles them into a
//! clustered [`graph::CompiledGraph`]; the [`validator`] proves the contracts hold before
//! anything runs; the [`runtime`] executes routing decisions with budgets, a call stack and
//! a decision trace; [`visualize`] exports the graph; the `store` module (feature `store`)
//! keeps runs durably in SQLite or PostgreSQL.
//!
//! [`prelude`] holds the names needed to define, validate, run and store a workflow:
//!
//! ```
//! use pactgraph::prelude::*;
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Define: a document (or the same contracts built in Rust with `GraphBuilder::new`).
//! let doc = WorkflowDocument::from_value(json!({
//!     "workflow": "hello",
//!     "slices": {"request": {}, "answer": {}},
//!     "entry": "desk",
//!     "supervisors": {"desk": {"allow": ["reply"]}},
//!     "nodes": {"reply": {"supervisor": "desk", "reads": ["request"], "writes": ["answer"],
//!         "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}],
//!         "run": {"set": {"answer": {"text": "hello"}}}, "terminal": true}}
//! }))?;
//! // Validate: only a graph the validator accepted runs (a refused one returns the report).
//! let graph = ValidGraph::new(GraphBuilder::from_document(doc).build()?)?;
//! let executor = Executor::builder(graph).build()?;
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//!
//! // Run in memory.
//! let outcome = rt.block_on(executor.run(executor.start(json!({"request": {}}))?));
//! assert_eq!(outcome.status, RunStatus::Completed);
//! assert_eq!(outcome.state["answer"], json!({"text": "hello"}));
//!
//! // Run durably (the `store` feature): the run is created in a SQLite store, then driven
//! // with its steps committed there (pure steps in batches, a step with an effect before
//! // the next effect starts); a killed process resumes it with `drive` again.
//! # #[cfg(feature = "store")] {
//! let dir = tempfile::tempdir()?;
//! let url = format!("sqlite:{}", dir.path().join("runs.db").display());
//! let store = rt.block_on(SqliteStore::open(&url))?;
//! let record = executor.record(executor.start(json!({"request": {}}))?);
//! rt.block_on(store.create(&record, &CreateOptions::default()))?;
//! let options = DriveOptions::default();
//! let run = rt.block_on(drive(&executor, &store, record.run_id, "example", &options, Continue::AsStored))?;
//! assert_eq!(run.status(), RunStatus::Completed);
//! assert_eq!(run.state()["answer"], json!({"text": "hello"}));
//! # }
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod contracts;
pub mod graph;
pub mod model;
pub mod runtime;
#[cfg(feature = "serve")]
pub mod serve;
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

/// The names needed to define, validate, run and store a workflow:
/// `use pactgraph::prelude::*;`.
pub mod prelude {
    pub use crate::contracts::{NodeContract, SupervisorContract, WorkflowDocument};
    pub use crate::graph::GraphBuilder;
    pub use crate::runtime::{Executor, RunOutcome, RunState, RunStatus};
    #[cfg(feature = "store")]
    pub use crate::store::{Continue, CreateOptions, DriveOptions, RunStore, SqliteStore, drive};
    pub use crate::validator::ValidGraph;
}

/// The README's Rust examples, compiled and run as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The getting-started guide's Rust examples (`docs/guides/getting-started.md`, moved there
/// from the README), compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/guides/getting-started.md")]
struct GettingStartedDoctests;

/// The patterns guide's Rust examples (`docs/guides/patterns.md`), compiled and run as
/// doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/guides/patterns.md")]
struct PatternsDoctests;
