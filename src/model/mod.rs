//! Model sessions: the conversation's wire types ([`messages`], always compiled) and, with
//! the cargo feature `agents` (on by default), the OpenAI-compatible Chat Completions
//! client (`model::client`) that agents call (brief section 10, `docs/spec/models.md`).

#[cfg(feature = "agents")]
pub mod client;
pub mod messages;

#[cfg(feature = "agents")]
pub use client::{Attempt, ChatClient, ChatReply, ChatRequest, ModelDelta, ModelError};
pub use messages::{ChatMessage, Role, ToolCall, ToolChoice, ToolDef, Usage};
