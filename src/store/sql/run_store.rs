//! `RunStore` for [`Store`]: every method one transaction or one statement, the same
//! on both databases.

use std::time::Duration;

use super::Store;
use super::events::transition_chunk;
use crate::runtime::{EventStamp, RunEvent, RunId, RunRecord};
use crate::store::clock::Clock;
use crate::store::db::{Backend, sql};
use crate::store::rows::{INFO, info_from_row, to_i64};
use crate::store::trace_once::StoredDelta;
use crate::store::trace_weight::to_json_and_trace_bytes;
use crate::store::{
    Checkpoint, CreateOptions, DependencySpec, Lease, PreparedCheckpoint, PreparedCreate,
    PruneFilter, RunFilter, RunInfo, RunStore, StoreError, StoredRun, StoredStatus, Wakeups,
    attempt_key, duration_ms, owner_gone,
};

impl<B: Backend> RunStore for Store<B> {
    async fn create(
        &self,
        record: &RunRecord,
        options: &CreateOptions,
    ) -> Result<RunInfo, StoreError> {
        self.create_run(PreparedCreate::of(record)?, options).await
    }

    async fn checkpoint(
        &self,
        id: RunId,
        owner: &str,
        checkpoint: Checkpoint<'_>,
    ) -> Result<RunInfo, StoreError> {
        let prepared = self.prepare(id, owner, checkpoint).await?;
        let written = self
            .ride_out("checkpoint", |tried| {
                self.checkpoint_once(&prepared, tried > 0)
            })
            .await;
        if written.is_err() {
            // Weighed as prepared (see `prepare`): its next load weighs the run again.
            self.weights.forget(prepared.id);
        }
        written
    }

    async fn load(&self, id: RunId) -> Result<StoredRun, StoreError> {
        self.ride_out("load", |_| self.load_upto(id, None)).await
    }

    async fn load_at(&self, id: RunId, seq: u64) -> Result<StoredRun, StoreError> {
        self.load_upto(id, Some(seq)).await
    }

    async fn info(&self, id: RunId) -> Result<RunInfo, StoreError> {
        self.ride_out("info", |_| async move {
            let row = sql(&format!("SELECT {INFO} FROM runs WHERE id = $1"))
                .bind(id.to_string())
                .fetch_optional(&mut self.db.read().await?)
                .await
                .map_err(StoreError::db("info", Some(id)))?
                .ok_or_else(|| StoreError::NotFound {
                    key: id.to_string(),
                })?;
            info_from_row(&row, self.now())
        })
        .await
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        self.list_runs(filter).await
    }

    async fn claim(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        self.ride_out("claim", |_| async move {
            // The lease is fenced and written on the database's clock (`now_sql`); the
            // holder is told when it lapses on the store's clock (`RunStore::clock`, the
            // database's as measured), from before the statement was sent.
            let sent = self.now();
            // One round trip for a run nobody holds (what a worker takes): the row is
            // read only when the update takes nothing.
            let mut updated = self.claim_row(id, owner, lease, None).await?;
            if updated == 0 {
                // A holder that is a gone process of this host is taken over like a
                // lapsed lease.
                let mut info = self.info(id).await?;
                if let Some(gone) = info.owner.clone().filter(|o| owner_gone(o)) {
                    updated = self.claim_row(id, owner, lease, Some(gone)).await?;
                    if updated == 0 {
                        info = self.info(id).await?;
                    }
                }
                if updated == 0 {
                    return Err(StoreError::LeaseHeld {
                        run_id: id,
                        holder: info.owner.unwrap_or_default(),
                        lease_expires_ms: info.lease_expires_ms.unwrap_or(0),
                    });
                }
            }
            Ok(Lease {
                run_id: id,
                owner: owner.to_string(),
                expires_ms: sent.saturating_add(duration_ms(lease)),
            })
        })
        .await
    }

    async fn renew(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        self.ride_out("renew", |_| async move {
            let sent = self.now();
            let now = self.now_sql(4);
            let updated = sql(&format!(
                "UPDATE runs SET lease_expires_ms = {now} + $1 WHERE id = $2 AND owner = $3 \
                 AND lease_expires_ms > {now}"
            ))
            .bind(to_i64(duration_ms(lease)))
            .bind(id.to_string())
            .bind(owner)
            .bind(self.bound_now())
            .execute(&mut self.db.write().await?)
            .await
            .map_err(StoreError::db("renew", Some(id)))?;
            if updated == 0 {
                return Err(self.lease_lost(id, owner, self.now()).await);
            }
            Ok(Lease {
                run_id: id,
                owner: owner.to_string(),
                expires_ms: sent.saturating_add(duration_ms(lease)),
            })
        })
        .await
    }

    async fn note_attempt(&self, id: RunId, owner: &str, attempt: u32) -> Result<(), StoreError> {
        self.ride_out("note_attempt", |_| async move {
            let statement = format!(
                "UPDATE runs SET attempt = {}(attempt, $1) WHERE id = $2 AND owner = $3 \
                 AND lease_expires_ms > {}",
                self.dialect.greatest,
                self.now_sql(4)
            );
            let updated = sql(&statement)
                .bind(i64::from(attempt))
                .bind(id.to_string())
                .bind(owner)
                .bind(self.bound_now())
                .execute(&mut self.db.write().await?)
                .await
                .map_err(StoreError::db("note_attempt", Some(id)))?;
            if updated == 0 {
                return Err(self.lease_lost(id, owner, self.now()).await);
            }
            Ok(())
        })
        .await
    }

    async fn release(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        self.weights.forget(id);
        // Fenced like a checkpoint: a lease that lapsed is no longer `owner`'s to give
        // up cleanly (its step in flight may run again as the same attempt); `interrupt`
        // gives it up, counting that attempt.
        let statement = format!(
            "UPDATE runs SET owner = NULL, lease_expires_ms = NULL WHERE id = $1 AND owner = $2 \
             AND lease_expires_ms > {}",
            self.now_sql(3)
        );
        self.let_go(id, owner, "release", (&statement, true)).await
    }

    async fn interrupt(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        self.let_go(
            id,
            owner,
            "interrupt",
            (
                "UPDATE runs SET owner = NULL, lease_expires_ms = NULL, \
             attempt = CASE WHEN status IN ('running', 'queued') THEN attempt + 1 \
               ELSE attempt END, \
             status = CASE WHEN status = 'queued' THEN 'running' ELSE status END \
             WHERE id = $1 AND owner = $2",
                false,
            ),
        )
        .await
    }

    async fn cancel(&self, id: RunId) -> Result<RunInfo, StoreError> {
        self.cancel_run(id).await
    }

    async fn prune(&self, filter: &PruneFilter) -> Result<u64, StoreError> {
        self.prune_runs(filter).await
    }

    async fn find(&self, key: &str) -> Result<RunId, StoreError> {
        self.find_run(key).await
    }

    async fn dependency_spec(&self, id: RunId) -> Result<Option<DependencySpec>, StoreError> {
        self.read_dependency_spec(id).await
    }

    async fn dependents(&self, id: RunId) -> Result<Vec<RunInfo>, StoreError> {
        self.read_dependents(id).await
    }

    async fn runnable(&self, limit: usize) -> Result<Vec<RunInfo>, StoreError> {
        self.read_runnable(limit).await
    }

    async fn wakeups(&self) -> Option<Wakeups> {
        self.db().wakeups().await
    }

    async fn event_wakeups(&self, id: RunId) -> Option<Wakeups> {
        self.db().event_wakeups(id).await
    }

    async fn events(
        &self,
        id: RunId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RunEvent>, StoreError> {
        self.read_events(id, after, limit).await
    }

    async fn last_event_seq(&self, id: RunId) -> Result<u64, StoreError> {
        self.read_last_event_seq(id).await
    }

    fn clock(&self) -> Clock {
        self.clock
            .shifted(self.clock_offset.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl<B: Backend> Store<B> {
    /// The claim's update: takes run `id`'s row for `owner` if nobody holds it, `owner`
    /// does, its lease lapsed, or its holder is `gone` (a process of this host that is
    /// gone); the rows it took (0 or 1).
    ///
    /// Taking a run from another owner that did not let it go (it died, or its lease
    /// lapsed) means its step in flight may have started: that step's next attempt is
    /// one more. So does taking back one's own lapsed lease that was not given up (a
    /// drive that finds its lease lapsed gives it up with `interrupt`, which counts the
    /// attempt; when even that could not be written, the claim counts it). A queued run
    /// claimed is running. The row is chosen with the dialect's lock (PostgreSQL: `FOR
    /// UPDATE SKIP LOCKED`, never waiting on another claim).
    async fn claim_row(
        &self,
        id: RunId,
        owner: &str,
        lease: Duration,
        gone: Option<String>,
    ) -> Result<u64, StoreError> {
        let now = self.now_sql(4);
        // No current lease: what lets anyone take the row, and what makes its holder's
        // own claim count the attempt.
        let lapsed = format!("lease_expires_ms IS NULL OR lease_expires_ms <= {now}");
        let statement = format!(
            "UPDATE runs SET \
               attempt = CASE WHEN owner IS NOT NULL AND (owner <> $1 OR {lapsed}) \
                 AND status IN ('running', 'queued') THEN attempt + 1 ELSE attempt END, \
               status = CASE WHEN status = 'queued' THEN 'running' ELSE status END, \
               owner = $1, lease_expires_ms = {now} + $2 \
             WHERE id = (SELECT id FROM runs WHERE id = $3 \
               AND (owner IS NULL OR owner = $1 OR {lapsed} OR owner = $5){})",
            self.dialect.claim_lock
        );
        sql(&statement)
            .bind(owner)
            .bind(to_i64(duration_ms(lease)))
            .bind(id.to_string())
            .bind(self.bound_now())
            .bind(gone)
            .execute(&mut self.db.write().await?)
            .await
            .map_err(StoreError::db("claim", Some(id)))
    }

    /// Checkpoint `checkpoint` of run `id` by `owner` as its statement binds it.
    async fn prepare(
        &self,
        id: RunId,
        owner: &str,
        checkpoint: Checkpoint<'_>,
    ) -> Result<PreparedCheckpoint, StoreError> {
        let Checkpoint {
            seq,
            delta,
            run,
            next_attempt,
            document,
            events,
            let_go,
        } = checkpoint;
        let trace_from = delta.trace_from;
        let now = self.now();
        let running = run.is_running();
        let next_key = attempt_key(run);
        // Weighed without their trace items (ADR 0049): a load reads the trace once,
        // from the snapshot or from the deltas after it, so only the rest of a delta is
        // replayed on top of a snapshot.
        // Stored without its trace items, which its `step` events carry (format 8, ADR
        // 0053): the trace is kept once.
        if run.trace.len() != trace_from + delta.trace_appended() {
            return Err(StoreError::CannotContinue {
                run_id: id,
                reason: format!(
                    "checkpoint {seq}: its delta appends {} trace items at {trace_from}, the \
                     run's trace holds {}",
                    delta.trace_appended(),
                    run.trace.len()
                ),
            });
        }
        let (delta, delta_trace) = to_json_and_trace_bytes(&StoredDelta::of(delta));
        let delta_weight = delta.len() - delta_trace;
        let status = StoredStatus::of(run.status());
        // A new document always comes with a snapshot: PostgreSQL's statement without one
        // writes no document (ADR 0054). Only a reopened run brings one, and it is running.
        let snapshot = (document.is_some() || self.wants_snapshot(id, seq, run, delta_weight))
            .then(|| to_json_and_trace_bytes(run));
        // A snapshot is weighed whole, trace included (`Weights::weigh`, ADR 0049).
        let snapshot = snapshot.map(|(text, _)| text);
        // Weighed as it is prepared, not when its answer comes (ADR 0071): a drive
        // prepares its checkpoints in the order it writes them, the next one sometimes
        // before this one's answer; a write that fails forgets the run's weights.
        self.weights
            .weigh(id, running, delta_weight, snapshot.as_deref());
        let document = document.map(|(doc, digest)| {
            let text = serde_json::to_string(doc).expect("a document is plain data");
            (text, digest.to_string())
        });
        // Its events (docs/spec/events.md), numbered from the driver's stamp, else on from
        // the run's last kept event (the lease makes this the one writer; the events'
        // primary key refuses a clash).
        let stamp = match events {
            Some(stamp) => stamp,
            None => EventStamp {
                first_seq: self.read_last_event_seq(id).await? + 1,
                at_ms: now,
            },
        };
        // Numbered on by one from the first: one chunk (format 8, ADR 0053), written
        // straight from the run (ADR 0056); none when there is no event (last below
        // first).
        let chunk = transition_chunk(run, trace_from, seq, stamp)
            .map_err(|reason| StoreError::CannotContinue { run_id: id, reason })?;
        let (first_event, last_event) = chunk.seqs.unwrap_or((stamp.first_seq, 0));
        // Packed in the client (lz4, `store/packed.rs`).
        let event_texts = super::super::packed::pack(&chunk.texts);
        Ok(PreparedCheckpoint {
            id,
            owner: owner.to_string(),
            seq,
            steps: run.steps,
            status,
            termination_reason: run.termination_reason(),
            running,
            let_go: let_go && !running,
            next_key,
            next_attempt,
            document,
            delta,
            snapshot,
            events: event_texts,
            first_event,
            last_event,
            now,
        })
    }
}
