//! Following a run's events through the store (docs/spec/events.md): [`Follower`] gives
//! the kept events after a `seq`, the committed ones first, then new ones as they are
//! committed, until the run ends or pauses (or, [`Follower::through_pauses`], until it
//! ends: a paused run answered and resumed by any process goes on). What `runs watch`
//! prints and what an SSE route serves (`Last-Event-ID` is the `seq` to follow after).

use std::collections::VecDeque;
use std::time::Duration;

use super::{RunStore, StoreError, StoredStatus, Wakeups};
use crate::runtime::{RunEvent, RunId, Subscription};

/// Events read from the store at once.
const PAGE: usize = 1000;

/// Follows run `id`'s events in `store` after a `seq` (see the module docs).
///
/// It reads the run's status first and its events second, so once the status is final
/// (ended, or awaiting input) the events read after it are all there are. Between reads
/// it waits [`Follower::poll_every`] (50 ms), or less with a live subscription
/// ([`Follower::live`]): a kept event published in this process is delivered at once when
/// it is the next one, and `model_delta`s (never in the store) pass through.
pub struct Follower<'a, S> {
    store: &'a S,
    id: RunId,
    after: u64,
    poll: Duration,
    buffered: VecDeque<RunEvent>,
    live: Option<Subscription>,
    wakeups: Option<Wakeups>,
    through_pauses: bool,
    ended: Option<StoredStatus>,
}

impl<S> std::fmt::Debug for Follower<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("run_id", &self.id)
            .field("after", &self.after)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl<'a, S: RunStore> Follower<'a, S> {
    /// Follows run `id` in `store` from the event after `after` (0: from the first).
    pub fn new(store: &'a S, id: RunId, after: u64) -> Self {
        Self {
            store,
            id,
            after,
            poll: Duration::from_millis(50),
            buffered: VecDeque::new(),
            live: None,
            wakeups: None,
            through_pauses: false,
            ended: None,
        }
    }

    /// Following the run through its pauses, until it ends: a paused run waits for an
    /// answer (given by any process), and its events go on after the resume.
    pub fn through_pauses(mut self) -> Self {
        self.through_pauses = true;
        self
    }

    /// Also woken by `wakeups` (from [`RunStore::event_wakeups`]: PostgreSQL tells when
    /// the run's checkpoint commits): the store is read at once, and polled only every
    /// ten poll intervals in case a word was lost.
    pub fn wakeups(mut self, wakeups: Wakeups) -> Self {
        self.wakeups = Some(wakeups);
        self
    }

    /// Looking for new events every `every` (at least 1 ms).
    pub fn poll_every(mut self, every: Duration) -> Self {
        self.poll = every.max(Duration::from_millis(1));
        self
    }

    /// Also listening to `subscription` (taken from the `RunEvents` the run is driven
    /// with, in this process): the next kept event and model deltas come without waiting
    /// for the next poll.
    pub fn live(mut self, subscription: Subscription) -> Self {
        self.live = Some(subscription);
        self
    }

    /// The `seq` of the last kept event delivered (or the one followed after).
    pub fn last_seq(&self) -> u64 {
        self.after
    }

    /// The run's status once it ended (or paused, unless followed through pauses) and
    /// every event was delivered.
    pub fn final_status(&self) -> Option<StoredStatus> {
        self.ended.filter(|_| self.buffered.is_empty())
    }

    /// The next event; `Ok(None)` once the run ended or paused and its every kept event
    /// was delivered.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an event is consumed only when returned.
    pub async fn next(&mut self) -> Result<Option<RunEvent>, StoreError> {
        loop {
            if let Some(event) = self.buffered.pop_front() {
                self.after = event.seq;
                return Ok(Some(event));
            }
            if self.ended.is_some() {
                return Ok(None);
            }
            // The status first: every event committed before it is read below.
            let status = self.store.info(self.id).await?.status;
            let events = self.store.events(self.id, self.after, PAGE).await?;
            if !events.is_empty() {
                self.buffered.extend(events);
                continue;
            }
            if status.is_ended() || (status == StoredStatus::AwaitingInput && !self.through_pauses)
            {
                self.ended = Some(status);
                continue;
            }
            if let Some(event) = self.wait().await {
                return Ok(Some(event));
            }
        }
    }

    /// The next event already read from the store, without reading or waiting: `None`
    /// when [`Follower::next`] would have to look further. For a caller that handles the
    /// events of one read together.
    pub fn next_ready(&mut self) -> Option<RunEvent> {
        let event = self.buffered.pop_front()?;
        self.after = event.seq;
        Some(event)
    }

    /// Waits for the next poll, or a live event: a `model_delta` of the run following the
    /// last event delivered, or its next kept event (returned: the store has it
    /// committed, since the driver publishes after its commit).
    async fn wait(&mut self) -> Option<RunEvent> {
        // With the store's wakeups, polling is the fallback for a lost word.
        let every = if self.wakeups.is_some() {
            self.poll * 10
        } else {
            self.poll
        };
        let deadline = tokio::time::Instant::now() + every;
        let woken = async {
            match &self.wakeups {
                Some(w) => w.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(woken);
        let Some(live) = &mut self.live else {
            tokio::select! {
                () = &mut woken => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
            return None;
        };
        loop {
            let event = tokio::select! {
                e = live.next() => e,
                () = tokio::time::sleep_until(deadline) => return None,
                () = &mut woken => return None,
            };
            let Some(event) = event else {
                // Every publisher is gone: polling only.
                self.live = None;
                return None;
            };
            if event.run_id != self.id {
                continue;
            }
            if !event.kind.is_kept() {
                // A model delta follows the kept event it carries the seq of: delivered
                // when that is the last one delivered here, else (out of step) skipped.
                if event.seq == self.after {
                    return Some(event);
                }
                continue;
            }
            if event.seq == self.after + 1 {
                self.after = event.seq;
                return Some(event);
            }
            // Out of step (dropped events, or already read): the store says what is next.
            return None;
        }
    }
}
