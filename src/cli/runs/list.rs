//! `pactgraph runs list`.

use std::process::ExitCode;

use comfy_table::{Table, presets};
use pactgraph::runtime::RunId;
use pactgraph::store::{AnyStore, RunFilter, RunInfo, RunStore, StoredStatus};
use serde::Serialize;

use super::ListFormat;
use crate::exit;
use crate::run::write_json;
use crate::store::{self, ago};

/// One run as `runs list --format json` prints it (keys in this order).
#[derive(Serialize)]
struct Row<'a> {
    id: RunId,
    name: Option<&'a str>,
    workflow: &'a str,
    status: StoredStatus,
    termination_reason: Option<&'static str>,
    steps: u32,
    created_ms: u64,
    updated_ms: u64,
    expires_ms: Option<u64>,
    waits_on: Option<String>,
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

/// The status with its reason when that says more (`stopped (cancelled)`).
pub fn status_text(info: &RunInfo) -> String {
    match (info.status, info.termination_reason) {
        (StoredStatus::Stopped | StoredStatus::Failed, Some(r)) => {
            format!("{} ({})", info.status, r.as_str())
        }
        (s, _) => s.to_string(),
    }
}

/// `runs list`: the table or JSON array of the runs `filter` selects, newest first.
pub async fn list(
    store: &AnyStore,
    status: Option<StoredStatus>,
    workflow: Option<String>,
    all: bool,
    format: ListFormat,
    limit: usize,
) -> ExitCode {
    let mut filter = RunFilter::default();
    if let Some(s) = status {
        filter = filter.status(s);
    }
    if let Some(w) = workflow {
        filter = filter.workflow(w);
    }
    if all {
        filter = filter.include_expired();
    }
    if limit > 0 {
        filter = filter.limit(limit);
    }
    let runs = match store.list(&filter).await {
        Ok(r) => r,
        Err(e) => return store::error(&e),
    };
    if limit > 0 && runs.len() == limit {
        eprintln!("pactgraph: the newest {limit} runs; --limit 0 lists them all");
    }
    // What each run waits on: its open dependencies for a waiting run.
    let mut waits = Vec::with_capacity(runs.len());
    for i in &runs {
        waits.push(match super::deps::waiting_on(store, i).await {
            Some(text) => Some(text),
            None => waits_on(i),
        });
    }
    match format {
        ListFormat::Json => {
            let rows: Vec<Row<'_>> = runs
                .iter()
                .zip(&waits)
                .map(|(i, waits)| Row {
                    id: i.id,
                    name: i.name.as_deref(),
                    workflow: &i.workflow,
                    status: i.status,
                    termination_reason: i.termination_reason.map(|r| r.as_str()),
                    steps: i.steps,
                    created_ms: i.created_ms,
                    updated_ms: i.updated_ms,
                    expires_ms: i.expires_ms,
                    waits_on: waits.clone(),
                })
                .collect();
            match write_json(Ok(std::io::stdout().lock()), &rows, "\n") {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => exit::failed(&format!("cannot write the list: {e}")),
            }
        }
        ListFormat::Table => {
            if runs.is_empty() {
                println!("no runs");
                return ExitCode::SUCCESS;
            }
            let now = pactgraph_now_ms();
            let mut table = Table::new();
            table.load_preset(presets::NOTHING).set_header([
                "ID", "NAME", "WORKFLOW", "STATUS", "STEPS", "UPDATED", "EXPIRES", "WAITS ON",
            ]);
            for (i, waits) in runs.iter().zip(&waits) {
                table.add_row([
                    i.id.to_string(),
                    i.name.clone().unwrap_or_else(|| "-".into()),
                    i.workflow.clone(),
                    status_text(i),
                    i.steps.to_string(),
                    ago(i.updated_ms, now),
                    expires_text(i.expires_ms, now),
                    waits.clone().unwrap_or_else(|| "-".into()),
                ]);
            }
            println!("{table}");
            ExitCode::SUCCESS
        }
    }
}

/// "never", "in 7 d" or "expired 2 h ago".
pub fn expires_text(expires_ms: Option<u64>, now: u64) -> String {
    match expires_ms {
        None => "never".into(),
        Some(e) if e <= now => format!("expired {}", ago(e, now)),
        Some(e) => ago(e, now),
    }
}

/// Milliseconds since the Unix epoch.
pub fn pactgraph_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
