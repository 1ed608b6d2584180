//! The router: the routes, the guard every request passes (body size, token), request
//! ids and logs, CORS when asked.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::TraceLayer;

use super::error::ApiError;
use super::routes;
use super::state::Shared;

/// The header that carries the request id (set when absent, echoed in the response).
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Request ids `<pid in hex>-<n>`: unique per server, rising.
#[derive(Clone, Debug)]
struct Ids {
    prefix: Arc<str>,
    next: Arc<AtomicU64>,
}

/// Gives the request an id (`X-Request-Id`, kept when the client sent a short printable
/// one) before it is logged, and echoes it in the response.
async fn request_id(State(ids): State<Ids>, mut req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(REQUEST_ID)
        .filter(|v| {
            v.len() <= 64
                && v.to_str()
                    .is_ok_and(|t| t.chars().all(|c| c.is_ascii_graphic()))
        })
        .cloned();
    let id = match given {
        Some(v) => v,
        None => {
            let n = ids.next.fetch_add(1, Ordering::Relaxed);
            match HeaderValue::from_str(&format!("{}-{n}", ids.prefix)) {
                Ok(v) => v,
                Err(_) => return next.run(req).await,
            }
        }
    };
    req.headers_mut().insert(REQUEST_ID, id.clone());
    let mut res = next.run(req).await;
    res.headers_mut().insert(REQUEST_ID, id);
    res
}

/// The router over `state`, with CORS for `cors` when given.
pub fn router(state: Shared, cors: Option<HeaderValue>) -> Router {
    let api = Router::new()
        .route("/workflows", get(routes::workflows::list))
        .route("/workflows/{name}", get(routes::workflows::show))
        .route(
            "/workflows/{name}/graph.dot",
            get(routes::workflows::graph_dot),
        )
        .route(
            "/workflows/{name}/graph.svg",
            get(routes::workflows::graph_svg),
        )
        .route("/runs", get(routes::runs::list).post(routes::runs::create))
        .route("/runs/{id}", get(routes::runs::show))
        .route("/runs/{id}/trace", get(routes::runs::trace))
        .route("/runs/{id}/state", get(routes::runs::state))
        .route("/runs/{id}/messages", get(routes::runs::messages))
        .route("/runs/{id}/events", get(routes::events::events))
        .route("/runs/{id}/resume", post(routes::runs::resume))
        .route("/runs/{id}/cancel", post(routes::runs::cancel))
        .route("/session", post(routes::session))
        .fallback(routes::unknown_api)
        .method_not_allowed_fallback(routes::wrong_method);
    let ids = Ids {
        prefix: Arc::from(format!("{:x}", std::process::id())),
        next: Arc::new(AtomicU64::new(1)),
    };
    let limit = usize::try_from(state.max_body).unwrap_or(usize::MAX);
    let mut app = Router::new()
        .nest("/api", api)
        .route("/healthz", get(routes::healthz))
        .route("/metrics", get(routes::metrics))
        .merge(super::ui::routes())
        .fallback(routes::unknown)
        .method_not_allowed_fallback(routes::wrong_method)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), guard))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state);
    if let Some(origin) = cors {
        app = app.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list([origin]))
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, REQUEST_ID]),
        );
    }
    app.layer(
        TraceLayer::new_for_http()
            .make_span_with(|req: &Request| {
                let id = req
                    .headers()
                    .get(REQUEST_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                // The path only: a query names runs and filters, never a secret, but
                // there is no need to log it.
                tracing::info_span!(
                    target: "pactgraph::serve",
                    "request",
                    id = %id,
                    method = %req.method(),
                    path = %req.uri().path(),
                )
            })
            .on_request(())
            .on_response(|res: &Response, latency: Duration, _span: &tracing::Span| {
                tracing::info!(
                    target: "pactgraph::serve",
                    status = res.status().as_u16(),
                    ms = latency.as_millis() as u64,
                    "response"
                );
            }),
    )
    .layer(middleware::from_fn_with_state(ids, request_id))
}

/// Refuses a body over `--max-body` from its `Content-Length` before reading it (413),
/// and an `/api` or `/metrics` request without the token when one is required (401).
async fn guard(State(state): State<Shared>, req: Request, next: Next) -> Response {
    if let Some(length) = req.headers().get(CONTENT_LENGTH) {
        match length
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            Some(n) if n > state.max_body => {
                return ApiError::TooLarge(format!(
                    "the body ({n} bytes) is over the limit of {} bytes (--max-body)",
                    state.max_body
                ))
                .into_response();
            }
            Some(_) => {}
            None => {
                return ApiError::bad("bad_request", "Content-Length is not a number")
                    .into_response();
            }
        }
    }
    let path = req.uri().path();
    let guarded = (path.starts_with("/api/") || path == "/api" || path == "/metrics")
        && path != "/api/session";
    if guarded
        && let Some(auth) = &state.auth
        && !auth.allows(req.headers())
    {
        return ApiError::Unauthorized(
            "this server needs `Authorization: Bearer TOKEN` (the token of its --token-env) \
             or a session cookie from POST /api/session"
                .into(),
        )
        .into_response();
    }
    next.run(req).await
}
