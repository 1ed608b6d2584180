//! `pactgraph runs export`.

use std::process::ExitCode;

use crate::store::RunStore;

use crate::cli::store::{self, StoreArgs};

/// The arguments of `pactgraph runs export`.
#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    /// The run: id, unique id prefix (6+ characters) or name.
    pub run: String,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runs export`: the saved-run JSON of the run's last checkpoint.
pub async fn run(args: ExportArgs) -> ExitCode {
    let (store, id) = match super::opened(&args.store, &args.run).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    match store.load(id).await {
        Ok(stored) => {
            println!("{}", stored.record.to_json_pretty());
            ExitCode::SUCCESS
        }
        Err(e) => store::error(&e),
    }
}
