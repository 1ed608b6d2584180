//! `RunStore` for `PgStore`: every method one transaction or one statement, as on SQLite.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::Row;

use super::deps::insert_dependencies;
use super::*;
use crate::runtime::{RunRecord, TerminationReason, digest_of};
use crate::store::rows::{INFO, cancel_run, info_from_row, is_unique_violation, stored_status};
use crate::store::{
    Checkpoint, CreateOptions, DependencySpec, Lease, PruneFilter, RunFilter, RunInfo, RunStore,
    StoredRun, StoredStatus, attempt_key, duration_ms, owner_gone,
};

/// The checkpoint statement: a call of `pactgraph_checkpoint` (migration 0004), which
/// returns the run row as it leaves it.
fn checkpoint_sql() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {INFO} FROM pactgraph_checkpoint($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
             $11, $12, $13, $14)"
        )
    });
    &SQL
}

/// The store's operations as written; `RunStore` wraps each (see `PgStore::watch`).
impl PgStore {
    async fn create_inner(
        &self,
        record: &RunRecord,
        options: &CreateOptions,
    ) -> Result<RunInfo, StoreError> {
        let id = record.run_id;
        let computed = digest_of(&record.document);
        if computed != record.digest {
            return Err(StoreError::Corrupt {
                run_id: id,
                what: "document".into(),
                reason: format!(
                    "its digest is {computed}, the record says {}",
                    record.digest
                ),
            });
        }
        let document = serde_json::to_string(&record.document).expect("a document is plain data");
        let run_state = serde_json::to_string(&record.run).expect("a run state is plain data");
        let now = now_ms();
        let db = StoreError::db("create", Some(id));
        let mut c = self.conns.get().await?;
        let mut tx = sqlx::Connection::begin(&mut *c).await.map_err(&db)?;
        sqlx::query(
            "INSERT INTO documents (digest, document) VALUES ($1, $2) \
             ON CONFLICT (digest) DO NOTHING",
        )
        .bind(&record.digest)
        .bind(&document)
        .execute(&mut *tx)
        .await
        .map_err(&db)?;
        if let Some(name) = &options.name {
            // Two workers creating runs of the same name at once: the second waits for
            // the first's transaction, then sees its run (SQLite has one writer anyway).
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
                .bind(name)
                .execute(&mut *tx)
                .await
                .map_err(&db)?;
            let holder = sqlx::query(
                "SELECT id FROM runs WHERE name = $1 \
                 AND (expires_ms IS NULL OR expires_ms > $2) LIMIT 1",
            )
            .bind(name)
            .bind(to_i64(now))
            .fetch_optional(&mut *tx)
            .await
            .map_err(&db)?;
            if let Some(row) = holder {
                let text: String = row.try_get("id").map_err(&db)?;
                if let Ok(holder) = text.parse() {
                    return Err(StoreError::NameTaken {
                        name: name.clone(),
                        holder,
                    });
                }
            }
        }
        let status = stored_status(&record.run, record.seq);
        let inserted = sqlx::query(
            "INSERT INTO runs (id, name, workflow, digest, format, workflow_file, base_dir, \
             status, termination_reason, steps, seq, snapshot_seq, created_ms, updated_ms, \
             expires_ms, owner, lease_expires_ms, attempt_key, attempt) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, $14, NULL, NULL, \
             $15, 1)",
        )
        .bind(id.to_string())
        .bind(&options.name)
        .bind(&record.run.workflow)
        .bind(&record.digest)
        .bind(i64::from(record.format))
        .bind(&record.workflow_file)
        .bind(&record.base_dir)
        .bind(status.as_str())
        .bind(
            record
                .run
                .termination_reason()
                .map(TerminationReason::as_str),
        )
        .bind(i64::from(record.run.steps))
        .bind(to_i64(record.seq))
        .bind(to_i64(id.created_ms()))
        .bind(to_i64(now))
        .bind(options.expires_ms.map(to_i64))
        .bind(attempt_key(&record.run))
        .execute(&mut *tx)
        .await;
        match inserted {
            Err(e) if is_unique_violation(&e) => return Err(StoreError::Exists { run_id: id }),
            other => other.map_err(&db)?,
        };
        sqlx::query("INSERT INTO snapshots (run_id, seq, run_state) VALUES ($1, $2, $3)")
            .bind(id.to_string())
            .bind(to_i64(record.seq))
            .bind(&run_state)
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        if let Some(deps) = &options.dependencies {
            insert_dependencies(&mut tx, id, deps).await?;
        }
        tx.commit().await.map_err(&db)?;
        // The connection goes back before the next statement takes one.
        drop(c);
        self.info(id).await
    }

    async fn checkpoint_inner(
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
        } = checkpoint;
        let now = now_ms();
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
        // One statement (`pactgraph_checkpoint`, migration 0004): fenced, atomic, one
        // round trip; the run row as it is after it comes back.
        let row = sqlx::query(checkpoint_sql())
            .bind(id.to_string())
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
            .bind(snapshot.as_deref())
            .fetch_one(&mut *self.conns.get().await?)
            .await;
        let row = match row {
            Ok(row) => row,
            Err(e) if is_refusal(&e) => return Err(self.refusal(id, owner, seq, now).await),
            Err(e) => return Err(StoreError::db("checkpoint", Some(id))(e)),
        };
        self.weights
            .weigh(id, running, delta.len(), snapshot.as_ref().map(String::len));
        info_from_row(&row, now)
    }

    async fn load_inner(&self, id: RunId) -> Result<StoredRun, StoreError> {
        self.load_upto(id, None).await
    }

    async fn load_at_inner(&self, id: RunId, seq: u64) -> Result<StoredRun, StoreError> {
        self.load_upto(id, Some(seq)).await
    }

    async fn info_inner(&self, id: RunId) -> Result<RunInfo, StoreError> {
        let row = sqlx::query(&format!("SELECT {INFO} FROM runs WHERE id = $1"))
            .bind(id.to_string())
            .fetch_optional(&mut *self.conns.get().await?)
            .await
            .map_err(StoreError::db("info", Some(id)))?
            .ok_or_else(|| StoreError::NotFound {
                key: id.to_string(),
            })?;
        info_from_row(&row, now_ms())
    }
    async fn list_inner(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        let now = now_ms();
        // The stored status narrows the rows in SQL; `running`, `interrupted` and `queued`
        // are derived from the lease when read, so they select both live statuses.
        let (exact, live) = match filter.status {
            None => (None, false),
            Some(StoredStatus::Running | StoredStatus::Interrupted | StoredStatus::Queued) => {
                (None, true)
            }
            Some(s) => (Some(s.as_str()), false),
        };
        // Pages, newest first, until `limit` rows match (the derived status is checked
        // in Rust, so a page may match fewer than it holds).
        let page = filter.limit.map(|l| to_i64(l.max(128) as u64 * 2));
        let mut out = Vec::new();
        let mut before: Option<String> = None;
        loop {
            let rows = sqlx::query(&format!(
                "SELECT {INFO} FROM runs WHERE ($1 IS NULL OR workflow = $1) \
                 AND ($2 OR expires_ms IS NULL OR expires_ms > $3) \
                 AND ($4 IS NULL OR id < $4) AND ($5 IS NULL OR status = $5) \
                 AND (NOT $6 OR status IN ('running', 'queued')) \
                 ORDER BY id DESC LIMIT $7"
            ))
            .bind(&filter.workflow)
            .bind(filter.include_expired)
            .bind(to_i64(now))
            .bind(&before)
            .bind(exact)
            .bind(live)
            .bind(page)
            .fetch_all(&mut *self.conns.get().await?)
            .await
            .map_err(StoreError::db("list", None))?;
            for row in &rows {
                let info = info_from_row(row, now)?;
                if filter.status.is_none_or(|s| s == info.status) {
                    out.push(info);
                    if filter.limit.is_some_and(|l| out.len() >= l) {
                        return Ok(out);
                    }
                }
            }
            match rows.last() {
                Some(last) if page.is_some_and(|p| rows.len() as i64 == p) => {
                    before = Some(last.try_get("id").map_err(StoreError::db("list", None))?);
                }
                _ => return Ok(out),
            }
        }
    }

    async fn claim_inner(
        &self,
        id: RunId,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, StoreError> {
        let now = now_ms();
        let expires_ms = now.saturating_add(duration_ms(lease));
        // A holder that is a gone process of this host is taken over like a lapsed lease.
        let before = self.info(id).await?;
        let gone = before.owner.clone().filter(|o| owner_gone(o));
        // Taking a run from another owner that did not let it go (it died, or its lease
        // lapsed) means its step in flight may have started: that step's next attempt is
        // one more. A queued run claimed is running.
        let updated = sqlx::query(
            "UPDATE runs SET \
               attempt = CASE WHEN owner IS NOT NULL AND owner <> $1 AND status IN \
                 ('running', 'queued') THEN attempt + 1 ELSE attempt END, \
               status = CASE WHEN status = 'queued' THEN 'running' ELSE status END, \
               owner = $1, lease_expires_ms = $2 \
             WHERE id = (SELECT id FROM runs WHERE id = $3 \
               AND (owner IS NULL OR owner = $1 OR lease_expires_ms IS NULL \
                    OR lease_expires_ms <= $4 OR owner = $5) \
               FOR UPDATE SKIP LOCKED)",
        )
        .bind(owner)
        .bind(to_i64(expires_ms))
        .bind(id.to_string())
        .bind(to_i64(now))
        .bind(gone)
        .execute(&mut *self.conns.get().await?)
        .await
        .map_err(StoreError::db("claim", Some(id)))?
        .rows_affected();
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

    async fn note_attempt_inner(
        &self,
        id: RunId,
        owner: &str,
        attempt: u32,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let updated = sqlx::query(
            "UPDATE runs SET attempt = GREATEST(attempt, $1) WHERE id = $2 AND owner = $3 \
             AND lease_expires_ms > $4",
        )
        .bind(i64::from(attempt))
        .bind(id.to_string())
        .bind(owner)
        .bind(to_i64(now))
        .execute(&mut *self.conns.get().await?)
        .await
        .map_err(StoreError::db("note_attempt", Some(id)))?
        .rows_affected();
        if updated == 0 {
            return Err(self.lease_lost(id, owner, now).await);
        }
        Ok(())
    }

    async fn renew_inner(
        &self,
        id: RunId,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, StoreError> {
        let now = now_ms();
        let expires_ms = now.saturating_add(duration_ms(lease));
        let updated = sqlx::query(
            "UPDATE runs SET lease_expires_ms = $1 WHERE id = $2 AND owner = $3 \
             AND lease_expires_ms > $4",
        )
        .bind(to_i64(expires_ms))
        .bind(id.to_string())
        .bind(owner)
        .bind(to_i64(now))
        .execute(&mut *self.conns.get().await?)
        .await
        .map_err(StoreError::db("renew", Some(id)))?
        .rows_affected();
        if updated == 0 {
            return Err(self.lease_lost(id, owner, now).await);
        }
        Ok(Lease {
            run_id: id,
            owner: owner.to_string(),
            expires_ms,
        })
    }

    async fn release_inner(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        self.weights.forget(id);
        self.let_go(
            id,
            owner,
            "release",
            "UPDATE runs SET owner = NULL, lease_expires_ms = NULL WHERE id = $1 AND owner = $2",
        )
        .await
    }

    async fn interrupt_inner(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
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

    async fn cancel_inner(&self, id: RunId) -> Result<RunInfo, StoreError> {
        let stored = self.load(id).await?;
        let status = stored.info.status;
        if status == StoredStatus::Running {
            // Its driver stops it at its next step (it reads the flag with every
            // checkpoint and while an effect runs).
            sqlx::query("UPDATE runs SET cancel_requested = 1 WHERE id = $1")
                .bind(id.to_string())
                .execute(&mut *self.conns.get().await?)
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
        let now = now_ms();
        let mut run = stored.record.run;
        cancel_run(&mut run, now).map_err(|reason| StoreError::Corrupt {
            run_id: id,
            what: "run state".into(),
            reason,
        })?;
        let state = serde_json::to_string(&run).expect("a run state is plain data");
        let seq = stored.info.seq + 1;
        let key = id.to_string();
        let db = StoreError::db("cancel", Some(id));
        let mut c = self.conns.get().await?;
        let mut tx = sqlx::Connection::begin(&mut *c).await.map_err(&db)?;
        // Fenced: the run has not moved since it was loaded and nobody holds a lease.
        let updated = sqlx::query(
            "UPDATE runs SET seq = $1, steps = $2, status = 'stopped', \
             termination_reason = 'cancelled', updated_ms = $3, snapshot_seq = $1, \
             owner = NULL, lease_expires_ms = NULL \
             WHERE id = $4 AND seq = $1 - 1 \
             AND (owner IS NULL OR lease_expires_ms IS NULL OR lease_expires_ms <= $3 \
                  OR owner = $5)",
        )
        .bind(to_i64(seq))
        .bind(i64::from(run.steps))
        .bind(to_i64(now))
        .bind(&key)
        .bind(stored.info.owner.clone().filter(|o| owner_gone(o)))
        .execute(&mut *tx)
        .await
        .map_err(&db)?
        .rows_affected();
        if updated == 0 {
            tx.rollback().await.map_err(&db)?;
            drop(c);
            let info = self.info(id).await?;
            return Err(wrong(info.status));
        }
        // The snapshot is the checkpoint (it replaces the step rows before it).
        sqlx::query("INSERT INTO snapshots (run_id, seq, run_state) VALUES ($1, $2, $3)")
            .bind(&key)
            .bind(to_i64(seq))
            .bind(&state)
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        sqlx::query("DELETE FROM snapshots WHERE run_id = $1 AND seq < $2")
            .bind(&key)
            .bind(to_i64(seq))
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        sqlx::query("DELETE FROM steps WHERE run_id = $1 AND seq <= $2")
            .bind(&key)
            .bind(to_i64(seq))
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        tx.commit().await.map_err(&db)?;
        drop(c);
        self.info(id).await
    }

    async fn prune_inner(&self, filter: &PruneFilter) -> Result<u64, StoreError> {
        if !filter.expired && filter.older_than.is_none() && filter.status.is_none() {
            return Err(StoreError::NoPruneFilter);
        }
        let now = now_ms();
        let all = self.list(&RunFilter::default().include_expired()).await?;
        let cutoff = filter
            .older_than
            .map(|age| now.saturating_sub(duration_ms(age)));
        let doomed: Vec<RunId> = all
            .iter()
            .filter(|r| !filter.expired || r.is_expired(now))
            .filter(|r| cutoff.is_none_or(|c| r.updated_ms < c))
            .filter(|r| filter.status.is_none_or(|s| s == r.status))
            // A run under a current lease is being stepped: never deleted under its owner.
            .filter(|r| r.status != StoredStatus::Running)
            .map(|r| r.id)
            .collect();
        let count = u64::try_from(doomed.len()).unwrap_or(u64::MAX);
        if filter.dry_run || doomed.is_empty() {
            return Ok(count);
        }
        let db = StoreError::db("prune", None);
        let mut c = self.conns.get().await?;
        let mut tx = sqlx::Connection::begin(&mut *c).await.map_err(&db)?;
        for id in &doomed {
            // Steps and snapshots go with the run (ON DELETE CASCADE).
            sqlx::query("DELETE FROM runs WHERE id = $1")
                .bind(id.to_string())
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("prune", Some(*id)))?;
        }
        sqlx::query("DELETE FROM documents WHERE digest NOT IN (SELECT digest FROM runs)")
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        tx.commit().await.map_err(&db)?;
        Ok(count)
    }

    async fn dependency_spec_inner(&self, id: RunId) -> Result<Option<DependencySpec>, StoreError> {
        self.read_dependency_spec(id).await
    }

    async fn dependents_inner(&self, id: RunId) -> Result<Vec<RunInfo>, StoreError> {
        self.read_dependents(id).await
    }

    async fn runnable_inner(&self, limit: usize) -> Result<Vec<RunInfo>, StoreError> {
        self.read_runnable(limit).await
    }

    async fn find_inner(&self, key: &str) -> Result<RunId, StoreError> {
        let db = StoreError::db("find", None);
        if let Ok(id) = key.parse::<RunId>() {
            return self.info(id).await.map(|i| i.id);
        }
        if key.len() >= 6 && key.chars().all(|c| c.is_ascii_alphanumeric()) {
            let rows =
                sqlx::query("SELECT id FROM runs WHERE id LIKE $1 ORDER BY id DESC LIMIT 20")
                    .bind(format!("{}%", key.to_ascii_uppercase()))
                    .fetch_all(&mut *self.conns.get().await?)
                    .await
                    .map_err(&db)?;
            let mut ids = Vec::with_capacity(rows.len());
            for row in &rows {
                let text: String = row.try_get("id").map_err(&db)?;
                if let Ok(id) = text.parse::<RunId>() {
                    ids.push(id);
                }
            }
            match ids.len() {
                0 => {}
                1 => return Ok(ids[0]),
                _ => {
                    return Err(StoreError::Ambiguous {
                        prefix: key.to_string(),
                        candidates: ids,
                    });
                }
            }
        }
        let row = sqlx::query(
            "SELECT id FROM runs WHERE name = $1 AND (expires_ms IS NULL OR expires_ms > $2) \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(key)
        .bind(to_i64(now_ms()))
        .fetch_optional(&mut *self.conns.get().await?)
        .await
        .map_err(&db)?;
        match row {
            Some(row) => {
                let text: String = row.try_get("id").map_err(&db)?;
                text.parse().map_err(|_| StoreError::NotFound {
                    key: key.to_string(),
                })
            }
            None => Err(StoreError::NotFound {
                key: key.to_string(),
            }),
        }
    }
}

impl RunStore for PgStore {
    async fn create(
        &self,
        record: &RunRecord,
        options: &CreateOptions,
    ) -> Result<RunInfo, StoreError> {
        self.watch(self.create_inner(record, options).await)
    }

    async fn checkpoint(
        &self,
        id: RunId,
        owner: &str,
        checkpoint: Checkpoint<'_>,
    ) -> Result<RunInfo, StoreError> {
        self.watch(self.checkpoint_inner(id, owner, checkpoint).await)
    }

    async fn load(&self, id: RunId) -> Result<StoredRun, StoreError> {
        self.watch(self.load_inner(id).await)
    }

    async fn load_at(&self, id: RunId, seq: u64) -> Result<StoredRun, StoreError> {
        self.watch(self.load_at_inner(id, seq).await)
    }

    async fn info(&self, id: RunId) -> Result<RunInfo, StoreError> {
        self.watch(self.info_inner(id).await)
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        self.watch(self.list_inner(filter).await)
    }

    async fn claim(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        self.watch(self.claim_inner(id, owner, lease).await)
    }

    async fn note_attempt(&self, id: RunId, owner: &str, attempt: u32) -> Result<(), StoreError> {
        self.watch(self.note_attempt_inner(id, owner, attempt).await)
    }

    async fn renew(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        self.watch(self.renew_inner(id, owner, lease).await)
    }

    async fn release(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        self.watch(self.release_inner(id, owner).await)
    }

    async fn interrupt(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        self.watch(self.interrupt_inner(id, owner).await)
    }

    async fn cancel(&self, id: RunId) -> Result<RunInfo, StoreError> {
        self.watch(self.cancel_inner(id).await)
    }

    async fn prune(&self, filter: &PruneFilter) -> Result<u64, StoreError> {
        self.watch(self.prune_inner(filter).await)
    }

    async fn dependency_spec(&self, id: RunId) -> Result<Option<DependencySpec>, StoreError> {
        self.watch(self.dependency_spec_inner(id).await)
    }

    async fn dependents(&self, id: RunId) -> Result<Vec<RunInfo>, StoreError> {
        self.watch(self.dependents_inner(id).await)
    }

    async fn runnable(&self, limit: usize) -> Result<Vec<RunInfo>, StoreError> {
        self.watch(self.runnable_inner(limit).await)
    }

    async fn find(&self, key: &str) -> Result<RunId, StoreError> {
        self.watch(self.find_inner(key).await)
    }
}
