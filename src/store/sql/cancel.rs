//! Ending runs from outside their steps: cancelling one (one more checkpoint, a snapshot)
//! and pruning those a filter selects.

use super::Store;
use super::events::{last_seq_on, write_events};
use crate::runtime::{EventStamp, RunId};
use crate::store::db::{Backend, Begin, Conn, Exec, Tx, sql};
use crate::store::rows::{cancel_run, to_i64};
use crate::store::{
    PruneFilter, RunFilter, RunInfo, RunStore, StoreError, StoredStatus, duration_ms, owner_gone,
};

impl<B: Backend> Store<B> {
    /// Stops run `id` as cancelled, or asks its driver to (see [`RunStore::cancel`]).
    pub(super) async fn cancel_run(&self, id: RunId) -> Result<RunInfo, StoreError> {
        let stored = self.load(id).await?;
        let status = stored.info.status;
        if status == StoredStatus::Running {
            // Its driver stops it at its next step (it reads the flag with every
            // checkpoint and while an effect runs).
            sql("UPDATE runs SET cancel_requested = 1 WHERE id = $1")
                .bind(id.to_string())
                .execute(&mut self.db.write().await?)
                .await
                .map_err(StoreError::db("cancel", Some(id)))?;
            return self.info(id).await;
        }
        let wrong = |status| StoreError::WrongStatus {
            run_id: id,
            status,
            operation: "cancel",
        };
        if !matches!(
            status,
            StoredStatus::Queued
                | StoredStatus::Waiting
                | StoredStatus::AwaitingInput
                | StoredStatus::Interrupted
        ) {
            return Err(wrong(status));
        }
        let now = self.now();
        let mut run = stored.record.run;
        let trace_from = run.trace.len();
        cancel_run(&mut run, now).map_err(|reason| StoreError::Corrupt {
            run_id: id,
            what: "run state".into(),
            reason,
        })?;
        let state = serde_json::to_string(&run).expect("a run state is plain data");
        let seq = stored.info.seq + 1;
        let key = id.to_string();
        let db = StoreError::db("cancel", Some(id));
        let mut c = self.db.write().await?;
        let mut tx = c.begin(Begin::Write).await.map_err(&db)?;
        // Fenced: the run has not moved since it was loaded and nobody holds a lease (on
        // the database's clock).
        let updated = sql(&format!(
            "UPDATE runs SET seq = $1, steps = $2, status = 'stopped', \
             termination_reason = 'cancelled', updated_ms = $3, snapshot_seq = $1, \
             owner = NULL, lease_expires_ms = NULL \
             WHERE id = $4 AND seq = $1 - 1 \
             AND (owner IS NULL OR lease_expires_ms IS NULL OR lease_expires_ms <= {} \
                  OR owner = $5)",
            self.now_sql(6)
        ))
        .bind(to_i64(seq))
        .bind(i64::from(run.steps))
        .bind(to_i64(now))
        .bind(&key)
        .bind(stored.info.owner.clone().filter(|o| owner_gone(o)))
        .bind(self.bound_now())
        .execute(&mut tx)
        .await
        .map_err(&db)?;
        if updated == 0 {
            tx.rollback().await.map_err(&db)?;
            drop(c);
            let info = self.info(id).await?;
            return Err(wrong(info.status));
        }
        // The snapshot is the checkpoint (it replaces the step rows before it).
        snapshot_at(&mut tx, &key, seq, &state).await.map_err(&db)?;
        // Its events, in the same transaction (docs/spec/events.md).
        let stamp = EventStamp {
            first_seq: last_seq_on(&mut tx, &key).await.map_err(&db)? + 1,
            at_ms: now,
        };
        write_events(
            &mut tx,
            (&run, trace_from),
            (seq, self.dialect.packed_column),
            stamp,
        )
        .await?;
        tx.commit().await.map_err(&db)?;
        drop(c);
        // Runs waiting on this one may be runnable now.
        self.notify_runnable().await;
        self.info(id).await
    }

    /// Deletes the runs `filter` selects (see [`RunStore::prune`]).
    pub(super) async fn prune_runs(&self, filter: &PruneFilter) -> Result<u64, StoreError> {
        if !filter.expired && filter.older_than.is_none() && filter.status.is_none() {
            return Err(StoreError::NoPruneFilter);
        }
        let now = self.now();
        let all = self.list(&RunFilter::default().include_expired()).await?;
        let cutoff = filter
            .older_than
            .map(|age| now.saturating_sub(duration_ms(age)));
        let doomed: Vec<(RunId, Option<String>)> = all
            .iter()
            .filter(|r| !filter.expired || r.is_expired(now))
            .filter(|r| cutoff.is_none_or(|c| r.updated_ms < c))
            .filter(|r| filter.status.is_none_or(|s| s == r.status))
            // A run under a current lease is being stepped: never deleted under its owner.
            .filter(|r| r.status != StoredStatus::Running)
            .map(|r| (r.id, r.owner.clone().filter(|o| owner_gone(o))))
            .collect();
        let count = u64::try_from(doomed.len()).unwrap_or(u64::MAX);
        if filter.dry_run || doomed.is_empty() {
            return Ok(count);
        }
        let db = StoreError::db("prune", None);
        let mut c = self.db.write().await?;
        let mut tx = c.begin(Begin::Write).await.map_err(&db)?;
        // Fenced again in the statement: a run claimed since it was listed is kept.
        let delete = format!(
            "DELETE FROM runs WHERE id = $1 AND (owner IS NULL OR lease_expires_ms IS NULL \
             OR lease_expires_ms <= {} OR owner = $3)",
            self.now_sql(2)
        );
        let mut deleted = 0u64;
        for (id, gone) in &doomed {
            // Its step rows, snapshots and event chunks go with the run: on SQLite by
            // `ON DELETE CASCADE`, on PostgreSQL by the trigger `runs_deleted` (format 10,
            // ADR 0057: one mechanism for all three, none of which has a foreign key).
            deleted += sql(&delete)
                .bind(id.to_string())
                .bind(self.bound_now())
                .bind(gone.as_deref())
                .execute(&mut tx)
                .await
                .map_err(StoreError::db("prune", Some(*id)))?;
        }
        // PostgreSQL: creates hold this lock shared until they commit, so every run whose
        // document is kept is seen by the delete below (the prune/create race).
        if let Some(lock) = self.dialect.documents_lock {
            sql(lock).execute(&mut tx).await.map_err(&db)?;
        }
        sql("DELETE FROM documents WHERE digest NOT IN (SELECT digest FROM runs)")
            .execute(&mut tx)
            .await
            .map_err(&db)?;
        tx.commit().await.map_err(&db)?;
        Ok(deleted)
    }
}

/// Writes the run's snapshot at `seq` and drops the older ones (a run keeps one) and the
/// step rows up to it (the snapshot covers them), in the caller's transaction.
async fn snapshot_at(
    tx: &mut impl Exec,
    key: &str,
    seq: u64,
    state: &str,
) -> Result<(), sqlx::Error> {
    sql("INSERT INTO snapshots (run_id, seq, run_state) VALUES ($1, $2, $3)")
        .bind(key)
        .bind(to_i64(seq))
        .bind(state)
        .execute(tx)
        .await?;
    sql("DELETE FROM snapshots WHERE run_id = $1 AND seq < $2")
        .bind(key)
        .bind(to_i64(seq))
        .execute(tx)
        .await?;
    sql("DELETE FROM steps WHERE run_id = $1 AND seq <= $2")
        .bind(key)
        .bind(to_i64(seq))
        .execute(tx)
        .await?;
    Ok(())
}
