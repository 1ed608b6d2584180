//! `RunStore` for [`Store`]: every method one transaction or one statement, the same
//! on both databases.

use std::time::Duration;

use super::Store;
use super::events::{events_json, write_events};
use crate::runtime::{
    EventStamp, RunEvent, RunId, RunRecord, TerminationReason, transition_events,
};
use crate::store::clock::Clock;
use crate::store::db::{Backend, Begin, Conn, Tx, is_refusal, sql};
use crate::store::rows::{INFO, info_from_row, to_i64};
use crate::store::{
    Checkpoint, CreateOptions, DependencySpec, Lease, PruneFilter, RunFilter, RunInfo, RunStore,
    StoreError, StoredRun, StoredStatus, attempt_key, duration_ms, owner_gone,
};

impl<B: Backend> RunStore for Store<B> {
    async fn create(
        &self,
        record: &RunRecord,
        options: &CreateOptions,
    ) -> Result<RunInfo, StoreError> {
        self.create_run(record, options).await
    }

    async fn checkpoint(
        &self,
        id: RunId,
        owner: &str,
        checkpoint: Checkpoint<'_>,
    ) -> Result<RunInfo, StoreError> {
        let Checkpoint {
            seq,
            delta,
            run,
            next_attempt,
            document,
            events,
        } = checkpoint;
        let trace_from = delta.trace_from;
        let now = self.now();
        let running = run.is_running();
        let next_key = attempt_key(run);
        let delta = serde_json::to_string(delta).expect("a delta is plain data");
        let status = StoredStatus::of(run.status());
        let snapshot = self
            .wants_snapshot(id, seq, run, delta.len())
            .then(|| serde_json::to_string(run).expect("a run state is plain data"));
        let document = document.map(|(doc, digest)| {
            let text = serde_json::to_string(doc).expect("a document is plain data");
            (text, digest)
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
        let events = transition_events(run, trace_from, Some(seq), stamp);
        let db = StoreError::db("checkpoint", Some(id));
        let key = id.to_string();
        let one_statement = self.dialect.checkpoint_with_events.as_deref();
        let events_json = one_statement.map(|_| events_json(&events));
        // The checkpoint statement (SQLite's `checkpoint_in` trigger, PostgreSQL's
        // `pactgraph_checkpoint`): fenced, atomic; the run row as it is after it comes
        // back. The events go with it: in the same statement (PostgreSQL), or after it in
        // the same write transaction (SQLite).
        let q = sql(one_statement.unwrap_or(&self.dialect.checkpoint))
            .bind(key.as_str())
            .bind(to_i64(seq))
            .bind(i64::from(run.steps))
            .bind(status.as_str())
            .bind(run.termination_reason().map(TerminationReason::as_str))
            .bind(to_i64(now))
            .bind(owner)
            .bind(running)
            .bind(&next_key)
            .bind(i64::from(next_attempt))
            .bind(document.as_ref().map(|(_, digest)| *digest))
            .bind(document.as_ref().map(|(text, _)| text.as_str()))
            .bind(&delta)
            .bind(snapshot.as_deref());
        let mut c = self.db.write().await?;
        let row = if let Some(json) = &events_json {
            q.bind(json.as_str()).fetch_one(&mut c).await
        } else {
            let mut tx = c.begin(Begin::Write).await.map_err(&db)?;
            match q.fetch_one(&mut tx).await {
                Ok(row) => {
                    write_events(&mut tx, &key, &events).await.map_err(&db)?;
                    tx.commit().await.map_err(&db)?;
                    Ok(row)
                }
                Err(e) => {
                    tx.rollback().await.map_err(&db)?;
                    Err(e)
                }
            }
        };
        drop(c);
        let row = match row {
            Ok(row) => row,
            Err(e) if is_refusal(&e) => return Err(self.refusal(id, owner, seq, now).await),
            Err(e) => return Err(db(e)),
        };
        self.weights
            .weigh(id, running, delta.len(), snapshot.as_ref().map(String::len));
        info_from_row(&row, now)
    }

    async fn load(&self, id: RunId) -> Result<StoredRun, StoreError> {
        self.load_upto(id, None).await
    }

    async fn load_at(&self, id: RunId, seq: u64) -> Result<StoredRun, StoreError> {
        self.load_upto(id, Some(seq)).await
    }

    async fn info(&self, id: RunId) -> Result<RunInfo, StoreError> {
        let row = sql(&format!("SELECT {INFO} FROM runs WHERE id = $1"))
            .bind(id.to_string())
            .fetch_optional(&mut self.db.read().await?)
            .await
            .map_err(StoreError::db("info", Some(id)))?
            .ok_or_else(|| StoreError::NotFound {
                key: id.to_string(),
            })?;
        info_from_row(&row, self.now())
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        self.list_runs(filter).await
    }

    async fn claim(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        let now = self.now();
        let expires_ms = now.saturating_add(duration_ms(lease));
        // A holder that is a gone process of this host is taken over like a lapsed lease.
        let before = self.info(id).await?;
        let gone = before.owner.clone().filter(|o| owner_gone(o));
        // Taking a run from another owner that did not let it go (it died, or its lease
        // lapsed) means its step in flight may have started: that step's next attempt is
        // one more. A queued run claimed is running. The row is chosen with the dialect's
        // lock (PostgreSQL: `FOR UPDATE SKIP LOCKED`, never waiting on another claim).
        let statement = format!(
            "UPDATE runs SET \
               attempt = CASE WHEN owner IS NOT NULL AND owner <> $1 AND status IN \
                 ('running', 'queued') THEN attempt + 1 ELSE attempt END, \
               status = CASE WHEN status = 'queued' THEN 'running' ELSE status END, \
               owner = $1, lease_expires_ms = $2 \
             WHERE id = (SELECT id FROM runs WHERE id = $3 \
               AND (owner IS NULL OR owner = $1 OR lease_expires_ms IS NULL \
                    OR lease_expires_ms <= $4 OR owner = $5){})",
            self.dialect.claim_lock
        );
        let updated = sql(&statement)
            .bind(owner)
            .bind(to_i64(expires_ms))
            .bind(id.to_string())
            .bind(to_i64(now))
            .bind(gone)
            .execute(&mut self.db.write().await?)
            .await
            .map_err(StoreError::db("claim", Some(id)))?;
        if updated == 0 {
            let info = self.info(id).await?;
            return Err(StoreError::LeaseHeld {
                run_id: id,
                holder: info.owner.unwrap_or_default(),
                lease_expires_ms: info.lease_expires_ms.unwrap_or(0),
            });
        }
        Ok(Lease {
            run_id: id,
            owner: owner.to_string(),
            expires_ms,
        })
    }

    async fn renew(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        let now = self.now();
        let expires_ms = now.saturating_add(duration_ms(lease));
        let updated = sql(
            "UPDATE runs SET lease_expires_ms = $1 WHERE id = $2 AND owner = $3 \
             AND lease_expires_ms > $4",
        )
        .bind(to_i64(expires_ms))
        .bind(id.to_string())
        .bind(owner)
        .bind(to_i64(now))
        .execute(&mut self.db.write().await?)
        .await
        .map_err(StoreError::db("renew", Some(id)))?;
        if updated == 0 {
            return Err(self.lease_lost(id, owner, now).await);
        }
        Ok(Lease {
            run_id: id,
            owner: owner.to_string(),
            expires_ms,
        })
    }

    async fn note_attempt(&self, id: RunId, owner: &str, attempt: u32) -> Result<(), StoreError> {
        let now = self.now();
        let statement = format!(
            "UPDATE runs SET attempt = {}(attempt, $1) WHERE id = $2 AND owner = $3 \
             AND lease_expires_ms > $4",
            self.dialect.greatest
        );
        let updated = sql(&statement)
            .bind(i64::from(attempt))
            .bind(id.to_string())
            .bind(owner)
            .bind(to_i64(now))
            .execute(&mut self.db.write().await?)
            .await
            .map_err(StoreError::db("note_attempt", Some(id)))?;
        if updated == 0 {
            return Err(self.lease_lost(id, owner, now).await);
        }
        Ok(())
    }

    async fn release(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        self.weights.forget(id);
        self.let_go(
            id,
            owner,
            "release",
            "UPDATE runs SET owner = NULL, lease_expires_ms = NULL WHERE id = $1 AND owner = $2",
        )
        .await
    }

    async fn interrupt(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        self.let_go(
            id,
            owner,
            "interrupt",
            "UPDATE runs SET owner = NULL, lease_expires_ms = NULL, \
             attempt = CASE WHEN status IN ('running', 'queued') THEN attempt + 1 \
               ELSE attempt END, \
             status = CASE WHEN status = 'queued' THEN 'running' ELSE status END \
             WHERE id = $1 AND owner = $2",
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
        self.clock.clone()
    }
}
