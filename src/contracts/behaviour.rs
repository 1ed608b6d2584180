//! How a node runs (`set`, `exec`, `handler`, `agent`) and how a supervisor decides
//! (`policy`).

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AgentSpec;

/// Runs an external program (no shell): the program reads one JSON object on stdin and
/// prints one JSON object on stdout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecSpec {
    /// The program and its arguments. A relative `argv[0]` containing a `/` is resolved
    /// against the workflow file's folder; a bare name is looked up on `PATH`.
    pub argv: Vec<String>,
    /// Kill the program after this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub env: IndexMap<String, String>,
    /// Working directory (default: the workflow file's folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl ExecSpec {
    /// An exec spec for `argv`.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            argv: super::strings(argv),
            ..Self::default()
        }
    }

    /// Sets the time limit.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the working directory.
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
}

/// What a node does when it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum NodeBehaviour {
    /// Writes constant JSON: `{"set": {slice: value}}`.
    Set(IndexMap<String, Value>),
    /// Runs a program: `{"exec": {...}}`.
    Exec(ExecSpec),
    /// Calls a handler registered from Rust: `{"handler": "name"}`.
    Handler(String),
    /// Runs a model session: `{"agent": {...}}`.
    Agent(AgentSpec),
}

impl NodeBehaviour {
    /// `{"set": {...}}` from `(slice, value)` pairs.
    pub fn set<I, K>(writes: I) -> Self
    where
        I: IntoIterator<Item = (K, Value)>,
        K: Into<String>,
    {
        NodeBehaviour::Set(writes.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// `{"handler": name}`.
    pub fn handler(name: impl Into<String>) -> Self {
        NodeBehaviour::Handler(name.into())
    }

    /// `{"agent": {...}}`.
    pub fn agent(spec: AgentSpec) -> Self {
        NodeBehaviour::Agent(spec)
    }

    /// The agent session, when the node runs one.
    pub fn as_agent(&self) -> Option<&AgentSpec> {
        match self {
            NodeBehaviour::Agent(spec) => Some(spec),
            _ => None,
        }
    }
}

/// How a supervisor decides, when it is not rule-based.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SupervisorPolicy {
    /// A program that prints one routing decision (typed or a bare string).
    Exec(ExecSpec),
    /// A policy registered from Rust under this name.
    Handler(String),
    /// A model session that decides through its `route` exit tool: `{"agent": {...}}`.
    Agent(AgentSpec),
}

impl SupervisorPolicy {
    /// The agent session, when the policy is one.
    pub fn as_agent(&self) -> Option<&AgentSpec> {
        match self {
            SupervisorPolicy::Agent(spec) => Some(spec),
            _ => None,
        }
    }
}
