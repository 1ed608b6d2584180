//! `pactgraph runs resume` and `pactgraph runs cancel`.

use std::process::ExitCode;
use std::time::Duration;

use pactgraph::runtime::{Clock, Executor, RunId, TerminationReason};
use pactgraph::store::{AnyStore, Continue, RunStore, StoreError, StoredStatus};

use crate::exit;
use crate::run::{Outputs, drive_stored, with_max_steps};
use crate::store;

/// `runs resume`: continues the run as its status allows (see `docs/spec/cli.md`).
pub async fn resume(
    store: &AnyStore,
    id: RunId,
    answer: Option<String>,
    max_steps: Option<u32>,
    outputs: &Outputs,
) -> ExitCode {
    let stored = match store.load(id).await {
        Ok(s) => s,
        Err(e) => return store::error(&e),
    };
    let info = &stored.info;
    let reason = info.termination_reason;
    let budget = stored.record.document.budgets.max_steps;
    let refuse = |why: String| exit::failed(&format!("run {id} {why}"));
    let how = match (info.status, reason) {
        (StoredStatus::Completed, _) => {
            return refuse("is completed: there is nothing to resume".into());
        }
        (StoredStatus::Stopped, Some(TerminationReason::Cancelled)) => {
            return refuse("was cancelled: a cancelled run cannot be resumed".into());
        }
        (StoredStatus::Running, _) => {
            return refuse(format!(
                "is running, held by `{}`: it cannot be resumed while its owner runs it",
                info.owner.as_deref().unwrap_or("?")
            ));
        }
        (StoredStatus::AwaitingInput, _) => match answer.clone() {
            Some(a) => Continue::Answer(a),
            None => {
                return exit::usage(&format!(
                    "run {id} awaits input: give the answer with --answer TEXT"
                ));
            }
        },
        (StoredStatus::Stopped, Some(TerminationReason::MaxStepsExceeded)) => match max_steps {
            Some(n) if n > budget => Continue::Reopen(None),
            _ => {
                return refuse(format!(
                    "stopped at its step budget ({budget}): give a higher --max-steps"
                ));
            }
        },
        (StoredStatus::Stopped, r) => {
            return refuse(format!(
                "stopped ({}): only a run stopped by max_steps_exceeded can be resumed",
                r.map_or("no reason", |r| r.as_str())
            ));
        }
        (
            StoredStatus::Failed,
            Some(r @ (TerminationReason::DependencyFailed | TerminationReason::DependencyTimeout)),
        ) => {
            return refuse(format!(
                "failed before its first step ({r}): resuming cannot change its dependencies; \
                 start a new run"
            ));
        }
        (StoredStatus::Failed, _) => Continue::Reopen(None),
        _ => Continue::AsStored,
    };
    if answer_given_but_unused(&how, &answer) {
        return exit::usage(&format!(
            "run {id} is {}: --answer is only for a run awaiting input",
            info.status
        ));
    }
    let mut graph = match stored.record.graph() {
        Ok(g) => g,
        Err(e) => return exit::failed(&format!("run {id}: {e}")),
    };
    let mut how = how;
    if let Some(n) = max_steps {
        if !matches!(how, Continue::Reopen(_)) {
            return exit::usage(&format!(
                "run {id} is {}: --max-steps is for a run stopped by max_steps_exceeded or \
                 failed",
                info.status
            ));
        }
        graph = match with_max_steps(graph, n) {
            Ok(g) => g,
            Err(code) => return code,
        };
        how = Continue::Reopen(Some(Box::new(graph.to_document())));
    }
    let executor = match Executor::builder(graph)
        .base_dir(stored.record.base_dir.as_deref().unwrap_or("."))
        .clock(Clock::System)
        .build()
    {
        Ok(e) => e,
        Err(e) => return exit::failed(&format!("run {id}: {e}")),
    };
    drive_stored(&executor, store, id, how, outputs, None).await
}

fn answer_given_but_unused(how: &Continue, answer: &Option<String>) -> bool {
    answer.is_some() && !matches!(how, Continue::Answer(_))
}

/// How long `runs cancel` waits for a running run to stop.
const CANCEL_WAIT: Duration = Duration::from_secs(30);

/// `runs cancel`: stops the run, at once or (running) at its next step.
pub async fn cancel(store: &AnyStore, id: RunId) -> ExitCode {
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
    let owner = pactgraph::store::local_owner();
    let mut queue = vec![id];
    while let Some(next) = queue.pop() {
        match pactgraph::store::settle_dependents(store, next, &owner, Duration::from_secs(30))
            .await
        {
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
