//! `pactgraph runs ...`: the runs kept in the run store. One file per command, each
//! with its `Args` struct.

mod accounting;
mod cancel;
mod export;
mod graph;
mod list;
mod prune;
mod resume;
mod show;
mod watch;

use std::process::ExitCode;

use crate::runtime::RunId;
use crate::store::{AnyStore, RunStore, StoredStatus};
use clap::Subcommand;

use crate::cli::store::{self, StoreArgs};

/// `pactgraph runs ...`. RUN is a full run id, a unique prefix of 6 or more of its
/// characters, or a run's name; an unknown or ambiguous one exits 1 (the candidates are
/// listed).
#[derive(Subcommand)]
pub enum RunsCommand {
    /// Runs, newest first: id, name, workflow, status, steps, updated, expires and what a
    /// waiting run waits on. Expired runs only with --all.
    List(list::ListArgs),
    /// A run's summary, accounting and dependencies; its trace (--trace) as a table; its
    /// last committed state (--state).
    Show(show::ShowArgs),
    /// Continue a run: awaiting_input (with --answer), interrupted (from its last committed
    /// step), stopped by max_steps_exceeded (with a higher --max-steps) or failed (its
    /// failed step is tried again). Completed and cancelled runs are refused (exit 1).
    /// Prints and exits like `run`.
    Resume(resume::ResumeArgs),
    /// Stop a run (`stopped`, reason `cancelled`): a queued, waiting, paused or interrupted
    /// one at once; a running one at its next step, its programs killed.
    Cancel(cancel::CancelArgs),
    /// Delete run records (all the filters given apply; at least one is needed) and print
    /// how many. Runs under a current lease are never deleted.
    Prune(prune::PruneArgs),
    /// The dependency graph as DOT (or Mermaid): RUN's dependencies and dependents, or
    /// every run with one; nodes coloured by status.
    Graph(graph::GraphArgs),
    /// Print the saved-run JSON of a run (what `pactgraph resume FILE` reads).
    Export(export::ExportArgs),
    /// Follow a run another process or a worker executes: its events as JSON Lines,
    /// those already committed first, then new ones as they are committed, until it ends
    /// (exit 0 completed, 1 failed, 3 stopped) or pauses (4).
    Watch(watch::WatchArgs),
}

/// `--status S` of `runs list` and `runs prune`.
fn parse_status(text: &str) -> Result<StoredStatus, String> {
    StoredStatus::parse(text).ok_or_else(|| {
        format!(
            "`{text}` is not a status (queued, waiting, running, interrupted, awaiting_input, \
             completed, stopped, failed)"
        )
    })
}

/// Runs a `runs` command.
pub fn run(command: RunsCommand) -> ExitCode {
    let rt = match store::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async move {
        match command {
            RunsCommand::List(args) => list::run(args).await,
            RunsCommand::Show(args) => show::run(args).await,
            RunsCommand::Resume(args) => resume::run(args).await,
            RunsCommand::Cancel(args) => cancel::run(args).await,
            RunsCommand::Prune(args) => prune::run(args).await,
            RunsCommand::Graph(args) => graph::run(args).await,
            RunsCommand::Export(args) => export::run(args).await,
            RunsCommand::Watch(args) => watch::run(args).await,
        }
    })
}

/// Opens the store and finds RUN in it.
async fn opened(args: &StoreArgs, key: &str) -> Result<(AnyStore, RunId), ExitCode> {
    let s = store::open_required(args).await?;
    let id = s.find(key).await.map_err(|e| store::error(&e))?;
    Ok((s, id))
}
