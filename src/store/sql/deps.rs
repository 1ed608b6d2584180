//! Dependency records: writing them with a new run, reading a run's dependencies and
//! dependents, every edge, and finding the runs a worker may take.

use super::Store;
use crate::runtime::RunId;
use crate::store::db::{Backend, Exec, sql};
use crate::store::deps::deadline;
use crate::store::rows::{Cols, INFO, info_from_row, to_i64, to_u64};
use crate::store::{
    Dependencies, DependencySpec, OnDepFailure, RunInfo, StoreError, local_owner_pattern,
    owner_gone,
};

impl<B: Backend> Store<B> {
    /// Records `deps` for the new run `id` in the create transaction `tx`: each must exist
    /// ([`StoreError::NotFound`] naming it otherwise); the run becomes `waiting`.
    pub(super) async fn insert_dependencies(
        &self,
        tx: &mut impl Exec,
        id: RunId,
        deps: &Dependencies,
    ) -> Result<(), StoreError> {
        let db = StoreError::db("recording dependencies", Some(id));
        let key = id.to_string();
        for (position, dep) in deps.after.iter().enumerate() {
            let found = sql("SELECT 1 FROM runs WHERE id = $1")
                .bind(dep.to_string())
                .fetch_optional(tx)
                .await
                .map_err(&db)?;
            if found.is_none() {
                return Err(StoreError::NotFound {
                    key: dep.to_string(),
                });
            }
            sql("INSERT INTO dependencies (run_id, position, dep_id) VALUES ($1, $2, $3)")
                .bind(&key)
                .bind(i64::try_from(position).unwrap_or(i64::MAX))
                .bind(dep.to_string())
                .execute(tx)
                .await
                .map_err(&db)?;
        }
        sql(
            "UPDATE runs SET status = 'waiting', dep_deadline_ms = $2, on_dep_failure = $3, \
             dep_result = $4 WHERE id = $1",
        )
        .bind(&key)
        .bind(to_i64(deadline(self.now(), deps.timeout)))
        .bind(deps.on_failure.as_str())
        .bind(&deps.result_slice)
        .execute(tx)
        .await
        .map_err(&db)?;
        Ok(())
    }

    /// How run `id` was created to wait (see `RunStore::dependency_spec`).
    pub(super) async fn read_dependency_spec(
        &self,
        id: RunId,
    ) -> Result<Option<DependencySpec>, StoreError> {
        let db = StoreError::db("reading dependencies", Some(id));
        let key = id.to_string();
        let row = sql("SELECT dep_deadline_ms, on_dep_failure, dep_result FROM runs WHERE id = $1")
            .bind(&key)
            .fetch_optional(&mut self.db.read().await?)
            .await
            .map_err(&db)?
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        let Some(deadline_ms) = row.opt_int("dep_deadline_ms").map_err(&db)? else {
            return Ok(None);
        };
        let policy = row.opt_text("on_dep_failure").map_err(&db)?;
        let on_failure = match policy.as_deref().map(OnDepFailure::parse) {
            Some(Some(p)) => p,
            _ => {
                return Err(StoreError::Corrupt {
                    run_id: id,
                    what: "on_dep_failure".into(),
                    reason: format!("{policy:?} is not `abort` or `continue`"),
                });
            }
        };
        let rows = sql("SELECT dep_id FROM dependencies WHERE run_id = $1 ORDER BY position")
            .bind(&key)
            .fetch_all(&mut self.db.read().await?)
            .await
            .map_err(&db)?;
        let mut after = Vec::with_capacity(rows.len());
        for row in &rows {
            let text = row.text("dep_id").map_err(&db)?;
            after.push(text.parse().map_err(|e: crate::runtime::RunIdError| {
                StoreError::Corrupt {
                    run_id: id,
                    what: "dependencies".into(),
                    reason: e.to_string(),
                }
            })?);
        }
        Ok(Some(DependencySpec {
            after,
            deadline_ms: to_u64(deadline_ms),
            on_failure,
            result_slice: row.opt_text("dep_result").map_err(&db)?,
        }))
    }

    /// The runs created after run `id`, oldest first.
    pub(super) async fn read_dependents(&self, id: RunId) -> Result<Vec<RunInfo>, StoreError> {
        let now = self.now();
        let rows = sql(&format!(
            "SELECT {INFO} FROM runs WHERE id IN \
             (SELECT run_id FROM dependencies WHERE dep_id = $1) ORDER BY id"
        ))
        .bind(id.to_string())
        .fetch_all(&mut self.db.read().await?)
        .await
        .map_err(StoreError::db("reading dependents", Some(id)))?;
        rows.iter().map(|r| info_from_row(r, now)).collect()
    }

    /// Up to `limit` runs a worker may take now (see `RunStore::runnable`), in one
    /// statement (what a worker asks on every poll, and first after a wakeup).
    pub(super) async fn read_runnable(&self, limit: usize) -> Result<Vec<RunInfo>, StoreError> {
        let now = self.now();
        let most = i64::try_from(limit).unwrap_or(i64::MAX);
        let db = StoreError::db("finding runnable runs", None);
        // Leases on the database's clock; expiry and deadlines too (one instant).
        let db_now = self.now_sql(1);
        // The runs nobody holds (oldest first, at most `limit`), then (`held` = 1) those
        // held under a current lease by an owner of this host's form: a run whose owner is
        // a process of this host that is gone (killed, say) is runnable too, as `claim`
        // takes it over at once (`owner_gone`, checked here, not by the database). A
        // worker's own runs are among the second, so they are a few.
        let free = runnable_sql(
            &db_now,
            &format!("(owner IS NULL OR lease_expires_ms IS NULL OR lease_expires_ms <= {db_now})"),
            "LIMIT $2",
        );
        let local = runnable_sql(
            &db_now,
            &format!("owner LIKE $3 AND lease_expires_ms > {db_now}"),
            "",
        );
        let rows = sql(&format!(
            "SELECT f.*, CAST(0 AS BIGINT) AS held FROM ({free}) f \
             UNION ALL SELECT l.*, CAST(1 AS BIGINT) AS held FROM ({local}) l"
        ))
        .bind(self.bound_now())
        .bind(most)
        .bind(local_owner_pattern())
        .fetch_all(&mut self.db.read().await?)
        .await
        .map_err(&db)?;
        let mut runs = Vec::with_capacity(rows.len());
        let mut took_over = false;
        for row in &rows {
            let held = row.int("held").map_err(&db)? != 0;
            let info = info_from_row(row, now)?;
            if held {
                if !info.owner.as_deref().is_some_and(owner_gone) {
                    continue;
                }
                took_over = true;
            }
            runs.push(info);
        }
        if took_over {
            runs.sort_by_key(|i| i.id);
            runs.dedup_by_key(|i| i.id);
            runs.truncate(limit);
        }
        Ok(runs)
    }

    /// Every dependency edge in the store, `(dependency, dependent)`, ordered by the
    /// dependent's id then position (for `runs graph`).
    pub async fn dependency_edges(&self) -> Result<Vec<(RunId, RunId)>, StoreError> {
        let db = StoreError::db("reading dependencies", None);
        let rows = sql("SELECT dep_id, run_id FROM dependencies ORDER BY run_id, position")
            .fetch_all(&mut self.db.read().await?)
            .await
            .map_err(&db)?;
        let parse = |text: String| {
            text.parse::<RunId>().map_err(|e| StoreError::Database {
                operation: "reading dependencies",
                run_id: None,
                source: sqlx::Error::Decode(Box::new(e)),
            })
        };
        let mut edges = Vec::with_capacity(rows.len());
        for row in &rows {
            let dep = row.text("dep_id").map_err(&db)?;
            let run = row.text("run_id").map_err(&db)?;
            edges.push((parse(dep)?, parse(run)?));
        }
        Ok(edges)
    }
}

/// The runnable runs query (`now` the time) whose lease condition is `held`, ending with
/// `limit` (`LIMIT $2`, or nothing): runs not ended, not expired, and waiting ones only
/// once their dependencies are final or their deadline passed; oldest first.
fn runnable_sql(now: &str, held: &str, limit: &str) -> String {
    format!(
        "SELECT {INFO} FROM runs r WHERE status IN ('queued', 'waiting', 'running') \
         AND (expires_ms IS NULL OR expires_ms > {now}) AND {held} \
         AND (status <> 'waiting' OR dep_deadline_ms <= {now} OR NOT EXISTS ( \
              SELECT 1 FROM dependencies d JOIN runs dr ON dr.id = d.dep_id \
              WHERE d.run_id = r.id \
                AND dr.status NOT IN ('completed', 'stopped', 'failed'))) \
         ORDER BY id {limit}"
    )
}
