//! Delivering run events live: [`RunEvents`], the publishing side (an executor or a
//! durable driver holds one), and [`Subscription`], one subscriber's bounded buffer.
//!
//! Publishing never waits: each subscriber has a buffer of its own capacity; when it is
//! full, a `model_delta` is dropped first (the incoming one, or the oldest buffered one),
//! and only when no `model_delta` is buffered the oldest event; the next event the
//! subscriber receives carries how many were dropped ([`RunEvent::dropped`]). A
//! subscriber that never reads costs the run one buffer push per event.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::clock::now_ms;
use super::events::{
    EventKind, EventStamp, RunEvent, transition_event_count, transition_events_into,
};
use super::run_id::RunId;
use super::run_state::RunState;
use super::status::RunStatus;

/// The capacity [`RunEvents::subscribe`] is usually given: 1024 events.
pub const DEFAULT_EVENT_BUFFER: usize = 1024;

/// Where live events go: every [`Subscription`] taken from it (or from a clone of it).
/// Cheap to clone. Give it to an executor with [`crate::runtime::Executor::with_events`]
/// (a durable driver publishes through the executor's) and subscribe **before** the run
/// starts: a subscriber sees the events published after it subscribed.
///
/// One value may carry many runs' events (each event names its run); the `seq` counter
/// is per run. When the last clone is dropped, every subscription ends once drained.
#[derive(Clone, Default)]
pub struct RunEvents {
    bus: Arc<Bus>,
}

impl std::fmt::Debug for RunEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEvents")
            .field("subscribers", &self.bus.lock().subs.len())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Bus {
    state: Mutex<BusState>,
}

#[derive(Default)]
struct BusState {
    subs: Vec<Arc<Shared>>,
    /// Hashed with foldhash (randomly seeded, as the plan's id maps): a step looks its
    /// run up once, and SipHash cost some 150 instructions a look-up.
    runs: foldhash::HashMap<RunId, Cursor>,
    /// A step's events, built here and moved out to the subscribers: the buffer is
    /// reused from step to step.
    scratch: Vec<RunEvent>,
}

/// Per run: the last kept event's `seq` and the trace items already published.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    last_seq: u64,
    trace_published: usize,
}

impl Bus {
    fn lock(&self) -> MutexGuard<'_, BusState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        for sub in state.subs.drain(..) {
            sub.queue().closed = true;
            sub.notify.notify_one();
        }
    }
}

impl RunEvents {
    /// A new bus without subscribers.
    pub fn new() -> Self {
        Self::default()
    }

    /// A subscription holding at most `capacity` (at least 1) undelivered events.
    pub fn subscribe(&self, capacity: usize) -> Subscription {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                events: VecDeque::with_capacity(capacity.clamp(1, 4096)),
                capacity: capacity.max(1),
                dropped: 0,
                closed: false,
            }),
            notify: Notify::new(),
        });
        self.bus.lock().subs.push(Arc::clone(&shared));
        Subscription { shared }
    }

    /// Whether anyone is subscribed (publishing is skipped otherwise).
    pub fn has_subscribers(&self) -> bool {
        !self.bus.lock().subs.is_empty()
    }

    /// Publishes kept events (numbered by their producer, as the store's history is):
    /// the run's last `seq` becomes the last one's.
    pub fn publish(&self, events: &[RunEvent]) {
        let Some(last) = events.last() else { return };
        let mut state = self.bus.lock();
        note_published(&mut state, last.run_id, last.seq, last.kind.is_end());
        deliver(&mut state, events.iter().cloned());
    }

    /// [`RunEvents::publish`] of events the caller gives up: the last subscriber takes
    /// them without a copy (a durable driver's checkpoint publishes this way).
    pub fn publish_owned(&self, events: Vec<RunEvent>) {
        let Some(last) = events.last() else { return };
        let (run_id, seq, end) = (last.run_id, last.seq, last.kind.is_end());
        let mut state = self.bus.lock();
        note_published(&mut state, run_id, seq, end);
        deliver(&mut state, events.into_iter());
    }

    /// Publishes a `model_delta` of run `run_id`: `text` streamed by `node`'s model in turn
    /// `turn`. It carries the `seq` of the run's last event and is never kept.
    pub fn model_delta(&self, run_id: RunId, node: &str, turn: u32, text: &str) {
        self.delta(run_id, node, turn, text, None);
    }

    /// Publishes a `model_delta` of run `run_id` carrying a chunk of the arguments of tool
    /// call `index` of the reply `node`'s model streams in turn `turn`.
    pub fn tool_arguments_delta(
        &self,
        run_id: RunId,
        node: &str,
        turn: u32,
        index: usize,
        text: &str,
    ) {
        self.delta(run_id, node, turn, text, Some(index));
    }

    fn delta(&self, run_id: RunId, node: &str, turn: u32, text: &str, tool_call: Option<usize>) {
        let mut state = self.bus.lock();
        if state.subs.is_empty() {
            return;
        }
        let seq = state.runs.get(&run_id).map_or(0, |c| c.last_seq);
        let event = RunEvent {
            seq,
            run_id,
            at_ms: now_ms(),
            kind: EventKind::ModelDelta {
                node: node.to_string(),
                turn,
                text: text.to_string(),
                tool_call,
            },
            dropped: 0,
        };
        deliver(&mut state, std::iter::once(event));
    }

    /// A handle publishing run `run_id`'s model deltas (what an agent's model call holds).
    pub fn publisher(&self, run_id: RunId) -> DeltaPublisher {
        DeltaPublisher {
            events: self.clone(),
            run_id,
        }
    }

    /// The `seq` of run `run_id`'s last kept event published here (`None` before any).
    pub fn last_seq(&self, run_id: RunId) -> Option<u64> {
        self.bus.lock().runs.get(&run_id).map(|c| c.last_seq)
    }

    /// Continues run `run_id`'s numbering after `seq` (a durable driver: the last event
    /// its store keeps), with its trace published up to `trace_len`.
    pub fn continue_after(&self, run_id: RunId, seq: u64, trace_len: usize) {
        self.bus.lock().runs.insert(
            run_id,
            Cursor {
                last_seq: seq,
                trace_published: trace_len,
            },
        );
    }

    /// After a step of `run` driven without a store, `trace_before` its trace's length
    /// before the step: its events (numbered on from the run's last, see
    /// [`super::events::transition_events`]) published. A run seen for the first time is
    /// published from `trace_before` on. One lock and one look-up of the run a step.
    pub(crate) fn after_step(&self, run: &RunState, trace_before: usize) {
        let mut guard = self.bus.lock();
        let BusState {
            subs,
            runs,
            scratch,
        } = &mut *guard;
        let cursor = runs.entry(run.run_id).or_insert(Cursor {
            last_seq: 0,
            trace_published: trace_before,
        });
        subs.retain(|s| Arc::strong_count(s) > 1);
        if subs.is_empty() {
            // Nobody listens: the events are counted, not built, so that a subscriber
            // joining later sees the run's numbering go on without a gap.
            let made =
                transition_event_count(run, cursor.trace_published, None, cursor.last_seq + 1);
            if made == 0 {
                return;
            }
            // As `transition_events` ends a run: `run_ended` for these.
            if matches!(
                run.status(),
                RunStatus::Completed | RunStatus::Stopped | RunStatus::Failed
            ) {
                runs.remove(&run.run_id);
            } else {
                cursor.last_seq += made;
                cursor.trace_published = run.trace.len();
            }
            return;
        }
        let stamp = EventStamp {
            first_seq: cursor.last_seq + 1,
            at_ms: now_ms(),
        };
        scratch.clear();
        transition_events_into(run, cursor.trace_published, None, stamp, scratch);
        let Some(last) = scratch.last() else { return };
        if last.kind.is_end() {
            runs.remove(&run.run_id);
        } else {
            cursor.last_seq = last.seq;
            cursor.trace_published = run.trace.len();
        }
        // Cloned for all subscribers but the last, which takes the events themselves.
        let Some((last, rest)) = subs.split_last() else {
            return;
        };
        for sub in rest {
            sub.push_all(scratch.iter().cloned());
        }
        last.push_all(scratch.drain(..));
        // A transition of many items (a long resume) leaves no large buffer behind.
        scratch.shrink_to(64);
    }
}

/// Run `run_id`'s numbering after a publication ending at `seq` (`end`: its last event
/// ended the run, which is forgotten).
fn note_published(state: &mut BusState, run_id: RunId, seq: u64, end: bool) {
    let cursor = state.runs.entry(run_id).or_default();
    cursor.last_seq = cursor.last_seq.max(seq);
    if end {
        state.runs.remove(&run_id);
    }
}

/// Pushes `events` to every live subscriber, forgetting those dropped.
fn deliver(state: &mut BusState, events: impl Iterator<Item = RunEvent> + Clone) {
    state.subs.retain(|s| Arc::strong_count(s) > 1);
    let Some((last, rest)) = state.subs.split_last() else {
        return;
    };
    for sub in rest {
        sub.push_all(events.clone());
    }
    last.push_all(events);
}

/// Publishes one run's `model_delta`s (see [`RunEvents::model_delta`]). Cheap to clone;
/// publishing never waits.
#[derive(Debug, Clone)]
pub struct DeltaPublisher {
    events: RunEvents,
    run_id: RunId,
}

impl DeltaPublisher {
    /// Publishes `text` streamed by `node`'s model in turn `turn`.
    pub fn model_delta(&self, node: &str, turn: u32, text: &str) {
        self.events.model_delta(self.run_id, node, turn, text);
    }

    /// Publishes a chunk of the arguments of tool call `index` streamed by `node`'s model
    /// in turn `turn`.
    pub fn tool_arguments_delta(&self, node: &str, turn: u32, index: usize, text: &str) {
        self.events
            .tool_arguments_delta(self.run_id, node, turn, index, text);
    }
}

struct Shared {
    queue: Mutex<Queue>,
    notify: Notify,
}

struct Queue {
    events: VecDeque<RunEvent>,
    capacity: usize,
    dropped: u64,
    closed: bool,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push_all(&self, events: impl Iterator<Item = RunEvent>) {
        {
            let mut q = self.queue();
            for e in events {
                q.push(e);
            }
        }
        self.notify.notify_one();
    }
}

impl Queue {
    /// Buffers `event`; when full, drops a `model_delta` first (this one, or the oldest
    /// buffered), else the oldest event.
    fn push(&mut self, event: RunEvent) {
        if self.events.len() >= self.capacity {
            if !event.kind.is_kept() {
                self.dropped += 1;
                return;
            }
            match self.events.iter().position(|e| !e.kind.is_kept()) {
                Some(i) => {
                    self.events.remove(i);
                }
                None => {
                    self.events.pop_front();
                }
            }
            self.dropped += 1;
        }
        self.events.push_back(event);
    }

    fn pop(&mut self) -> Option<RunEvent> {
        let mut event = self.events.pop_front()?;
        event.dropped = std::mem::take(&mut self.dropped);
        Some(event)
    }
}

/// One subscriber's events, oldest first, from a bounded buffer (see [`RunEvents`]).
pub struct Subscription {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = self.shared.queue();
        f.debug_struct("Subscription")
            .field("buffered", &q.events.len())
            .field("capacity", &q.capacity)
            .field("dropped", &q.dropped)
            .finish()
    }
}

impl Subscription {
    /// The next event, waiting for one; `None` once every [`RunEvents`] clone is gone
    /// and the buffer is drained. Its `dropped` says how many events were lost since the
    /// one delivered before it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an event is taken from the buffer only when returned.
    pub async fn next(&mut self) -> Option<RunEvent> {
        loop {
            let notified = self.shared.notify.notified();
            {
                let mut q = self.shared.queue();
                if let Some(e) = q.pop() {
                    return Some(e);
                }
                if q.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// The next buffered event, without waiting.
    pub fn try_next(&mut self) -> Option<RunEvent> {
        self.shared.queue().pop()
    }

    /// Events buffered, not yet delivered.
    pub fn buffered(&self) -> usize {
        self.shared.queue().events.len()
    }
}
