//! `GET /api/runs/{id}/events`: the run's kept events as Server-Sent Events, history
//! first, then live ones as they are committed (read from the store, so a run executed
//! by any process or worker can be followed); `Last-Event-ID: K` resumes with `seq` K+1.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::super::error::ApiError;
use super::super::feed::{End, Next, Sent, Watch};
use super::super::state::Shared;
use crate::runtime::RunId;
use crate::store::DynStore;

/// Events read from the store at once.
const PAGE: usize = 500;

/// Events taken from the feed's ring at once.
const TAKE: usize = 1024;

/// Reads of the store a stream tries in a row before it gives up (and ends).
const STORE_TRIES: u32 = 10;

/// The keep-alive: an empty SSE comment.
const KEEP_ALIVE: &[u8] = b":\n\n";

/// One stream's position.
struct Follow {
    state: Shared,
    id: RunId,
    /// The `seq` of the last kept event sent.
    after: u64,
    watch: Watch,
    /// When the stream last sent something (a keep-alive is due `keep_alive` later).
    sent_at: Instant,
    /// Store reads failed in a row.
    failures: u32,
    done: bool,
    _permit: OwnedSemaphorePermit,
}

/// `GET /api/runs/{id}/events`: `id` is each kept event's `seq`, `data` the event's JSON
/// (docs/spec/events.md); the stream ends when the run has ended or paused and every
/// event is sent, or when the server stops. Comments keep an idle stream alive. 503 when
/// the server already follows its maximum of streams. The streams of one run share one
/// follower of the store (`serve::feed`), which formats each event once; each stream
/// reads its own history, and sends the events it can send at once as one chunk (one
/// write to its socket, not one per event).
pub async fn events(
    State(state): State<Shared>,
    UrlPath(key): UrlPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = super::runs::find(&state, &key).await?;
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError::bad(
                    "bad_request",
                    "Last-Event-ID must be the `seq` of an event (a whole number)",
                )
            })?,
    };
    let permit = Arc::clone(&state.streams)
        .try_acquire_owned()
        .map_err(|_| ApiError::Busy("the server follows its maximum of event streams".into()))?;
    let watch = state
        .feeds
        .join(&state.store, id, state.event_poll, &state.stop);
    let follow = Follow {
        state: Arc::clone(&state),
        id,
        after,
        watch,
        sent_at: Instant::now(),
        failures: 0,
        done: false,
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(follow, next_chunk);
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// The next chunk to send: the events the stream can send now, from the feed's ring or
/// the store (its history, or what it missed), as one chunk; waiting for the feed when
/// there is none, and sending a keep-alive comment when it waited `keep_alive` since it
/// last sent something; `None` ends the stream.
async fn next_chunk(mut f: Follow) -> Option<(Result<Bytes, Infallible>, Follow)> {
    loop {
        if f.done || f.state.stop.is_cancelled() {
            return None;
        }
        let events = match f.watch.take(f.after, TAKE) {
            Next::Events(events) => events,
            Next::FromStore => match f.state.store.events(f.id, f.after, PAGE).await {
                Ok(events) if events.is_empty() => {
                    // The feed knows of events the store did not give: not committed
                    // where this read looked yet; the feed's next change says more.
                    if let Some(alive) = wait(&mut f).await? {
                        return Some((Ok(alive), f));
                    }
                    continue;
                }
                Ok(events) => {
                    f.failures = 0;
                    events.iter().map(Sent::of).collect()
                }
                Err(e) => {
                    // Many streams catching up at once can wait on the store's
                    // connections: tried again, a while later each time, before giving up.
                    f.failures += 1;
                    if f.failures > STORE_TRIES {
                        tracing::warn!(target: "pactgraph::serve", "events of run {}: {e}", f.id);
                        return None;
                    }
                    tracing::debug!(target: "pactgraph::serve", "events of run {} (trying again): {e}", f.id);
                    let pause = f.state.event_poll * f.failures;
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = f.state.stop.cancelled() => return None,
                    }
                    continue;
                }
            },
            Next::Wait => {
                if let Some(alive) = wait(&mut f).await? {
                    return Some((Ok(alive), f));
                }
                continue;
            }
            Next::Ended(end) => {
                if end == End::Failed {
                    tracing::debug!(target: "pactgraph::serve", "events of run {}: the feed failed", f.id);
                }
                f.done = true;
                continue;
            }
        };
        let chunk = join(&events);
        if let Some(last) = events.iter().rev().find(|e| e.kept) {
            f.after = last.seq;
        }
        f.sent_at = Instant::now();
        return Some((Ok(chunk), f));
    }
}

/// `events`' messages as one chunk (the one message itself, shared, when there is one).
fn join(events: &[Sent]) -> Bytes {
    if let [one] = events {
        return one.frame.clone();
    }
    let mut chunk = Vec::with_capacity(events.iter().map(|e| e.frame.len()).sum());
    for e in events {
        chunk.extend_from_slice(&e.frame);
    }
    Bytes::from(chunk)
}

/// Waits for the feed to change (`Some(None)`), for a keep-alive to be due (`Some` of
/// the comment), or for the server to stop (`None`).
async fn wait(f: &mut Follow) -> Option<Option<Bytes>> {
    let due = f.sent_at + f.state.keep_alive;
    tokio::select! {
        () = f.watch.changed() => Some(None),
        () = tokio::time::sleep_until(due) => {
            f.sent_at = Instant::now();
            Some(Some(Bytes::from_static(KEEP_ALIVE)))
        }
        () = f.state.stop.cancelled() => None,
    }
}
