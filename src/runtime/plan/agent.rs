//! Agent nodes, resolved once: the model client, the templates, the exit tool
//! (`final_report`, one property per written slice) and the tool nodes offered, each with
//! its function definition and compiled argument schema (brief 10.2).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::tables::Schema;
use crate::contracts::{AgentSpec, Price};
use crate::model::ToolDef;
#[cfg(feature = "agents")]
use crate::model::client::ChatClient;

/// The exit tool of a node that writes slices.
pub(crate) const FINAL_REPORT: &str = "final_report";

/// The property of an advisor's `final_report` when the advisor writes no slice: its
/// report's text.
pub(crate) const ADVISOR_REPORT: &str = "report";

/// The exit tool of a team member, and the lead's tool to start another cycle.
pub(crate) const TEAM_BROADCAST: &str = "team_broadcast";

/// The exit tool of a router.
pub(crate) const HANDOFF_TO: &str = "handoff_to";

/// The exit tool of a supervisor policy.
pub(crate) const ROUTE: &str = "route";

/// The `route` decisions besides the `allow` ids.
pub(crate) const STOP_LOCAL: &str = "stop_local";
/// See [`STOP_LOCAL`].
pub(crate) const STOP_GLOBAL: &str = "stop_global";
/// See [`STOP_LOCAL`]: offered only when the document declares a `clarification` slice.
pub(crate) const ASK_CLARIFICATION: &str = "ask_clarification";

/// What an exit tool's arguments become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitKind {
    /// The node's writes (`final_report`); a router's answer of its own (`$route: null`)
    /// when `answers` is set.
    Report { answers: bool },
    /// A router's `$route` (`agent`) and `$message` (`message`): `handoff_to`.
    Handoff,
    /// A team member's `$broadcast` (`message`) and `$exit` (`exit`): `team_broadcast`.
    Broadcast,
    /// A team lead's `$broadcast` (`message`), starting another cycle: `team_broadcast`.
    LeadBroadcast,
    /// A team lead's answer (`final_report`): the team node's writes, `$final: true`.
    Final,
    /// A supervisor's decision (`route`): its arguments are read when the decision is
    /// planned (see `machine/agent/policy.rs`).
    Route,
    /// An agent tool's result (`final_report` with `{"result"}`): its arguments are the
    /// tool message its caller gets; a plain text reply is taken as `{"result": TEXT}`.
    Result,
}

/// An exit tool: its kind and the function offered.
pub(crate) struct Exit {
    pub(crate) kind: ExitKind,
    pub(crate) tool: ToolPlan,
}

/// An agent node, ready to run a session.
pub(crate) struct AgentPlan {
    /// The model key in the document's `models`.
    pub(crate) model: String,
    /// The client for that model.
    #[cfg(feature = "agents")]
    pub(crate) client: Arc<ChatClient>,
    /// The model's prices (absent: no cost recorded).
    pub(crate) price: Option<Price>,
    /// The templates and `max_turns`.
    pub(crate) spec: AgentSpec,
    /// The exit tools, the one forced on the last turn first (`final_report`; a router's
    /// `handoff_to`, then `final_report` with `may_answer`).
    pub(crate) exits: Vec<Exit>,
    /// The tool nodes offered, in the order `tools` lists them.
    pub(crate) tools: Vec<ToolPlan>,
    /// The only slice the node writes, when it has exactly one: a plain text reply that
    /// its schema accepts becomes its value.
    pub(crate) text_slice: Option<String>,
}

impl std::fmt::Debug for AgentPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentPlan")
            .field("model", &self.model)
            .field("exit", &self.exit().def.name)
            .finish_non_exhaustive()
    }
}

impl AgentPlan {
    /// The turn limit (model calls of one session).
    pub(crate) fn max_turns(&self) -> u32 {
        self.spec.turns().max(1)
    }

    /// The exit tool forced on the last turn.
    pub(crate) fn exit(&self) -> &ToolPlan {
        &self.exits[0].tool
    }

    /// The exit tool named `name`, if it is one.
    pub(crate) fn exit_named(&self, name: &str) -> Option<&Exit> {
        self.exits.iter().find(|e| e.tool.def.name == name)
    }

    /// Every function offered: the exit tools, then the tools in order.
    pub(crate) fn offered(&self) -> impl Iterator<Item = &ToolPlan> {
        self.exits.iter().map(|e| &e.tool).chain(&self.tools)
    }

    /// The tool (not an exit) offered under `name`.
    pub(crate) fn tool(&self, name: &str) -> Option<&ToolPlan> {
        self.tools.iter().find(|t| t.def.name == name)
    }

    /// Every function definition sent with a request: the exit tools first.
    pub(crate) fn defs(&self) -> Vec<ToolDef> {
        self.offered().map(|t| t.def.clone()).collect()
    }
}

/// A function offered to the model: its definition and its compiled argument schema.
pub(crate) struct ToolPlan {
    /// The tool node's id (the exit tool's name for the exit tool).
    pub(crate) node: Arc<str>,
    pub(crate) def: ToolDef,
    /// `None`: any arguments object is accepted.
    pub(crate) schema: Option<Schema>,
}

/// The `final_report` parameters for a node writing `writes`: one property per written
/// slice with the slice's schema, all required, no others.
pub(crate) fn final_report_parameters(
    writes: &[String],
    slice_schema: impl Fn(&str) -> Option<Value>,
) -> Value {
    let properties: Map<String, Value> = writes
        .iter()
        .map(|s| (s.clone(), slice_schema(s).unwrap_or_else(|| json!({}))))
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": writes,
        "additionalProperties": false,
    })
}

/// The `final_report` parameters of an advisor that writes no slice:
/// `{"report": string}`, required, no others.
pub(crate) fn advisor_report_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {ADVISOR_REPORT: {"type": "string"}},
        "required": [ADVISOR_REPORT],
        "additionalProperties": false,
    })
}

/// The `team_broadcast` parameters: `{"message": string, "exit": boolean}` for a
/// member, `{"message": string}` for the lead; all required, no others.
pub(crate) fn broadcast_parameters(member: bool) -> Value {
    if member {
        json!({
            "type": "object",
            "properties": {"message": {"type": "string"}, "exit": {"type": "boolean"}},
            "required": ["message", "exit"],
            "additionalProperties": false,
        })
    } else {
        json!({
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
            "additionalProperties": false,
        })
    }
}

/// The `handoff_to` parameters for a router choosing among `destinations`.
pub(crate) fn handoff_parameters(destinations: &[String]) -> Value {
    json!({
        "type": "object",
        "properties": {
            "agent": {"type": "string", "enum": destinations},
            "message": {"type": "string"},
        },
        "required": ["agent"],
        "additionalProperties": false,
    })
}

/// The `final_report` parameters of an agent called as a tool: `result`, an object or
/// a text, required.
pub(crate) fn tool_result_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "result": {
                "type": ["object", "string"],
                "description": "What the tool returns to its caller.",
            },
        },
        "required": ["result"],
        "additionalProperties": false,
    })
}

/// The `route` parameters for a supervisor allowing `allow`: `decision` one of the
/// `allow` ids, `stop_local` and `stop_global` (and `ask_clarification` when `clarify`),
/// and `reason`, both required. With `ask_clarification` a `question` is offered too,
/// required only with that decision (so the schema is not strict); without it there is
/// no `question` at all and the schema is strict.
pub(crate) fn route_parameters(allow: &[String], clarify: bool) -> Value {
    let mut decisions: Vec<&str> = allow.iter().map(String::as_str).collect();
    decisions.extend([STOP_LOCAL, STOP_GLOBAL]);
    if clarify {
        decisions.push(ASK_CLARIFICATION);
    }
    let mut schema = json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": decisions},
            "reason": {"type": "string"},
        },
        "required": ["decision", "reason"],
        "additionalProperties": false,
    });
    if clarify {
        schema["properties"]["question"] = json!({"type": "string"});
        schema["if"] = json!({"properties": {"decision": {"const": ASK_CLARIFICATION}}});
        schema["then"] = json!({"required": ["question"]});
    }
    schema
}

/// Whether `schema` allows strict function calling: every object schema in it lists all
/// its properties as required and sets `additionalProperties: false`, and every schema
/// says what it accepts (a `type`, `enum`, `const` or `anyOf` of such schemas).
pub(crate) fn allows_strict(schema: &Value) -> bool {
    let Value::Object(m) = schema else {
        return false;
    };
    if let Some(Value::Array(any)) = m.get("anyOf") {
        return any.iter().all(allows_strict);
    }
    if m.contains_key("enum") || m.contains_key("const") {
        return true;
    }
    let types: Vec<&str> = match m.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return false,
    };
    if types.contains(&"object") {
        let Some(Value::Object(props)) = m.get("properties") else {
            return false;
        };
        if m.get("additionalProperties") != Some(&Value::Bool(false)) {
            return false;
        }
        let required: Vec<&str> = match m.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if props.keys().any(|k| !required.contains(&k.as_str())) {
            return false;
        }
        if !props.values().all(allows_strict) {
            return false;
        }
    }
    if types.contains(&"array") {
        match m.get("items") {
            Some(items) if allows_strict(items) => {}
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_mode_needs_closed_objects_with_every_property_required() {
        let closed = json!({"type": "object", "properties": {"a": {"type": "string"}},
            "required": ["a"], "additionalProperties": false});
        assert!(allows_strict(&closed));
        let open = json!({"type": "object", "properties": {"a": {"type": "string"}},
            "required": ["a"]});
        assert!(!allows_strict(&open));
        let optional = json!({"type": "object", "properties": {"a": {"type": "string"}},
            "additionalProperties": false});
        assert!(!allows_strict(&optional));
        assert!(!allows_strict(&json!({})), "an untyped schema");
        let report =
            final_report_parameters(&["answer".into()], |_| Some(json!({"type": "string"})));
        assert!(allows_strict(&report));
        let untyped = final_report_parameters(&["answer".into()], |_| None);
        assert!(!allows_strict(&untyped));
        assert!(allows_strict(
            &json!({"type": "array", "items": {"enum": [1, 2]}})
        ));
    }

    #[test]
    fn route_offers_the_allow_ids_and_the_stops_and_a_question_only_with_clarification() {
        let allow = ["a".to_string(), "b".to_string()];
        let plain = route_parameters(&allow, false);
        assert_eq!(
            plain["properties"]["decision"]["enum"],
            json!(["a", "b", "stop_local", "stop_global"])
        );
        assert!(plain["properties"].get("question").is_none());
        assert!(allows_strict(&plain), "decision and reason, both required");
        let asking = route_parameters(&allow, true);
        assert_eq!(
            asking["properties"]["decision"]["enum"],
            json!(["a", "b", "stop_local", "stop_global", "ask_clarification"])
        );
        assert!(!allows_strict(&asking), "question is optional");
        let v = jsonschema::validator_for(&asking).expect("compiles");
        assert!(v.is_valid(&json!({"decision": "a", "reason": "r"})));
        assert!(!v.is_valid(&json!({"decision": "ask_clarification", "reason": "r"})));
        assert!(
            v.is_valid(&json!({"decision": "ask_clarification", "reason": "r", "question": "q?"}))
        );
        assert!(!v.is_valid(&json!({"decision": "zzz", "reason": "r"})));
    }
}
