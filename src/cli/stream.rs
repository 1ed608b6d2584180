//! `run --stream`: the run's events (docs/spec/events.md) as JSON Lines on stdout,
//! written by a thread of their own so that a slow reader of stdout never slows the run;
//! the outcome object follows the last event.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use crate::runtime::{RunEvent, RunEvents, Subscription};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Events a `--stream` subscriber buffers before dropping some (model deltas first).
const STREAM_BUFFER: usize = 65_536;

/// Prints the events of the runs published to a [`RunEvents`], until finished.
pub struct Streamer {
    stop: CancellationToken,
    printer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Streamer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streamer").finish_non_exhaustive()
    }
}

impl Streamer {
    /// Subscribes to `events` (before the run starts) and starts printing.
    pub fn start(events: &RunEvents) -> Arc<Self> {
        let subscription = events.subscribe(STREAM_BUFFER);
        let stop = CancellationToken::new();
        let handle = tokio::runtime::Handle::current();
        let token = stop.clone();
        let printer =
            tokio::task::spawn_blocking(move || print_events(&handle, subscription, &token));
        Arc::new(Self {
            stop,
            printer: Mutex::new(Some(printer)),
        })
    }

    /// Prints what is still buffered, then stops: called once the run returned (every
    /// event is published by then), before its outcome is printed.
    pub async fn finish(&self) {
        self.stop.cancel();
        let printer = self
            .printer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(printer) = printer {
            let _ = printer.await;
        }
    }
}

/// The printer thread: each event as one line, flushed, until `stop` (then the rest).
fn print_events(
    handle: &tokio::runtime::Handle,
    mut subscription: Subscription,
    stop: &CancellationToken,
) {
    let mut out = std::io::stdout();
    loop {
        let next = handle.block_on(async {
            tokio::select! {
                e = subscription.next() => e,
                () = stop.cancelled() => None,
            }
        });
        match next {
            Some(event) => {
                if write_line(&mut out, &event).is_err() {
                    return;
                }
            }
            None => break,
        }
    }
    while let Some(event) = subscription.try_next() {
        if write_line(&mut out, &event).is_err() {
            return;
        }
    }
}

/// One event as one JSON line (a closed stdout ends the printing).
fn write_line(out: &mut std::io::Stdout, event: &RunEvent) -> std::io::Result<()> {
    let mut lock = out.lock();
    serde_json::to_writer(&mut lock, event)?;
    lock.write_all(b"\n")?;
    lock.flush()
}
