//! `pactgraph serve`: the HTTP API over one run store (feature `serve`). Workflows come
//! from a folder (`--workflows`), runs from the store; with workers the server also runs
//! queued runs, as `pactgraph worker` does. See `docs/spec/http-api.md`.
//!
//! It sits between the store and the command line: it reads runs through
//! [`crate::store`] and draws graphs with [`crate::visualize`]; the `pactgraph` binary
//! starts it. The JSON views of runs ([`views`]) and the resume decision ([`resume`]) are
//! shared with the `runs` commands.

mod app;
mod auth;
mod body;
mod catalog;
mod error;
mod feed;
mod metrics;
pub mod resume;
mod routes;
mod server;
mod state;
mod trace_values;
mod ui;
pub mod views;

use std::sync::Arc;

use crate::runtime::Executor;
use crate::store::StoredRun;

pub use error::ApiError;
pub use resume::{ResumeRefused, plan_resume};
pub use server::{ServeError, ServeOptions, ServeSummary, serve};
pub use trace_values::trace_with_values;

/// Builds the executor of a stored run (its document, its base folder, a clock): what
/// the server's workers and the runs resumed through the API are driven with.
pub type ExecutorFor = Arc<dyn Fn(&StoredRun) -> Result<Executor, String> + Send + Sync>;
