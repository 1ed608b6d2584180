//! `pactgraph runs ...`: the runs kept in the run store. One file per command.

mod accounting;
mod deps;
mod list;
mod prune;
mod resume;
mod show;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use pactgraph::runtime::RunId;
use pactgraph::store::{AnyStore, RunStore, StoredStatus};

use crate::store::{self, StoreArgs};

/// `pactgraph runs ...`. RUN is a full run id, a unique prefix of 6 or more of its
/// characters, or a run's name; an unknown or ambiguous one exits 1 (the candidates are
/// listed).
#[derive(Subcommand)]
pub enum RunsCommand {
    /// Runs, newest first: id, name, workflow, status, steps, updated, expires and what a
    /// waiting run waits on. Expired runs only with --all.
    List {
        /// Only runs with this status (queued, waiting, running, interrupted,
        /// awaiting_input, completed, stopped, failed).
        #[arg(long, value_name = "S", value_parser = parse_status)]
        status: Option<StoredStatus>,
        /// Only runs of this workflow.
        #[arg(long, value_name = "W")]
        workflow: Option<String>,
        /// Expired runs too.
        #[arg(long)]
        all: bool,
        /// A table, or a JSON array.
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormat,
        /// At most this many runs, the newest (0: all of them).
        #[arg(long, value_name = "N", default_value_t = 100)]
        limit: usize,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// A run's summary, accounting and dependencies; its trace (--trace) as a table; its
    /// last committed state (--state).
    Show {
        /// The run: id, unique id prefix (6+ characters) or name.
        run: String,
        /// The decision trace.
        #[arg(long)]
        trace: bool,
        /// The last committed state.
        #[arg(long)]
        state: bool,
        /// Text for people, or one JSON object.
        #[arg(long, value_enum, default_value = "human")]
        format: ShowFormat,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Continue a run: awaiting_input (with --answer), interrupted (from its last committed
    /// step), stopped by max_steps_exceeded (with a higher --max-steps) or failed (its
    /// failed step is tried again). Completed and cancelled runs are refused (exit 1).
    /// Prints and exits like `run`.
    Resume {
        /// The run: id, unique id prefix (6+ characters) or name.
        run: String,
        /// The answer to the pending question (a run awaiting input).
        #[arg(long)]
        answer: Option<String>,
        /// A higher `budgets.max_steps` (a run stopped by max_steps_exceeded, or a failed
        /// one).
        #[arg(long, value_name = "N")]
        max_steps: Option<u32>,
        /// Write the decision trace (a JSON array) to this file.
        #[arg(long, value_name = "FILE")]
        trace_out: Option<PathBuf>,
        /// Write the saved run (what `pactgraph resume FILE` reads) to this file.
        #[arg(long, value_name = "FILE")]
        state_out: Option<PathBuf>,
        /// No messages on stderr besides errors.
        #[arg(long)]
        quiet: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Stop a run (`stopped`, reason `cancelled`): a queued, waiting, paused or interrupted
    /// one at once; a running one at its next step, its programs killed.
    Cancel {
        /// The run: id, unique id prefix (6+ characters) or name.
        run: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Delete run records (all the filters given apply; at least one is needed) and print
    /// how many. Runs under a current lease are never deleted.
    Prune {
        /// Expired runs.
        #[arg(long)]
        expired: bool,
        /// Runs last written longer ago than this (`30m`, `24h`, `7d`).
        #[arg(long, value_name = "DUR")]
        older_than: Option<String>,
        /// Runs with this status.
        #[arg(long, value_name = "S", value_parser = parse_status)]
        status: Option<StoredStatus>,
        /// Count only; delete nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// The dependency graph as DOT (or Mermaid): RUN's dependencies and dependents, or
    /// every run with one; nodes coloured by status.
    Graph {
        /// The run: id, unique id prefix (6+ characters) or name; all runs if left out.
        run: Option<String>,
        /// Mermaid instead of DOT.
        #[arg(long)]
        mermaid: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print the saved-run JSON of a run (what `pactgraph resume FILE` reads).
    Export {
        /// The run: id, unique id prefix (6+ characters) or name.
        run: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// `runs list --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// A table.
    Table,
    /// A JSON array, one object per run.
    Json,
}

/// `runs show --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// Text for people.
    Human,
    /// One JSON object.
    Json,
}

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
            RunsCommand::List {
                status,
                workflow,
                all,
                format,
                limit,
                store,
            } => match store::open_required(&store).await {
                Ok(s) => list::list(&s, status, workflow, all, format, limit).await,
                Err(code) => code,
            },
            RunsCommand::Show {
                run,
                trace,
                state,
                format,
                store,
            } => match opened(&store, &run).await {
                Ok((s, id)) => show::show(&s, id, trace, state, format).await,
                Err(code) => code,
            },
            RunsCommand::Resume {
                run,
                answer,
                max_steps,
                trace_out,
                state_out,
                quiet,
                store,
            } => match opened(&store, &run).await {
                Ok((s, id)) => {
                    let outputs = crate::run::Outputs {
                        trace_out,
                        state_out,
                        quiet,
                        frozen_clock: false,
                    };
                    resume::resume(&s, id, answer, max_steps, &outputs).await
                }
                Err(code) => code,
            },
            RunsCommand::Cancel { run, store } => match opened(&store, &run).await {
                Ok((s, id)) => resume::cancel(&s, id).await,
                Err(code) => code,
            },
            RunsCommand::Prune {
                expired,
                older_than,
                status,
                dry_run,
                store,
            } => match store::open_required(&store).await {
                Ok(s) => prune::prune(&s, expired, older_than.as_deref(), status, dry_run).await,
                Err(code) => code,
            },
            RunsCommand::Graph {
                run: Some(run),
                mermaid,
                store,
            } => match opened(&store, &run).await {
                Ok((s, id)) => deps::graph(&s, Some(id), mermaid).await,
                Err(code) => code,
            },
            RunsCommand::Graph {
                run: None,
                mermaid,
                store,
            } => match store::open_required(&store).await {
                Ok(s) => deps::graph(&s, None, mermaid).await,
                Err(code) => code,
            },
            RunsCommand::Export { run, store } => match opened(&store, &run).await {
                Ok((s, id)) => show::export(&s, id).await,
                Err(code) => code,
            },
        }
    })
}

/// Opens the store and finds RUN in it.
async fn opened(args: &StoreArgs, key: &str) -> Result<(AnyStore, RunId), ExitCode> {
    let s = store::open_required(args).await?;
    let id = s.find(key).await.map_err(|e| store::error(&e))?;
    Ok((s, id))
}
