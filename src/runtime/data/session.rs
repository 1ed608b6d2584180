//! Agent sessions as run state: the conversation of one agent node visit, kept whole in
//! the run (brief 10.3). A step appends the messages it added; a store checkpoints only
//! those (see `store::delta`). The conversation is the Chat Completions wire form, so
//! what is stored is what the model saw.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::ChatMessage;

/// One agent session: the conversation of one visit of an agent node, one decision of a
/// supervisor's policy agent (`node` is the supervisor), or one call of an agent tool
/// (`caller` says which).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// The agent node.
    pub node: Arc<str>,
    /// Which visit of the node it is (1 for its first run).
    pub visit: u32,
    /// The model key (in the document's `models`) the session talks to.
    pub model: String,
    /// Steps taken before its first model call (its calls are the steps after).
    pub step: u32,
    /// The conversation so far, in the Chat Completions wire form.
    pub messages: Vec<ChatMessage>,
    /// For an agent called as a tool: the tool call it answers (`None` for an agent
    /// node's visit or a supervisor's decision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<ToolCaller>,
}

/// The tool call an agent tool's session answers: its caller's session, the caller's
/// model call (turn) that asked, and the call's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCaller {
    /// The caller's session (an index in the run's sessions).
    pub session: u32,
    /// The caller's model call that made the tool call (1 for its first).
    pub turn: u32,
    /// The tool call's id.
    pub call: String,
}

impl Session {
    /// The session without its messages (what tells which session it is).
    pub fn clone_head(&self) -> Session {
        Session {
            node: Arc::clone(&self.node),
            visit: self.visit,
            model: self.model.clone(),
            step: self.step,
            messages: Vec::new(),
            caller: self.caller.clone(),
        }
    }

    /// Model calls made so far: the assistant messages.
    pub fn turns(&self) -> u32 {
        let n = self
            .messages
            .iter()
            .filter(|m| m.role == crate::model::Role::Assistant)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}
