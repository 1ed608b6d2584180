//! The handlers: runs, workflows, and the few routes outside `/api`.

pub mod events;
pub mod runs;
pub mod workflows;

use axum::Json;
use axum::extract::State;
use axum::http::header::{CONTENT_TYPE, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::auth::COOKIE_NAME;
use super::body::JsonBody;
use super::error::ApiError;
use super::state::Shared;
use crate::store::DynStore;

/// `GET /healthz`: the server answers and its store can be read.
pub async fn healthz(State(state): State<Shared>) -> Response {
    let one = crate::store::RunFilter::default().limit(1);
    match state.store.list(&one).await {
        Ok(_) => Json(json!({"status": "ok"})).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unavailable", "error": {"code": "store", "message": e.to_string()}})),
        )
            .into_response(),
    }
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(State(state): State<Shared>) -> Result<Response, ApiError> {
    let text = state
        .metrics
        .render(&state.store, state.feeds.counts())
        .await?;
    Ok((
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

/// The body of `POST /api/session`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionBody {
    /// The token (or `Authorization: Bearer` instead).
    token: Option<String>,
}

/// `POST /api/session` `{"token"}` (or with `Authorization: Bearer`): sets an HttpOnly,
/// SameSite=Strict session cookie, so a browser never carries the token in a URL.
pub async fn session(
    State(state): State<Shared>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<SessionBody>,
) -> Result<Response, ApiError> {
    let Some(auth) = &state.auth else {
        return Ok(Json(json!({"auth": false})).into_response());
    };
    let good = match &body.token {
        Some(t) => auth.is_token(t),
        None => auth.allows(&headers),
    };
    if !good {
        return Err(ApiError::Unauthorized(
            "the token is not this server's".into(),
        ));
    }
    let value = auth
        .open_session()
        .ok_or_else(|| ApiError::Internal("the system's random source failed".into()))?;
    let cookie = format!("{COOKIE_NAME}={value}; HttpOnly; SameSite=Strict; Path=/");
    Ok(([(SET_COOKIE, cookie)], Json(json!({"auth": true}))).into_response())
}

/// An unknown `/api` path: 404.
pub async fn unknown_api(uri: Uri) -> ApiError {
    ApiError::NotFound {
        code: "unknown_path",
        message: format!("no API route {}", uri.path()),
    }
}

/// A known path with another method: 405.
pub async fn wrong_method(method: axum::http::Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!("{} does not take {method}", uri.path()))
}

/// Any other unknown path: 404 (the web UI's pages are routed by `serve::ui`).
pub async fn unknown(uri: Uri) -> ApiError {
    ApiError::NotFound {
        code: "unknown_path",
        message: format!(
            "no route {}: the API is under /api, liveness at /healthz, metrics at /metrics",
            uri.path()
        ),
    }
}
