//! Slice declarations: the top-level keys of the workflow state.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The slice reserved for the runtime (call stack, decision trace, budgets, counters).
/// Nodes may read it but never write it.
pub const SYSTEM_SLICE: &str = "system";

/// The slice a clarification is written to: `{"question", "answer"}` when a paused run is
/// resumed, `{"question", "from"}` when a kept `chat` child is asked a follow-up. The
/// workflow declares it to use `ask_clarification` or `clarify`; the validator checks that
/// and the runtime writes it.
pub const CLARIFICATION_SLICE: &str = "clarification";

/// Declares one slice of the state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SliceDecl {
    /// Optional human description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Optional JSON Schema that values of this slice must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

impl SliceDecl {
    /// A slice with no schema.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the slice's JSON Schema.
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
}
