//! Creating a run: its document (once per digest), its row, its first snapshot and its
//! dependencies, in one write transaction; the row as inserted comes back with the insert.

use super::Store;
use crate::runtime::TerminationReason;
use crate::store::db::{Backend, Begin, Conn, Tx, sql};
use crate::store::rows::{Cols, info_from_row, is_unique_violation, to_i64};
use crate::store::{CreateOptions, PreparedCreate, RunInfo, RunStore, StoreError, duration_ms};

impl<B: Backend> Store<B> {
    /// Stores the run `prepared` was made of as a new run (see [`RunStore::create`]).
    pub(super) async fn create_run(
        &self,
        prepared: PreparedCreate,
        options: &CreateOptions,
    ) -> Result<RunInfo, StoreError> {
        // Weighed as a load of it would weigh it (the snapshot just written, nothing to
        // replay); a create that fails forgets it.
        let id = prepared.id;
        if prepared.row.running {
            self.weights.loaded(id, prepared.run_state.len(), 0);
        }
        let created = self.create_inner(prepared, options).await;
        if created.is_err() {
            self.weights.forget(id);
        }
        created
    }

    /// [`Store::create_run`] but the run's weights.
    async fn create_inner(
        &self,
        prepared: PreparedCreate,
        options: &CreateOptions,
    ) -> Result<RunInfo, StoreError> {
        let PreparedCreate {
            id,
            document,
            run_state,
            row: values,
        } = prepared;
        let now = self.now();
        let db = StoreError::db("create", Some(id));
        let key = id.to_string();
        let mut c = self.db.write().await?;
        // PostgreSQL: the documents lock (shared) comes with the `BEGIN` and is held until
        // the commit, so that a prune cannot delete the document between its insert (a
        // no-op when it is stored) and the run's (see prune).
        let mut tx = c.begin(Begin::Create).await.map_err(&db)?;
        // One statement for the document, the row and the snapshot where the dialect has
        // it (PostgreSQL), else the document first.
        let create_run = self.dialect.create_run.as_deref();
        if create_run.is_none() {
            sql("INSERT INTO documents (digest, document) VALUES ($1, $2) \
                 ON CONFLICT (digest) DO NOTHING")
            .bind(&values.digest)
            .bind(&document)
            .execute(&mut tx)
            .await
            .map_err(&db)?;
        }
        if let Some(name) = &options.name {
            // Two creates of the same name at once: the second waits for the first's
            // transaction, then sees its run (SQLite: one writer; PostgreSQL: a lock on
            // the name).
            if let Some(lock) = self.dialect.name_lock {
                sql(lock).bind(name).execute(&mut tx).await.map_err(&db)?;
            }
            let holder = sql("SELECT id FROM runs WHERE name = $1 \
                 AND (expires_ms IS NULL OR expires_ms > $2) LIMIT 1")
            .bind(name)
            .bind(to_i64(now))
            .fetch_optional(&mut tx)
            .await
            .map_err(&db)?;
            if let Some(row) = holder {
                let text = row.text("id").map_err(&db)?;
                if let Ok(holder) = text.parse() {
                    return Err(StoreError::NameTaken {
                        name: name.clone(),
                        holder,
                    });
                }
            }
        }
        let claimed = options.claimed_by.as_ref();
        let status = values.status(claimed.is_some());
        let mut insert = sql(create_run.unwrap_or(&self.dialect.insert_run))
            .bind(&key)
            .bind(&options.name)
            .bind(&values.workflow)
            .bind(&values.digest)
            .bind(i64::from(values.format))
            .bind(&values.workflow_file)
            .bind(&values.base_dir)
            .bind(status.as_str())
            .bind(values.termination_reason.map(TerminationReason::as_str))
            .bind(i64::from(values.steps))
            .bind(to_i64(values.seq))
            .bind(to_i64(id.created_ms()))
            .bind(to_i64(now))
            .bind(options.expires_ms.map(to_i64))
            .bind(&values.attempt_key)
            .bind(claimed.map(|(owner, _)| owner.as_str()))
            .bind(claimed.map(|(_, lease)| to_i64(duration_ms(*lease))))
            .bind(self.bound_now());
        // The state (the run's whole input) is moved into the statement that writes it,
        // not copied (ADR 0070).
        let (run_state, snapshot_state) = if create_run.is_some() {
            (Some(run_state), None)
        } else {
            (None, Some(run_state))
        };
        if let Some(run_state) = run_state {
            insert = insert.bind(&document).bind(run_state);
        }
        let row = match insert.fetch_one(&mut tx).await {
            Err(e) if is_unique_violation(&e) => return Err(StoreError::Exists { run_id: id }),
            other => other.map_err(&db)?,
        };
        if let Some(run_state) = snapshot_state {
            // Delivered to listening workers when the run is committed, told by the
            // snapshot's insert (one round trip for both, `Dialect::notifying`).
            let snapshot = self
                .dialect
                .notifying("INSERT INTO snapshots (run_id, seq, run_state) VALUES ($1, $2, $3)");
            sql(&snapshot)
                .bind(&key)
                .bind(to_i64(values.seq))
                .bind(run_state)
                .execute(&mut tx)
                .await
                .map_err(&db)?;
        }
        if let Some(deps) = &options.dependencies {
            self.insert_dependencies(&mut tx, id, deps).await?;
        }
        tx.commit().await.map_err(&db)?;
        // The connection goes back before the next statement takes one.
        drop(c);
        let info = match options.dependencies {
            // Its dependencies changed the row the insert returned (`waiting`).
            Some(_) => self.info(id).await,
            None => info_from_row(&row, now),
        }?;
        Ok(info)
    }
}
