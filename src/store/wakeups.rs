//! [`Wakeups`]: a store's word that runs may have become runnable (PostgreSQL's
//! `LISTEN`/`NOTIFY`), so that a worker looks at once instead of at its next poll.

use std::sync::Arc;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Wakeups from a store: [`Wakeups::next`] returns when the store said that a run became
/// runnable (queued, let go or interrupted, a run ended that others depend on) since the
/// last call. A hint, never a promise: a worker still polls (a wakeup lost while the
/// store's connection was down is made up for by the next poll). Got from
/// [`RunStore::wakeups`](super::RunStore::wakeups); its listening task ends when it is
/// dropped.
#[derive(Debug)]
pub struct Wakeups {
    said: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Wakeups {
    /// Wakeups a task fed (it calls `notify_one` on `said` for each word from the
    /// store), ended when the wakeups are dropped.
    pub(crate) fn new(said: Arc<Notify>, task: JoinHandle<()>) -> Self {
        Self { said, task }
    }

    /// Returns once the store said a run may be runnable (at once if it said so since
    /// the last call). Cancel-safe: dropping the future loses no wakeup.
    pub async fn next(&self) {
        self.said.notified().await;
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        self.task.abort();
    }
}
