//! Handlers: node behaviours and supervisor policies written in Rust.
//!
//! A node handler gets a read-only view of its `reads` slices and returns its writes (a
//! plain [`Writes`] map, or a [`NodeOutput`] that also says what the step cost); a
//! policy handler gets the state visible at its level, its contract and the run context
//! and returns a [`SupervisorOutput`] (a typed [`RoutingDecision`](crate::RoutingDecision)
//! or a bare string). Async closures register directly:
//!
//! ```
//! use pactgraph::runtime::{HandlerError, NodeInput, PolicyInput};
//! use pactgraph::contracts::SupervisorOutput;
//! use serde_json::{Map, json};
//!
//! let node = |input: NodeInput| async move {
//!     let mut writes = Map::new();
//!     writes.insert("answer".into(), json!({"seen": input.view.len()}));
//!     Ok::<_, HandlerError>(writes)
//! };
//! let policy = |_input: PolicyInput| async move {
//!     Ok::<SupervisorOutput, HandlerError>("reply".into())
//! };
//! # let _ = (node, policy);
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::contracts::{SupervisorContract, SupervisorOutput};
#[cfg(doc)]
use crate::runtime::data::Writes;
use crate::runtime::data::{NodeOutput, RunId};

/// A boxed, sendable future (what handlers return).
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A handler failed; the run fails with `node_failed` and this message (or, once node
/// retries exist, the attempt is retried when [`HandlerError::is_retryable`] says it may
/// help).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct HandlerError {
    /// What went wrong, in plain words.
    pub message: String,
    retryable: bool,
    #[source]
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl HandlerError {
    /// An error with this message; retrying may help (a transient failure is the common
    /// case: a model or a service unavailable).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: true,
            source: None,
        }
    }

    /// An error with this message, caused by `source` (kept, and shown after the message).
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            message: message.into(),
            retryable: true,
            source: Some(Arc::new(source)),
        }
    }

    /// An error that no retry can mend (bad input, a refused request).
    pub fn permanent(mut self) -> Self {
        self.retryable = false;
        self
    }

    /// Whether trying again may help.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The message followed by the chain of causes (`message: cause: cause...`).
    pub fn describe(&self) -> String {
        let mut out = self.message.clone();
        let mut next = std::error::Error::source(self);
        while let Some(e) = next {
            let text = e.to_string();
            if !out.ends_with(&text) {
                out.push_str(": ");
                out.push_str(&text);
            }
            next = e.source();
        }
        out
    }
}

impl PartialEq for HandlerError {
    /// Errors compare by what they say: message, retryability and the cause's text.
    fn eq(&self, other: &Self) -> bool {
        self.retryable == other.retryable && self.describe() == other.describe()
    }
}

impl From<String> for HandlerError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for HandlerError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

impl From<serde_json::Error> for HandlerError {
    /// Bad JSON is not mended by retrying.
    fn from(e: serde_json::Error) -> Self {
        Self::with_source("invalid JSON", e).permanent()
    }
}

impl From<std::io::Error> for HandlerError {
    fn from(e: std::io::Error) -> Self {
        Self::with_source("I/O error", e)
    }
}

/// What a node handler is given.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInput {
    /// The node's id.
    pub node: String,
    /// Its `reads` slices present at its level (absent slices are left out).
    pub view: Map<String, Value>,
    /// Call depth (0 at the root).
    pub depth: u32,
    /// The subgraph the node runs in (`None` at the root).
    pub subgraph: Option<String>,
    /// Steps taken before this one: the step this call belongs to.
    pub step: u32,
    /// The run's id. With `step` and `attempt` it names this call: a handler with side
    /// effects can use the three to make a repeated call (an abandoned step driven again,
    /// a retry) idempotent.
    pub run_id: RunId,
    /// Which try of this step's call this is (1; retries will count up).
    pub attempt: u32,
    /// A router run again after an invalid `$route` (a new step, attempt 1 again): what
    /// was wrong with it (a program gets the same text as `error` on stdin). `None`
    /// otherwise.
    pub error: Option<String>,
}

/// Where a supervisor decides: the run context handed to policies.
#[derive(Debug, Clone, PartialEq)]
pub struct RunContext {
    /// The workflow's name.
    pub workflow: String,
    /// Steps taken so far.
    pub step: u32,
    /// Call depth (0 at the root).
    pub depth: u32,
    /// The subgraph of the current level (`None` at the root).
    pub subgraph: Option<String>,
    /// Subgraph ids of the open frames, outermost first.
    pub call_stack: Vec<String>,
}

/// What a policy handler is given.
#[derive(Debug, Clone)]
pub struct PolicyInput {
    /// The deciding supervisor's id.
    pub supervisor: String,
    /// The slices visible at this level (the whole state at the root, the child state in
    /// a subgraph).
    pub state: Map<String, Value>,
    /// The supervisor's contract (its `allow`, `fallback`, `default`, ...).
    pub contract: Arc<SupervisorContract>,
    /// Where the run stands.
    pub context: RunContext,
}

/// Runs a node registered from Rust. Implemented for async closures
/// `Fn(NodeInput) -> impl Future<Output = Result<O, HandlerError>>` where `O` is
/// [`Writes`] or [`NodeOutput`] (anything `Into<NodeOutput>`).
///
/// The output is read as an envelope (see [`NodeOutput`]): reserved `$` keys in the writes
/// are checked like a program's, and refused ones fail the step with `invalid_output`.
pub trait NodeHandler: Send + Sync + 'static {
    /// Runs the node on its input and returns its output.
    fn call(&self, input: NodeInput) -> BoxFuture<Result<NodeOutput, HandlerError>>;
}

impl<F, Fut, O> NodeHandler for F
where
    F: Fn(NodeInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, HandlerError>> + Send + 'static,
    O: Into<NodeOutput> + 'static,
{
    fn call(&self, input: NodeInput) -> BoxFuture<Result<NodeOutput, HandlerError>> {
        let fut = self(input);
        Box::pin(async move { fut.await.map(Into::into) })
    }
}

/// Decides for a supervisor whose `policy` is `{"handler": name}`. Implemented for async
/// closures `Fn(PolicyInput) -> impl Future<Output = Result<SupervisorOutput, HandlerError>>`.
pub trait PolicyHandler: Send + Sync + 'static {
    /// Decides what happens next.
    fn decide(&self, input: PolicyInput) -> BoxFuture<Result<SupervisorOutput, HandlerError>>;
}

impl<F, Fut> PolicyHandler for F
where
    F: Fn(PolicyInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<SupervisorOutput, HandlerError>> + Send + 'static,
{
    fn decide(&self, input: PolicyInput) -> BoxFuture<Result<SupervisorOutput, HandlerError>> {
        Box::pin(self(input))
    }
}

/// A node handler from a synchronous function (no `async` needed) returning [`Writes`]
/// or a [`NodeOutput`].
pub fn sync_node<F, O>(f: F) -> impl NodeHandler
where
    F: Fn(NodeInput) -> Result<O, HandlerError> + Send + Sync + 'static,
    O: Into<NodeOutput> + Send + 'static,
{
    let f = Arc::new(f);
    move |input: NodeInput| {
        let f = Arc::clone(&f);
        async move { f(input) }
    }
}

/// A policy handler from a synchronous function (no `async` needed).
pub fn sync_policy<F>(f: F) -> impl PolicyHandler
where
    F: Fn(PolicyInput) -> Result<SupervisorOutput, HandlerError> + Send + Sync + 'static,
{
    let f = Arc::new(f);
    move |input: PolicyInput| {
        let f = Arc::clone(&f);
        async move { f(input) }
    }
}

/// Shared handle to a node handler.
#[derive(Clone)]
pub(crate) struct SharedNode(pub(crate) Arc<dyn NodeHandler>);

/// Shared handle to a policy handler.
#[derive(Clone)]
pub(crate) struct SharedPolicy(pub(crate) Arc<dyn PolicyHandler>);

impl fmt::Debug for SharedNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeHandler")
    }
}

impl fmt::Debug for SharedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PolicyHandler")
    }
}
