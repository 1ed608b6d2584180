//! `GET /api/runs/{id}/events`: the run's kept events as Server-Sent Events, history
//! first, then live ones as they are committed (read from the store, so a run executed
//! by any process or worker can be followed); `Last-Event-ID: K` resumes with `seq` K+1.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use tokio::sync::OwnedSemaphorePermit;

use super::super::error::ApiError;
use super::super::feed::{End, Next, Sent, Watch};
use super::super::sendable;
use super::super::state::Shared;
use crate::runtime::RunId;

/// Events read from the store at once.
const PAGE: usize = 500;

/// Events taken from the feed's ring at once.
const TAKE: usize = 256;

/// Reads of the store a stream tries in a row before it gives up (and ends).
const STORE_TRIES: u32 = 10;

/// One stream's position.
struct Follow {
    state: Shared,
    id: RunId,
    /// The `seq` of the last kept event sent.
    after: u64,
    buffer: VecDeque<Sent>,
    watch: Watch,
    /// Store reads failed in a row.
    failures: u32,
    done: bool,
    _permit: OwnedSemaphorePermit,
}

/// `GET /api/runs/{id}/events`: `id` is each kept event's `seq`, `data` the event's JSON
/// (docs/spec/events.md); the stream ends when the run has ended or paused and every
/// event is sent, or when the server stops. Comments keep an idle stream alive. 503 when
/// the server already follows its maximum of streams. The streams of one run share one
/// follower of the store (`serve::feed`); each reads its own history.
pub async fn events(
    State(state): State<Shared>,
    UrlPath(key): UrlPath<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
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
        buffer: VecDeque::new(),
        watch,
        failures: 0,
        done: false,
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(follow, next_event);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(state.keep_alive)))
}

/// The next event to send: from the stream's buffer, the feed's ring, or the store (its
/// history, or what it missed), waiting for the feed when there is none; `None` ends the
/// stream.
async fn next_event(mut f: Follow) -> Option<(Result<Event, Infallible>, Follow)> {
    loop {
        if let Some(sent) = f.buffer.pop_front() {
            let mut sse = Event::default().data(&*sent.data);
            if sent.kept {
                f.after = sent.seq;
                sse = sse.id(sent.seq.to_string());
            }
            return Some((Ok(sse), f));
        }
        if f.done || f.state.stop.is_cancelled() {
            return None;
        }
        match f.watch.take(f.after, TAKE) {
            Next::Events(events) => f.buffer.extend(events),
            Next::FromStore => match sendable::events(&f.state.store, f.id, f.after, PAGE).await {
                Ok(events) if events.is_empty() => {
                    // The feed knows of events the store did not give: not committed
                    // where this read looked yet; the feed's next change says more.
                    wait(&mut f).await?;
                }
                Ok(events) => {
                    f.failures = 0;
                    f.buffer.extend(events.iter().map(Sent::of));
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
                }
            },
            Next::Wait => wait(&mut f).await?,
            Next::Ended(end) => {
                if end == End::Failed {
                    tracing::debug!(target: "pactgraph::serve", "events of run {}: the feed failed", f.id);
                }
                f.done = true;
            }
        }
    }
}

/// Waits for the feed to change, or for the server to stop (`None`).
async fn wait(f: &mut Follow) -> Option<()> {
    tokio::select! {
        () = f.watch.changed() => Some(()),
        () = f.state.stop.cancelled() => None,
    }
}
