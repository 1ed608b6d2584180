//! `SubgraphContract`: a cluster a supervisor calls like a function.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Trigger, strings};

/// A cluster with an entrypoint supervisor, member supervisors, a read/write boundary
/// and optional input/output schemas.
///
/// ```
/// use pactgraph::SubgraphContract;
/// let fashion = SubgraphContract::new("fashion")
///     .entrypoint("fashion_supervisor")
///     .supervisors(["fashion_supervisor"])
///     .reads(["request"])
///     .writes(["fashion"]);
/// assert_eq!(fashion.entrypoint, "fashion_supervisor");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubgraphContract {
    /// The subgraph's id (the key under `subgraphs` in a document).
    #[serde(skip)]
    #[schemars(skip)]
    pub id: String,
    /// Human description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The supervisor that starts the subgraph.
    pub entrypoint: String,
    /// Member supervisors (the entrypoint among them).
    #[serde(default)]
    pub supervisors: Vec<String>,
    /// Slices the subgraph may see.
    #[serde(default)]
    pub reads: Vec<String>,
    /// Slices the subgraph may change (committed to the caller on return).
    #[serde(default)]
    pub writes: Vec<String>,
    /// When the subgraph wants to be called (rule-based callers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Trigger>,
    /// JSON Schema of the input (the `reads` slices as an object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema of the output returned by `stop_local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Slice of the caller that receives the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_slice: Option<String>,
    /// Nodes after which the subgraph returns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exitpoints: Vec<String>,
    /// How many times this subgraph may be entered in one run (default: the run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reentry: Option<u32>,
    /// Whether the subgraph's final child state is kept at the calling level when it
    /// returns, so that the caller's supervisor may `clarify` it (a later call replaces it;
    /// it is dropped when the calling level ends).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub chat: bool,
}

impl SubgraphContract {
    /// A subgraph with this id and nothing else declared.
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
    /// Sets the entrypoint supervisor (and makes it a member if it is not one yet).
    pub fn entrypoint(mut self, supervisor: impl Into<String>) -> Self {
        let s = supervisor.into();
        if !self.supervisors.contains(&s) {
            self.supervisors.insert(0, s.clone());
        }
        self.entrypoint = s;
        self
    }
    /// Sets the member supervisors.
    pub fn supervisors<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ids: I) -> Self {
        self.supervisors = strings(ids);
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
    /// Sets the result slice.
    pub fn result_slice(mut self, slice: impl Into<String>) -> Self {
        self.result_slice = Some(slice.into());
        self
    }
    /// Sets the exitpoints.
    pub fn exitpoints<I: IntoIterator<Item = S>, S: Into<String>>(mut self, nodes: I) -> Self {
        self.exitpoints = strings(nodes);
        self
    }
    /// Sets `chat` (the child state is kept on return, for `clarify`).
    pub fn chat(mut self, chat: bool) -> Self {
        self.chat = chat;
        self
    }
    /// Sets `max_reentry`.
    pub fn max_reentry(mut self, n: u32) -> Self {
        self.max_reentry = Some(n);
        self
    }
    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
}
