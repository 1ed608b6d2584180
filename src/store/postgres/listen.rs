//! Waking workers and followers on PostgreSQL: `NOTIFY` on its schema's channels
//! ([`RUNNABLE_CHANNEL`]) when a run becomes runnable (the store sends it, in the
//! transition's transaction or right after it), and a `LISTEN`ing connection of a
//! worker's own that turns each notification into a [`Wakeups`] word.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::Notify;

use crate::store::Wakeups;
#[cfg(doc)]
use crate::store::dialects::{EVENTS_CHANNEL, RUNNABLE_CHANNEL};

/// Listens on the channel the SQL expression `channel` names, read on the listening
/// connection itself (so that it is the schema the store's statements use:
/// [`RUNNABLE_CHANNEL`], [`EVENTS_CHANNEL`]), with a connection of its own, waking on each
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
    let name: Result<String, sqlx::Error> = sqlx::query_scalar(&format!("SELECT {channel}"))
        .fetch_one(&mut listener)
        .await;
    let listening = match name {
        Ok(name) => listener.listen(&name).await,
        Err(e) => Err(e),
    };
    if let Err(e) = listening {
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
