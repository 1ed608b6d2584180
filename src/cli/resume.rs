//! `pactgraph resume STATE_FILE --answer TEXT`: continue a paused run from a saved-run
//! file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::runtime::RunRecord;
use crate::store::{Checkpoints, Continue, CreateOptions, RunStore, StoreError, StoredStatus};

use crate::cli::drive::{Target, continue_run, executor_of};
use crate::cli::exit;
use crate::cli::outcome::{Outputs, ShapeArgs};
use crate::cli::store::{self, StoreArgs};

/// The arguments of `pactgraph resume`.
#[derive(clap::Args, Debug, Clone)]
pub struct ResumeArgs {
    /// The saved run written by `run --state-out` (rewritten if the run pauses again).
    pub state_file: PathBuf,
    /// The answer to the pending question.
    #[arg(long)]
    pub answer: String,
    /// Write the decision trace (a JSON array) to this file.
    #[arg(long, value_name = "FILE")]
    pub trace_out: Option<PathBuf>,
    /// Write the saved run here instead of over STATE_FILE.
    #[arg(long, value_name = "FILE")]
    pub state_out: Option<PathBuf>,
    /// No progress line: only the result on stdout.
    #[arg(long)]
    pub quiet: bool,
    /// Record zero timestamps and durations (see `run --frozen-clock`).
    #[arg(long)]
    pub frozen_clock: bool,
    #[command(flatten)]
    pub shape: ShapeArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `pactgraph resume STATE_FILE --answer TEXT`: the saved run is continued with the
/// answer; with a store, through it (imported first when the store does not have it yet).
pub fn run(args: ResumeArgs) -> ExitCode {
    let outputs = Outputs {
        trace_out: args.trace_out,
        state_out: args.state_out,
        quiet: args.quiet,
        frozen_clock: args.frozen_clock,
        shape: args.shape,
        stream: None,
    };
    let state_file = args.state_file.as_path();
    let text = match std::fs::read_to_string(state_file) {
        Ok(t) => t,
        Err(e) => return exit::failed(&format!("cannot read {}: {e}", state_file.display())),
    };
    let record = match RunRecord::from_json(&text) {
        Ok(r) => r,
        Err(e) => return exit::failed(&format!("{}: {e}", state_file.display())),
    };
    // The saved document is validated again: the runtime runs valid graphs only.
    let graph = match record.graph() {
        Ok(g) => g,
        Err(e) => return exit::failed(&format!("{}: {e}", state_file.display())),
    };
    let executor = match executor_of(&record, graph, outputs.clock()) {
        Ok(e) => e,
        Err(e) => return exit::failed(&format!("{}: {e}", state_file.display())),
    };
    let rt = match store::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let how = Continue::Answer(args.answer);
    rt.block_on(async {
        let store = match store::open(&args.store).await {
            Ok(s) => s,
            Err(code) => return code,
        };
        let Some(store) = store else {
            let target = Target::Memory(Box::new(record));
            return continue_run(&executor, target, how, &outputs, Some(state_file)).await;
        };
        if let Err(code) = import(&store, &record, state_file).await {
            return code;
        }
        let target = Target::Stored(&store, record.run_id, Checkpoints::default());
        continue_run(&executor, target, how, &outputs, Some(state_file)).await
    })
}

/// Makes sure `store` holds the saved run paused at the file's checkpoint: imported when
/// the store does not have it; a store that has it at another checkpoint exits 1
/// pointing at `runs resume`.
async fn import(
    store: &crate::store::AnyStore,
    record: &RunRecord,
    state_file: &Path,
) -> Result<(), ExitCode> {
    let id = record.run_id;
    match store.info(id).await {
        Ok(info) if info.seq == record.seq && info.status == StoredStatus::AwaitingInput => Ok(()),
        Ok(info) => Err(exit::failed(&format!(
            "{}: run {id} is in the store at step {} ({}), the file is at {}; \
             continue it with `pactgraph runs resume {id}`",
            state_file.display(),
            info.seq,
            info.status,
            record.seq
        ))),
        Err(StoreError::NotFound { .. }) => store
            .create(record, &CreateOptions::default())
            .await
            .map(|_| ())
            .map_err(|e| store::error(&e)),
        Err(e) => Err(store::error(&e)),
    }
}
