//! Helpers shared by the integration tests, one submodule per family. A test file says
//! `mod support;` and uses the submodule it needs.
//!
//! * [`cli`]: the `pactgraph` binary against a real SQLite store in a temp folder, and a
//!   workflow of Python `exec` steps that logs every call, for the run store's CLI and
//!   crash tests.
//! * [`crash`]: SIGKILL at random points of runs of the `pactgraph` binary, their
//!   uninterrupted references, and the checks that a resumed run ended as they did.
//! * [`packed`]: packed event chunks written and read back, the same scenario on both
//!   stores.
//! * [`random_workflow`]: random valid workflows with random rule outcomes and their
//!   inputs, for the runtime's and the run store's property tests.
//! * [`router`]: a workflow whose router picks among two nodes and a subgraph, a scripted
//!   router handler, and readers of its dispatches and chain stages, for the router tests.
//! * [`stores`]: both run stores (SQLite, and PostgreSQL at `PG_URL`) for the store tests.
//! * [`runtime`]: compiling workflows, building executors and reading runs, for the
//!   runtime tests.
//! * [`valid_workflow`]: a generator of valid workflows, for the validator's property
//!   tests (and, by path, its benchmark).
//! * [`visualize`]: workflows, hand-made traces and parse-back of DOT and Mermaid, for the
//!   visualization tests.
#![allow(dead_code)]

#[cfg(feature = "store")]
pub mod cli;
#[cfg(feature = "store")]
pub mod crash;
#[cfg(feature = "store")]
pub mod packed;
pub mod random_workflow;
pub mod router;
pub mod runtime;
#[cfg(feature = "store")]
pub mod stores;
pub mod valid_workflow;
pub mod visualize;
