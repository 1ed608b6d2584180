//! Waking workers on PostgreSQL: `NOTIFY` on the channel [`CHANNEL`] when a run becomes
//! runnable (the store sends it, in the transition's transaction or right after it), and
//! a `LISTEN`ing connection of a worker's own that turns each notification into a
//! [`Wakeups`] word.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::Notify;

use crate::store::Wakeups;

/// The channel runs becoming runnable are announced on (one per database: workers of
/// other schemas of the same database are woken for nothing, and look once).
pub(crate) const CHANNEL: &str = "pactgraph_runnable";

/// The channel a checkpoint announces its run's new events on (its payload the run's
/// id), in the checkpoint's own statement: a follower (`runs watch`, the server's event
/// feeds) listening for that run reads them at once.
pub(crate) const EVENTS_CHANNEL: &str = "pactgraph_events";

/// Listens on `channel` with a connection of its own (`options`), waking on each
/// notification (or only those whose payload is `payload`); `None` if it cannot (the
/// worker or follower then only polls). The listener reconnects by itself after a lost
/// connection (a restarted server); notifications sent meanwhile are lost, and polling
/// makes up for them.
pub(crate) async fn listen(
    options: &PgConnectOptions,
    channel: &str,
    payload: Option<String>,
) -> Option<Wakeups> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(options.clone());
    let mut listener = match PgListener::connect_with(&pool).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cannot listen on {channel} ({e}): polling only");
            return None;
        }
    };
    if let Err(e) = listener.listen(channel).await {
        tracing::warn!("cannot listen on {channel} ({e}): polling only");
        return None;
    }
    let said = Arc::new(Notify::new());
    let tell = Arc::clone(&said);
    let task = tokio::spawn(async move {
        loop {
            match listener.recv().await {
                Ok(n) if payload.as_deref().is_none_or(|p| p == n.payload()) => {
                    tell.notify_one();
                }
                Ok(_) => {}
                // The server is away (recv reconnects on its next call): try again in a
                // while rather than spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    });
    Some(Wakeups::new(said, task))
}
