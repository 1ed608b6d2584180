//! `NodeContract`: a unit of work.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Advisors, NodeBehaviour, RetryPolicy, RouterSpec, Team, ToolSpec, Trigger, strings};

/// A unit of work: the slices it reads and writes, the supervisor that owns it, when it
/// wants to run, and how it runs.
///
/// ```
/// use pactgraph::NodeContract;
/// let trend = NodeContract::new("trend")
///     .supervisor("fashion_supervisor")
///     .reads(["request"])
///     .writes(["fashion"]);
/// assert_eq!(trend.writes, ["fashion"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeContract {
    /// The node's id (the key under `nodes` in a document).
    #[serde(skip)]
    #[schemars(skip)]
    pub id: String,
    /// Human description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The supervisor that owns this node (control returns to it).
    pub supervisor: String,
    /// Slices the node may see.
    #[serde(default)]
    pub reads: Vec<String>,
    /// Slices the node may change.
    #[serde(default)]
    pub writes: Vec<String>,
    /// When the node wants to run (rule-based supervisors).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Trigger>,
    /// How the node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<NodeBehaviour>,
    /// A terminal node ends its level after it runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminal: bool,
    /// The node that always runs next (a deterministic handoff chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<String>,
    /// Most times this node may run in one run (`cycle_detected` past it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_visits: Option<u32>,
    /// JSON Schema of the node's input (its `reads` slices as an object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema of the node's output (its `writes` slices as an object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// How a failed run of the node is tried again (none by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// Nodes run concurrently before this one, their outputs collected as advice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advisors: Option<Advisors>,
    /// Makes the node a router: it names its successor in `$route`, among
    /// `router.destinations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<RouterSpec>,
    /// Makes the node a team: running it runs `team.members` in cycles and `team.lead`,
    /// whose final writes are the node's (a team node has no `run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<Team>,
    /// Makes the node a tool agents may call (listed in an agent's `tools`): its `run`
    /// computes the tool's result from the arguments; it writes no slices and is never
    /// dispatched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolSpec>,
}

impl NodeContract {
    /// A node with this id and nothing else declared.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }
    /// Returns the contract with its id set (documents key contracts by id).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }
    /// Sets the owning supervisor.
    pub fn supervisor(mut self, id: impl Into<String>) -> Self {
        self.supervisor = id.into();
        self
    }
    /// Sets the slices read.
    pub fn reads<I: IntoIterator<Item = S>, S: Into<String>>(mut self, slices: I) -> Self {
        self.reads = strings(slices);
        self
    }
    /// Sets the slices written.
    pub fn writes<I: IntoIterator<Item = S>, S: Into<String>>(mut self, slices: I) -> Self {
        self.writes = strings(slices);
        self
    }
    /// Adds a trigger.
    pub fn trigger(mut self, trigger: Trigger) -> Self {
        self.triggers.push(trigger);
        self
    }
    /// Sets the behaviour.
    pub fn run(mut self, behaviour: NodeBehaviour) -> Self {
        self.run = Some(behaviour);
        self
    }
    /// Marks the node terminal.
    pub fn terminal(mut self, terminal: bool) -> Self {
        self.terminal = terminal;
        self
    }
    /// Sets the handoff target.
    pub fn handoff(mut self, node: impl Into<String>) -> Self {
        self.handoff = Some(node.into());
        self
    }
    /// Sets `max_visits`.
    pub fn max_visits(mut self, n: u32) -> Self {
        self.max_visits = Some(n);
        self
    }
    /// Sets the input schema.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }
    /// Sets the output schema.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }
    /// Sets the retry policy.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }
    /// Sets the advisors.
    pub fn advisors(mut self, advisors: Advisors) -> Self {
        self.advisors = Some(advisors);
        self
    }
    /// Makes the node a router.
    pub fn router(mut self, spec: RouterSpec) -> Self {
        self.router = Some(spec);
        self
    }
    /// Makes the node a team.
    pub fn team(mut self, team: Team) -> Self {
        self.team = Some(team);
        self
    }
    /// Makes the node a tool.
    pub fn tool(mut self, spec: ToolSpec) -> Self {
        self.tool = Some(spec);
        self
    }
    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
}
