//! `pactgraph runs list`.

use std::process::ExitCode;

use crate::serve::views::list_rows;
use crate::store::{RunFilter, RunInfo, RunStore, StoredStatus};
use clap::ValueEnum;
use comfy_table::{Table, presets};

use crate::cli::exit;
use crate::cli::outcome::write_json;
use crate::cli::store::{self, StoreArgs, ago};

/// The arguments of `pactgraph runs list`.
#[derive(clap::Args, Debug, Clone)]
pub struct ListArgs {
    /// Only runs with this status (queued, waiting, running, interrupted,
    /// awaiting_input, completed, stopped, failed).
    #[arg(long, value_name = "S", value_parser = super::parse_status)]
    pub status: Option<StoredStatus>,
    /// Only runs of this workflow.
    #[arg(long, value_name = "W")]
    pub workflow: Option<String>,
    /// Expired runs too.
    #[arg(long)]
    pub all: bool,
    /// A table, or a JSON array.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ListFormat,
    /// At most this many runs, the newest (0: all of them).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: usize,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runs list --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// A table.
    Table,
    /// A JSON array, one object per run.
    Json,
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

/// `runs list`: the table or JSON array of the runs the filters select, newest first.
pub async fn run(args: ListArgs) -> ExitCode {
    let store = match store::open_required(&args.store).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let ListArgs {
        status,
        workflow,
        all,
        format,
        limit,
        ..
    } = args;
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
    let rows = list_rows(&store, &runs).await;
    match format {
        ListFormat::Json => match write_json(Ok(std::io::stdout().lock()), &rows, "\n") {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => exit::failed(&format!("cannot write the list: {e}")),
        },
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
            for (i, row) in runs.iter().zip(&rows) {
                table.add_row([
                    i.id.to_string(),
                    i.name.clone().unwrap_or_else(|| "-".into()),
                    i.workflow.clone(),
                    status_text(i),
                    i.steps.to_string(),
                    ago(i.updated_ms, now),
                    expires_text(i.expires_ms, now),
                    row.waits_on.clone().unwrap_or_else(|| "-".into()),
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
