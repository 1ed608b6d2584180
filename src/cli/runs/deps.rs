//! Run dependencies on the command line: what a waiting run waits on (`runs list`), a
//! run's dependencies and dependents (`runs show`).

use pactgraph::runtime::RunId;
use pactgraph::store::{AnyStore, DependencySpec, RunInfo, RunStore, StoreError, StoredStatus};
use serde_json::{Value, json};

/// A run's dependencies (with their rows; `None` for one pruned since) and dependents.
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
pub async fn links(store: &AnyStore, id: RunId) -> Result<Links, StoreError> {
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
pub async fn waiting_on(store: &AnyStore, info: &RunInfo) -> Option<String> {
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
