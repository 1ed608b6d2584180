//! `SupervisorContract`: who decides what runs next at one level.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AgentSpec, RoutingDecision, SupervisorPolicy, strings};

/// Decides what happens next at one level of the graph, choosing only from `allow`.
///
/// ```
/// use pactgraph::{RoutingDecision, SupervisorContract};
/// let domain = SupervisorContract::new("domain_supervisor")
///     .allow(["fashion", "reply"])
///     .fallback("reply")
///     .default_decision(RoutingDecision::stop_global("nothing to do"));
/// assert_eq!(domain.allow.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SupervisorContract {
    /// The supervisor's id (the key under `supervisors` in a document).
    #[serde(skip)]
    #[schemars(skip)]
    pub id: String,
    /// Human description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Node and subgraph ids this supervisor may choose, in priority-tie order.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Node to route to on `fallback` or an allowlist violation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Decision when no trigger matches (absent: `stop_local`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<RoutingDecision>,
    /// A program or registered handler that decides; absent means rule-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SupervisorPolicy>,
    /// Whether a child's `stop_local` with `should_end: true` ends the run.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub honor_should_end: bool,
}

fn yes() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}

impl Default for SupervisorContract {
    fn default() -> Self {
        Self {
            id: String::new(),
            description: None,
            allow: Vec::new(),
            fallback: None,
            default: None,
            policy: None,
            honor_should_end: true,
        }
    }
}

impl SupervisorContract {
    /// A rule-based supervisor with this id and an empty allowlist.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }
    /// Returns the contract with its id set.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }
    /// Sets the allowlist.
    pub fn allow<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ids: I) -> Self {
        self.allow = strings(ids);
        self
    }
    /// Sets the fallback node.
    pub fn fallback(mut self, node: impl Into<String>) -> Self {
        self.fallback = Some(node.into());
        self
    }
    /// Sets the decision taken when no trigger matches.
    pub fn default_decision(mut self, decision: RoutingDecision) -> Self {
        self.default = Some(decision);
        self
    }
    /// Sets the policy (otherwise rule-based).
    pub fn policy(mut self, policy: SupervisorPolicy) -> Self {
        self.policy = Some(policy);
        self
    }
    /// Decides with the handler registered under `name`.
    pub fn handler(self, name: impl Into<String>) -> Self {
        self.policy(SupervisorPolicy::Handler(name.into()))
    }
    /// Decides with a model session (its exit tool is `route`).
    pub fn agent(self, spec: AgentSpec) -> Self {
        self.policy(SupervisorPolicy::Agent(spec))
    }
    /// Sets `honor_should_end`.
    pub fn honor_should_end(mut self, honor: bool) -> Self {
        self.honor_should_end = honor;
        self
    }
    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
    /// True when the supervisor decides by its triggers (no `policy`).
    pub fn is_rule_based(&self) -> bool {
        self.policy.is_none()
    }
}
