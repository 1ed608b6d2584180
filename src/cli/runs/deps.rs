//! Run dependencies on the command line: what a waiting run waits on (`runs list`), a
//! run's dependencies and dependents (`runs show`), and `runs graph`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::process::ExitCode;

use pactgraph::runtime::RunId;
use pactgraph::store::{AnyStore, DependencySpec, RunInfo, RunStore, StoreError, StoredStatus};
use serde_json::{Value, json};

use crate::store;

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

/// `runs graph [RUN] [--mermaid]`: the dependency graph (of RUN's connected runs, or of
/// every run with a dependency or a dependent) as DOT or Mermaid, nodes coloured by status.
pub async fn graph(store: &AnyStore, root: Option<RunId>, mermaid: bool) -> ExitCode {
    let edges = match store.dependency_edges().await {
        Ok(e) => e,
        Err(e) => return store::error(&e),
    };
    let mut ids: BTreeSet<RunId> = edges.iter().flat_map(|(a, b)| [*a, *b]).collect();
    if let Some(root) = root {
        // The runs reachable from RUN through edges either way.
        let mut seen = BTreeSet::from([root]);
        let mut queue = VecDeque::from([root]);
        while let Some(id) = queue.pop_front() {
            for (a, b) in &edges {
                let next = if *a == id {
                    *b
                } else if *b == id {
                    *a
                } else {
                    continue;
                };
                if seen.insert(next) {
                    queue.push_back(next);
                }
            }
        }
        ids = seen;
    }
    let mut infos: BTreeMap<RunId, Option<RunInfo>> = BTreeMap::new();
    for id in &ids {
        let info = match store.info(*id).await {
            Ok(i) => Some(i),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return store::error(&e),
        };
        infos.insert(*id, info);
    }
    let edges: Vec<&(RunId, RunId)> = edges
        .iter()
        .filter(|(a, b)| ids.contains(a) && ids.contains(b))
        .collect();
    let text = if mermaid {
        render_mermaid(&infos, &edges)
    } else {
        render_dot(&infos, &edges)
    };
    print!("{text}");
    if ids.is_empty() {
        eprintln!("pactgraph: no run has dependencies");
    }
    ExitCode::SUCCESS
}

/// Fill colours by status (the same in DOT and Mermaid).
fn colour(status: Option<StoredStatus>) -> &'static str {
    match status {
        Some(StoredStatus::Completed) => "#c8e6c9",
        Some(StoredStatus::Running) => "#bbdefb",
        Some(StoredStatus::Waiting) => "#fff9c4",
        Some(StoredStatus::Queued) => "#eeeeee",
        Some(StoredStatus::Interrupted) => "#d1c4e9",
        Some(StoredStatus::AwaitingInput) => "#b2ebf2",
        Some(StoredStatus::Stopped) => "#ffe0b2",
        Some(StoredStatus::Failed) => "#ffcdd2",
        _ => "#ffffff",
    }
}

fn label(id: RunId, info: Option<&RunInfo>) -> (String, String, String) {
    match info {
        Some(i) => (
            id.to_string(),
            i.workflow.clone(),
            match i.termination_reason {
                Some(r) if i.status.is_ended() => format!("{} ({r})", i.status),
                _ => i.status.to_string(),
            },
        ),
        None => (id.to_string(), "?".into(), "pruned".into()),
    }
}

fn render_dot(infos: &BTreeMap<RunId, Option<RunInfo>>, edges: &[&(RunId, RunId)]) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut out = String::from(
        "digraph runs {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", \
         fontname=\"Helvetica\"];\n",
    );
    for (id, info) in infos {
        let (name, workflow, status) = label(*id, info.as_ref());
        out.push_str(&format!(
            "  \"{id}\" [label=\"{}\\n{}\\n{}\", fillcolor=\"{}\"];\n",
            esc(&name),
            esc(&workflow),
            esc(&status),
            colour(info.as_ref().map(|i| i.status))
        ));
    }
    for (a, b) in edges {
        out.push_str(&format!("  \"{a}\" -> \"{b}\";\n"));
    }
    out.push_str("}\n");
    out
}

fn render_mermaid(infos: &BTreeMap<RunId, Option<RunInfo>>, edges: &[&(RunId, RunId)]) -> String {
    let esc = |s: &str| s.replace('"', "#quot;");
    let mut out = String::from("flowchart LR\n");
    for (id, info) in infos {
        let (name, workflow, status) = label(*id, info.as_ref());
        out.push_str(&format!(
            "  r{id}[\"{}<br/>{}<br/>{}\"]\n  style r{id} fill:{}\n",
            esc(&name),
            esc(&workflow),
            esc(&status),
            colour(info.as_ref().map(|i| i.status))
        ));
    }
    for (a, b) in edges {
        out.push_str(&format!("  r{a} --> r{b}\n"));
    }
    out
}
