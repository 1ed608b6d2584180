//! One follower per run, shared by all of that run's event streams (the SSE fan-out).
//!
//! [`Feeds::join`] gives a stream a [`Watch`] on run `id`'s [`Feed`]: the first watcher of a
//! run starts its poller, a task that follows the run with a [`Follower`] (the store's
//! kept events, polled every `--event-poll`, woken at once by the events of the runs this
//! server drives) and appends each event, formatted once as its whole SSE message
//! ([`Sent`]), to a bounded ring ([`RING`] events), the events of one read of the store
//! together (one wakeup of the streams per read, ADR 0047). Each stream reads its history from the store after its own
//! `Last-Event-ID`, then takes the shared feed's events from the ring; a stream that falls
//! behind the ring (a slow client) reads the events it missed from the store again, so
//! it lags on its own and the poller never waits for it. The poller ends when its run
//! ends or pauses (every event delivered), when its store fails, when the server stops,
//! or when its last watcher leaves.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::runtime::{DEFAULT_EVENT_BUFFER, RunEvent, RunEvents, RunId};
use crate::store::{Follower, RunStore, StoreError};

/// The events a feed keeps for its streams (older ones are read from the store again):
/// four of the follower's pages, so streams that keep up do not fall behind a burst.
pub const RING: usize = 4096;

/// One event as sent: its `seq`, whether it is kept (not a `model_delta`), and its
/// Server-Sent Events message, formatted once for every stream.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The event's `seq` (a `model_delta`'s is the kept event's before it).
    pub seq: u64,
    /// False for a `model_delta` (never kept, never replayed).
    pub kept: bool,
    /// The whole SSE message: `id: SEQ` for a kept event, `data: JSON`, then the blank
    /// line that ends it. Shared (a reference count) by every stream sending it.
    pub frame: Bytes,
}

impl Sent {
    /// `event` serialized (once, [`RunEvent::to_json_string`]), as one SSE message.
    pub fn of(event: &RunEvent) -> Self {
        let kept = event.kind.is_kept();
        let json = event.to_json_string();
        let mut frame = Vec::with_capacity(json.len() + 32);
        if kept {
            frame.extend_from_slice(format!("id: {}\n", event.seq).as_bytes());
        }
        // Compact JSON escapes every line break inside its strings: the data is one line.
        frame.extend_from_slice(b"data: ");
        frame.extend_from_slice(json.as_bytes());
        frame.extend_from_slice(b"\n\n");
        Self {
            seq: event.seq,
            kept,
            frame: Bytes::from(frame),
        }
    }
}

/// Why a feed stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The run ended or paused, and every event it published is in the feed.
    Settled,
    /// Reading the store failed (logged).
    Failed,
    /// The server stops, or nobody watches any more.
    Stopped,
}

/// The ring of a feed.
#[derive(Debug, Default)]
struct Ring {
    /// The events, oldest first; `events[i]` is at position `front + i`.
    events: VecDeque<Sent>,
    /// The position of `events[0]`.
    front: u64,
    /// The `seq` of the last kept event the feed knows of (the store's last when the feed
    /// started, then each one appended).
    last_seq: u64,
    /// Set once the poller stopped.
    end: Option<End>,
}

impl Ring {
    /// The position the next event appended gets.
    fn end_pos(&self) -> u64 {
        self.front + self.events.len() as u64
    }
}

/// A run's shared follower: its ring and its watchers.
#[derive(Debug)]
pub struct Feed {
    ring: Mutex<Ring>,
    /// Bumped on every append and at the end.
    changed: watch::Sender<u64>,
    /// Streams watching.
    watchers: AtomicUsize,
    /// Told when the last watcher left.
    idle: Notify,
}

impl Feed {
    fn ring(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends `batch` (in order) under one lock, then tells the streams once.
    fn append(&self, batch: Vec<Sent>) {
        if batch.is_empty() {
            return;
        }
        {
            let mut ring = self.ring();
            for sent in batch {
                if sent.kept {
                    ring.last_seq = sent.seq;
                }
                if ring.events.len() >= RING {
                    ring.events.pop_front();
                    ring.front += 1;
                }
                ring.events.push_back(sent);
            }
        }
        self.changed.send_modify(|n| *n += 1);
    }

    fn finish(&self, end: End) {
        self.ring().end = Some(end);
        self.changed.send_modify(|n| *n += 1);
    }
}

/// The server's feeds, one per followed run, and the bus its drives publish on.
#[derive(Debug)]
pub struct Feeds {
    map: Mutex<HashMap<RunId, Arc<Feed>>>,
    bus: RunEvents,
    lags: Counter,
}

impl Feeds {
    /// No feeds yet; the events of the runs this server drives are published on `bus`;
    /// `lags` counts the streams that fell behind a ring.
    pub fn new(bus: RunEvents, lags: Counter) -> Self {
        Self {
            map: Mutex::default(),
            bus,
            lags,
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<RunId, Arc<Feed>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The runs followed now (one poller each) and the streams watching them.
    pub fn counts(&self) -> (usize, usize) {
        let map = self.map();
        let watchers = map
            .values()
            .map(|f| f.watchers.load(Ordering::SeqCst))
            .sum();
        (map.len(), watchers)
    }

    /// A watch on run `id`'s feed, starting its poller on `store` (polling every `poll`,
    /// stopping with `stop`) if no stream follows the run yet.
    pub fn join<S: RunStore + Clone + 'static>(
        self: &Arc<Self>,
        store: &S,
        id: RunId,
        poll: Duration,
        stop: &CancellationToken,
    ) -> Watch {
        let mut map = self.map();
        let feed = match map.get(&id) {
            Some(feed) => Arc::clone(feed),
            None => {
                let (changed, _) = watch::channel(0);
                let feed = Arc::new(Feed {
                    ring: Mutex::default(),
                    changed,
                    watchers: AtomicUsize::new(0),
                    idle: Notify::new(),
                });
                map.insert(id, Arc::clone(&feed));
                let live = self.bus.subscribe(DEFAULT_EVENT_BUFFER);
                let poller = poll_run(
                    store.clone(),
                    Arc::clone(self),
                    Arc::clone(&feed),
                    id,
                    poll,
                    stop.clone(),
                    live,
                );
                tokio::spawn(poller);
                feed
            }
        };
        feed.watchers.fetch_add(1, Ordering::SeqCst);
        let changes = feed.changed.subscribe();
        // The stream's place is the ring's end as it joins: what the feed appends from now
        // on is the stream's to take from the ring, so a stream that takes its first events
        // only after the ring dropped some of them fell behind it (a lag), however late its
        // first read came.
        let next = Some(feed.ring().end_pos());
        Watch {
            feed,
            changes,
            next,
            lags: self.lags.clone(),
        }
    }

    /// Takes `feed` (of run `id`) out of the map if it is still the run's feed and, unless
    /// it ended, nobody watches it: true when it was taken out (its poller then stops).
    fn leave(&self, id: RunId, feed: &Arc<Feed>, ended: bool) -> bool {
        let mut map = self.map();
        if !ended && feed.watchers.load(Ordering::SeqCst) > 0 {
            return false;
        }
        if map.get(&id).is_some_and(|f| Arc::ptr_eq(f, feed)) {
            map.remove(&id);
        }
        true
    }
}

/// The poller of run `id`'s feed (see the module docs).
async fn poll_run<S: RunStore + 'static>(
    store: S,
    feeds: Arc<Feeds>,
    feed: Arc<Feed>,
    id: RunId,
    poll: Duration,
    stop: CancellationToken,
    live: crate::runtime::Subscription,
) {
    let after = match store.last_event_seq(id).await {
        Ok(seq) => seq,
        Err(e) => {
            tracing::warn!(target: "pactgraph::serve", "events of run {id}: {e}");
            feeds.leave(id, &feed, true);
            feed.finish(End::Failed);
            return;
        }
    };
    feed.ring().last_seq = after;
    feed.changed.send_modify(|n| *n += 1);
    let wakeups = store.event_wakeups(id).await;
    let mut follower = Follower::new(&store, id, after).poll_every(poll).live(live);
    if let Some(wakeups) = wakeups {
        follower = follower.wakeups(wakeups);
    }
    let end = loop {
        let next: Result<Option<RunEvent>, StoreError> = tokio::select! {
            next = follower.next() => next,
            () = stop.cancelled() => break End::Stopped,
            () = feed.idle.notified() => {
                if feeds.leave(id, &feed, false) {
                    break End::Stopped;
                }
                continue;
            }
        };
        match next {
            Ok(Some(event)) => {
                // The events the follower already holds (a page read at once) go in
                // together: one lock of the ring and one wakeup of each stream per read.
                let mut batch = vec![Sent::of(&event)];
                while let Some(event) = follower.next_ready() {
                    batch.push(Sent::of(&event));
                }
                feed.append(batch);
            }
            Ok(None) => break End::Settled,
            Err(e) => {
                tracing::warn!(target: "pactgraph::serve", "events of run {id}: {e}");
                break End::Failed;
            }
        }
    };
    feeds.leave(id, &feed, true);
    feed.finish(end);
}

/// One stream's place in a feed. Dropping it leaves the feed (the last watcher's leaving
/// stops the poller).
#[derive(Debug)]
pub struct Watch {
    feed: Arc<Feed>,
    changes: watch::Receiver<u64>,
    /// The ring position of the next event to take: the ring's end when the stream
    /// joined, `None` while it reads what it missed from the store.
    next: Option<u64>,
    /// Counts this stream's falls behind the ring.
    lags: Counter,
}

/// What a stream does next ([`Watch::take`]).
#[derive(Debug)]
pub enum Next {
    /// Events from the ring (at most the number asked for), in order.
    Events(Vec<Sent>),
    /// The events after the stream's `seq` are no longer (or not yet) in the ring: read
    /// them from the store.
    FromStore,
    /// Nothing new yet: wait ([`Watch::changed`]).
    Wait,
    /// The feed ended this way, and the stream has every event it had.
    Ended(End),
}

impl Watch {
    /// The next events for a stream that has sent every kept event up to `after`: from
    /// the ring when it holds the one after, else [`Next::FromStore`]. `model_delta`s are
    /// passed on only after the kept event they follow.
    pub fn take(&mut self, after: u64, most: usize) -> Next {
        let _ = self.changes.borrow_and_update();
        let ring = self.feed.ring();
        let pos = match self.next {
            Some(pos) if pos >= ring.front => pos,
            fallen => {
                if fallen.is_some() {
                    // A slow stream: the ring moved on without it.
                    self.lags.inc();
                }
                // Not in the ring yet, or fallen out of it: find the event after `after`.
                let found = ring
                    .events
                    .iter()
                    .position(|e| e.kept && e.seq == after + 1);
                match found {
                    Some(i) => ring.front + i as u64,
                    // Every kept event the feed knows of is sent (or they are not in the
                    // ring: then the store, below): from the next appended.
                    None => ring.end_pos(),
                }
            }
        };
        let mut i = usize::try_from(pos - ring.front).unwrap_or(usize::MAX);
        let mut sent = after;
        let mut events = Vec::new();
        while let Some(e) = ring.events.get(i) {
            if events.len() >= most.max(1) {
                break;
            }
            if e.kept {
                if e.seq > sent + 1 {
                    // A gap (the stream is ahead of where the ring starts): the store.
                    break;
                }
                if e.seq == sent + 1 {
                    sent = e.seq;
                    events.push(e.clone());
                }
            } else if e.seq == sent {
                events.push(e.clone());
            }
            i += 1;
        }
        self.next = Some(ring.front + i as u64);
        if !events.is_empty() {
            return Next::Events(events);
        }
        if ring.last_seq > sent {
            self.next = None;
            return Next::FromStore;
        }
        match ring.end {
            Some(end) => Next::Ended(end),
            None => Next::Wait,
        }
    }

    /// Returns when the feed changed since the last [`Watch::take`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn changed(&mut self) {
        if self.changes.changed().await.is_err() {
            // The feed's sender lives as long as the feed, which this watch holds.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.feed.watchers.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.feed.idle.notify_one();
        }
    }
}
