//! The SQLite run store: one database file (WAL mode), opened by URL, tables created by
//! the embedded migrations in `migrations/sqlite`. Every write is one `BEGIN IMMEDIATE`
//! transaction whose first statement is a conditional update of the run's row: the
//! fencing (sequence number, lease) and the write are one atomic step.

use std::borrow::Cow;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

mod deps;
mod load;
mod rows;
mod snapshots;
mod store;

use self::deps::insert_dependencies;
use self::rows::*;
use self::snapshots::{checkpoint_sql, is_refusal};
use super::rows::{
    INFO, STORE_FORMAT, cancel_run, delta_from_row, info_from_row, is_unique_violation, replay,
    stored_status, to_i64, to_u64,
};
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Connection, Row, Sqlite, SqliteConnection, Transaction};

use super::delta::StepDelta;
use super::weights::Weights;
use super::{
    Checkpoint, CreateOptions, DependencySpec, Lease, PruneFilter, RunFilter, RunInfo, RunStore,
    StoreError, StoredRun, StoredStatus, attempt_key, duration_ms, now_ms, owner_gone,
};
use crate::contracts::WorkflowDocument;
use crate::runtime::{RunId, RunRecord, RunState, TerminationReason, digest_of};

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// `synchronous=NORMAL` (WAL): a commit survives the process dying; a power loss
    /// may lose the last commits (never corrupting the database).
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit reaches the disk before it returns.
    Full,
}

/// How a [`SqliteStore`] is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// `synchronous=NORMAL` or `FULL`.
    pub durability: Durability,
    /// A snapshot at least every this many checkpoints, besides the ones weight calls
    /// for (when the deltas since the last snapshot weigh as much as it), creation,
    /// pauses and the end. `None` (the default): by weight only.
    pub snapshot_every: Option<u64>,
    /// How long a write waits for another connection's write lock.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Normal,
            snapshot_every: None,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

impl SqliteOptions {
    /// With `durability`.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
    /// A snapshot at least every `n` checkpoints (`n` at least 1).
    pub fn snapshot_every(mut self, n: u64) -> Self {
        self.snapshot_every = Some(n.max(1));
        self
    }
    /// Waiting up to `timeout` for a lock.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }
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

/// The run store in one SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// Reads (any of several connections).
    pool: SqlitePool,
    /// Writes: one connection of their own, not a pool. Its page cache stays valid
    /// between checkpoints (a connection drops its cache when another connection of the
    /// database wrote), and a pool would ping the connection (one more round trip to
    /// SQLite's worker thread) each time it is given back. SQLite lets one connection
    /// write at a time anyway.
    writer: Arc<tokio::sync::Mutex<SqliteConnection>>,
    snapshot_every: Option<u64>,
    weights: Arc<Weights>,
}

/// Pages of WAL written before SQLite copies them into the database file.
const WAL_AUTOCHECKPOINT: u32 = 4_000;

/// The embedded migrations.
#[derive(Debug)]
struct Embedded;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(self) -> BoxFuture<'s, Result<Vec<Migration>, sqlx::error::BoxDynError>> {
        Box::pin(async {
            Ok(vec![
                Migration::new(
                    1,
                    Cow::Borrowed("run store"),
                    MigrationType::Simple,
                    Cow::Borrowed(include_str!(
                        "../../../migrations/sqlite/0001_run_store.sql"
                    )),
                    false,
                ),
                Migration::new(
                    2,
                    Cow::Borrowed("attempts and cancel"),
                    MigrationType::Simple,
                    Cow::Borrowed(include_str!(
                        "../../../migrations/sqlite/0002_attempts_and_cancel.sql"
                    )),
                    false,
                ),
                Migration::new(
                    3,
                    Cow::Borrowed("one-statement checkpoints"),
                    MigrationType::Simple,
                    Cow::Borrowed(include_str!(
                        "../../../migrations/sqlite/0003_one_statement_checkpoints.sql"
                    )),
                    false,
                ),
                Migration::new(
                    4,
                    Cow::Borrowed("dependencies"),
                    MigrationType::Simple,
                    Cow::Borrowed(include_str!(
                        "../../../migrations/sqlite/0004_dependencies.sql"
                    )),
                    false,
                ),
            ])
        })
    }
}

impl SqliteStore {
    /// Opens (creating it and its folder if missing) the store at `url`:
    /// `sqlite:PATH` (or `sqlite://PATH`), or `sqlite::memory:` for a private in-memory
    /// database. Default options: see [`SqliteOptions`].
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, SqliteOptions::default()).await
    }

    /// Opens the store at `url` with `options`.
    pub async fn open_with(url: &str, options: SqliteOptions) -> Result<Self, StoreError> {
        let bad = |reason: &str| StoreError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let open_err = |reason: String| StoreError::Open {
            url: url.to_string(),
            reason,
        };
        let rest = url
            .strip_prefix("sqlite:")
            .ok_or_else(|| bad("expected `sqlite:PATH` or `sqlite::memory:`"))?;
        let memory = rest == ":memory:";
        let base = if memory {
            // A private database shared by this store's connections (a unique name,
            // shared cache): it lives while the writer connection does.
            ":memory:"
                .parse::<SqliteConnectOptions>()
                .map_err(|e| open_err(e.to_string()))?
        } else {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(bad("no file path after `sqlite:`"));
            }
            if path.contains('?') {
                return Err(bad("query parameters are not supported"));
            }
            let path = PathBuf::from(path);
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| {
                    open_err(format!(
                        "cannot create the folder {}: {e}",
                        parent.display()
                    ))
                })?;
            }
            SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                // Checkpoint the WAL into the database every 4,000 pages (16 MB), not
                // 1,000: checkpoints copy each page once however often it was written,
                // and a checkpoint's fsyncs are a step's dearest part.
                .pragma("wal_autocheckpoint", WAL_AUTOCHECKPOINT.to_string())
        };
        let connect = base
            .foreign_keys(true)
            .busy_timeout(options.busy_timeout)
            .synchronous(match options.durability {
                Durability::Normal => SqliteSynchronous::Normal,
                Durability::Full => SqliteSynchronous::Full,
            });
        // Writes go through one connection of their own, opened first (in memory, it
        // keeps the database alive).
        let mut writer = SqliteConnection::connect_with(&connect)
            .await
            .map_err(|e| open_err(e.to_string()))?;
        check_format(&mut writer, url).await?;
        let migrator = Migrator::new(Embedded)
            .await
            .map_err(|e| open_err(format!("migrations: {e}")))?;
        migrator
            .run(&mut writer)
            .await
            .map_err(|e| open_err(format!("migrations: {e}")))?;
        sqlx::query(&format!("PRAGMA user_version = {STORE_FORMAT}"))
            .execute(&mut writer)
            .await
            .map_err(|e| open_err(format!("setting the format: {e}")))?;
        // Reads: a pool. No ping before each acquire: a broken connection fails its
        // statement anyway, and the ping is one more round trip to SQLite's worker thread.
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(connect)
            .await
            .map_err(|e| open_err(e.to_string()))?;
        Ok(Self {
            pool,
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            snapshot_every: options.snapshot_every.map(|n| n.max(1)),
            weights: Arc::default(),
        })
    }

    /// Closes the pool (waiting for open connections to finish).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// What run `id` takes: step rows and snapshots, in bytes of JSON.
    pub async fn storage(&self, id: RunId) -> Result<RunStorage, StoreError> {
        let db = StoreError::db("measuring storage", Some(id));
        let key = id.to_string();
        let row = sqlx::query(
            "SELECT \
               (SELECT COUNT(*) FROM steps WHERE run_id = ?1) AS steps, \
               (SELECT COALESCE(SUM(LENGTH(delta)), 0) FROM steps WHERE run_id = ?1) AS step_bytes, \
               (SELECT COUNT(*) FROM snapshots WHERE run_id = ?1) AS snapshots, \
               (SELECT COALESCE(SUM(LENGTH(run_state)), 0) FROM snapshots WHERE run_id = ?1) \
                 AS snapshot_bytes, \
               (SELECT COALESCE(MAX(seq), 0) FROM snapshots WHERE run_id = ?1) AS snapshot_seq",
        )
        .bind(&key)
        .fetch_one(&self.pool)
        .await
        .map_err(&db)?;
        let get = |col: &str| row.try_get::<i64, _>(col).map(to_u64).map_err(&db);
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
        let rows = sqlx::query("SELECT seq, delta FROM steps WHERE run_id = ?1 ORDER BY seq")
            .bind(id.to_string())
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::db("reading steps", Some(id)))?;
        rows.iter()
            .map(|r| delta_from_row(id, r).map(|(seq, delta, _)| (seq, delta)))
            .collect()
    }

    /// The error of a lease-fenced update that touched no row: `LeaseLost`, naming the
    /// holder if its lease is current at `now` (or the error reading the run).
    pub(super) async fn lease_lost(&self, id: RunId, owner: &str, now: u64) -> StoreError {
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

    /// Gives `owner`'s lease on run `id` up with `sql` (an update of the run row bound to
    /// `?1` id and `?2` owner): `LeaseLost` if `owner` does not hold it.
    pub(super) async fn let_go(
        &self,
        id: RunId,
        owner: &str,
        operation: &'static str,
        sql: &'static str,
    ) -> Result<(), StoreError> {
        let updated = sqlx::query(sql)
            .bind(id.to_string())
            .bind(owner)
            .execute(&mut *self.writer().await)
            .await
            .map_err(StoreError::db(operation, Some(id)))?
            .rows_affected();
        if updated == 0 {
            return Err(self.lease_lost(id, owner, now_ms()).await);
        }
        Ok(())
    }

    /// Why a fenced update touched no row: no such run, a lease not held, or a sequence
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

    /// The write connection (waiting for this store's other writes to end).
    ///
    /// Cancel safety: dropping a future that holds it mid-statement lets SQLite finish
    /// that statement (an open transaction is rolled back before the connection's next
    /// statement), so the next holder finds the connection idle.
    pub(super) async fn writer(&self) -> tokio::sync::MutexGuard<'_, SqliteConnection> {
        self.writer.lock().await
    }
}

/// Starts a write transaction on `conn` (`BEGIN IMMEDIATE`: the write lock is taken at
/// once, waiting up to the busy timeout, so two writers never deadlock on an upgrade).
pub(super) async fn begin<'c>(
    conn: &'c mut SqliteConnection,
    operation: &'static str,
    id: Option<RunId>,
) -> Result<Transaction<'c, Sqlite>, StoreError> {
    conn.begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(StoreError::db(operation, id))
}

/// Refuses a database written by a newer pactgraph (its `user_version`, or a migration
/// this one does not know) before any migration touches it. Reading the header also
/// fails early, and clearly, on a file that is not a database.
async fn check_format(conn: &mut SqliteConnection, url: &str) -> Result<(), StoreError> {
    let open_err = |reason: String| StoreError::Open {
        url: url.to_string(),
        reason,
    };
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| open_err(e.to_string()))?;
    let migrated: Option<i64> = sqlx::query_scalar(
        "SELECT MAX(version) FROM _sqlx_migrations \
         WHERE EXISTS (SELECT 1 FROM sqlite_master WHERE name = '_sqlx_migrations')",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap_or(None);
    let found = version.max(migrated.unwrap_or(0));
    if found > STORE_FORMAT {
        return Err(StoreError::NewerFormat {
            url: url.to_string(),
            found,
            supported: STORE_FORMAT,
        });
    }
    Ok(())
}
