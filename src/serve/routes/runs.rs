//! `/api/runs`: list, start, show, trace, state, messages, resume, cancel.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::body::JsonBody;
use super::super::error::ApiError;
use super::super::resume::{ResumeRefused, plan_resume};
use super::super::state::Shared;
use super::super::trace_values::trace_with_values;
use super::super::views::{links, list_rows, show_json};
use crate::runtime::{Executor, RunId, RunRecord, StartError, document_dir};
use crate::store::{
    Continue, CreateOptions, Dependencies, DriveOptions, DynStore, OnDepFailure, RunFilter,
    StoreError, StoredRun, StoredStatus, local_owner,
};

/// The default page size of `GET /api/runs`.
const DEFAULT_LIMIT: usize = 100;
/// The largest page.
const MAX_LIMIT: usize = 1_000;

/// `GET /api/runs` query.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    status: Option<String>,
    workflow: Option<String>,
    limit: Option<usize>,
    before: Option<String>,
    all: Option<bool>,
}

/// The query, or a 400 naming what is wrong.
fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(q)| q)
        .map_err(|e| ApiError::bad("bad_query", e.body_text()))
}

/// `GET /api/runs?status=&workflow=&limit=&before=&all=`: `{"runs": [as runs list
/// --format json], "next_before": RUN_ID or null}`, newest first.
pub async fn list(
    State(state): State<Shared>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = query(q)?;
    let mut filter = RunFilter::default();
    if let Some(s) = &q.status {
        let status = StoredStatus::parse(s).ok_or_else(|| {
            ApiError::bad(
                "bad_query",
                format!(
                    "status `{s}` is not a status (queued, waiting, running, interrupted, \
                     awaiting_input, completed, stopped, failed)"
                ),
            )
        })?;
        filter = filter.status(status);
    }
    if let Some(w) = q.workflow {
        filter = filter.workflow(w);
    }
    if q.all == Some(true) {
        filter = filter.include_expired();
    }
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::bad(
            "bad_query",
            format!("limit {limit}: expected 1 to {MAX_LIMIT}"),
        ));
    }
    if let Some(b) = &q.before {
        let id: RunId = b
            .parse()
            .map_err(|_| ApiError::bad("bad_query", format!("before `{b}` is not a run id")))?;
        filter = filter.before(id);
    }
    let runs = {
        let filter = filter.limit(limit);
        state.store.list(&filter).await?
    };
    let next = (runs.len() == limit)
        .then(|| runs.last().map(|i| i.id))
        .flatten();
    let rows = list_rows(&state.store, &runs).await;
    Ok(Json(json!({"runs": rows, "next_before": next})))
}

/// The run a path's `{id}` names (a full id, a unique prefix or a name): 404 when none.
pub(super) async fn find(state: &Shared, key: &str) -> Result<RunId, ApiError> {
    state.store.find(key).await.map_err(|e| match e {
        StoreError::NotFound { .. } | StoreError::Ambiguous { .. } => ApiError::NotFound {
            code: "unknown_run",
            message: e.to_string(),
        },
        e => e.into(),
    })
}

async fn load(state: &Shared, key: &str) -> Result<StoredRun, ApiError> {
    let id = find(state, key).await?;
    Ok(state.store.load(id).await?)
}

/// `GET /api/runs/{id}`: as `runs show --format json`.
pub async fn show(
    State(state): State<Shared>,
    UrlPath(key): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let stored = load(&state, &key).await?;
    let mut value = show_json(&stored, false, false);
    value["dependencies"] = links(&state.store, stored.info.id).await?.to_json();
    Ok(Json(value))
}

/// `GET /api/runs/{id}/trace` query.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceQuery {
    values: Option<bool>,
}

/// Events read from the store at once for `?values=true`.
const EVENTS_PAGE: usize = 1000;

/// `GET /api/runs/{id}/trace[?values=true]`: the decision trace (a JSON array); with
/// `values`, each node run's item also holds `values: {input, writes}` (see
/// `serve::trace_values`).
pub async fn trace(
    State(state): State<Shared>,
    UrlPath(key): UrlPath<String>,
    q: Result<Query<TraceQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = query(q)?;
    let stored = load(&state, &key).await?;
    if q.values != Some(true) {
        let value = show_json(&stored, true, false);
        return Ok(Json(value["trace"].clone()));
    }
    let id = stored.info.id;
    let mut events = Vec::new();
    loop {
        let after = events
            .last()
            .map_or(0, |e: &crate::runtime::RunEvent| e.seq);
        let page = state.store.events(id, after, EVENTS_PAGE).await?;
        let full = page.len() == EVENTS_PAGE;
        events.extend(page);
        if !full {
            break;
        }
    }
    Ok(Json(trace_with_values(
        &stored.record.run.trace().items_from(0),
        &events,
        &stored.record.document,
    )))
}

/// `GET /api/runs/{id}/state`: the last committed state.
pub async fn state(
    State(state): State<Shared>,
    UrlPath(key): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let stored = load(&state, &key).await?;
    Ok(Json(stored.record.run.state_json()))
}

/// `GET /api/runs/{id}/messages`: the agents' sessions as last committed, one per agent
/// node visit, policy decision or agent tool call, in the order they began (`runs show
/// --messages --format json` prints the same `sessions`): `{"run_id", "sessions":
/// [{"node", "visit", "model", "step", "messages", "caller"?}]}`.
pub async fn messages(
    State(state): State<Shared>,
    UrlPath(key): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let stored = load(&state, &key).await?;
    Ok(Json(json!({
        "run_id": stored.info.id,
        "sessions": stored.record.run.sessions(),
    })))
}

/// `POST /api/runs` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    workflow: String,
    #[serde(default)]
    input: Option<Value>,
    name: Option<String>,
    ttl: Option<String>,
    #[serde(default)]
    after: Vec<String>,
    dep_timeout: Option<String>,
    on_dep_failure: Option<String>,
    dep_result: Option<String>,
}

/// `POST /api/runs` `{"workflow", "input", "name"?, "ttl"?, "after"?, "dep_timeout"?,
/// "on_dep_failure"?, "dep_result"?}`: 201 `{"run_id", "status"}`, the run queued (or
/// waiting on `after`) for a worker, as `run --detach` stores it (the dependency fields
/// are `run`'s `--dep-timeout`, `--on-dep-failure` and `--dep-result`).
pub async fn create(
    State(state): State<Shared>,
    JsonBody(mut body): JsonBody<CreateBody>,
) -> Result<Response, ApiError> {
    let catalog = state.catalog.clone();
    let name = body.workflow.clone();
    let entry = tokio::task::spawn_blocking(move || catalog.find(&name))
        .await
        .map_err(|e| ApiError::Internal(format!("reading the workflows: {e}")))?
        .ok_or_else(|| ApiError::NotFound {
            code: "unknown_workflow",
            message: format!("no workflow `{}` under --workflows", body.workflow),
        })?;
    let path = entry.path.clone();
    let diagnostics = entry.diagnostics();
    let graph = entry
        .checked
        .into_valid()
        .map_err(|_| ApiError::BadRequest {
            code: "invalid_workflow",
            message: format!(
                "workflow `{}` ({}) is not valid; nothing was started",
                body.workflow, entry.file
            ),
            diagnostics: Some(diagnostics),
        })?;
    let doc = graph.to_document();
    let ttl = match (&body.ttl, &doc.retention) {
        (Some(t), _) => Some(duration("ttl", t)?),
        (None, Some(r)) => Some(duration("the document's retention", r)?),
        (None, None) => None,
    };
    let base_dir = document_dir(&path);
    let executor = Executor::builder(graph)
        .base_dir(&base_dir)
        .build()
        .map_err(|e| ApiError::bad("invalid_workflow", e.to_string()))?;
    let input = body.input.take().unwrap_or_else(|| json!({}));
    let run = executor.start(input).map_err(|e| input_error(&e))?;
    let mut record = RunRecord::new(doc, run);
    record.workflow_file = Some(path.display().to_string());
    record.base_dir = Some(base_dir.display().to_string());
    let mut options = CreateOptions::default();
    if let Some(n) = &body.name {
        options = options.name(n);
    }
    if let Some(ttl) = ttl {
        options = options.ttl(ttl);
    }
    if let Some(deps) = dependencies(&state, &body, &record).await? {
        options = options.after(deps);
    }
    let info = state
        .store
        .create(&record, &options)
        .await
        .map_err(|e| match e {
            StoreError::NameTaken { .. } => ApiError::Conflict(e.to_string()),
            e => e.into(),
        })?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"run_id": info.id, "status": info.status})),
    )
        .into_response())
}

/// The dependencies `body` names (`None` without `after`): each run found (404 when one is
/// not), `dep_timeout` a duration, `on_dep_failure` `abort` or `continue`, `dep_result` a
/// slice the workflow declares; a dependency field without `after` is a 400, as `run`'s
/// options are a usage error without `--after`.
async fn dependencies(
    state: &Shared,
    body: &CreateBody,
    record: &RunRecord,
) -> Result<Option<Dependencies>, ApiError> {
    if body.after.is_empty() {
        let given = [
            ("dep_timeout", body.dep_timeout.is_some()),
            ("on_dep_failure", body.on_dep_failure.is_some()),
            ("dep_result", body.dep_result.is_some()),
        ];
        if let Some((field, _)) = given.iter().find(|(_, set)| *set) {
            return Err(ApiError::bad(
                "bad_request",
                format!("`{field}` needs `after` (the runs this one waits for)"),
            ));
        }
        return Ok(None);
    }
    let mut after = Vec::with_capacity(body.after.len());
    for key in &body.after {
        after.push(find(state, key).await?);
    }
    let mut deps = Dependencies::new(after);
    if let Some(t) = &body.dep_timeout {
        deps = deps.timeout(duration("dep_timeout", t)?);
    }
    if let Some(p) = &body.on_dep_failure {
        let policy = OnDepFailure::parse(p).ok_or_else(|| {
            ApiError::bad(
                "bad_request",
                format!("on_dep_failure `{p}`: expected `abort` or `continue`"),
            )
        })?;
        deps = deps.on_failure(policy);
    }
    if let Some(slice) = &body.dep_result {
        if !record.document.slices.contains_key(slice.as_str()) {
            return Err(ApiError::bad(
                "bad_request",
                format!(
                    "dep_result `{slice}`: workflow `{}` declares no slice `{slice}`",
                    body.workflow
                ),
            ));
        }
        deps = deps.result_slice(slice);
    }
    Ok(Some(deps))
}

/// A duration (`30m`, `24h`, `7d`), or a 400.
fn duration(what: &str, text: &str) -> Result<std::time::Duration, ApiError> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        ApiError::bad(
            "bad_request",
            format!("{what} `{text}` is not a duration such as 30m, 24h or 7d: {e}"),
        )
    })
}

/// An input the workflow refuses: 400 with a diagnostic naming the slice.
fn input_error(e: &StartError) -> ApiError {
    let pointer = match e {
        StartError::SliceInvalid { slice, .. } => format!("/input/{slice}"),
        StartError::SystemNotAnObject => "/input/system".into(),
        _ => "/input".into(),
    };
    ApiError::BadRequest {
        code: "invalid_input",
        message: format!("the input does not fit the workflow: {e}"),
        diagnostics: Some(json!([{
            "code": "invalid_input",
            "severity": "error",
            "message": e.to_string(),
            "pointer": pointer,
        }])),
    }
}

/// `POST /api/runs/{id}/resume` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    answer: Option<String>,
}

/// `POST /api/runs/{id}/resume` `{"answer"?}`: as `runs resume`, the run driven by this
/// server: 202 `{"run_id", "status": "running"}`; 409 for a completed, cancelled or
/// running run; 400 for a paused run without an answer (or an answer to a run not
/// paused).
pub async fn resume(
    State(state): State<Shared>,
    UrlPath(key): UrlPath<String>,
    JsonBody(body): JsonBody<ResumeBody>,
) -> Result<Response, ApiError> {
    let stored = load(&state, &key).await?;
    let id = stored.info.id;
    let budget = stored.record.document.budgets.max_steps;
    let how =
        plan_resume(&stored.info, body.answer.as_deref(), None, budget).map_err(|e| match e {
            ResumeRefused::Conflict(m) => ApiError::Conflict(m),
            ResumeRefused::Usage(m) => ApiError::bad(
                "bad_request",
                m.replace("--answer TEXT", "`answer`")
                    .replace("--answer", "`answer`"),
            ),
        })?;
    let executor = (state.executor_for)(&stored)
        .map_err(|e| ApiError::Internal(format!("run {id}: {e}")))?
        .with_events(state.events.clone());
    // Claimed before answering, so a 202 means this server holds the run.
    let owner = local_owner();
    state.store.claim(id, &owner, state.lease).await?;
    spawn_drive(&state, executor, id, owner, how);
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"run_id": id, "status": "running"})),
    )
        .into_response())
}

/// Drives run `id` here (its lease already held by `owner`), a task of the server's, until
/// it ends, pauses or the server stops (then its step in flight is abandoned and the run
/// interrupted).
fn spawn_drive(state: &Shared, executor: Executor, id: RunId, owner: String, how: Continue) {
    let state = Arc::clone(state);
    let tasks = state.tasks.clone();
    let drive = async move {
        let since = crate::store::Clock::system().now_ms();
        let options = DriveOptions::default().lease(state.lease);
        let drive = state.store.drive(&executor, id, &owner, &options, how);
        tokio::select! {
            result = drive => match result {
                Ok(run) => {
                    state.metrics.observe_run(&run, since);
                    tracing::info!(target: "pactgraph::serve", "run {id} ended {} after {} steps", run.status(), run.steps());
                }
                Err(e) => tracing::warn!(target: "pactgraph::serve", "run {id} could not be run: {e}"),
            },
            () = state.stop.cancelled() => {
                if let Err(e) = state.store.interrupt(id, &owner).await {
                    tracing::warn!(target: "pactgraph::serve", "run {id}: interrupting: {e}");
                } else {
                    tracing::info!(target: "pactgraph::serve", "run {id} interrupted (resumable)");
                }
            }
        }
    };
    tasks.spawn(drive);
}

/// `POST /api/runs/{id}/cancel`: as `runs cancel`: a queued, waiting, paused or
/// interrupted run stops at once (200, and the runs waiting on it are settled); a
/// running one at its next step (202, `cancel_requested`); an ended one is refused (409).
pub async fn cancel(
    State(state): State<Shared>,
    UrlPath(key): UrlPath<String>,
) -> Result<Response, ApiError> {
    let id = find(&state, &key).await?;
    let info = state.store.cancel(id).await?;
    if info.status == StoredStatus::Running {
        return Ok((
            StatusCode::ACCEPTED,
            Json(json!({"run_id": id, "status": info.status, "cancel_requested": true})),
        )
            .into_response());
    }
    let ended = settle_all(&state, id).await?;
    Ok(
        Json(json!({"run_id": id, "status": info.status, "dependents_ended": ended}))
            .into_response(),
    )
}

/// Settles the runs waiting on the cancelled run `id`, and on those that end in turn.
async fn settle_all(state: &Shared, id: RunId) -> Result<Vec<Value>, ApiError> {
    let owner = local_owner();
    let mut queue = vec![id];
    let mut ended = Vec::new();
    while let Some(next) = queue.pop() {
        for (dependent, reason) in state
            .store
            .settle_dependents(next, &owner, std::time::Duration::from_secs(30))
            .await?
        {
            ended.push(json!({"run_id": dependent, "reason": reason.to_string()}));
            queue.push(dependent);
        }
    }
    Ok(ended)
}
