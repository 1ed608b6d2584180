//! The API's errors: `{"error": {"code", "message"}}` with the status that fits
//! (`diagnostics` too for an invalid input).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::store::StoreError;

/// What went wrong with a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// 400: bad JSON, unknown fields, a bad query or an invalid input; `diagnostics` says
    /// what and where.
    #[error("{message}")]
    BadRequest {
        /// `bad_json`, `invalid_input`, `bad_query`, ...
        code: &'static str,
        /// What is wrong.
        message: String,
        /// The validator's diagnostics, for an invalid input or workflow.
        diagnostics: Option<Value>,
    },
    /// 401: no token, or a wrong one.
    #[error("{0}")]
    Unauthorized(String),
    /// 404: an unknown workflow, run or path.
    #[error("{message}")]
    NotFound {
        /// `unknown_run`, `unknown_workflow`, `unknown_path`.
        code: &'static str,
        /// What was not found.
        message: String,
    },
    /// 405: the path exists, not with this method.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 409: the run's status does not allow it.
    #[error("{0}")]
    Conflict(String),
    /// 413: the body is over `--max-body` (what and by how much).
    #[error("{0}")]
    TooLarge(String),
    /// 503: the server is at a limit (event streams); try again later.
    #[error("{0}")]
    Busy(String),
    /// 501: Graphviz's `dot` is not installed on the server.
    #[error("{0}")]
    NotImplemented(String),
    /// 500: the store or the server failed.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// A 400 with `code`.
    pub fn bad(code: &'static str, message: impl Into<String>) -> Self {
        Self::BadRequest {
            code,
            message: message.into(),
            diagnostics: None,
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::NotFound { .. } => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            Self::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable code in the body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest { code, .. } | Self::NotFound { code, .. } => code,
            Self::Unauthorized(_) => "unauthorized",
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::Conflict(_) => "conflict",
            Self::TooLarge(_) => "body_too_large",
            Self::NotImplemented(_) => "not_implemented",
            Self::Busy(_) => "busy",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { .. } | StoreError::Ambiguous { .. } => Self::NotFound {
                code: "unknown_run",
                message: e.to_string(),
            },
            StoreError::WrongStatus { .. } | StoreError::LeaseHeld { .. } => {
                Self::Conflict(e.to_string())
            }
            // Store errors name runs and statements, never the URL's password (it is
            // redacted when the store is opened).
            e => Self::Internal(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(target: "pactgraph::serve", "{self}");
        }
        let mut error = json!({"code": self.code(), "message": self.to_string()});
        if let Self::BadRequest {
            diagnostics: Some(d),
            ..
        } = self
        {
            error["diagnostics"] = d;
        }
        (status, Json(json!({ "error": error }))).into_response()
    }
}
