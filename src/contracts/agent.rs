//! The `agent` behaviour (a model session, brief 10.2) and the `tool` field of tool nodes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::strings;

/// A model session: `"run": {"agent": {...}}` on a node, `"policy": {"agent": {...}}` on a
/// supervisor. The session ends only through its role's exit tool.
///
/// ```
/// use pactgraph::contracts::AgentSpec;
/// let a = AgentSpec::new()
///     .instructions("You triage requests for {{ request.product }}.")
///     .prompt("{{ request.text }}")
///     .tools(["lookup_order"])
///     .max_turns(8);
/// assert_eq!(a.model, "default");
/// assert_eq!(a.turns(), 8);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// The model: a key of the document's `models` (default `default`).
    #[serde(default = "default_model")]
    pub model: String,
    /// The system message: a MiniJinja template over the read view (each read slice by
    /// name, `input` for the whole view).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The first user message: a MiniJinja template like `instructions` (absent: the read
    /// view as indented JSON, after the tagged blocks of advisors and routers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Ids of tool nodes the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Most model calls of one session (absent: 10); the last one forces the exit tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

fn default_model() -> String {
    AgentSpec::DEFAULT_MODEL.to_string()
}

impl Default for AgentSpec {
    fn default() -> Self {
        Self {
            model: default_model(),
            instructions: None,
            prompt: None,
            tools: Vec::new(),
            max_turns: None,
        }
    }
}

impl AgentSpec {
    /// The model key used when `model` is not given.
    pub const DEFAULT_MODEL: &'static str = "default";
    /// The turn limit used when `max_turns` is not given.
    pub const DEFAULT_MAX_TURNS: u32 = 10;

    /// A session on the `default` model with default templates and no tools.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the model key.
    pub fn model(mut self, key: impl Into<String>) -> Self {
        self.model = key.into();
        self
    }
    /// Sets the `instructions` template.
    pub fn instructions(mut self, template: impl Into<String>) -> Self {
        self.instructions = Some(template.into());
        self
    }
    /// Sets the `prompt` template.
    pub fn prompt(mut self, template: impl Into<String>) -> Self {
        self.prompt = Some(template.into());
        self
    }
    /// Sets the tool nodes offered.
    pub fn tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ids: I) -> Self {
        self.tools = strings(ids);
        self
    }
    /// Sets the turn limit.
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = Some(n);
        self
    }
    /// The turn limit in effect (default [`Self::DEFAULT_MAX_TURNS`]).
    pub fn turns(&self) -> u32 {
        self.max_turns.unwrap_or(Self::DEFAULT_MAX_TURNS)
    }
}

/// Makes a node a tool an agent may call: `"tool": {"description": ..., "parameters": ...}`.
/// The node's `run` computes the result from the arguments; it writes no slices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = both_required)]
pub struct ToolSpec {
    /// What the tool does, told to the model (required: the validator reports it empty).
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments, an object schema (required: the validator reports
    /// it missing).
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub parameters: Value,
}

/// The schema of `tool` requires both fields (editors say so at once); loading takes a
/// missing one as empty so the validator can report it with its code and a fix.
fn both_required(schema: &mut schemars::Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for field in props.values_mut().filter_map(Value::as_object_mut) {
            field.remove("default");
        }
    }
    schema.insert(
        "required".into(),
        serde_json::json!(["description", "parameters"]),
    );
}

impl ToolSpec {
    /// A tool described by `description` taking arguments that fit `parameters`.
    pub fn new(description: impl Into<String>, parameters: Value) -> Self {
        Self {
            description: description.into(),
            parameters,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_round_trip() {
        let a: AgentSpec = serde_json::from_value(json!({})).expect("all optional");
        assert_eq!(a, AgentSpec::new());
        assert_eq!((a.model.as_str(), a.turns()), ("default", 10));
        assert_eq!(
            serde_json::to_value(&a).expect("serializes"),
            json!({"model": "default"})
        );
        let t: ToolSpec = serde_json::from_value(json!({"description": "d"})).expect("ok");
        assert_eq!(t.parameters, Value::Null);
        let e = serde_json::from_value::<AgentSpec>(json!({"turns": 3})).expect_err("unknown");
        assert!(e.to_string().contains("unknown field `turns`"), "{e}");
    }
}
