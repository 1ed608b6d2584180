//! The OpenAI-compatible Chat Completions client (feature `agents`): one [`ChatClient`] per
//! model, [`ChatClient::complete`] for one model call with its retries (brief 10.1, 10.5;
//! `docs/spec/models.md`).
//!
//! HTTP/1.1 over plain TCP or TLS (rustls with ring, the webpki roots), JSON or streamed
//! (SSE) replies, usage, retries with backoff and the server's `Retry-After`, a time limit
//! per request, and cancellation that aborts the request in flight.

mod env;
mod error;
mod retry;
mod wire;

use std::time::{Duration, Instant, SystemTime};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use error::{ModelError, status_is_retryable};
pub use retry::{BASE_BACKOFF, MAX_BACKOFF, MAX_RETRY_AFTER};

use crate::contracts::ModelSpec;
use crate::model::messages::{ChatMessage, ToolChoice, ToolDef, Usage};

/// The most bytes read from one response body (a larger body is malformed).
const MAX_BODY_BYTES: usize = 64 << 20;

/// One model call's request: the conversation so far and the tools offered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    /// The conversation, instructions first.
    pub messages: Vec<ChatMessage>,
    /// The tools offered (none: no `tools` field is sent).
    pub tools: Vec<ToolDef>,
    /// Which tool the model must call (none: no `tool_choice` field is sent).
    pub tool_choice: Option<ToolChoice>,
}

/// A model call's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    /// The assistant message (text, tool calls, or both).
    pub message: ChatMessage,
    /// `finish_reason` as the server sent it (`stop`, `tool_calls`, `length`, ...).
    pub finish_reason: Option<String>,
    /// The tokens used; `None` when the server sent no usage (unknown, never guessed).
    pub usage: Option<Usage>,
    /// Every attempt the call made, the successful one last.
    pub attempts: Vec<Attempt>,
}

/// One HTTP attempt of a model call, for the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The HTTP status, when the server answered.
    pub status: Option<u16>,
    /// Why the attempt failed (`None`: it succeeded).
    pub error: Option<String>,
    /// How long the attempt took, in milliseconds.
    pub duration_ms: u64,
    /// How long the client waited before it (backoff or `Retry-After`), in milliseconds.
    pub waited_ms: u64,
}

/// A piece of a streamed reply, published as it arrives (what is kept is the assembled
/// reply). A stream that breaks and is retried publishes its pieces again from the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelDelta {
    /// Text of the assistant message.
    Text(String),
    /// A fragment of the arguments of the tool call at `index`.
    ToolArguments {
        /// The tool call's index in the reply.
        index: usize,
        /// The fragment.
        text: String,
    },
}

/// A client for one model: `POST {base_url}/chat/completions`.
///
/// The API key is not kept: it is read from the model's `api_key_env` at each call and
/// sent only as `Authorization: Bearer` (none when the variable is unset or empty). The
/// client's `Debug` names the variable, never its value.
#[derive(Debug, Clone)]
pub struct ChatClient {
    model: String,
    base_url: String,
    endpoint: reqwest::Url,
    api_key_env: String,
    params: IndexMap<String, Value>,
    timeout: Duration,
    max_retries: u32,
    stream: bool,
    http: reqwest::Client,
}

/// How one attempt failed: the error, and the wait the server asked for.
type AttemptFailure = (ModelError, Option<Duration>);

impl ChatClient {
    /// A client for `spec`, with `${VAR}` and `${VAR:-default}` in `base_url` and `model`
    /// expanded from this process's environment.
    pub fn new(spec: &ModelSpec) -> Result<ChatClient, ModelError> {
        Self::with_env(spec, |name| std::env::var(name).ok())
    }

    /// Like [`ChatClient::new`], reading variables through `get`.
    pub fn with_env(
        spec: &ModelSpec,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<ChatClient, ModelError> {
        let config = |model: &str, message: String| ModelError::Config {
            model: model.to_string(),
            message,
        };
        let model = env::expand(&spec.model, "model", &get).map_err(|m| config(&spec.model, m))?;
        if model.trim().is_empty() {
            return Err(config(&spec.model, "model: the name is empty".into()));
        }
        let base_url =
            env::expand(&spec.base_url, "base_url", &get).map_err(|m| config(&model, m))?;
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        let lower = base_url.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(config(
                &model,
                format!("base_url `{base_url}` must start with http:// or https://"),
            ));
        }
        let endpoint = reqwest::Url::parse(&format!("{base_url}/chat/completions"))
            .map_err(|e| config(&model, format!("base_url `{base_url}` is not a URL: {e}")))?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("pactgraph/", env!("CARGO_PKG_VERSION")))
            // The key goes to `base_url` only: a redirect is an error naming its status.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| config(&model, format!("the HTTP client cannot be built: {e}")))?;
        Ok(ChatClient {
            model,
            base_url,
            endpoint,
            api_key_env: spec.api_key_env().to_string(),
            params: spec.params.clone(),
            timeout: Duration::from_millis(spec.timeout_ms()),
            max_retries: spec.max_retries(),
            stream: spec.stream,
            http,
        })
    }

    /// The model name sent (expanded).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL (expanded, without a trailing `/`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Whether replies are requested streamed.
    pub fn streams(&self) -> bool {
        self.stream
    }

    /// The request body [`ChatClient::complete`] sends for `req`.
    pub fn request_body(&self, req: &ChatRequest) -> Value {
        wire::request_body(&self.model, &self.params, req, self.stream)
    }

    /// One model call: sends `req`, retrying as brief 10.5 says (connection errors,
    /// time-outs, 408/409/429/5xx but 501, broken streams and malformed bodies; backoff
    /// with full jitter from 0.5 s doubling to 30 s, or the server's `Retry-After`), up to
    /// the model's `max_retries`. Each request is bounded by the model's `timeout_ms`.
    /// `cancel` aborts the request in flight (or the wait) at once. A streamed reply's
    /// pieces go to `on_delta` as they arrive.
    pub async fn complete(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
        on_delta: &mut (dyn FnMut(ModelDelta) + Send),
    ) -> Result<ChatReply, ModelError> {
        let body = serde_json::to_vec(&self.request_body(req)).map_err(|e| ModelError::Config {
            model: self.model.clone(),
            message: format!("the request cannot be encoded: {e}"),
        })?;
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut waited = Duration::ZERO;
        let mut retry = 0u32;
        loop {
            if cancel.is_cancelled() {
                return Err(self.cancelled(attempts));
            }
            let started = Instant::now();
            let outcome = tokio::select! {
                biased;
                _ = cancel.cancelled() => None,
                r = tokio::time::timeout(self.timeout, self.attempt(&body, on_delta)) => Some(r),
            };
            let duration_ms = millis(started.elapsed());
            let waited_ms = millis(waited);
            let (mut error, server_wait) = match outcome {
                None => {
                    attempts.push(Attempt {
                        status: None,
                        error: Some("cancelled".into()),
                        duration_ms,
                        waited_ms,
                    });
                    return Err(self.cancelled(attempts));
                }
                Some(Ok(Ok((status, parsed)))) => {
                    attempts.push(Attempt {
                        status: Some(status),
                        error: None,
                        duration_ms,
                        waited_ms,
                    });
                    return Ok(ChatReply {
                        message: parsed.message,
                        finish_reason: parsed.finish_reason,
                        usage: parsed.usage,
                        attempts,
                    });
                }
                Some(Ok(Err(failure))) => failure,
                Some(Err(_elapsed)) => (
                    ModelError::Timeout {
                        model: self.model.clone(),
                        timeout_ms: millis(self.timeout),
                        attempts: Vec::new(),
                    },
                    None,
                ),
            };
            attempts.push(Attempt {
                status: error.status(),
                error: Some(error.to_string()),
                duration_ms,
                waited_ms,
            });
            if !error.is_retryable() || retry >= self.max_retries {
                error.set_attempts(attempts);
                return Err(error);
            }
            let wait = server_wait.unwrap_or_else(|| retry::backoff(retry));
            tracing::debug!(model = %self.model, retry = retry + 1, wait_ms = millis(wait), %error, "model call retried");
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(self.cancelled(attempts)),
                _ = tokio::time::sleep(wait) => {}
            }
            waited = wait;
            retry += 1;
        }
    }

    fn cancelled(&self, attempts: Vec<Attempt>) -> ModelError {
        ModelError::Cancelled {
            model: self.model.clone(),
            attempts,
        }
    }

    /// The API key, read now: `None` when the variable is unset or empty.
    fn api_key(&self) -> Option<String> {
        std::env::var(&self.api_key_env)
            .ok()
            .filter(|k| !k.is_empty())
    }

    /// One HTTP request and its reply.
    async fn attempt(
        &self,
        body: &[u8],
        on_delta: &mut (dyn FnMut(ModelDelta) + Send),
    ) -> Result<(u16, wire::Parsed), AttemptFailure> {
        let key = self.api_key();
        let redact = |text: String| match &key {
            Some(k) if !k.is_empty() => text.replace(k.as_str(), "[redacted]"),
            _ => text,
        };
        let mut request = self
            .http
            .post(self.endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(k) = &key {
            request = request.bearer_auth(k);
        }
        let mut response = request.send().await.map_err(|e| {
            let message = redact(transport_message(e));
            (self.connection(message), None)
        })?;
        let status = response.status().as_u16();
        let server_wait = retry::server_wait(response.headers(), SystemTime::now());
        let malformed = |message: String| ModelError::Malformed {
            model: self.model.clone(),
            status,
            message,
            attempts: Vec::new(),
        };
        if !response.status().is_success() {
            let body = read_body(&mut response).await.unwrap_or_default();
            let error = ModelError::Status {
                model: self.model.clone(),
                status,
                message: redact(wire::server_message(&body)),
                attempts: Vec::new(),
            };
            return Err((error, server_wait));
        }
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let parsed = if is_sse {
            let mut assembler = wire::StreamAssembler::default();
            loop {
                match response.chunk().await {
                    Ok(Some(bytes)) => assembler
                        .feed(&bytes, on_delta)
                        .map_err(|m| (malformed(redact(m)), server_wait))?,
                    Ok(None) => break,
                    Err(e) => {
                        let m = format!("the stream broke: {}", transport_message(e));
                        return Err((malformed(redact(m)), server_wait));
                    }
                }
            }
            assembler.finish(on_delta)
        } else {
            match read_body(&mut response).await {
                Ok(body) => wire::parse_response(&body),
                Err(m) => Err(m),
            }
        };
        parsed
            .map(|p| (status, p))
            .map_err(|m| (malformed(redact(m)), server_wait))
    }

    fn connection(&self, message: String) -> ModelError {
        ModelError::Connection {
            model: self.model.clone(),
            message,
            attempts: Vec::new(),
        }
    }
}

/// Reads a whole body, at most [`MAX_BODY_BYTES`].
async fn read_body(response: &mut reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) => {
                if body.len() + bytes.len() > MAX_BODY_BYTES {
                    return Err(format!("the body is larger than {MAX_BODY_BYTES} bytes"));
                }
                body.extend_from_slice(&bytes);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(format!("the body broke off: {}", transport_message(e))),
        }
    }
}

/// A transport error with its causes, without the URL (the model is named instead).
fn transport_message(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
