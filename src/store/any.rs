//! [`AnyStore`]: the run store a URL names, SQLite or PostgreSQL, behind one type, so that
//! the commands and the worker are written once for both.

use std::time::Duration;

use super::{
    Checkpoint, CreateOptions, DependencySpec, Durability, Lease, PgOptions, PgStore, PruneFilter,
    RunFilter, RunInfo, RunStorage, RunStore, SqliteOptions, SqliteStore, StoreError, StoredRun,
};
use crate::runtime::{RunId, RunRecord};

/// A run store opened by URL: `sqlite:PATH` or `postgres://...`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyStore {
    /// A SQLite database file (one machine).
    Sqlite(SqliteStore),
    /// A PostgreSQL database (workers on many machines).
    Postgres(PgStore),
}

/// Calls the same method on whichever store `$store` is.
macro_rules! each {
    ($store:expr, $s:ident => $call:expr) => {
        match $store {
            AnyStore::Sqlite($s) => $call,
            AnyStore::Postgres($s) => $call,
        }
    };
}

impl AnyStore {
    /// Opens the store `url` names with `durability`: `sqlite:PATH` (or
    /// `sqlite::memory:`), or `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (also
    /// `postgresql://`). Any other scheme is [`StoreError::BadUrl`].
    pub async fn open(url: &str, durability: Durability) -> Result<Self, StoreError> {
        Self::open_with(url, durability, PgOptions::default().max_connections).await
    }

    /// As [`AnyStore::open`], keeping `connections` connections to a PostgreSQL server
    /// (a one-shot command needs 2; a worker one per run it drives at once, and one more).
    /// SQLite ignores it (one writer connection, a few readers).
    pub async fn open_with(
        url: &str,
        durability: Durability,
        connections: u32,
    ) -> Result<Self, StoreError> {
        let url = url.trim();
        if url.starts_with("sqlite:") {
            let options = SqliteOptions::default().durability(durability);
            return SqliteStore::open_with(url, options).await.map(Self::Sqlite);
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgOptions::default()
                .durability(durability)
                .max_connections(connections);
            return PgStore::open_with(url, options).await.map(Self::Postgres);
        }
        Err(StoreError::BadUrl {
            url: super::postgres::redact(url),
            reason: "expected `sqlite:PATH` or `postgres://USER:PASSWORD@HOST:PORT/DATABASE`"
                .into(),
        })
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self {
            AnyStore::Sqlite(_) => "sqlite",
            AnyStore::Postgres(_) => "postgres",
        }
    }

    /// Closes its connections.
    pub async fn close(&self) {
        each!(self, s => s.close().await)
    }

    /// What run `id` takes: step rows and snapshots, in bytes of JSON.
    pub async fn storage(&self, id: RunId) -> Result<RunStorage, StoreError> {
        each!(self, s => s.storage(id).await)
    }

    /// Run `id`'s step rows in sequence order: each checkpoint's number and delta (those
    /// after its snapshot).
    pub async fn deltas(&self, id: RunId) -> Result<Vec<(u64, super::StepDelta)>, StoreError> {
        each!(self, s => s.deltas(id).await)
    }

    /// Every dependency edge, `(dependency, dependent)` (for `runs graph`).
    pub async fn dependency_edges(&self) -> Result<Vec<(RunId, RunId)>, StoreError> {
        each!(self, s => s.dependency_edges().await)
    }
}

impl From<SqliteStore> for AnyStore {
    fn from(store: SqliteStore) -> Self {
        AnyStore::Sqlite(store)
    }
}

impl From<PgStore> for AnyStore {
    fn from(store: PgStore) -> Self {
        AnyStore::Postgres(store)
    }
}

impl RunStore for AnyStore {
    async fn create(
        &self,
        record: &RunRecord,
        options: &CreateOptions,
    ) -> Result<RunInfo, StoreError> {
        each!(self, s => s.create(record, options).await)
    }

    async fn checkpoint(
        &self,
        id: RunId,
        owner: &str,
        checkpoint: Checkpoint<'_>,
    ) -> Result<RunInfo, StoreError> {
        each!(self, s => s.checkpoint(id, owner, checkpoint).await)
    }

    async fn load(&self, id: RunId) -> Result<StoredRun, StoreError> {
        each!(self, s => s.load(id).await)
    }

    async fn load_at(&self, id: RunId, seq: u64) -> Result<StoredRun, StoreError> {
        each!(self, s => s.load_at(id, seq).await)
    }

    async fn info(&self, id: RunId) -> Result<RunInfo, StoreError> {
        each!(self, s => s.info(id).await)
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        each!(self, s => s.list(filter).await)
    }

    async fn claim(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        each!(self, s => s.claim(id, owner, lease).await)
    }

    async fn renew(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        each!(self, s => s.renew(id, owner, lease).await)
    }

    async fn note_attempt(&self, id: RunId, owner: &str, attempt: u32) -> Result<(), StoreError> {
        each!(self, s => s.note_attempt(id, owner, attempt).await)
    }

    async fn release(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        each!(self, s => s.release(id, owner).await)
    }

    async fn interrupt(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        each!(self, s => s.interrupt(id, owner).await)
    }

    async fn cancel(&self, id: RunId) -> Result<RunInfo, StoreError> {
        each!(self, s => s.cancel(id).await)
    }

    async fn prune(&self, filter: &PruneFilter) -> Result<u64, StoreError> {
        each!(self, s => s.prune(filter).await)
    }

    async fn find(&self, key: &str) -> Result<RunId, StoreError> {
        each!(self, s => s.find(key).await)
    }

    async fn dependency_spec(&self, id: RunId) -> Result<Option<DependencySpec>, StoreError> {
        each!(self, s => s.dependency_spec(id).await)
    }

    async fn dependents(&self, id: RunId) -> Result<Vec<RunInfo>, StoreError> {
        each!(self, s => s.dependents(id).await)
    }

    async fn runnable(&self, limit: usize) -> Result<Vec<RunInfo>, StoreError> {
        each!(self, s => s.runnable(limit).await)
    }
}
