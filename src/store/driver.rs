//! Driving a stored run under its lease: step it, checkpoint its steps (at effects or every
//! step: `store/batch.rs`), renew the lease, watch for a cancel. Claiming it and letting it
//! go: `store/drive.rs`.

use super::batch::{Batch, Limits};
use super::delta::{Before, StepDelta};
use super::drive::Continue;
use super::drive_options::DriveOptions;
use super::{
    Checkpoint, Clock, Lease, RunInfo, RunStore, Settled, StoreError, StoredRun, StoredStatus,
    attempt_key, duration_ms, settle,
};
use crate::runtime::{
    EventStamp, Executor, RunId, RunState, transition_event_count, transition_events,
};

mod control;

/// A run being driven under its lease.
pub(super) struct Driver<'a, S> {
    executor: &'a Executor,
    store: &'a S,
    id: RunId,
    owner: &'a str,
    options: &'a DriveOptions,
    lease_expires_ms: u64,
    /// The store's clock: when the lease lapses and is renewed.
    clock: Clock,
    /// The run as loaded under this lease, if it was (else `run` loads it).
    loaded: Option<StoredRun>,
    /// The `seq` of the run's last kept event when the drive starts, if known without
    /// asking the store (a run this process just created: 0).
    last_event: Option<u64>,
    /// The `seq` of the run's last kept event (docs/spec/events.md).
    event_seq: u64,
    /// A cancel was asked (the last checkpoint's answer said so).
    cancel_requested: bool,
    /// The last checkpoint's answer shows no owner: it gave the lease up with the run's
    /// stop (`Checkpoint::let_go`, ADR 0071), so the drive's end releases nothing.
    let_go: bool,
}

/// How waiting for dependencies ended.
enum Waited {
    /// The run may start.
    Ready,
    /// It ended (`dependency_failed`, `dependency_timeout`).
    Ended,
    /// A cancel was asked while it waited: it is stopped.
    Cancelled,
}

/// What a step came to.
enum Stepped {
    /// Committed to the run in memory (its batch checkpoints it); `effectful` when it
    /// performed an effect.
    Committed {
        /// It awaited an effect (a handler, a program, a policy, team members...).
        effectful: bool,
    },
    /// A cancel was asked mid-step: the step was abandoned.
    Cancelled,
    /// The drive was interrupted mid-step ([`DriveOptions::interrupt`]): the step's
    /// effect was dropped.
    Interrupted,
}

impl<'a, S: RunStore> Driver<'a, S> {
    /// The drive of the run `lease` holds, loaded as `loaded` when given; the `seq` of its
    /// last kept event `last_event` when known.
    pub(super) fn new(
        executor: &'a Executor,
        store: &'a S,
        lease: &'a Lease,
        options: &'a DriveOptions,
        loaded: Option<StoredRun>,
        last_event: Option<u64>,
    ) -> Self {
        Self {
            executor,
            store,
            id: lease.run_id,
            owner: &lease.owner,
            options,
            lease_expires_ms: lease.expires_ms,
            clock: store.clock(),
            loaded,
            last_event,
            event_seq: 0,
            cancel_requested: false,
            let_go: false,
        }
    }

    /// The store driven through.
    pub(super) fn store(&self) -> &'a S {
        self.store
    }

    /// The run driven.
    pub(super) fn id(&self) -> RunId {
        self.id
    }

    /// The lease's owner.
    pub(super) fn owner(&self) -> &'a str {
        self.owner
    }

    /// Whether the last checkpoint written gave the lease up (ADR 0071).
    pub(super) fn let_go(&self) -> bool {
        self.let_go
    }

    /// Steps the run to its end, a pause or a stop, every step committed, and returns it.
    pub(super) async fn run(&mut self, how: Continue) -> Result<RunState, StoreError> {
        let stored = match self.loaded.take() {
            Some(stored) => stored,
            None => self.store.load(self.id).await?,
        };
        self.continue_events(&stored.record.run, self.last_event)
            .await?;
        let mut info = stored.info;
        let mut seq = stored.record.seq;
        let mut run = stored.record.run;
        if self.options.live_only && info.status.is_ended() {
            return Err(StoreError::WrongStatus {
                run_id: self.id,
                status: info.status,
                operation: "drive it (it already ended)",
            });
        }
        if info.status == StoredStatus::Waiting {
            match self.wait_for_dependencies(&mut run, &mut seq).await? {
                Waited::Ready => {}
                Waited::Ended | Waited::Cancelled => return Ok(run),
            }
            info = self.store.info(self.id).await?;
            // Settling wrote its checkpoints (and their events) itself.
            self.continue_events(&run, None).await?;
        }
        // The `step` events carry what each node run writes (and `run_started` the input
        // of a run not started yet): recorded from here, forgotten at each commit.
        run.record_values_as_text();
        match how {
            Continue::AsStored => {}
            Continue::Answer(answer) => {
                let before = Before::of(&run);
                run = self
                    .executor
                    .resume(run, &answer)
                    .map_err(|e| self.cannot(e.to_string()))?;
                let delta = StepDelta::between(&before, &run);
                info = self
                    .checkpoint(Checkpoint::new(seq + 1, &delta, &run))
                    .await?;
                // Its events carried the answer: not again with the next checkpoint's.
                run.events_made();
                seq += 1;
            }
            Continue::Reopen(document) => {
                let reopened = self.reopen(&info, &run, seq).await?;
                let before = Before::of(&run);
                let delta = StepDelta::between(&before, &reopened);
                let attempt = info.attempt_for(&reopened).saturating_add(u32::from(
                    info.attempt_key.as_deref() == Some(&attempt_key(&reopened)),
                ));
                let digest = document.as_deref().map(crate::runtime::digest_of);
                let mut cp = Checkpoint::new(seq + 1, &delta, &reopened).next_attempt(attempt);
                if let (Some(doc), Some(digest)) = (&document, &digest) {
                    cp = cp.document(doc, digest);
                }
                info = self.checkpoint(cp).await?;
                seq += 1;
                run = reopened;
                // Loaded from the store: its events record values from here too.
                run.record_values_as_text();
            }
        }
        // The attempt the store keeps is for the first step after the last commit; at
        // effects it goes to the first effect after it (the pure steps before need none):
        // the effect that was in flight when the run's last process died.
        let mut attempt = info.attempt_for(&run);
        self.cancel_requested = info.cancel_requested;
        let mut done = 0u64;
        let half = duration_ms(self.options.lease) / 2;
        let limits = Limits::of(
            self.options.checkpoints,
            self.options.batch_steps,
            self.options.batch_wait,
        );
        let mut batch = Batch::start(&mut run);
        while run.is_running() && self.options.max_checkpoints.is_none_or(|m| done < m) {
            if self.cancel_requested {
                self.flush(&mut run, &mut batch, &mut seq).await?;
                self.cancel(&mut run, seq).await?;
                return Ok(run);
            }
            if self.interrupted() {
                self.flush(&mut run, &mut batch, &mut seq).await?;
                return Err(self.interruption(false));
            }
            if self.lease_expires_ms.saturating_sub(self.clock.now_ms()) < half {
                self.renew().await?;
                if self.cancel_requested {
                    continue;
                }
            }
            if let Some(f) = self.options.before_step {
                f(&run);
            }
            let effectful = match self.step(&mut run, attempt).await? {
                Stepped::Committed { effectful } => effectful,
                Stepped::Cancelled => {
                    // The run in memory is as the steps before left it: the step changed
                    // nothing. Those steps are committed, then the cancel.
                    self.flush(&mut run, &mut batch, &mut seq).await?;
                    self.cancel(&mut run, seq).await?;
                    return Ok(run);
                }
                Stepped::Interrupted => {
                    // As for a cancel: the steps before are committed, the run is let go.
                    self.flush(&mut run, &mut batch, &mut seq).await?;
                    return Err(self.interruption(true));
                }
            };
            if effectful {
                attempt = 1;
            }
            if batch.took(&run, effectful, limits) {
                // A batch of pure steps full by its count or its time (at effects), a
                // step that performed an effect, a pure step (`--checkpoints steps`), or
                // a step that ended or paused the run: committed before the next step.
                self.commit(&mut run, &mut batch, &mut seq).await?;
                attempt = 1;
                done += 1;
            }
        }
        // Every way out of the loop commits first (a step that ends or pauses the run is
        // committed with its batch; `max_checkpoints` counts commits).
        debug_assert_eq!(batch.steps(), 0, "uncommitted steps at the end of a drive");
        Ok(run)
    }

    /// Commits the steps of `batch` (one checkpoint, `seq` + 1) and starts the next batch.
    async fn commit(
        &mut self,
        run: &mut RunState,
        batch: &mut Batch,
        seq: &mut u64,
    ) -> Result<(), StoreError> {
        let delta = batch.delta(run);
        // A run that stopped running is let go with its last checkpoint where the store
        // can (ADR 0071; the store ignores this for a run still running): every way out
        // of the drive's loop ends the drive.
        let checkpoint = Checkpoint::new(*seq + 1, &delta, run).letting_go();
        self.checkpoint(checkpoint).await?;
        run.events_made();
        *seq += 1;
        *batch = Batch::start(run);
        Ok(())
    }

    /// Commits the steps of `batch`, if any.
    async fn flush(
        &mut self,
        run: &mut RunState,
        batch: &mut Batch,
        seq: &mut u64,
    ) -> Result<(), StoreError> {
        if batch.steps() > 0 {
            self.commit(run, batch, seq).await?;
        }
        Ok(())
    }

    /// Takes one step of `run` (not yet checkpointed: the caller's batch holds it). Says
    /// whether it performed an effect.
    async fn step(&mut self, run: &mut RunState, attempt: u32) -> Result<Stepped, StoreError> {
        let half = duration_ms(self.options.lease) / 2;
        let mut step = self.executor.begin_step(run);
        let mut effectful = false;
        while let Some(mut effect) = step.take_effect() {
            if !std::mem::replace(&mut effectful, true) {
                effect.set_attempt(attempt);
            } else if effect.attempt() > attempt {
                // A node `retry` policy's later attempt: stored before it starts, so a
                // crash from here runs the step again with a higher attempt still.
                self.store
                    .note_attempt(self.id, self.owner, effect.attempt())
                    .await?;
            }
            // The lease is renewed while the effect runs, each time half of it is left,
            // and a cancel is looked for; losing the lease or a cancel abandons the
            // effect (dropping it kills its program).
            // The lease's times are on the store's clock; the cancel is looked for every
            // `cancel_poll` of real time.
            let perform = self.executor.perform(effect);
            tokio::pin!(perform);
            let output = loop {
                let renew_at = self.lease_expires_ms.saturating_sub(half);
                tokio::select! {
                    output = &mut perform => break output,
                    () = self.clock.sleep_until(renew_at) => {}
                    () = tokio::time::sleep(self.options.cancel_poll) => {}
                    () = self.interrupt() => return Ok(Stepped::Interrupted),
                }
                if self.lease_expires_ms.saturating_sub(self.clock.now_ms()) <= half {
                    self.renew().await?;
                }
                if self.store.info(self.id).await?.cancel_requested {
                    return Ok(Stepped::Cancelled);
                }
            };
            self.executor.resolve_step(run, &mut step, output);
        }
        self.executor.commit_step(run, step);
        Ok(Stepped::Committed { effectful })
    }

    /// Waits (renewing the lease) until run `id`'s dependencies settle it; a cancel asked
    /// meanwhile stops it.
    async fn wait_for_dependencies(
        &mut self,
        run: &mut RunState,
        seq: &mut u64,
    ) -> Result<Waited, StoreError> {
        let half = duration_ms(self.options.lease) / 2;
        loop {
            match settle(self.store, self.id, self.owner, run, seq).await? {
                Settled::Waiting { on, .. } => {
                    if let Some(f) = self.options.on_wait {
                        f(&on);
                    }
                }
                Settled::Ready => return Ok(Waited::Ready),
                Settled::Ended(_) => return Ok(Waited::Ended),
            }
            tokio::select! {
                () = tokio::time::sleep(self.options.dependency_poll) => {}
                () = self.interrupt() => return Err(self.interruption(false)),
            }
            if self.lease_expires_ms.saturating_sub(self.clock.now_ms()) < half {
                self.renew().await?;
            }
            if self.store.info(self.id).await?.cancel_requested {
                self.cancel(run, *seq).await?;
                return Ok(Waited::Cancelled);
            }
        }
    }

    /// Writes `checkpoint` with its events numbered on from the run's last, then
    /// publishes them to the executor's subscribers (docs/spec/events.md) and reads its
    /// answer (a cancel asked, the lease given up).
    async fn checkpoint(&mut self, checkpoint: Checkpoint<'_>) -> Result<RunInfo, StoreError> {
        let (run, trace_from, seq) = (checkpoint.run, checkpoint.delta.trace_from, checkpoint.seq);
        let stamp = EventStamp {
            first_seq: self.event_seq + 1,
            at_ms: self.clock.now_ms(),
        };
        let publish = self
            .executor
            .events()
            .filter(|b| b.has_subscribers())
            .map(|_| transition_events(run, trace_from, Some(seq), stamp));
        let made = transition_event_count(run, trace_from, Some(seq), stamp.first_seq);
        let info = self
            .store
            .checkpoint(self.id, self.owner, checkpoint.events(stamp))
            .await?;
        self.event_seq = stamp.first_seq + made - 1;
        self.cancel_requested = info.cancel_requested;
        self.let_go = info.owner.is_none();
        if let (Some(events), Some(bus)) = (publish, self.executor.events()) {
            bus.publish_owned(events);
        }
        Ok(info)
    }

    /// Numbers the run's next events on from the last its store keeps (`known`, else
    /// read from the store).
    async fn continue_events(
        &mut self,
        run: &RunState,
        known: Option<u64>,
    ) -> Result<(), StoreError> {
        let last = match known {
            Some(last) => last,
            None => self.store.last_event_seq(self.id).await?,
        };
        self.event_seq = last;
        if let Some(bus) = self.executor.events() {
            bus.continue_after(self.id, last, run.trace.len());
        }
        Ok(())
    }
}
