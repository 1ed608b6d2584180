//! `pactgraph runs cancel`.

use std::process::ExitCode;
use std::time::Duration;

use crate::runtime::RunId;
use crate::store::{AnyStore, RunStore, StoreError, StoredStatus};

use crate::cli::exit;
use crate::cli::store::{self, StoreArgs};

/// The arguments of `pactgraph runs cancel`.
#[derive(clap::Args, Debug, Clone)]
pub struct CancelArgs {
    /// The run: id, unique id prefix (6+ characters) or name.
    pub run: String,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// How long `runs cancel` waits for a running run to stop.
const CANCEL_WAIT: Duration = Duration::from_secs(30);

/// `runs cancel`: stops the run, at once or (running) at its next step.
pub async fn run(args: CancelArgs) -> ExitCode {
    let (store, id) = match super::opened(&args.store, &args.run).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let store = &store;
    let info = match store.cancel(id).await {
        Ok(i) => i,
        Err(e @ StoreError::WrongStatus { .. }) => return exit::failed(&e.to_string()),
        Err(e) => return store::error(&e),
    };
    if info.status != StoredStatus::Running {
        println!("run {id} cancelled");
        return settle_dependents(store, id).await;
    }
    // Running: its driver stops it at its next step (killing its programs); wait for it.
    let start = std::time::Instant::now();
    while start.elapsed() < CANCEL_WAIT {
        tokio::time::sleep(Duration::from_millis(100)).await;
        match store.info(id).await {
            Ok(i) if i.status == StoredStatus::Running => {}
            Ok(i) if i.status == StoredStatus::Stopped => {
                println!("run {id} cancelled (it was running; its programs were killed)");
                return settle_dependents(store, id).await;
            }
            Ok(i) => {
                println!(
                    "run {id} is {}: it ended or let go before the cancel was seen",
                    i.status
                );
                return if i.status.is_ended() {
                    ExitCode::from(exit::FAILED)
                } else {
                    cancel_again(store, id).await
                };
            }
            Err(e) => return store::error(&e),
        }
    }
    println!("run {id}: cancel asked; it stops at its next step");
    ExitCode::SUCCESS
}

/// Settles the waiting runs that depend on the cancelled run `id` (and, in turn, on
/// those that end), by their failure policy; prints each one ended.
async fn settle_dependents(store: &AnyStore, id: RunId) -> ExitCode {
    let owner = crate::store::local_owner();
    let mut queue = vec![id];
    while let Some(next) = queue.pop() {
        match crate::store::settle_dependents(store, next, &owner, Duration::from_secs(30)).await {
            Ok(ended) => {
                for (dependent, reason) in ended {
                    println!("run {dependent} (waiting on {next}) ended: {reason}");
                    queue.push(dependent);
                }
            }
            Err(e) => return store::error(&e),
        }
    }
    ExitCode::SUCCESS
}

/// The run was let go (interrupted) before its driver saw the cancel: stop it now.
async fn cancel_again(store: &AnyStore, id: RunId) -> ExitCode {
    match store.cancel(id).await {
        Ok(i) if i.status == StoredStatus::Stopped => {
            println!("run {id} cancelled");
            settle_dependents(store, id).await
        }
        Ok(i) => exit::failed(&format!("run {id} is {}: not cancelled", i.status)),
        Err(e) => store::error(&e),
    }
}
