//! `RouterSpec`: the `router` field of a node.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::strings;

/// Makes a node a router: after it runs (its writes applied), it must name one of
/// `destinations` in `$route`, and that destination runs next (a node as a chain stage, a
/// subgraph as a call from the router's level).
///
/// ```
/// use pactgraph::contracts::RouterSpec;
/// let spec = RouterSpec::new(["billing", "tech"]).message_slice("note").retries(2);
/// assert_eq!(spec.destinations, ["billing", "tech"]);
/// assert!(!spec.may_answer);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterSpec {
    /// The ids (nodes and subgraphs) the router may name in `$route`.
    pub destinations: Vec<String>,
    /// The slice `$message` is written to, as `{"router": id, "message": text}`, before
    /// the destination runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_slice: Option<String>,
    /// Whether `$route: null` (or no `$route`) is allowed: the router then ends its level
    /// like a terminal node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_answer: bool,
    /// How many more times the router runs when its route is invalid (each a step, with
    /// the problem on stdin as `error`) before the run fails with `invalid_route`.
    #[serde(default = "default_retries")]
    pub retries: u32,
}

fn default_retries() -> u32 {
    1
}

impl Default for RouterSpec {
    fn default() -> Self {
        Self {
            destinations: Vec::new(),
            message_slice: None,
            may_answer: false,
            retries: default_retries(),
        }
    }
}

impl RouterSpec {
    /// A router choosing among `destinations` (no message slice, may not answer, one
    /// retry).
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(destinations: I) -> Self {
        Self {
            destinations: strings(destinations),
            ..Self::default()
        }
    }
    /// Sets the slice `$message` goes to.
    pub fn message_slice(mut self, slice: impl Into<String>) -> Self {
        self.message_slice = Some(slice.into());
        self
    }
    /// Sets whether the router may answer itself (`$route: null`).
    pub fn may_answer(mut self, may: bool) -> Self {
        self.may_answer = may;
        self
    }
    /// Sets how many more times an invalid route is retried.
    pub fn retries(mut self, n: u32) -> Self {
        self.retries = n;
        self
    }
    /// True when `id` is one of the destinations.
    pub fn allows(&self, id: &str) -> bool {
        self.destinations.iter().any(|d| d == id)
    }
}
