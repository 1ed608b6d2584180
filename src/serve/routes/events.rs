//! `GET /api/runs/{id}/events`: the run's kept events as Server-Sent Events, history
//! first, then live ones as they are committed (read from the store, so a run executed
//! by any process or worker can be followed); `Last-Event-ID: K` resumes with `seq` K+1.
//! For a run driven by this server, its `model_delta`s come live too (without an SSE
//! `id`: they are never kept), and its next kept event without waiting for the poll.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use tokio::sync::OwnedSemaphorePermit;

use super::super::error::ApiError;
use super::super::sendable;
use super::super::state::Shared;
use crate::runtime::{DEFAULT_EVENT_BUFFER, RunEvent, RunId, Subscription};
use crate::store::StoredStatus;

/// Events read from the store at once.
const PAGE: usize = 500;

/// One stream's position.
struct Follow {
    state: Shared,
    id: RunId,
    after: u64,
    buffer: VecDeque<RunEvent>,
    done: bool,
    /// The server's live events (runs driven here).
    live: Subscription,
    _permit: OwnedSemaphorePermit,
}

/// True when the run will publish nothing more without an answer or a resume.
fn settled(status: StoredStatus) -> bool {
    status.is_ended() || status == StoredStatus::AwaitingInput
}

/// `GET /api/runs/{id}/events`: `id` is each event's `seq`, `data` the event's JSON
/// (docs/spec/events.md); the stream ends when the run has ended or paused and every
/// event is sent, or when the server stops. Comments keep an idle stream alive. 503 when
/// the server already follows its maximum of streams.
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
    let follow = Follow {
        state: Arc::clone(&state),
        id,
        after,
        buffer: VecDeque::new(),
        done: false,
        live: state.events.subscribe(DEFAULT_EVENT_BUFFER),
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(follow, next_event);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(state.keep_alive)))
}

/// The next event to send, reading the store (and waiting) until there is one; `None`
/// ends the stream.
async fn next_event(mut f: Follow) -> Option<(Result<Event, Infallible>, Follow)> {
    loop {
        if let Some(event) = f.buffer.pop_front() {
            let data = serde_json::to_string(&event).unwrap_or_else(|_| "{}".into());
            if !event.kind.is_kept() {
                // A model delta: no `id`, so a reconnect resumes after the last kept one.
                return Some((Ok(Event::default().data(data)), f));
            }
            f.after = event.seq;
            let sse = Event::default().id(event.seq.to_string()).data(data);
            return Some((Ok(sse), f));
        }
        if f.done || f.state.stop.is_cancelled() {
            return None;
        }
        // The status first: every event committed before it is read next.
        let status = match sendable::info(&f.state.store, f.id).await {
            Ok(info) => info.status,
            Err(e) => {
                tracing::warn!(target: "pactgraph::serve", "events of run {}: {e}", f.id);
                return None;
            }
        };
        match sendable::events(&f.state.store, f.id, f.after, PAGE).await {
            Ok(events) => {
                let full = events.len() == PAGE;
                f.buffer.extend(events);
                if full || !f.buffer.is_empty() {
                    continue;
                }
            }
            Err(e) => {
                tracing::warn!(target: "pactgraph::serve", "events of run {}: {e}", f.id);
                return None;
            }
        }
        if settled(status) {
            f.done = true;
            continue;
        }
        let stop = f.state.stop.clone();
        tokio::select! {
            () = tokio::time::sleep(f.state.event_poll) => {}
            () = wait_live(&mut f) => {}
            () = stop.cancelled() => return None,
        }
    }
}

/// Waits for a live event of the followed run: a model delta following the last kept
/// event sent is buffered to send; a kept event ends the wait (the store has it: the
/// driver publishes after its commit). Deltas out of step (their kept event not sent
/// yet) are skipped, as `runs watch` skips them.
async fn wait_live(f: &mut Follow) {
    while let Some(event) = f.live.next().await {
        if event.run_id != f.id {
            continue;
        }
        if event.kind.is_kept() {
            return;
        }
        if event.seq == f.after {
            f.buffer.push_back(event);
            return;
        }
    }
    // The server's bus is gone (it is stopping): the poll and the stop decide.
    std::future::pending::<()>().await;
}
