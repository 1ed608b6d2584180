//! `pactgraph worker`: runs queued runs, and waiting runs whose dependencies are
//! settled, from the run store; logs one line per run started and ended (`tracing`,
//! `RUST_LOG` honoured; `info` for the worker by default).

use std::process::ExitCode;
use std::time::Duration;

use crate::runtime::{Clock, Executor};
use crate::store::{StoreError, StoredRun, WorkEvent, WorkerOptions, work};
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::exit;
use crate::cli::store::{self, CheckpointArgs, StoreArgs};

/// `pactgraph worker` options.
#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Runs driven at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrency: usize,
    /// Exit (0) when nothing is runnable and nothing is running.
    #[arg(long)]
    pub once: bool,
    /// The lease taken on each run and renewed while it runs (`30s`, `2m`).
    #[arg(long, value_name = "DUR", default_value = "30s")]
    pub lease: String,
    /// How often the store is asked for runnable runs (`20ms`, `1s`).
    #[arg(long, value_name = "DUR", default_value = "20ms")]
    pub poll: String,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub checkpoints: CheckpointArgs,
}

/// Logs to stderr, filtered by `RUST_LOG` (default: the worker's lines at `info`, the
/// rest at `warn`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,pactgraph::worker=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// The executor for a stored run: its own document, its base folder, the system clock.
pub fn executor_for(stored: &StoredRun) -> Result<Executor, String> {
    let graph = stored.record.graph().map_err(|e| e.to_string())?;
    crate::cli::drive::executor_of(&stored.record, graph, Clock::System)
}

/// Watches SIGINT and SIGTERM (from now on): resolves to the name of the first one
/// received. Exit 1 when they cannot be watched.
pub fn stop_signal() -> Result<impl Future<Output = &'static str> + Send + 'static, ExitCode> {
    let (mut int, mut term) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            return Err(exit::failed(&format!("cannot watch for signals: {e}")));
        }
    };
    Ok(async move {
        tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        }
    })
}

/// `pactgraph worker ...`.
pub fn run(args: &WorkerArgs) -> ExitCode {
    init_logging();
    if args.concurrency == 0 {
        return exit::usage("--concurrency must be at least 1");
    }
    let parse = |what: &str, text: &str| -> Result<Duration, ExitCode> {
        store::parse_duration(what, text).map_err(|m| exit::usage(&m))
    };
    let (lease, poll) = match (parse("--lease", &args.lease), parse("--poll", &args.poll)) {
        (Ok(l), Ok(p)) => (l, p),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    if lease < Duration::from_millis(100) {
        return exit::usage("--lease must be at least 100ms");
    }
    let rt = match store::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        // One connection per run driven at once, one for the looks (PostgreSQL).
        let connections = u32::try_from(args.concurrency.saturating_add(1))
            .unwrap_or(u32::MAX)
            .min(32);
        let store = match store::open_with(&args.store, connections).await {
            Ok(Some(s)) => s,
            Ok(None) => return exit::usage("a worker needs a run store, not --store none"),
            Err(code) => return code,
        };
        let signalled = match stop_signal() {
            Ok(s) => s,
            Err(code) => return code,
        };
        let stop = async {
            let name = signalled.await;
            tracing::info!(target: "pactgraph::worker", "{name}: interrupting the runs in flight and stopping");
        };
        let options = WorkerOptions::default()
            .concurrency(args.concurrency)
            .once(args.once)
            .lease(lease)
            .poll(poll)
            .checkpoints(args.checkpoints.get());
        tracing::info!(
            target: "pactgraph::worker",
            "worker started: store {}, concurrency {}, lease {lease:?}{}",
            args.store.store,
            args.concurrency,
            if args.once { ", once" } else { "" }
        );
        let summary = work(&store, &options, executor_for, log_event, stop).await;
        match summary {
            Ok(s) => {
                tracing::info!(
                    target: "pactgraph::worker",
                    "worker stopped: {} runs finished, {} failed to run, {} interrupted",
                    s.finished,
                    s.errors,
                    s.interrupted
                );
                ExitCode::SUCCESS
            }
            Err(e) => store::error(&e),
        }
    })
}

/// One line per run started and ended.
fn log_event(event: WorkEvent<'_>) {
    match event {
        WorkEvent::Started {
            id,
            workflow,
            owner,
        } => {
            tracing::info!(target: "pactgraph::worker", "run {id} ({workflow}) started by {owner}")
        }
        WorkEvent::Ended {
            id,
            result: Ok(run),
        } => tracing::info!(
            target: "pactgraph::worker",
            "run {id} ended {} ({}) after {} steps",
            run.status(),
            run.termination_reason().map_or("-", |r| r.as_str()),
            run.steps()
        ),
        // Its lease lapsed (this worker was paused, say) or another worker took the run:
        // the store refused the write and the run is left to whoever holds it now.
        WorkEvent::Ended {
            id,
            result: Err(e @ StoreError::LeaseLost { .. }),
        } => {
            tracing::warn!(
                target: "pactgraph::worker",
                "run {id}: lease lost, write refused (nothing written; the run is left to its current owner): {e}"
            );
        }
        WorkEvent::Ended { id, result: Err(e) } => {
            tracing::warn!(target: "pactgraph::worker", "run {id} could not be run: {e}");
        }
        WorkEvent::Interrupted { id } => {
            tracing::info!(target: "pactgraph::worker", "run {id} interrupted (resumable)");
        }
    }
}
