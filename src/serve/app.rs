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
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::trace::TraceLayer;

use super::ExecutorFor;
use super::auth::Auth;
use super::catalog::Catalog;
use super::error::ApiError;
use super::metrics::Metrics;
use super::routes;
use crate::store::AnyStore;

/// What every handler shares.
pub struct AppState {
    /// The run store.
    pub store: AnyStore,
    /// The documents under `--workflows`.
    pub catalog: Catalog,
    /// The executor of a stored run.
    pub executor_for: ExecutorFor,
    /// The token, when `--token-env` was given.
    pub auth: Option<Auth>,
    /// `/metrics`.
    pub metrics: Metrics,
    /// The runs resumed through the API, driven here.
    pub tasks: TaskTracker,
    /// Cancelled when the server stops: drives are interrupted, streams end.
    pub stop: CancellationToken,
    /// The lease taken on a run driven here.
    pub lease: Duration,
    /// `--max-body`.
    pub max_body: u64,
    /// The event streams followed at once (a permit each).
    pub streams: Arc<tokio::sync::Semaphore>,
    /// How often an event stream looks for new events.
    pub event_poll: Duration,
    /// How often an idle event stream sends a keep-alive comment.
    pub keep_alive: Duration,
}

/// Shared state.
pub type Shared = Arc<AppState>;

/// The header that carries the request id (set when absent, echoed in the response).
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Request ids `req-<process start>-<n>`: unique per server, rising.
#[derive(Clone, Debug)]
struct Ids {
    prefix: Arc<str>,
    next: Arc<AtomicU64>,
}

impl MakeRequestId for Ids {
    fn make_request_id<B>(&mut self, _request: &axum::http::Request<B>) -> Option<RequestId> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        HeaderValue::from_str(&format!("{}-{n}", self.prefix))
            .ok()
            .map(RequestId::new)
    }
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
        .fallback(routes::unknown_api);
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
    app.layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
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
        .layer(SetRequestIdLayer::new(REQUEST_ID, ids))
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
