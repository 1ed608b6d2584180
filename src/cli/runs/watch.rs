//! `pactgraph runs watch RUN`: follows a run that another process or a worker executes,
//! through the store: its kept events (docs/spec/events.md) as JSON Lines, the committed
//! ones first, then new ones as they are committed (polling the store), until the run
//! ends or pauses.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use pactgraph::store::{RunStore, StoredStatus};

use crate::exit;
use crate::store::{self, StoreArgs};

/// Events read from the store at once.
const PAGE: usize = 1000;

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
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runs watch`: prints the run's events until it ends (exit 0 completed, 1 failed, 3
/// stopped) or pauses (4); a run already ended prints its history and exits at once.
pub async fn run(args: WatchArgs) -> ExitCode {
    let poll = match store::parse_duration("--poll", &args.poll) {
        Ok(d) => d.max(Duration::from_millis(1)),
        Err(message) => return exit::usage(&message),
    };
    let (store, id) = match super::opened(&args.store, &args.run).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let mut after = args.after;
    loop {
        // The status first: every event committed before it is read below.
        let status = match store.info(id).await {
            Ok(info) => info.status,
            Err(e) => return store::error(&e),
        };
        let events = match store.events(id, after, PAGE).await {
            Ok(events) => events,
            Err(e) => return store::error(&e),
        };
        let mut out = std::io::stdout().lock();
        for event in &events {
            let written = serde_json::to_writer(&mut out, event)
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"));
            if written.is_err() {
                // stdout closed: nobody is watching any more.
                return ExitCode::SUCCESS;
            }
            after = event.seq;
        }
        if out.flush().is_err() {
            return ExitCode::SUCCESS;
        }
        drop(out);
        if events.len() == PAGE {
            continue;
        }
        if let Some(code) = final_code(status) {
            return ExitCode::from(code);
        }
        tokio::time::sleep(poll).await;
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
