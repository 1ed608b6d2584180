//! Routing decisions: what a supervisor chooses to happen next.

use schemars::JsonSchema;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::fmt;

/// Payload of `stop_local`: end the current subgraph (or the run, at the root).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopLocal {
    /// The subgraph's output (default: its `writes` slices as an object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Ask the caller to end the run after the return.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub should_end: bool,
    /// Why (recorded in the trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Payload of `stop_global`, `fallback`: a reason for the trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopGlobal {
    /// Why (recorded in the trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Payload of `ask_clarification`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Clarification {
    /// The question put to the user.
    pub question: String,
}

/// Payload of `clarify`: a follow-up question for a finished `chat` subgraph.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClarifyRequest {
    /// The `chat` subgraph to ask (it must have returned at the deciding level, and be in
    /// the supervisor's `allow`).
    pub subgraph: String,
    /// The question, written to the child's `clarification` slice as
    /// `{"question", "from": supervisor}`.
    pub question: String,
}

/// A supervisor's decision. Serialized externally tagged:
/// `{"node": "trend"}`, `{"subgraph": "fashion"}`, `{"stop_local": {...}}`,
/// `{"stop_global": {...}}`, `{"ask_clarification": {"question": "..."}}`,
/// `{"fallback": {...}}`, `{"clarify": {"subgraph": "...", "question": "..."}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum RoutingDecision {
    /// Run this node.
    Node(String),
    /// Call this subgraph.
    Subgraph(String),
    /// End the current subgraph.
    StopLocal(StopLocal),
    /// End the whole run from any depth.
    StopGlobal(StopGlobal),
    /// Pause the run until the user answers.
    AskClarification(Clarification),
    /// Route to the supervisor's fallback node.
    Fallback(StopGlobal),
    /// Ask a finished `chat` subgraph a follow-up: it resumes from its kept state.
    Clarify(ClarifyRequest),
}

impl RoutingDecision {
    /// `{"node": id}`.
    pub fn node(id: impl Into<String>) -> Self {
        RoutingDecision::Node(id.into())
    }
    /// `{"subgraph": id}`.
    pub fn subgraph(id: impl Into<String>) -> Self {
        RoutingDecision::Subgraph(id.into())
    }
    /// `{"stop_local": {}}`.
    pub fn stop_local() -> Self {
        RoutingDecision::StopLocal(StopLocal::default())
    }
    /// `{"stop_local": {"output": v}}`.
    pub fn stop_local_with(output: Value) -> Self {
        RoutingDecision::StopLocal(StopLocal {
            output: Some(output),
            ..StopLocal::default()
        })
    }
    /// `{"stop_global": {"reason": r}}`.
    pub fn stop_global(reason: impl Into<String>) -> Self {
        RoutingDecision::StopGlobal(StopGlobal {
            reason: Some(reason.into()),
        })
    }
    /// `{"ask_clarification": {"question": q}}`.
    pub fn ask(question: impl Into<String>) -> Self {
        RoutingDecision::AskClarification(Clarification {
            question: question.into(),
        })
    }
    /// `{"fallback": {"reason": r}}`.
    pub fn fallback(reason: impl Into<String>) -> Self {
        RoutingDecision::Fallback(StopGlobal {
            reason: Some(reason.into()),
        })
    }

    /// `{"clarify": {"subgraph": id, "question": q}}`.
    pub fn clarify(subgraph: impl Into<String>, question: impl Into<String>) -> Self {
        RoutingDecision::Clarify(ClarifyRequest {
            subgraph: subgraph.into(),
            question: question.into(),
        })
    }

    /// The decision's kind as written in documents and traces (`node`, `subgraph`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            RoutingDecision::Node(_) => "node",
            RoutingDecision::Subgraph(_) => "subgraph",
            RoutingDecision::StopLocal(_) => "stop_local",
            RoutingDecision::StopGlobal(_) => "stop_global",
            RoutingDecision::AskClarification(_) => "ask_clarification",
            RoutingDecision::Fallback(_) => "fallback",
            RoutingDecision::Clarify(_) => "clarify",
        }
    }

    /// The node or subgraph id a `node`/`subgraph` decision names.
    pub fn target(&self) -> Option<&str> {
        match self {
            RoutingDecision::Node(id) | RoutingDecision::Subgraph(id) => Some(id),
            _ => None,
        }
    }
}

/// What a supervisor returns: a typed decision, or a bare string (legacy): a node id
/// means `node`, a subgraph id means `subgraph`, and `"done"` means `stop_local`.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
#[schemars(untagged)]
pub enum SupervisorOutput {
    /// A typed decision.
    Decision(RoutingDecision),
    /// A bare string, resolved against the registry by the runtime.
    Legacy(String),
}

impl From<RoutingDecision> for SupervisorOutput {
    fn from(d: RoutingDecision) -> Self {
        SupervisorOutput::Decision(d)
    }
}

impl From<&str> for SupervisorOutput {
    fn from(s: &str) -> Self {
        SupervisorOutput::Legacy(s.to_string())
    }
}

impl From<String> for SupervisorOutput {
    fn from(s: String) -> Self {
        SupervisorOutput::Legacy(s)
    }
}

impl SupervisorOutput {
    /// The bare string that means `stop_local`.
    pub const DONE: &'static str = "done";
}

impl Serialize for SupervisorOutput {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SupervisorOutput::Decision(d) => d.serialize(s),
            SupervisorOutput::Legacy(id) => s.serialize_str(id),
        }
    }
}

impl<'de> Deserialize<'de> for SupervisorOutput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SupervisorOutput;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a routing decision object or a bare node/subgraph id")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(SupervisorOutput::Legacy(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                RoutingDecision::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(SupervisorOutput::Decision)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_round_trips() {
        let all = [
            RoutingDecision::node("trend"),
            RoutingDecision::subgraph("fashion"),
            RoutingDecision::stop_local(),
            RoutingDecision::StopLocal(StopLocal {
                output: Some(json!({"a": 1})),
                should_end: true,
                reason: Some("r".into()),
            }),
            RoutingDecision::stop_global("nothing to do"),
            RoutingDecision::ask("which size?"),
            RoutingDecision::fallback("unsure"),
            RoutingDecision::clarify("research", "which source?"),
        ];
        for d in all {
            let text = serde_json::to_string(&d).unwrap();
            assert_eq!(serde_json::from_str::<RoutingDecision>(&text).unwrap(), d);
            let out: SupervisorOutput = serde_json::from_str(&text).unwrap();
            assert_eq!(out, SupervisorOutput::Decision(d));
        }
        assert_eq!(
            serde_json::to_value(RoutingDecision::stop_global("x")).unwrap(),
            json!({"stop_global": {"reason": "x"}})
        );
        assert_eq!(
            serde_json::to_value(RoutingDecision::clarify("r", "why?"))
                .expect("a decision serializes"),
            json!({"clarify": {"subgraph": "r", "question": "why?"}})
        );
    }

    #[test]
    fn bare_strings_are_legacy() {
        let out: SupervisorOutput = serde_json::from_str(r#""trend""#).unwrap();
        assert_eq!(out, SupervisorOutput::Legacy("trend".into()));
        assert_eq!(serde_json::to_string(&out).unwrap(), r#""trend""#);
        assert!(serde_json::from_str::<SupervisorOutput>("3").is_err());
        let err = serde_json::from_str::<SupervisorOutput>(r#"{"nod": "x"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown variant `nod`"), "{err}");
    }
}
