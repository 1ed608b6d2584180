//! `pactgraph runs resume`.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::runtime::Clock;
use crate::serve::{ResumeRefused, plan_resume};
use crate::store::{Continue, RunStore};

use crate::cli::drive::{Target, continue_run, executor_of};
use crate::cli::exit;
use crate::cli::outcome::{Outputs, ShapeArgs};
use crate::cli::run::with_max_steps;
use crate::cli::store::{self, CheckpointArgs, StoreArgs};

/// The arguments of `pactgraph runs resume`.
#[derive(clap::Args, Debug, Clone)]
pub struct ResumeArgs {
    /// The run: id, unique id prefix (6+ characters) or name.
    pub run: String,
    /// The answer to the pending question (a run awaiting input).
    #[arg(long)]
    pub answer: Option<String>,
    /// A higher `budgets.max_steps` (a run stopped by max_steps_exceeded, or a failed
    /// one).
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,
    /// Write the decision trace (a JSON array) to this file.
    #[arg(long, value_name = "FILE")]
    pub trace_out: Option<PathBuf>,
    /// Write the saved run (what `pactgraph resume FILE` reads) to this file.
    #[arg(long, value_name = "FILE")]
    pub state_out: Option<PathBuf>,
    /// No messages on stderr besides errors.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub shape: ShapeArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub checkpoints: CheckpointArgs,
}

/// `runs resume`: continues the run as its status allows (see `docs/spec/cli.md`) and
/// prints like `run`.
pub async fn run(args: ResumeArgs) -> ExitCode {
    let (store, id) = match super::opened(&args.store, &args.run).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let outputs = Outputs {
        trace_out: args.trace_out,
        state_out: args.state_out,
        quiet: args.quiet,
        frozen_clock: false,
        shape: args.shape,
        stream: None,
    };
    let (answer, max_steps) = (args.answer, args.max_steps);
    let stored = match store.load(id).await {
        Ok(s) => s,
        Err(e) => return store::error(&e),
    };
    let budget = stored.record.document.budgets.max_steps;
    let how = match plan_resume(&stored.info, answer.as_deref(), max_steps, budget) {
        Ok(how) => how,
        Err(ResumeRefused::Conflict(message)) => return exit::failed(&message),
        Err(ResumeRefused::Usage(message)) => return exit::usage(&message),
    };
    let mut graph = match stored.record.graph() {
        Ok(g) => g,
        Err(e) => return exit::failed(&format!("run {id}: {e}")),
    };
    let mut how = how;
    if let Some(n) = max_steps {
        graph = match with_max_steps(graph, n) {
            Ok(g) => g,
            Err(code) => return code,
        };
        how = Continue::Reopen(Some(Box::new(graph.to_document())));
    }
    let executor = match executor_of(&stored.record, graph, Clock::System) {
        Ok(e) => e,
        Err(e) => return exit::failed(&format!("run {id}: {e}")),
    };
    continue_run(
        &executor,
        Target::Stored(&store, id, args.checkpoints.get()),
        how,
        &outputs,
        None,
    )
    .await
}
