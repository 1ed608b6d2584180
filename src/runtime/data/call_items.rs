//! What a `model_call` or `tool_call` trace item records of its call, as fields (brief
//! 10.3, ADR 0042): the model call's node, model, turn, attempt, the HTTP attempts that
//! failed before its answer and its `finish_reason`; the tool call's caller, tool, call id
//! and status. The item's `usage` and `duration_us` hold what the call cost and took.
//!
//! In an item's JSON they are one object under the key named after its kind
//! (`"model_call": {...}`, `"tool_call": {...}`), absent on every other item and on items
//! stored before they existed.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One model call of an agent session, on its `model_call` item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModelCallItem {
    /// The agent whose session made the call: an agent node, a supervisor (its policy
    /// agent) or an agent tool.
    pub node: Arc<str>,
    /// The model's key in the document's `models`.
    pub model: Arc<str>,
    /// The session's turn (1 for its first model call).
    pub turn: u32,
    /// Which attempt of the step the call was (1, higher when a driver made it again
    /// after a crash: same run id and step).
    pub attempt: u32,
    /// The HTTP attempts of this call that failed before its answer (retried, 10.5), in
    /// order; empty when the first one answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_attempts: Vec<HttpAttempt>,
    /// `finish_reason` as the server sent it (`None`: it sent none, or the call failed).
    pub finish_reason: Option<String>,
    /// Whether the server reported the call's usage (`false`: its tokens are unknown,
    /// never guessed; the item's `usage` says `usage_unknown: 1`).
    pub usage_known: bool,
    /// Why the call failed for good (`model_error`), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One failed HTTP attempt of a model call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HttpAttempt {
    /// The HTTP status, when the server answered.
    pub status: Option<u16>,
    /// What went wrong.
    pub error: String,
    /// How long the attempt took, in milliseconds (0 when timing is stripped).
    pub duration_ms: u64,
    /// How long the client waited before it (backoff or `Retry-After`), in milliseconds
    /// (0 when timing is stripped).
    pub waited_ms: u64,
}

/// One tool call of an agent session, on its `tool_call` item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallItem {
    /// The agent whose model asked for the call: an agent node, a supervisor (its policy
    /// agent) or an agent tool.
    pub caller: Arc<str>,
    /// The tool's name as the model called it (a tool node's id, or a name the model
    /// made up).
    pub tool: Arc<str>,
    /// The call's id in the model's reply (`tool_call_id` of the answer).
    pub call_id: String,
    /// The call's place among its reply's tool calls (0 for the first).
    pub index: u32,
    /// How it ended.
    pub status: ToolCallStatus,
    /// The error told to the model, when it did not end `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCallStatus {
    /// The tool ran (or answered with its constants); its output went to the model.
    Ok,
    /// The call was a mistake answered without running anything: arguments that are not
    /// JSON or do not fit, an unknown tool, an exit tool called with other tools.
    Invalid,
    /// The tool ran and failed (an error, a panic, bad output).
    Failed,
    /// The tool ran past its time limit.
    Timeout,
    /// Not run: the run's `max_steps` had no step left for it (ADR 0042). It counts no
    /// step; the model is told it was not run.
    Skipped,
}

impl ToolCallStatus {
    /// The status as in JSON (`ok`, `invalid`, `failed`, `timeout`, `skipped`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Invalid => "invalid",
            Self::Failed => "failed",
            Self::Timeout => "timeout",
            Self::Skipped => "skipped",
        }
    }
}

/// The call a `model_call` or `tool_call` item records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallRecord {
    /// A model call.
    Model(ModelCallItem),
    /// A tool call.
    Tool(ToolCallItem),
}

impl CallRecord {
    /// The record with its timings zeroed (see
    /// [`DecisionTrace::without_timing`](super::DecisionTrace::without_timing)).
    pub(crate) fn without_timing(&self) -> Self {
        match self {
            Self::Model(m) => Self::Model(ModelCallItem {
                failed_attempts: m
                    .failed_attempts
                    .iter()
                    .map(|a| HttpAttempt {
                        duration_ms: 0,
                        waited_ms: 0,
                        ..a.clone()
                    })
                    .collect(),
                ..m.clone()
            }),
            Self::Tool(_) => self.clone(),
        }
    }
}
