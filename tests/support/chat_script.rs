//! The script of [`ChatServer`](super::ChatServer): a [`Reply`] (a status, headers and a
//! [`Body`]: whole, an SSE stream, a hang or a closed connection) and the Chat Completions
//! bodies the replies carry (`completion`, `chunk`, `usage_chunk`).
#![allow(dead_code)]

use std::time::Duration;

use serde_json::{Value, json};

/// What a reply's body is.
#[derive(Debug, Clone)]
pub enum Body {
    /// A body sent whole with `Content-Length`.
    Full {
        /// The `Content-Type`.
        content_type: String,
        /// The bytes.
        text: String,
    },
    /// `text/event-stream` in HTTP chunks, one write per element of `chunks`, `pause`
    /// between writes; `complete: false` drops the connection before the end.
    Sse {
        /// The raw pieces of the stream, written one by one.
        chunks: Vec<String>,
        /// The pause after each piece.
        pause: Duration,
        /// Whether the HTTP body is ended properly.
        complete: bool,
    },
    /// Never answers; waits until the client closes the connection.
    Hang,
    /// Closes the connection without an answer.
    Close,
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Body,
    /// A wait before answering (the client closing meanwhile is recorded).
    pub delay: Duration,
    /// Held until the server has received this many requests (all told), waiting at
    /// most this long; past it the reply is HTTP 500 `chat_server: held alone` instead
    /// (see [`Reply::hold_until`]).
    pub hold: Option<(usize, Duration)>,
}

/// The usage object of the scripted completions: 11 prompt and 7 completion tokens.
pub fn usage() -> Value {
    json!({"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18})
}

/// A `chat.completion` body with `message`, `finish_reason` and `usage` (left out when
/// `None`).
pub fn completion(message: Value, finish_reason: &str, usage: Option<Value>) -> Value {
    let mut v = json!({
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    });
    if let Some(u) = usage {
        v["usage"] = u;
    }
    v
}

/// A `chat.completion.chunk` with one choice's `delta` and `finish_reason`.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

/// The final chunk with usage and no choices (`stream_options.include_usage`).
pub fn usage_chunk(usage: Value) -> Value {
    json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
           "model": "scripted", "choices": [], "usage": usage})
}

impl Reply {
    /// A reply calling tools `(id, name, arguments)`, the arguments given as JSON.
    pub fn calls(calls: &[(&str, &str, Value)]) -> Reply {
        let args: Vec<String> = calls.iter().map(|(_, _, a)| a.to_string()).collect();
        let refs: Vec<(&str, &str, &str)> = calls
            .iter()
            .zip(&args)
            .map(|((id, name, _), a)| (*id, *name, a.as_str()))
            .collect();
        Reply::tool_calls(&refs)
    }

    /// HTTP `status` with a JSON body.
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::raw(status, "application/json", &body.to_string())
    }

    /// HTTP `status` with any body.
    pub fn raw(status: u16, content_type: &str, text: &str) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Full {
                content_type: content_type.into(),
                text: text.into(),
            },
            delay: Duration::ZERO,
            hold: None,
        }
    }

    /// A 200 text completion with [`usage`].
    pub fn text(content: &str) -> Reply {
        Reply::json(
            200,
            completion(
                json!({"role": "assistant", "content": content}),
                "stop",
                Some(usage()),
            ),
        )
    }

    /// A 200 completion calling tools: `(id, name, arguments)` each, with [`usage`].
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Reply {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function",
                       "function": {"name": name, "arguments": args}})
            })
            .collect();
        Reply::json(
            200,
            completion(
                json!({"role": "assistant", "content": null, "tool_calls": calls}),
                "tool_calls",
                Some(usage()),
            ),
        )
    }

    /// An error status with the OpenAI error body `{"error": {"message", "type"}}`.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply::json(
            status,
            json!({"error": {"message": message, "type": "scripted_error"}}),
        )
    }

    /// An SSE stream: each event its own chunk (`data: EVENT\n\n`), then `data: [DONE]`.
    pub fn sse(events: &[Value]) -> Reply {
        let mut chunks: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        chunks.push("data: [DONE]\n\n".into());
        Reply::sse_chunks(chunks)
    }

    /// An SSE stream written exactly as these pieces (split anywhere, even inside a line).
    pub fn sse_chunks(chunks: Vec<String>) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: Body::Sse {
                chunks,
                pause: Duration::from_millis(5),
                complete: true,
            },
            delay: Duration::ZERO,
            hold: None,
        }
    }

    /// A streamed text reply in these pieces, with a usage chunk when `with_usage`.
    pub fn stream_text(pieces: &[&str], with_usage: bool) -> Reply {
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        events.extend(pieces.iter().map(|p| chunk(json!({"content": p}), None)));
        events.push(chunk(json!({}), Some("stop")));
        if with_usage {
            events.push(usage_chunk(usage()));
        }
        Reply::sse(&events)
    }

    /// A streamed call of tool `name` whose arguments arrive in these pieces.
    pub fn stream_tool_call(id: &str, name: &str, pieces: &[&str], with_usage: bool) -> Reply {
        let mut events = vec![chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id,
                "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        )];
        events.extend(pieces.iter().map(|p| {
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                None,
            )
        }));
        events.push(chunk(json!({}), Some("tool_calls")));
        if with_usage {
            events.push(usage_chunk(usage()));
        }
        Reply::sse(&events)
    }

    /// A reply that never comes: the server holds the connection until the client closes.
    pub fn hang() -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: Body::Hang,
            delay: Duration::ZERO,
            hold: None,
        }
    }

    /// The connection closed without an answer.
    pub fn close() -> Reply {
        Reply {
            body: Body::Close,
            ..Reply::hang()
        }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Holds the reply until the server has received `requests` requests in all (this
    /// one counted), waiting at most `limit`: a test proving that calls are concurrent
    /// holds the first until the second arrives. When the wait runs out (the calls were
    /// made one after the other) the answer is HTTP 500 `chat_server: held alone`, so
    /// the test fails on its result, never hangs.
    pub fn hold_until(mut self, requests: usize, limit: Duration) -> Reply {
        self.hold = Some((requests, limit));
        self
    }

    /// Waits this long before answering.
    pub fn delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// An SSE reply broken off after its first `keep` pieces (no end of the HTTP body).
    pub fn broken_after(mut self, keep: usize) -> Reply {
        if let Body::Sse {
            chunks, complete, ..
        } = &mut self.body
        {
            chunks.truncate(keep);
            *complete = false;
        }
        self
    }

    /// Sets the pause between SSE pieces.
    pub fn pause(mut self, pause: Duration) -> Reply {
        if let Body::Sse { pause: p, .. } = &mut self.body {
            *p = pause;
        }
        self
    }
}
