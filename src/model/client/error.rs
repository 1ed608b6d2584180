//! [`ModelError`]: why a model call failed, naming the model, the HTTP status and the
//! server's `error.message`, and never the API key.

use super::Attempt;

/// Why a model call failed (after its retries, when the failure is retried).
///
/// Its `Display` names the model, the HTTP status and the server's `error.message`; the API
/// key never appears in it (a server message quoting the key has it replaced by
/// `[redacted]`). Every variant from a call keeps the call's [`Attempt`]s.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// The model's settings cannot be used (`${VAR}` unset, a base URL that is not
    /// `http(s)://`, the HTTP client not building).
    #[error("model `{model}`: {message}")]
    Config {
        /// The model (as written when it could not be expanded).
        model: String,
        /// What is wrong and where.
        message: String,
    },
    /// The server answered with an HTTP error status.
    #[error("model `{model}`: HTTP {status}: {message}{}", after(attempts))]
    Status {
        /// The model.
        model: String,
        /// The HTTP status.
        status: u16,
        /// The server's `error.message` (or the start of its body).
        message: String,
        /// Every attempt of the call.
        attempts: Vec<Attempt>,
    },
    /// The server could not be reached, or the connection failed.
    #[error("model `{model}`: connection failed: {message}{}", after(attempts))]
    Connection {
        /// The model.
        model: String,
        /// The transport's error.
        message: String,
        /// Every attempt of the call.
        attempts: Vec<Attempt>,
    },
    /// A request took longer than the model's `timeout_ms`.
    #[error(
        "model `{model}`: no complete reply within {timeout_ms} ms{}",
        after(attempts)
    )]
    Timeout {
        /// The model.
        model: String,
        /// The time limit of one request.
        timeout_ms: u64,
        /// Every attempt of the call.
        attempts: Vec<Attempt>,
    },
    /// The body is not a Chat Completions response (bad JSON, no `choices`), or a stream
    /// broke before its end.
    #[error("model `{model}`: HTTP {status}: {message}{}", after(attempts))]
    Malformed {
        /// The model.
        model: String,
        /// The HTTP status of the malformed answer.
        status: u16,
        /// What was wrong with the body.
        message: String,
        /// Every attempt of the call.
        attempts: Vec<Attempt>,
    },
    /// The call was cancelled (its request aborted at once).
    #[error("model `{model}`: cancelled")]
    Cancelled {
        /// The model.
        model: String,
        /// Every attempt of the call, the aborted one last.
        attempts: Vec<Attempt>,
    },
}

fn after(attempts: &[Attempt]) -> String {
    if attempts.len() > 1 {
        format!(" (after {} attempts)", attempts.len())
    } else {
        String::new()
    }
}

/// HTTP statuses retried (brief 10.5): 408, 409, 429, 500, 502, 503, 504.
pub fn status_is_retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500 | 502 | 503 | 504)
}

impl ModelError {
    /// The HTTP status the server answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Status { status, .. } | ModelError::Malformed { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }

    /// Whether this failure is retried (10.5): connection errors, time-outs, a malformed
    /// body or broken stream, and HTTP 408, 409, 429, 500, 502, 503, 504.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => status_is_retryable(*status),
            ModelError::Connection { .. }
            | ModelError::Timeout { .. }
            | ModelError::Malformed { .. } => true,
            ModelError::Config { .. } | ModelError::Cancelled { .. } => false,
        }
    }

    /// The model named in the error.
    pub fn model(&self) -> &str {
        match self {
            ModelError::Config { model, .. }
            | ModelError::Status { model, .. }
            | ModelError::Connection { model, .. }
            | ModelError::Timeout { model, .. }
            | ModelError::Malformed { model, .. }
            | ModelError::Cancelled { model, .. } => model,
        }
    }

    /// Every attempt of the call (empty for a [`ModelError::Config`]).
    pub fn attempts(&self) -> &[Attempt] {
        match self {
            ModelError::Config { .. } => &[],
            ModelError::Status { attempts, .. }
            | ModelError::Connection { attempts, .. }
            | ModelError::Timeout { attempts, .. }
            | ModelError::Malformed { attempts, .. }
            | ModelError::Cancelled { attempts, .. } => attempts,
        }
    }

    pub(crate) fn set_attempts(&mut self, all: Vec<Attempt>) {
        match self {
            ModelError::Config { .. } => {}
            ModelError::Status { attempts, .. }
            | ModelError::Connection { attempts, .. }
            | ModelError::Timeout { attempts, .. }
            | ModelError::Malformed { attempts, .. }
            | ModelError::Cancelled { attempts, .. } => *attempts = all,
        }
    }
}
