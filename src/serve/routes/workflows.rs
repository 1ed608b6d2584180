//! `/api/workflows`: the documents under `--workflows`, one by name, and its graph as
//! DOT or SVG (with a run's path painted over it).

use std::process::Stdio;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::super::catalog::Entry;
use super::super::error::ApiError;
use super::super::state::Shared;
use crate::runtime::DecisionTrace;
use crate::store::{DynStore, StoreError};
use crate::visualize::{DotOptions, to_dot};

/// Reads the catalog off the async threads.
async fn scan(state: &Shared) -> Result<Vec<Entry>, ApiError> {
    let catalog = state.catalog.clone();
    tokio::task::spawn_blocking(move || catalog.scan())
        .await
        .map_err(|e| ApiError::Internal(format!("reading the workflows: {e}")))
}

async fn entry(state: &Shared, name: &str) -> Result<Entry, ApiError> {
    scan(state)
        .await?
        .into_iter()
        .find(|e| e.name.as_deref() == Some(name))
        .ok_or_else(|| ApiError::NotFound {
            code: "unknown_workflow",
            message: format!("no workflow `{name}` under --workflows"),
        })
}

/// `GET /api/workflows`: `[{name, file, valid, diagnostics}]`.
pub async fn list(State(state): State<Shared>) -> Result<Json<Value>, ApiError> {
    let entries = scan(&state).await?;
    Ok(Json(Value::Array(
        entries.iter().map(Entry::summary).collect(),
    )))
}

/// `GET /api/workflows/{name}`: `{name, file, valid, diagnostics, document}`.
pub async fn show(
    State(state): State<Shared>,
    UrlPath(name): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let e = entry(&state, &name).await?;
    let mut value = e.summary();
    value["document"] = e
        .checked
        .graph
        .as_ref()
        .map(|g| serde_json::to_value(g.to_document()).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    Ok(Json(value))
}

/// `?run=ID` of the graph routes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphQuery {
    run: Option<String>,
}

/// The graph of workflow `name` as DOT, with run `run`'s path when given (a run of
/// another workflow is a 400).
async fn dot_text(
    state: &Shared,
    name: &str,
    q: Result<Query<GraphQuery>, QueryRejection>,
) -> Result<String, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad("bad_query", e.body_text()))?;
    let e = entry(state, name).await?;
    let graph = e
        .checked
        .graph
        .as_ref()
        .ok_or_else(|| ApiError::BadRequest {
            code: "invalid_workflow",
            message: format!("workflow `{name}` ({}) could not be read", e.file),
            diagnostics: Some(e.diagnostics()),
        })?;
    let trace: Option<DecisionTrace> = match &q.run {
        None => None,
        Some(key) => {
            let id = state.store.find(key).await.map_err(|err| match err {
                StoreError::NotFound { .. } | StoreError::Ambiguous { .. } => ApiError::NotFound {
                    code: "unknown_run",
                    message: err.to_string(),
                },
                err => err.into(),
            })?;
            let stored = state.store.load(id).await?;
            if stored.info.workflow != name {
                return Err(ApiError::bad(
                    "bad_query",
                    format!(
                        "run {id} is a run of workflow `{}`, not `{name}`",
                        stored.info.workflow
                    ),
                ));
            }
            Some(stored.record.run.trace().clone())
        }
    };
    let options = match &trace {
        Some(t) => DotOptions::with_trace(t),
        None => DotOptions::default(),
    };
    Ok(to_dot(graph, &options))
}

/// `GET /api/workflows/{name}/graph.dot[?run=ID]`.
pub async fn graph_dot(
    State(state): State<Shared>,
    UrlPath(name): UrlPath<String>,
    q: Result<Query<GraphQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let text = dot_text(&state, &name, q).await?;
    Ok(([(CONTENT_TYPE, "text/vnd.graphviz; charset=utf-8")], text).into_response())
}

/// `GET /api/workflows/{name}/graph.svg[?run=ID]`: drawn by Graphviz's `dot` here; 501
/// when it is not installed.
pub async fn graph_svg(
    State(state): State<Shared>,
    UrlPath(name): UrlPath<String>,
    q: Result<Query<GraphQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let text = dot_text(&state, &name, q).await?;
    let svg = render_svg("dot", &text).await?;
    Ok(([(CONTENT_TYPE, "image/svg+xml")], svg).into_response())
}

/// Runs `program -Tsvg` (no shell) on `dot`, its output read from its stdout.
async fn render_svg(program: &str, dot: &str) -> Result<Vec<u8>, ApiError> {
    let mut child = match tokio::process::Command::new(program)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ApiError::NotImplemented(
                "Graphviz's `dot` is not installed on the server: graph.svg cannot be drawn \
                 (graph.dot can)"
                    .into(),
            ));
        }
        Err(e) => return Err(ApiError::Internal(format!("running Graphviz's `dot`: {e}"))),
    };
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| ApiError::Internal("Graphviz's `dot` has no stdin".into()))?;
    let input = dot.to_string();
    // Fed while its output is read, so neither side waits on the other.
    let feed = tokio::spawn(async move {
        let _ = stdin.write_all(input.as_bytes()).await;
    });
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| ApiError::Internal(format!("running Graphviz's `dot`: {e}")))?;
    let _ = feed.await;
    if !out.status.success() {
        return Err(ApiError::Internal(format!(
            "Graphviz's `dot` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}
