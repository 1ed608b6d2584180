//! `Advisors`: nodes that advise a primary node, run concurrently before it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A node's `advisors` field: before the node (the primary) runs, every member runs
/// concurrently on its own `reads` view; their outputs are not applied but collected as
/// reports into `slice`, which the primary reads (brief §5.4).
///
/// ```
/// use pactgraph::{Advisors, NodeContract};
/// let n = NodeContract::new("decide")
///     .reads(["request", "advice"])
///     .advisors(Advisors::new(["legal", "finance"], "advice").timeout_ms(5_000));
/// assert_eq!(n.advisors.map(|a| a.members.len()), Some(2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Advisors {
    /// The advising nodes, in the order their reports appear.
    pub members: Vec<String>,
    /// The slice the engine writes the reports to (declared, and read by the primary).
    pub slice: String,
    /// Bounds every member's time (and so the whole join): a member's limit is the
    /// smaller of its own and this (else `node_timeout_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl Advisors {
    /// `members` reporting to `slice`.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(
        members: I,
        slice: impl Into<String>,
    ) -> Self {
        Self {
            members: members.into_iter().map(Into::into).collect(),
            slice: slice.into(),
            timeout_ms: None,
        }
    }

    /// Sets the bound on every member's time.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }
}
