//! `pactgraph runs prune`.

use std::process::ExitCode;

use pactgraph::store::{AnyStore, PruneFilter, RunStore, StoreError, StoredStatus};

use crate::exit;
use crate::store::{self, parse_duration};

/// `runs prune`: deletes the runs the filters select and prints how many.
pub async fn prune(
    store: &AnyStore,
    expired: bool,
    older_than: Option<&str>,
    status: Option<StoredStatus>,
    dry_run: bool,
) -> ExitCode {
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
