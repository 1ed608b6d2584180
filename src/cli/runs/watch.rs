//! `pactgraph runs watch RUN`: follows a run that another process or a worker executes,
//! through the store: its kept events (docs/spec/events.md) as JSON Lines, the committed
//! ones first, then new ones as they are committed (polling the store; on PostgreSQL
//! woken by the checkpoint's `NOTIFY`, polling kept as the fallback), until the run ends.
//! A paused run is followed on: once answered and resumed by any process, its events go
//! on; `--until-pause` stops at the pause instead.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use crate::store::{Follower, RunStore, StoredStatus};

use crate::cli::exit;
use crate::cli::store::{self, StoreArgs};

/// The arguments of `pactgraph runs watch`.
#[derive(clap::Args, Debug, Clone)]
pub struct WatchArgs {
    /// The run: id, unique id prefix (6+ characters) or name.
    pub run: String,
    /// Print only the events after this `seq` (resuming an earlier watch).
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub after: u64,
    /// How often to look for new events.
    #[arg(long, value_name = "DUR", default_value = "50ms")]
    pub poll: String,
    /// Stop when the run pauses for an answer (exit 4) instead of following it through
    /// its resume.
    #[arg(long)]
    pub until_pause: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runs watch`: prints the run's events until it ends (exit 0 completed, 1 failed, 3
/// stopped), or with `--until-pause` until it ends or pauses (4); a run already ended
/// prints its history and exits at once.
pub async fn run(args: WatchArgs) -> ExitCode {
    let poll = match store::parse_duration("--poll", &args.poll) {
        Ok(d) => d.max(Duration::from_millis(1)),
        Err(message) => return exit::usage(&message),
    };
    let (store, id) = match super::opened(&args.store, &args.run).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let mut follower = Follower::new(&store, id, args.after).poll_every(poll);
    if !args.until_pause {
        follower = follower.through_pauses();
    }
    if let Some(wakeups) = store.event_wakeups(id).await {
        follower = follower.wakeups(wakeups);
    }
    let out = std::io::stdout();
    loop {
        let event = match follower.next().await {
            Ok(Some(event)) => event,
            Ok(None) => break,
            Err(e) => return store::error(&e),
        };
        let mut lock = out.lock();
        let written = serde_json::to_writer(&mut lock, &event)
            .map_err(std::io::Error::from)
            .and_then(|()| lock.write_all(b"\n"))
            .and_then(|()| lock.flush());
        if written.is_err() {
            // stdout closed: nobody is watching any more.
            return ExitCode::SUCCESS;
        }
    }
    match follower.final_status().and_then(final_code) {
        Some(code) => ExitCode::from(code),
        None => exit::failed(&format!("run {id}: the watch ended before the run did")),
    }
}

/// The exit code of a run that will publish nothing more without an answer or a resume:
/// ended or paused (as `run` exits); `None` while it runs, waits or is queued or
/// interrupted (a worker may take it over).
fn final_code(status: StoredStatus) -> Option<u8> {
    match status {
        StoredStatus::Completed => Some(exit::OK),
        StoredStatus::Failed => Some(exit::FAILED),
        StoredStatus::Stopped => Some(exit::STOPPED),
        StoredStatus::AwaitingInput => Some(exit::AWAITING),
        _ => None,
    }
}
