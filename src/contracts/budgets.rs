//! Run budgets: the guards that bound every run.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Per-run budgets, checked before every step across all depths.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Deepest subgraph nesting allowed (the root is depth 0).
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
    /// Most steps (node executions plus subgraph entries) in one run.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// How many times one subgraph may be entered in one run (subgraphs may override).
    #[serde(default = "default_max_reentry")]
    pub max_reentry: u32,
    /// Wall-clock deadline for the whole run, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Default time limit for one node or supervisor policy call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_timeout_ms: Option<u64>,
    /// Most tokens (the `input_tokens` plus `output_tokens` the nodes report in `$usage`)
    /// the whole run may use; checked before every step (`budget_exceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Most money (the `cost_usd` the nodes report in `$usage`) the whole run may spend;
    /// checked before every step (`budget_exceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

fn default_max_depth() -> u32 {
    Budgets::DEFAULT_MAX_DEPTH
}
fn default_max_steps() -> u32 {
    Budgets::DEFAULT_MAX_STEPS
}
fn default_max_reentry() -> u32 {
    Budgets::DEFAULT_MAX_REENTRY
}

impl Budgets {
    /// Default `max_depth`.
    pub const DEFAULT_MAX_DEPTH: u32 = 2;
    /// Default `max_steps`.
    pub const DEFAULT_MAX_STEPS: u32 = 40;
    /// Default `max_reentry`.
    pub const DEFAULT_MAX_REENTRY: u32 = 2;

    /// Sets `max_depth`.
    pub fn max_depth(mut self, n: u32) -> Self {
        self.max_depth = n;
        self
    }
    /// Sets `max_steps`.
    pub fn max_steps(mut self, n: u32) -> Self {
        self.max_steps = n;
        self
    }
    /// Sets `max_reentry`.
    pub fn max_reentry(mut self, n: u32) -> Self {
        self.max_reentry = n;
        self
    }
    /// Sets the run deadline.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }
    /// Sets the default per-node time limit.
    pub fn node_timeout_ms(mut self, ms: u64) -> Self {
        self.node_timeout_ms = Some(ms);
        self
    }
    /// Sets the run's token budget (`input_tokens` plus `output_tokens`).
    pub fn max_tokens(mut self, tokens: u64) -> Self {
        self.max_tokens = Some(tokens);
        self
    }
    /// Sets the run's cost budget, in US dollars (`cost_usd`).
    pub fn max_cost_usd(mut self, usd: f64) -> Self {
        self.max_cost_usd = Some(usd);
        self
    }
    /// True when a usage budget (`max_tokens` or `max_cost_usd`) is set.
    #[inline]
    pub fn limits_usage(&self) -> bool {
        self.max_tokens.is_some() || self.max_cost_usd.is_some()
    }
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_depth: Self::DEFAULT_MAX_DEPTH,
            max_steps: Self::DEFAULT_MAX_STEPS,
            max_reentry: Self::DEFAULT_MAX_REENTRY,
            timeout_ms: None,
            node_timeout_ms: None,
            max_tokens: None,
            max_cost_usd: None,
        }
    }
}

impl Budgets {
    /// True when every field has its default value (used to keep documents short).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}
