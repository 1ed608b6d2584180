//! `pactgraph runs prune`.

use std::process::ExitCode;

use crate::store::{PruneFilter, RunStore, StoreError, StoredStatus};

use crate::cli::exit;
use crate::cli::store::{self, StoreArgs, parse_duration};

/// The arguments of `pactgraph runs prune`.
#[derive(clap::Args, Debug, Clone)]
pub struct PruneArgs {
    /// Expired runs.
    #[arg(long)]
    pub expired: bool,
    /// Runs last written longer ago than this (`30m`, `24h`, `7d`).
    #[arg(long, value_name = "DUR")]
    pub older_than: Option<String>,
    /// Runs with this status.
    #[arg(long, value_name = "S", value_parser = super::parse_status)]
    pub status: Option<StoredStatus>,
    /// Count only; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runs prune`: deletes the runs the filters select and prints how many.
pub async fn run(args: PruneArgs) -> ExitCode {
    let store = match store::open_required(&args.store).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (expired, older_than, status, dry_run) = (
        args.expired,
        args.older_than.as_deref(),
        args.status,
        args.dry_run,
    );
    let mut filter = PruneFilter::default();
    if expired {
        filter = filter.expired();
    }
    if let Some(text) = older_than {
        match parse_duration("--older-than", text) {
            Ok(d) => filter = filter.older_than(d),
            Err(message) => return exit::usage(&message),
        }
    }
    if let Some(s) = status {
        filter = filter.status(s);
    }
    if dry_run {
        filter = filter.dry_run();
    }
    match store.prune(&filter).await {
        Ok(n) => {
            let runs = if n == 1 { "run" } else { "runs" };
            if dry_run {
                println!("{n} {runs} would be pruned (dry run: nothing deleted)");
            } else {
                println!("pruned {n} {runs}");
            }
            ExitCode::SUCCESS
        }
        Err(StoreError::NoPruneFilter) => exit::usage(
            "runs prune needs --expired, --older-than DUR or --status S (it never deletes \
             every run)",
        ),
        Err(e) => store::error(&e),
    }
}
