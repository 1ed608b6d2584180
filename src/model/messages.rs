//! The conversation of a model session, in the Chat Completions wire format.
//!
//! [`ChatMessage`] serialises exactly as the OpenAI-compatible Chat Completions API sends
//! and receives messages, so a run's stored session is the wire conversation:
//!
//! ```
//! use pactgraph::model::{ChatMessage, ToolCall};
//! use serde_json::json;
//!
//! let call = ToolCall::new("call_1", "final_report", r#"{"answer":"42"}"#);
//! let msg = ChatMessage::assistant(None, vec![call]);
//! assert_eq!(serde_json::to_value(&msg).unwrap(), json!({
//!     "role": "assistant", "content": null,
//!     "tool_calls": [{"id": "call_1", "type": "function",
//!                     "function": {"name": "final_report", "arguments": "{\"answer\":\"42\"}"}}]
//! }));
//! let back: ChatMessage = serde_json::from_value(serde_json::to_value(&msg).unwrap()).unwrap();
//! assert_eq!(back, msg);
//! ```

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Who speaks a [`ChatMessage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The instructions (the first message of a session).
    System,
    /// The user (the prompt, a clarification, a team inbox).
    User,
    /// The model.
    Assistant,
    /// A tool's result, answering one of the model's tool calls.
    Tool,
}

impl Role {
    /// The wire name: `system`, `user`, `assistant` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of a conversation.
///
/// Wire form: `{"role", "content"}`, plus `"tool_calls"` on an assistant message that
/// calls tools (omitted when there are none) and `"tool_call_id"` on a tool message.
/// `content` is `null` when absent (an assistant message with only tool calls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// The text; `None` for an assistant message that only calls tools.
    pub content: Option<String>,
    /// The tool calls of an assistant message (empty otherwise).
    pub tool_calls: Vec<ToolCall>,
    /// On a tool message, the id of the call it answers.
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A system message (the instructions).
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content.into())
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content.into())
    }

    /// An assistant message with optional text and its tool calls.
    pub fn assistant(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content,
            tool_calls,
            tool_call_id: None,
        }
    }

    /// A tool message: the result of the call `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(tool_call_id.into()),
        }
    }

    fn plain(role: Role, content: String) -> Self {
        Self {
            role,
            content: Some(content),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// The message as its wire JSON object.
    pub fn to_wire(&self) -> Value {
        let mut m = Map::new();
        m.insert("role".into(), Value::from(self.role.as_str()));
        m.insert(
            "content".into(),
            self.content.clone().map_or(Value::Null, Value::String),
        );
        if !self.tool_calls.is_empty() {
            m.insert(
                "tool_calls".into(),
                Value::Array(self.tool_calls.iter().map(ToolCall::to_wire).collect()),
            );
        }
        if let Some(id) = &self.tool_call_id {
            m.insert("tool_call_id".into(), Value::from(id.as_str()));
        }
        Value::Object(m)
    }

    /// Reads a message from its wire JSON. `content` may be a string, `null`, absent, or a
    /// list of content parts (their `text` parts are joined); a tool call's `arguments` may
    /// be a string or (as some servers send) a JSON value, kept as its JSON text.
    pub fn from_wire(v: &Value) -> Result<Self, String> {
        let obj = v.as_object().ok_or("a message must be a JSON object")?;
        let role: Role = serde_json::from_value(obj.get("role").cloned().unwrap_or(Value::Null))
            .map_err(|_| {
                "`role` must be one of \"system\", \"user\", \"assistant\", \"tool\"".to_string()
            })?;
        let content = match obj.get("content") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(parts)) => Some(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(""),
            ),
            Some(_) => return Err("`content` must be a string, null or a list of parts".into()),
        };
        let tool_calls = match obj.get("tool_calls") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(calls)) => calls
                .iter()
                .enumerate()
                .map(|(i, c)| ToolCall::from_wire(c, i))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("`tool_calls` must be a list".into()),
        };
        let tool_call_id = match obj.get("tool_call_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("`tool_call_id` must be a string".into()),
        };
        Ok(Self {
            role,
            content,
            tool_calls,
            tool_call_id,
        })
    }
}

impl Serialize for ChatMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ChatMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Self::from_wire(&v).map_err(D::Error::custom)
    }
}

/// One tool call of an assistant message. Wire form:
/// `{"id", "type": "function", "function": {"name", "arguments"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id, echoed by the tool message that answers it.
    pub id: String,
    /// The tool's (function's) name.
    pub name: String,
    /// The arguments exactly as the model sent them: a string that should, but need not,
    /// hold JSON.
    pub arguments: String,
}

impl ToolCall {
    /// A tool call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    /// The call as its wire JSON object.
    pub fn to_wire(&self) -> Value {
        serde_json::json!({
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        })
    }

    /// Reads a call from its wire JSON; `index` names a call without an `id`
    /// (`call_INDEX`), as some servers send.
    pub fn from_wire(v: &Value, index: usize) -> Result<Self, String> {
        let f = v
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| format!("tool call {index}: no `function` object"))?;
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("tool call {index}: no `function.name`"))?;
        let arguments = match f.get("arguments") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let id = match v.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => format!("call_{index}"),
        };
        Ok(Self {
            id,
            name: name.to_string(),
            arguments,
        })
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Self::from_wire(&v, 0).map_err(D::Error::custom)
    }
}

/// A tool offered to the model. Wire form:
/// `{"type": "function", "function": {"name", "description", "parameters", "strict"}}`
/// (`strict` sent only when true, for servers that refuse unknown fields).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// The function's name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The arguments' JSON Schema.
    pub parameters: Value,
    /// Ask the server for strict mode (arguments guaranteed to fit `parameters`).
    pub strict: bool,
}

impl ToolDef {
    /// The tool as its wire JSON object.
    pub fn to_wire(&self) -> Value {
        let mut f = Map::new();
        f.insert("name".into(), Value::from(self.name.as_str()));
        f.insert("description".into(), Value::from(self.description.as_str()));
        f.insert("parameters".into(), self.parameters.clone());
        if self.strict {
            f.insert("strict".into(), Value::Bool(true));
        }
        serde_json::json!({"type": "function", "function": f})
    }
}

impl Serialize for ToolDef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let f = v
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| D::Error::custom("a tool needs a `function` object"))?;
        Ok(Self {
            name: f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| D::Error::custom("a tool needs `function.name`"))?
                .to_string(),
            description: f
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            parameters: f.get("parameters").cloned().unwrap_or(Value::Null),
            strict: f.get("strict").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

/// Which tool the model must call. Wire form: `"auto"`, `"required"`, or
/// `{"type": "function", "function": {"name"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model chooses (text or any tool).
    Auto,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Function(String),
}

impl ToolChoice {
    /// The choice as its wire JSON.
    pub fn to_wire(&self) -> Value {
        match self {
            ToolChoice::Auto => Value::from("auto"),
            ToolChoice::Required => Value::from("required"),
            ToolChoice::Function(name) => {
                serde_json::json!({"type": "function", "function": {"name": name}})
            }
        }
    }
}

impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match &v {
            Value::String(s) if s == "auto" => Ok(ToolChoice::Auto),
            Value::String(s) if s == "required" => Ok(ToolChoice::Required),
            _ => v
                .pointer("/function/name")
                .and_then(Value::as_str)
                .map(|n| ToolChoice::Function(n.to_string()))
                .ok_or_else(|| {
                    D::Error::custom(
                        "tool_choice must be \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}",
                    )
                }),
        }
    }
}

/// The tokens one model response used, as the server reported them
/// (`usage.prompt_tokens`, `usage.completion_tokens`,
/// `usage.prompt_tokens_details.cached_tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from the server's cache, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

impl Usage {
    /// Reads the wire `usage` object; `None` when absent, `null`, or without token counts.
    pub fn from_wire(v: Option<&Value>) -> Option<Self> {
        let v = v?.as_object()?;
        let input = v.get("prompt_tokens").and_then(Value::as_u64);
        let output = v.get("completion_tokens").and_then(Value::as_u64);
        if input.is_none() && output.is_none() {
            return None;
        }
        Some(Self {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            cached_input_tokens: v
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens"))
                .and_then(Value::as_u64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_round_trip_in_the_wire_format() {
        let msgs = vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("hi"),
            ChatMessage::assistant(Some("ok".into()), vec![]),
            ChatMessage::assistant(None, vec![ToolCall::new("c1", "f", "{}")]),
            ChatMessage::tool("c1", "{\"ok\":true}"),
        ];
        let wire = serde_json::to_value(&msgs).expect("serialises");
        assert_eq!(
            wire,
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "ok"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "content": "{\"ok\":true}", "tool_call_id": "c1"}
            ])
        );
        let back: Vec<ChatMessage> = serde_json::from_value(wire).expect("parses");
        assert_eq!(back, msgs);
    }

    #[test]
    fn lenient_reading_of_what_servers_send() {
        let m = ChatMessage::from_wire(&json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]
        }))
        .expect("reads");
        assert_eq!(m.content.as_deref(), Some("ab"));
        assert_eq!(
            m.tool_calls,
            vec![ToolCall::new("call_0", "f", "{\"x\":1}")]
        );
        let e = ChatMessage::from_wire(&json!({"role": "robot"})).expect_err("bad role");
        assert!(e.contains("role"), "{e}");
    }

    #[test]
    fn tools_choices_and_usage() {
        let t = ToolDef {
            name: "final_report".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
            strict: true,
        };
        let w = serde_json::to_value(&t).expect("serialises");
        assert_eq!(w["function"]["strict"], json!(true));
        assert_eq!(serde_json::from_value::<ToolDef>(w).expect("parses"), t);
        for c in [
            ToolChoice::Auto,
            ToolChoice::Required,
            ToolChoice::Function("route".into()),
        ] {
            let w = serde_json::to_value(&c).expect("serialises");
            assert_eq!(serde_json::from_value::<ToolChoice>(w).expect("parses"), c);
        }
        let u = Usage::from_wire(Some(&json!({"prompt_tokens": 10, "completion_tokens": 2,
            "prompt_tokens_details": {"cached_tokens": 4}})));
        assert_eq!(
            u,
            Some(Usage {
                input_tokens: 10,
                output_tokens: 2,
                cached_input_tokens: Some(4)
            })
        );
        assert_eq!(Usage::from_wire(Some(&Value::Null)), None);
        assert_eq!(Usage::from_wire(None), None);
    }
}
