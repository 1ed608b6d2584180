//! Agent sessions as run state: the conversation of one agent node visit, kept whole in
//! the run (brief 10.3). A step appends the messages it added; a store checkpoints only
//! those (see `store::delta`). The conversation is the Chat Completions wire form, so
//! what is stored is what the model saw.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::ChatMessage;

/// One agent session: the conversation of one visit of an agent node.
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
