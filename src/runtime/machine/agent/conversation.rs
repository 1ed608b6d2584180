//! Reading a session's conversation: the tool calls of its last reply not answered yet,
//! a call's place among them, and the messages in the order a request sends them (agent
//! tools answer when their sessions end, so answers may be stored out of order: ADR
//! 0046).

use crate::model::{ChatMessage, Role as ChatRole, ToolCall};
use crate::runtime::data::Session;

/// The tool calls of `conversation`'s last reply not answered yet, in its order: `None`
/// when its last reply made no call or every call is answered. A call is answered by a
/// `tool` message with its id; agent tools answer when their sessions end, so the
/// answers may be stored in another order than the calls' (ADR 0046).
pub(crate) fn unanswered(conversation: &Session) -> Option<(&ChatMessage, Vec<&ToolCall>)> {
    let at = conversation
        .messages
        .iter()
        .rposition(|m| m.role == ChatRole::Assistant)?;
    let reply = &conversation.messages[at];
    let after = &conversation.messages[at + 1..];
    if after.iter().any(|m| m.role != ChatRole::Tool) {
        return None;
    }
    let answered = |id: &str| after.iter().any(|m| m.tool_call_id.as_deref() == Some(id));
    let calls: Vec<&ToolCall> = reply
        .tool_calls
        .iter()
        .filter(|c| !answered(&c.id))
        .collect();
    (!calls.is_empty()).then_some((reply, calls))
}

/// The place of call `call_id` among the tool calls of `conversation`'s last reply (0
/// when it is not there).
pub(crate) fn call_place(conversation: &Session, call_id: &str) -> usize {
    conversation
        .messages
        .iter()
        .rfind(|m| m.role == ChatRole::Assistant)
        .and_then(|reply| reply.tool_calls.iter().position(|c| c.id == call_id))
        .unwrap_or(0)
}

/// `messages` as a request sends them: the `tool` messages after the last reply in the
/// order of its calls (an agent tool's answer may be stored after a later call's, ADR
/// 0046), so the model always reads its results in the order it asked.
pub(crate) fn in_reply_order(mut messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let Some(at) = messages.iter().rposition(|m| m.role == ChatRole::Assistant) else {
        return messages;
    };
    let (head, tail) = messages.split_at_mut(at + 1);
    let reply = &head[at];
    if tail.iter().all(|m| m.role == ChatRole::Tool) {
        let place = |m: &ChatMessage| {
            reply
                .tool_calls
                .iter()
                .position(|c| Some(c.id.as_str()) == m.tool_call_id.as_deref())
                .unwrap_or(usize::MAX)
        };
        // A stable sort: answers to unknown ids keep their order, at the end.
        tail.sort_by_key(place);
    }
    messages
}
