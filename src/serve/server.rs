//! Starting the server on a bound listener, its workers beside it, and stopping both
//! gracefully.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderValue;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ExecutorFor;
use super::app::router;
use super::auth::Auth;
use super::catalog::Catalog;
use super::feed::Feeds;
use super::metrics::Metrics;
use super::state::AppState;
use crate::runtime::RunEvents;
use crate::store::{AnyStore, StoreError, WorkEvent, WorkerOptions, work};

/// How the server runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// The folder of workflow documents (`--workflows`).
    pub workflows: Option<PathBuf>,
    /// Runs driven at once by the embedded worker (0: none).
    pub workers: usize,
    /// The lease on each run driven here.
    pub lease: Duration,
    /// How often the worker asks the store for runnable runs.
    pub poll: Duration,
    /// The token every `/api` request must carry (`--token-env`).
    pub token: Option<String>,
    /// The one origin allowed cross-origin requests (`--cors`).
    pub cors: Option<String>,
    /// The largest request body, in bytes (`--max-body`).
    pub max_body: u64,
    /// Event streams followed at once (more get 503).
    pub max_streams: usize,
    /// How often an event stream looks for new events in the store.
    pub event_poll: Duration,
    /// How often an idle event stream sends a keep-alive comment.
    pub keep_alive: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            workflows: None,
            workers: 0,
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(100),
            token: None,
            cors: None,
            max_body: 10 * 1024 * 1024,
            max_streams: 256,
            event_poll: Duration::from_millis(50),
            keep_alive: Duration::from_secs(15),
        }
    }
}

impl ServeOptions {
    /// Documents from `dir`.
    pub fn workflows(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workflows = Some(dir.into());
        self
    }
    /// `n` runs driven at once by the embedded worker.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }
    /// The lease on each run driven here.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
    /// The worker's poll interval.
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }
    /// Requests must carry `token`.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }
    /// Cross-origin requests from `origin` only.
    pub fn cors(mut self, origin: impl Into<String>) -> Self {
        self.cors = Some(origin.into());
        self
    }
    /// At most `n` event streams at once.
    pub fn max_streams(mut self, n: usize) -> Self {
        self.max_streams = n;
        self
    }
    /// Event streams look for new events every `every`.
    pub fn event_poll(mut self, every: Duration) -> Self {
        self.event_poll = every;
        self
    }
    /// Idle event streams send a keep-alive comment every `every`.
    pub fn keep_alive(mut self, every: Duration) -> Self {
        self.keep_alive = every;
        self
    }
    /// Bodies of at most `bytes`.
    pub fn max_body(mut self, bytes: u64) -> Self {
        self.max_body = bytes;
        self
    }
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// `--cors` is not a valid origin.
    #[error("--cors {0}: not a valid origin such as https://ui.example.com")]
    BadOrigin(String),
    /// The listener failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
    /// The embedded worker's store failed.
    #[error("the worker: {0}")]
    Store(#[from] StoreError),
    /// The embedded worker's task ended without its summary (it panicked, or its runtime
    /// was shut down first).
    #[error("the worker stopped unexpectedly: {0}")]
    WorkerLost(String),
}

/// What the server did before it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeSummary {
    /// Runs the embedded worker finished.
    pub finished: u64,
    /// Runs interrupted by the stop (the worker's).
    pub interrupted: u64,
}

/// Serves the API on `listener` over `store` until `shutdown` resolves; with
/// `options.workers` it also drives runnable runs. On shutdown it stops accepting,
/// ends the event streams, lets the requests in flight finish, interrupts the runs it
/// drives (their leases given up: they resume elsewhere) and returns.
pub async fn serve(
    listener: TcpListener,
    store: AnyStore,
    options: ServeOptions,
    executor_for: ExecutorFor,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServeSummary, ServeError> {
    let cors = match &options.cors {
        Some(o) => Some(
            HeaderValue::from_str(o.trim_end_matches('/'))
                .map_err(|_| ServeError::BadOrigin(o.clone()))?,
        ),
        None => None,
    };
    let stop = CancellationToken::new();
    let events = RunEvents::new();
    let metrics = Metrics::new();
    let lags = metrics.lags.clone();
    let state = Arc::new(AppState {
        store: store.clone(),
        catalog: Catalog::new(options.workflows.clone()),
        executor_for: Arc::clone(&executor_for),
        auth: options.token.as_deref().map(Auth::new),
        metrics,
        tasks: TaskTracker::new(),
        stop: stop.clone(),
        lease: options.lease,
        max_body: options.max_body,
        streams: Arc::new(tokio::sync::Semaphore::new(options.max_streams)),
        event_poll: options.event_poll,
        keep_alive: options.keep_alive,
        feeds: Arc::new(Feeds::new(events.clone(), lags)),
        events: events.clone(),
    });
    let app = router(Arc::clone(&state), cors);
    let trigger = stop.clone();
    tokio::spawn(async move {
        shutdown.await;
        trigger.cancel();
    });
    let server_stop = stop.clone();
    let server = async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { server_stop.cancelled().await })
            .await
    };
    let worker = drive_queued(
        Arc::clone(&state),
        store,
        options.clone(),
        executor_for,
        stop,
    );
    let (served, worked) = tokio::join!(server, worker);
    // The runs resumed through the API: each interrupts itself on the stop.
    state.tasks.close();
    state.tasks.wait().await;
    served?;
    worked
}

/// The embedded worker (`options.workers` runs at once; none when 0) on `store`, a task
/// of its own, until `stop`: what it did.
async fn drive_queued(
    state: super::state::Shared,
    store: AnyStore,
    options: ServeOptions,
    executor_for: ExecutorFor,
    stop: CancellationToken,
) -> Result<ServeSummary, ServeError> {
    if options.workers == 0 {
        return Ok(ServeSummary::default());
    }
    let worker = async move {
        let worker_options = WorkerOptions::default()
            .concurrency(options.workers)
            .lease(options.lease)
            .poll(options.poll);
        let started: Mutex<std::collections::HashMap<crate::runtime::RunId, u64>> =
            Mutex::default();
        let clock = crate::store::Clock::system();
        let report = |event: WorkEvent<'_>| match event {
            WorkEvent::Started {
                id,
                workflow,
                owner,
            } => {
                if let Ok(mut s) = started.lock() {
                    s.insert(id, clock.now_ms());
                }
                tracing::info!(target: "pactgraph::serve", "run {id} ({workflow}) started by {owner}");
            }
            WorkEvent::Ended { id, result } => {
                let since = started
                    .lock()
                    .ok()
                    .and_then(|mut s| s.remove(&id))
                    .unwrap_or(0);
                match result {
                    Ok(run) => {
                        state.metrics.observe_run(run, since);
                        tracing::info!(
                            target: "pactgraph::serve",
                            "run {id} ended {} ({}) after {} steps",
                            run.status(),
                            run.termination_reason().map_or("-", |r| r.as_str()),
                            run.steps()
                        );
                    }
                    Err(e) => {
                        tracing::warn!(target: "pactgraph::serve", "run {id} could not be run: {e}")
                    }
                }
            }
            WorkEvent::Interrupted { id } => {
                tracing::info!(target: "pactgraph::serve", "run {id} interrupted (resumable)");
            }
        };
        let events = state.events.clone();
        let summary = work(
            &store,
            &worker_options,
            // Published live to the event streams (model deltas among them).
            move |s| executor_for(s).map(|e| e.with_events(events.clone())),
            report,
            stop.cancelled(),
        )
        .await?;
        Ok::<_, ServeError>(ServeSummary {
            finished: summary.finished,
            interrupted: summary.interrupted,
        })
    };
    tokio::spawn(worker)
        .await
        .map_err(|e| ServeError::WorkerLost(e.to_string()))?
}
