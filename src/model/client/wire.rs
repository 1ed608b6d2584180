//! The Chat Completions wire protocol: the request body we send, the JSON reply we read,
//! the streamed (SSE) reply we assemble, and the server's error message.

use serde_json::{Map, Value};

use super::{ChatRequest, ModelDelta};
use crate::model::messages::{ChatMessage, ToolCall, Usage};

/// The request body: `model`, `messages`, the model's `params`, `tools` and `tool_choice`
/// when the request has them, and `stream` with `stream_options.include_usage` when
/// streaming. `response_format` is never sent (some servers answer it with HTTP 500).
pub fn request_body(
    model: &str,
    params: &indexmap::IndexMap<String, Value>,
    req: &ChatRequest,
    stream: bool,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert(
        "messages".into(),
        Value::Array(req.messages.iter().map(ChatMessage::to_wire).collect()),
    );
    for (k, v) in params {
        // The validator refuses engine keys in `params`; a document built in Rust may
        // still hold them, and the engine's own values win.
        if !crate::contracts::ModelSpec::ENGINE_KEYS.contains(&k.as_str()) {
            body.insert(k.clone(), v.clone());
        }
    }
    if !req.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(req.tools.iter().map(|t| t.to_wire()).collect()),
        );
    }
    if let Some(choice) = &req.tool_choice {
        body.insert("tool_choice".into(), choice.to_wire());
    }
    if stream {
        body.insert("stream".into(), Value::Bool(true));
        body.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
    }
    Value::Object(body)
}

/// What one response carried: the assistant message, why it finished, its usage.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The assistant message.
    pub message: ChatMessage,
    /// `choices[0].finish_reason`.
    pub finish_reason: Option<String>,
    /// The usage, when the server sent it.
    pub usage: Option<Usage>,
}

/// Reads a (non-streamed) Chat Completions response body. An error says what is wrong:
/// the body is not JSON, has no `choices`, or its message cannot be read.
pub fn parse_response(body: &[u8]) -> Result<Parsed, String> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the body is not JSON ({e}): {}", snippet(body)))?;
    if let Some(msg) = error_message_of(&v) {
        return Err(format!("the server answered with an error: {msg}"));
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| {
            format!(
                "not a Chat Completions response (no `choices[0]`): {}",
                snippet(body)
            )
        })?;
    let msg = choice
        .get("message")
        .ok_or("not a Chat Completions response (no `choices[0].message`)")?;
    let mut message = ChatMessage::from_wire(&with_role(msg))
        .map_err(|e| format!("`choices[0].message`: {e}"))?;
    message.role = crate::model::Role::Assistant;
    Ok(Parsed {
        message,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: Usage::from_wire(v.get("usage")),
    })
}

/// A message object with `role` defaulted to `assistant` (some servers leave it out).
fn with_role(msg: &Value) -> Value {
    let mut m = msg.clone();
    if let Some(o) = m.as_object_mut() {
        o.entry("role").or_insert_with(|| Value::from("assistant"));
    }
    m
}

/// The server's `error.message` in an error body (`{"error": {"message"}}`,
/// `{"error": "text"}`, `{"message"}` or `{"detail"}`), or the start of the body.
pub fn server_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| error_message_of(&v).or_else(|| text_at(&v, "/message")))
        .or_else(|| text_at_detail(body))
        .unwrap_or_else(|| {
            if body.is_empty() {
                "(empty body)".to_string()
            } else {
                snippet(body)
            }
        })
}

fn error_message_of(v: &Value) -> Option<String> {
    match v.get("error")? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| Some(Value::Object(o.clone()).to_string())),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn text_at(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn text_at_detail(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    match v.get("detail")? {
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The first 200 characters of a body, for error messages.
pub fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut s: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        s.push('…');
    }
    s
}

/// Assembles a streamed reply from its SSE bytes as they arrive: `data:` lines (an event
/// ends at a blank line), `data: [DONE]` at the end, content and tool-call arguments
/// appended by index across chunks, the usage chunk read when the server sends one.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    line: Vec<u8>,
    data: Vec<String>,
    content: Option<String>,
    calls: Vec<(String, String, String)>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
    events: usize,
}

impl StreamAssembler {
    /// Feeds the next bytes of the body; `on_delta` hears text and argument fragments.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        on_delta: &mut (dyn FnMut(ModelDelta) + Send),
    ) -> Result<(), String> {
        for &b in bytes {
            if self.done {
                return Ok(());
            }
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.line_end(&line, on_delta)?;
            } else {
                self.line.push(b);
            }
        }
        Ok(())
    }

    fn line_end(
        &mut self,
        line: &[u8],
        on_delta: &mut (dyn FnMut(ModelDelta) + Send),
    ) -> Result<(), String> {
        if line.is_empty() {
            return self.dispatch(on_delta);
        }
        if line.starts_with(b":") {
            return Ok(()); // an SSE comment (a keep-alive)
        }
        let text = std::str::from_utf8(line).map_err(|_| "a stream line is not UTF-8")?;
        let (field, value) = text.split_once(':').unwrap_or((text, ""));
        if field == "data" {
            self.data
                .push(value.strip_prefix(' ').unwrap_or(value).to_string());
        }
        Ok(())
    }

    fn dispatch(&mut self, on_delta: &mut (dyn FnMut(ModelDelta) + Send)) -> Result<(), String> {
        if self.data.is_empty() {
            return Ok(());
        }
        let data = std::mem::take(&mut self.data).join("\n");
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        self.events += 1;
        let chunk: Value = serde_json::from_str(&data).map_err(|e| {
            format!(
                "stream event {} is not JSON ({e}): {}",
                self.events,
                snippet(data.as_bytes())
            )
        })?;
        if let Some(msg) = error_message_of(&chunk) {
            return Err(format!("the server sent an error in the stream: {msg}"));
        }
        if let Some(u) = Usage::from_wire(chunk.get("usage")) {
            self.usage = Some(u);
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Err(format!(
                "stream event {} is not a Chat Completions chunk (no `choices`)",
                self.events
            ));
        };
        let Some(choice) = choices.first() else {
            return Ok(()); // the usage chunk has no choices
        };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(r.to_string());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(());
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.content.get_or_insert_with(String::new).push_str(text);
            on_delta(ModelDelta::Text(text.to_string()));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, call) in calls.iter().enumerate() {
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .map_or(pos, |i| i as usize);
                if index > 1024 {
                    return Err(format!(
                        "stream event {}: tool call index {index}",
                        self.events
                    ));
                }
                if self.calls.len() <= index {
                    self.calls.resize(index + 1, Default::default());
                }
                let slot = &mut self.calls[index];
                if let Some(id) = call.get("id").and_then(Value::as_str)
                    && !id.is_empty()
                {
                    slot.0 = id.to_string();
                }
                let f = call.get("function");
                if let Some(name) = f.and_then(|f| f.get("name")).and_then(Value::as_str)
                    && slot.1.is_empty()
                {
                    slot.1 = name.to_string();
                }
                match f.and_then(|f| f.get("arguments")) {
                    Some(Value::String(a)) if !a.is_empty() => {
                        slot.2.push_str(a);
                        on_delta(ModelDelta::ToolArguments {
                            index,
                            text: a.clone(),
                        });
                    }
                    Some(Value::Object(_)) | Some(Value::Array(_)) => {
                        let a = f.and_then(|f| f.get("arguments")).map(Value::to_string);
                        if let Some(a) = a {
                            slot.2.push_str(&a);
                            on_delta(ModelDelta::ToolArguments { index, text: a });
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Ends the stream: the assembled reply, or why the stream is incomplete (it ended
    /// before `[DONE]` and before any `finish_reason`).
    pub fn finish(
        mut self,
        on_delta: &mut (dyn FnMut(ModelDelta) + Send),
    ) -> Result<Parsed, String> {
        if !self.done {
            if !self.line.is_empty() {
                let line = std::mem::take(&mut self.line);
                self.line_end(&line, on_delta)?;
            }
            self.dispatch(on_delta)?;
        }
        if !self.done && self.finish_reason.is_none() {
            return Err(format!(
                "the stream ended before `data: [DONE]` (after {} events)",
                self.events
            ));
        }
        let mut tool_calls = Vec::new();
        for (i, (id, name, args)) in self.calls.into_iter().enumerate() {
            if name.is_empty() {
                return Err(format!("streamed tool call {i} has no function name"));
            }
            let id = if id.is_empty() {
                format!("call_{i}")
            } else {
                id
            };
            tool_calls.push(ToolCall::new(id, name, args));
        }
        Ok(Parsed {
            message: ChatMessage::assistant(self.content, tool_calls),
            finish_reason: self.finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assemble(chunks: &[&str]) -> (Result<Parsed, String>, Vec<ModelDelta>) {
        let mut deltas = Vec::new();
        let mut on = |d: ModelDelta| deltas.push(d);
        let mut a = StreamAssembler::default();
        for c in chunks {
            if let Err(e) = a.feed(c.as_bytes(), &mut on) {
                return (Err(e), deltas);
            }
        }
        let r = a.finish(&mut on);
        (r, deltas)
    }

    #[test]
    fn tool_arguments_are_assembled_across_chunks_and_split_lines() {
        let (r, deltas) = assemble(&[
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"c9\",\"type\":\"function\",\"function\":{\"name\":\"final_report\",\"arguments\":\"\"}}]}}]}\r\n\r\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"ans",
            "wer\\\": \"}}]}}]}\n\n: keep-alive\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"42}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n",
        ]);
        let p = r.expect("assembled");
        assert_eq!(
            p.message.tool_calls,
            vec![ToolCall::new("c9", "final_report", "{\"answer\": 42}")]
        );
        assert_eq!(p.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(p.usage.map(|u| u.input_tokens), Some(5));
        assert_eq!(deltas.len(), 2);
    }

    #[test]
    fn an_unfinished_stream_is_an_error_and_garbage_is_named() {
        let (r, _) = assemble(&["data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"]);
        assert!(r.unwrap_err().contains("[DONE]"));
        let (r, _) = assemble(&["data: {nope\n\n"]);
        assert!(r.unwrap_err().contains("not JSON"));
        let (r, _) = assemble(&["data: {\"x\":1}\n\n"]);
        assert!(r.unwrap_err().contains("no `choices`"));
    }

    #[test]
    fn responses_and_error_bodies() {
        let p = parse_response(
            json!({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]})
                .to_string()
                .as_bytes(),
        )
        .expect("parses");
        assert_eq!(p.message, ChatMessage::assistant(Some("hi".into()), vec![]));
        assert_eq!(p.usage, None);
        assert!(
            parse_response(b"{\"id\": 1}")
                .unwrap_err()
                .contains("choices")
        );
        assert!(parse_response(b"<html>").unwrap_err().contains("not JSON"));
        assert_eq!(
            server_message(br#"{"error": {"message": "bad key"}}"#),
            "bad key"
        );
        assert_eq!(server_message(br#"{"detail": "nope"}"#), "nope");
        assert_eq!(server_message(b""), "(empty body)");
    }
}
