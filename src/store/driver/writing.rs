//! The checkpoints a driver has in flight while the run steps on (ADR 0068): at most one,
//! or two when the store pipelines them (ADR 0080), answered and published in the order
//! they were sent.
//!
//! A checkpoint sent behind another ([`RunStore::pipelines`]) is fenced on that one's
//! `seq`: it commits only after it, and is refused if that one did not commit. Its first
//! try goes where the one before it went, so a lost connection fails both; the older is
//! always settled first (it may ride out the fault on its own), and a checkpoint sent
//! behind that fails once the older committed is written again, alone.

use std::sync::{Mutex, PoisonError};
use std::task::Poll;

use super::{Answer, Driver, Writing};
use crate::runtime::RunEvent;
use crate::store::{Checkpoints, PreparedCheckpoint, RunInfo, RunStore, StoreError};

impl<'a> Writing<'a> {
    /// `answer` in flight, its events `publish`; `pipelined` as the field.
    fn new(answer: Answer<'a>, publish: Option<Vec<RunEvent>>, pipelined: bool) -> Self {
        Self {
            answer: Mutex::new(answer),
            done: None,
            publish,
            pipelined,
            again: None,
        }
    }

    /// Polls its answer once (nothing if it came already); true once it came.
    async fn poll(&mut self) -> bool {
        if self.done.is_none() {
            let answer = self
                .answer
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner);
            let polled = std::future::poll_fn(|cx| Poll::Ready(answer.as_mut().poll(cx))).await;
            if let Poll::Ready(answer) = polled {
                self.done = Some(answer);
            }
        }
        self.done.is_some()
    }

    /// Its answer, waited for.
    async fn answer(self) -> Result<RunInfo, StoreError> {
        match self.done {
            Some(answer) => answer,
            None => {
                self.answer
                    .into_inner()
                    .unwrap_or_else(PoisonError::into_inner)
                    .await
            }
        }
    }
}

impl<'a, S: RunStore> Driver<'a, S> {
    /// Starts the drive with `answer` in flight, as a checkpoint being written: the run's
    /// create (`drive_creating_then`), waited for before the first effect, the first
    /// checkpoint, any other call to the store and the end.
    pub(in crate::store) fn writing_first(&mut self, answer: Answer<'a>) {
        debug_assert!(self.writing.is_empty(), "nothing written yet");
        self.writing.push_back(Writing::new(answer, None, false));
    }

    /// Leaves `prepared` writing while the run steps on (its events `publish`, its batch
    /// of `steps` steps): behind the one in flight when the store pipelines both (at most
    /// two in flight: the older is waited for first), else once every one in flight is
    /// written. Polled once: the statement is sent (on SQLite, handed to its connection's
    /// thread) before the next step.
    pub(super) async fn send(
        &mut self,
        prepared: PreparedCheckpoint,
        publish: Option<Vec<RunEvent>>,
        steps: u32,
    ) -> Result<(), StoreError> {
        // `--checkpoints steps` only, whose checkpoints are one step each: their events are
        // packed here,
        // so the first poll of the write sends it (a batch's, packed on another thread,
        // would be sent when that is done, maybe after the one behind it); at effects a
        // round trip saved a batch is noise, and not worth the pipe's own connection.
        let pipelined =
            self.options.checkpoints == Checkpoints::Steps && self.store.pipelines(&prepared);
        debug_assert!(!pipelined || steps <= 1, "a batch at --checkpoints steps");
        let behind = pipelined && self.writing.back().is_some_and(|w| w.pipelined);
        let mut prepared = prepared;
        // A one-step checkpoint's events (every one of `--checkpoints steps`) are packed
        // here, while the one before is in flight: a few microseconds, less than handing
        // them to another thread and back (ADR 0079).
        if steps <= 1 {
            prepared.pack_events();
        }
        if pipelined {
            prepared = prepared.piped();
        }
        let again = behind.then(|| prepared.clone());
        if behind {
            prepared = prepared.behind();
        }
        let (store, run_id) = (self.store, self.id);
        let answer: Answer<'a> = if steps > 1 {
            // The events of a batch of several steps are packed on a thread of the
            // runtime's blocking pool, beside the next steps (started now: a task runs
            // without being polled), then written.
            let packing = tokio::task::spawn_blocking(move || {
                let mut prepared = prepared;
                prepared.pack_events();
                prepared
            });
            Box::pin(async move {
                let prepared = packing.await.map_err(|e| StoreError::CannotContinue {
                    run_id,
                    reason: format!("packing the events of a checkpoint: {e}"),
                })?;
                store.write_checkpoint(prepared).await
            })
        } else {
            Box::pin(store.write_checkpoint(prepared))
        };
        if behind {
            while self.writing.len() >= 2 {
                self.settle_oldest().await?;
            }
        } else {
            self.written().await?;
        }
        let mut writing = Writing::new(answer, publish, pipelined);
        writing.again = again;
        writing.poll().await;
        self.writing.push_back(writing);
        Ok(())
    }

    /// Waits for every checkpoint being written, in order: its answer read (a cancel
    /// asked), its events published. Every call to the store but those writes waits for
    /// this first.
    pub(in crate::store) async fn written(&mut self) -> Result<(), StoreError> {
        while !self.writing.is_empty() {
            self.settle_oldest().await?;
        }
        Ok(())
    }

    /// Polls the oldest checkpoint being written once, without waiting for it: its answer
    /// read if it came (its refusal returned).
    pub(super) async fn poll_writing(&mut self) -> Result<(), StoreError> {
        let Some(oldest) = self.writing.front_mut() else {
            return Ok(());
        };
        if oldest.poll().await {
            self.settle_oldest().await?;
        }
        Ok(())
    }

    /// Waits for the oldest checkpoint being written and settles it: committed, or its
    /// error returned (the ones behind it dropped: refused by their fence, or never
    /// committed without it), or, sent behind one that was then committed, written
    /// again alone.
    async fn settle_oldest(&mut self) -> Result<(), StoreError> {
        let Some(mut oldest) = self.writing.pop_front() else {
            return Ok(());
        };
        let publish = oldest.publish.take();
        let again = oldest.again.take();
        let info = match (oldest.answer().await, again) {
            (Ok(info), _) => info,
            (Err(e), Some(prepared)) => {
                tracing::debug!(
                    "checkpoint {} of run {} sent behind the one before: {e}; written again",
                    prepared.seq,
                    self.id
                );
                match self.store.write_checkpoint(prepared.resent()).await {
                    Ok(info) => info,
                    Err(e) => {
                        self.writing.clear();
                        return Err(e);
                    }
                }
            }
            (Err(e), None) => {
                self.writing.clear();
                return Err(e);
            }
        };
        self.committed(&info, publish);
        Ok(())
    }

    /// A checkpoint committed: its answer read, its events published.
    pub(super) fn committed(&mut self, info: &RunInfo, publish: Option<Vec<RunEvent>>) {
        self.cancel_requested = info.cancel_requested;
        self.let_go = info.owner.is_none();
        if let (Some(events), Some(bus)) = (publish, self.executor.events()) {
            bus.publish_owned(events);
        }
    }
}
