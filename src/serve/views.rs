//! The JSON views of stored runs that `runs list --format json`, `runs show --format
//! json` and the HTTP API print: written once here, used by both.

use serde::Serialize;
use serde_json::{Value, json};

use crate::runtime::{Accounting, RunId};
use crate::store::{DependencySpec, DynStore, RunInfo, StoreError, StoredRun, StoredStatus};

/// One run as `runs list --format json` and `GET /api/runs` show it (keys in this order).
#[derive(Debug, Serialize)]
pub struct ListRow<'a> {
    /// The run's id.
    pub run_id: RunId,
    /// Its name, if given.
    pub name: Option<&'a str>,
    /// Its workflow.
    pub workflow: &'a str,
    /// Its status.
    pub status: StoredStatus,
    /// Why it ended or paused.
    pub termination_reason: Option<&'static str>,
    /// Steps taken.
    pub steps: u32,
    /// Created (milliseconds since the Unix epoch).
    pub created_ms: u64,
    /// Last written.
    pub updated_ms: u64,
    /// When the record expires.
    pub expires_ms: Option<u64>,
    /// What a run that is not moving waits on.
    pub waits_on: Option<String>,
}

impl<'a> ListRow<'a> {
    /// The row of `info`, waiting on `waits` (see [`waits_on`] and [`waiting_on`]).
    pub fn new(info: &'a RunInfo, waits: Option<String>) -> Self {
        Self {
            run_id: info.id,
            name: info.name.as_deref(),
            workflow: &info.workflow,
            status: info.status,
            termination_reason: info.termination_reason.map(|r| r.as_str()),
            steps: info.steps,
            created_ms: info.created_ms,
            updated_ms: info.updated_ms,
            expires_ms: info.expires_ms,
            waits_on: waits,
        }
    }
}

/// What a run that is not moving waits on: an answer, its dependencies, or the owner
/// stepping it.
pub fn waits_on(info: &RunInfo) -> Option<String> {
    match info.status {
        StoredStatus::AwaitingInput => Some("an answer".into()),
        StoredStatus::Waiting => Some("its dependencies".into()),
        StoredStatus::Running => info.owner.as_ref().map(|o| format!("owner {o}")),
        _ => None,
    }
}

/// The rows of `runs`, each with what it waits on (a waiting run's open dependencies
/// read from `store`).
pub async fn list_rows<'a>(store: &dyn DynStore, runs: &'a [RunInfo]) -> Vec<ListRow<'a>> {
    let mut rows = Vec::with_capacity(runs.len());
    for info in runs {
        let waits = match waiting_on(store, info).await {
            Some(text) => Some(text),
            None => waits_on(info),
        };
        rows.push(ListRow::new(info, waits));
    }
    rows
}

/// `runs show --format json`: `{run: {run_id, ...}, question, message, usage_total,
/// accounting, dependencies, trace?, state?}`; `dependencies` is `[]` until set from
/// [`Links::to_json`].
pub fn show_json(stored: &StoredRun, trace: bool, state: bool) -> Value {
    let info = &stored.info;
    let run = &stored.record.run;
    let mut out = json!({
        "run": {
            "run_id": info.id,
            "name": info.name,
            "workflow": info.workflow,
            "status": info.status,
            "termination_reason": info.termination_reason.map(|r| r.as_str()),
            "steps": info.steps,
            "seq": info.seq,
            "attempt": info.attempt,
            "created_ms": info.created_ms,
            "updated_ms": info.updated_ms,
            "expires_ms": info.expires_ms,
            "owner": info.owner,
            "lease_expires_ms": info.lease_expires_ms,
            "cancel_requested": info.cancel_requested,
            "digest": info.digest,
            "workflow_file": stored.record.workflow_file,
        },
        "question": run.question(),
        "message": run.message(),
        "usage_total": run.usage_total(),
        "accounting": Accounting::from_trace(run.trace()),
        "dependencies": [],
    });
    if trace {
        out["trace"] = serde_json::to_value(run.trace()).unwrap_or(Value::Null);
    }
    if state {
        out["state"] = run.state_json();
    }
    out
}

/// A run's dependencies (with their rows; `None` for one pruned since) and dependents.
#[derive(Debug)]
pub struct Links {
    /// How the run was created to wait, if it was.
    pub spec: Option<DependencySpec>,
    /// Its dependencies in the order given.
    pub dependencies: Vec<(RunId, Option<RunInfo>)>,
    /// The runs created after it.
    pub dependents: Vec<RunInfo>,
}

impl Links {
    /// `{"on_failure", "deadline_ms", "result_slice", "after": [...], "dependents": [...]}`.
    pub fn to_json(&self) -> Value {
        let brief = |id: RunId, info: Option<&RunInfo>| {
            json!({
                "run_id": id,
                "workflow": info.map(|i| i.workflow.clone()),
                "status": info.map_or("pruned", |i| i.status.as_str()),
            })
        };
        json!({
            "on_failure": self.spec.as_ref().map(|s| s.on_failure.as_str()),
            "deadline_ms": self.spec.as_ref().map(|s| s.deadline_ms),
            "result_slice": self.spec.as_ref().and_then(|s| s.result_slice.clone()),
            "after": self.dependencies.iter().map(|(id, i)| brief(*id, i.as_ref())).collect::<Vec<_>>(),
            "dependents": self.dependents.iter().map(|i| brief(i.id, Some(i))).collect::<Vec<_>>(),
        })
    }
}

/// Reads run `id`'s dependencies and dependents.
pub async fn links(store: &dyn DynStore, id: RunId) -> Result<Links, StoreError> {
    let spec = store.dependency_spec(id).await?;
    let mut dependencies = Vec::new();
    for dep in spec.iter().flat_map(|s| s.after.iter()) {
        let info = match store.info(*dep).await {
            Ok(i) => Some(i),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        dependencies.push((*dep, info));
    }
    let dependents = store.dependents(id).await?;
    Ok(Links {
        spec,
        dependencies,
        dependents,
    })
}

/// `RUN (status), ...` of a waiting run's dependencies that are not final yet.
pub async fn waiting_on(store: &dyn DynStore, info: &RunInfo) -> Option<String> {
    if info.status != StoredStatus::Waiting {
        return None;
    }
    let links = links(store, info.id).await.ok()?;
    let open: Vec<String> = links
        .dependencies
        .iter()
        .filter_map(|(id, i)| match i {
            Some(i) if i.status.is_ended() => None,
            Some(i) => Some(format!("{id} ({})", i.status)),
            None => None,
        })
        .collect();
    Some(if open.is_empty() {
        "dependencies ended: starts when taken".into()
    } else {
        open.join(", ")
    })
}
