//! What every handler shares: the store, the documents, the token, the metrics and the
//! runs driven here.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ExecutorFor;
use super::auth::Auth;
use super::catalog::Catalog;
use super::feed::Feeds;
use super::metrics::Metrics;
use crate::runtime::RunEvents;
use crate::store::AnyStore;

/// What every handler shares.
pub struct AppState {
    /// The run store (the runs resumed through the API are driven through it too). The
    /// handlers call it through [`DynStore`](crate::store::DynStore) (boxed `Send`
    /// futures).
    pub store: AnyStore,
    /// The documents under `--workflows`.
    pub catalog: Catalog,
    /// The executor of a stored run.
    pub executor_for: ExecutorFor,
    /// The token, when `--token-env` was given.
    pub auth: Option<Auth>,
    /// `/metrics`.
    pub metrics: Metrics,
    /// The runs resumed through the API, driven here.
    pub tasks: TaskTracker,
    /// Cancelled when the server stops: drives are interrupted, streams end.
    pub stop: CancellationToken,
    /// The lease taken on a run driven here.
    pub lease: Duration,
    /// `--max-body`.
    pub max_body: u64,
    /// The event streams followed at once (a permit each).
    pub streams: Arc<tokio::sync::Semaphore>,
    /// How often an event stream looks for new events.
    pub event_poll: Duration,
    /// How often an idle event stream sends a keep-alive comment.
    pub keep_alive: Duration,
    /// The event streams' shared followers, one per run followed.
    pub feeds: Arc<Feeds>,
    /// The live events of the runs driven here (by the embedded workers or a resume):
    /// the feeds take the next kept event from it without waiting for their poll, and
    /// the model deltas.
    pub events: RunEvents,
}

/// Shared state.
pub type Shared = Arc<AppState>;
