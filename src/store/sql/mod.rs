//! The run store, written once for both databases: [`Store`] over a [`Backend`]
//! (SQLite's or PostgreSQL's connections, or either chosen by URL). Every statement is
//! written once with `$N` placeholders; where the dialects differ, the store's
//! [`Dialect`](super::db::Dialect) (`store/dialects.rs`) says how: the checkpoint
//! statement, the claim's lock, a named create's lock, the transactions' `BEGIN`,
//! `MAX`/`GREATEST`.
//!
//! `RunStore` for it is in `run_store.rs`; its longer operations in `create.rs`,
//! `load.rs`, `cancel.rs`, `list.rs` and `deps.rs`.

use std::sync::Arc;

mod cancel;
mod create;
mod deps;
mod events;
mod list;
mod load;
mod run_store;

use super::clock::Clock;
use super::db::{Backend, Dialect, sql};
use super::delta::StepDelta;
use super::rows::{Cols, delta_from_row, to_u64};
use super::weights::Weights;
use super::{RunStore, StoreError};
use crate::runtime::{RunId, RunState};

/// A run store on backend `B`: [`SqliteStore`](super::SqliteStore),
/// [`PgStore`](super::PgStore), or [`AnyStore`](super::AnyStore) (either, chosen by URL).
#[derive(Debug, Clone)]
pub struct Store<B> {
    db: B,
    /// The statements in which the backend's database differs.
    dialect: &'static Dialect,
    snapshot_every: Option<u64>,
    weights: Arc<Weights>,
    clock: Clock,
}

/// What a run takes in the store: its step rows and snapshots, in bytes of JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RunStorage {
    /// Step rows.
    pub steps: u64,
    /// Bytes of their deltas.
    pub step_bytes: u64,
    /// Snapshots kept.
    pub snapshots: u64,
    /// Bytes of their run states.
    pub snapshot_bytes: u64,
    /// The checkpoint the kept snapshot is: the step rows are the checkpoints after it.
    pub snapshot_seq: u64,
}

impl<B: Backend> Store<B> {
    /// The store on `db` (whose database speaks `dialect`), a snapshot at least every
    /// `snapshot_every` checkpoints when set, reading the time from `clock`.
    pub(crate) fn on(
        db: B,
        dialect: &'static Dialect,
        snapshot_every: Option<u64>,
        clock: Clock,
    ) -> Self {
        Self {
            db,
            dialect,
            snapshot_every: snapshot_every.map(|n| n.max(1)),
            weights: Arc::default(),
            clock,
        }
    }

    /// The same store on another backend type (`B` wrapped, say, in `AnyDb`).
    pub(crate) fn map<C>(self, f: impl FnOnce(B) -> C) -> Store<C> {
        Store {
            db: f(self.db),
            dialect: self.dialect,
            snapshot_every: self.snapshot_every,
            weights: self.weights,
            clock: self.clock,
        }
    }

    /// Its backend.
    pub(crate) fn db(&self) -> &B {
        &self.db
    }

    /// Closes its connections (waiting for their holders).
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// What run `id` takes: step rows and snapshots, in bytes of JSON.
    pub async fn storage(&self, id: RunId) -> Result<RunStorage, StoreError> {
        let db = StoreError::db("measuring storage", Some(id));
        let key = id.to_string();
        let row = sql("SELECT \
               (SELECT COUNT(*) FROM steps WHERE run_id = $1) AS steps, \
               (SELECT CAST(COALESCE(SUM(LENGTH(delta)), 0) AS BIGINT) FROM steps \
                 WHERE run_id = $1) AS step_bytes, \
               (SELECT COUNT(*) FROM snapshots WHERE run_id = $1) AS snapshots, \
               (SELECT CAST(COALESCE(SUM(LENGTH(run_state)), 0) AS BIGINT) FROM snapshots \
                 WHERE run_id = $1) AS snapshot_bytes, \
               (SELECT COALESCE(MAX(seq), 0) FROM snapshots WHERE run_id = $1) AS snapshot_seq")
        .bind(&key)
        .fetch_one(&mut self.db.read().await?)
        .await
        .map_err(&db)?;
        let get = |col: &str| row.int(col).map(to_u64).map_err(&db);
        Ok(RunStorage {
            steps: get("steps")?,
            step_bytes: get("step_bytes")?,
            snapshots: get("snapshots")?,
            snapshot_bytes: get("snapshot_bytes")?,
            snapshot_seq: get("snapshot_seq")?,
        })
    }

    /// Run `id`'s step rows in sequence order: each checkpoint's number and delta. The
    /// rows kept are those from the run's snapshot on (a snapshot replaces the rows it
    /// covers).
    pub async fn deltas(&self, id: RunId) -> Result<Vec<(u64, StepDelta)>, StoreError> {
        let rows = sql("SELECT seq, delta FROM steps WHERE run_id = $1 ORDER BY seq")
            .bind(id.to_string())
            .fetch_all(&mut self.db.read().await?)
            .await
            .map_err(StoreError::db("reading steps", Some(id)))?;
        rows.iter()
            .map(|r| delta_from_row(id, r).map(|(seq, delta, _)| (seq, delta)))
            .collect()
    }

    /// The time now on this store's clock (milliseconds since the Unix epoch).
    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Whether checkpoint `seq` of run `id`, leaving `run` and a delta of `delta_bytes`,
    /// carries a snapshot.
    fn wants_snapshot(&self, id: RunId, seq: u64, run: &RunState, delta_bytes: usize) -> bool {
        self.weights
            .wants_snapshot(self.snapshot_every, id, seq, run, delta_bytes)
    }

    /// The error of a lease-fenced update that touched no row: `LeaseLost`, naming the
    /// holder if its lease is current at `now` (or the error reading the run).
    async fn lease_lost(&self, id: RunId, owner: &str, now: u64) -> StoreError {
        match self.info(id).await {
            Ok(info) => {
                let current = info.lease_expires_ms.is_some_and(|l| l > now);
                StoreError::LeaseLost {
                    run_id: id,
                    owner: owner.to_string(),
                    holder: info.owner.filter(|_| current),
                }
            }
            Err(e) => e,
        }
    }

    /// Gives `owner`'s lease on run `id` up with `statement` (an update of the run row
    /// bound to `$1` id and `$2` owner): `LeaseLost` if `owner` does not hold it.
    async fn let_go(
        &self,
        id: RunId,
        owner: &str,
        operation: &'static str,
        statement: &'static str,
    ) -> Result<(), StoreError> {
        let updated = sql(statement)
            .bind(id.to_string())
            .bind(owner)
            .execute(&mut self.db.write().await?)
            .await
            .map_err(StoreError::db(operation, Some(id)))?;
        if updated == 0 {
            return Err(self.lease_lost(id, owner, self.now()).await);
        }
        Ok(())
    }

    /// Why a fenced checkpoint was refused: no such run, a lease not held, or a sequence
    /// number that is not the next.
    async fn refusal(&self, id: RunId, owner: &str, seq: u64, now: u64) -> StoreError {
        let info = match self.info(id).await {
            Ok(info) => info,
            Err(e) => return e,
        };
        let current = info.lease_expires_ms.is_some_and(|l| l > now);
        if info.owner.as_deref() != Some(owner) || !current {
            return StoreError::LeaseLost {
                run_id: id,
                owner: owner.to_string(),
                holder: info.owner.filter(|_| current),
            };
        }
        StoreError::SeqMismatch {
            run_id: id,
            expected: info.seq + 1,
            given: seq,
        }
    }
}
