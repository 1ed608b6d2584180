//! `pactgraph runs graph`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::process::ExitCode;

use crate::runtime::RunId;
use crate::store::{RunInfo, RunStore, StoreError, StoredStatus};

use crate::cli::store::{self, StoreArgs};

/// The arguments of `pactgraph runs graph`.
#[derive(clap::Args, Debug, Clone)]
pub struct GraphArgs {
    /// The run: id, unique id prefix (6+ characters) or name; all runs if left out.
    pub run: Option<String>,
    /// Mermaid instead of DOT.
    #[arg(long)]
    pub mermaid: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runs graph [RUN] [--mermaid]`: the dependency graph (of RUN's connected runs, or of
/// every run with a dependency or a dependent) as DOT or Mermaid, nodes coloured by status.
pub async fn run(args: GraphArgs) -> ExitCode {
    let (store, root) = match &args.run {
        Some(key) => match super::opened(&args.store, key).await {
            Ok((s, id)) => (s, Some(id)),
            Err(code) => return code,
        },
        None => match store::open_required(&args.store).await {
            Ok(s) => (s, None),
            Err(code) => return code,
        },
    };
    let mermaid = args.mermaid;
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
