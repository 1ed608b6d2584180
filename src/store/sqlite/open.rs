//! Opening a SQLite store: the file and its folder, the format check, the embedded
//! migrations, the writer and the read pool.

use std::path::PathBuf;
use std::sync::Arc;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, SqliteConnection};
use tokio::sync::Mutex;

use super::{Durability, SqliteDb, SqliteOptions, SqliteStore};
use crate::store::format::{Step, migrator, open_error, refuse_other};
use crate::store::rows::STORE_FORMAT;
use crate::store::sql::Store;
use crate::store::{StoreError, dialects};

/// Pages of WAL written before SQLite copies them into the database file (4 MB, SQLite's
/// own default): about 7 runs of the bench's 2,000-step chain (134 pages each). A command
/// leaves the WAL as it is at its exit (ADR 0059), so the next process to open the store
/// reads every page written since the last checkpoint to rebuild its index (about 1.6 µs
/// and 2,800 instructions a page: half the WAL's size at an average open); fewer pages a
/// checkpoint mean more of the checkpoints' four fsyncs. 1,000 measured against 2,000
/// (ADR 0059's value) and 700 in three series of interleaved runs: never dearer by mean,
/// 484 fewer `pread`s and ~1.35 M fewer instructions a run, for 0.27 more fsyncs a run (ADR
/// 0062).
const WAL_AUTOCHECKPOINT: u32 = 1_000;

/// The file a `sqlite:` URL names, from what follows `sqlite:` (`//` before it allowed):
/// no path and query parameters are refused, saying why.
pub(crate) fn file_path(rest: &str) -> Result<PathBuf, &'static str> {
    let path = rest.strip_prefix("//").unwrap_or(rest);
    if path.is_empty() {
        return Err("no file path after `sqlite:`");
    }
    if path.contains('?') {
        return Err("query parameters are not supported");
    }
    Ok(PathBuf::from(path))
}

/// The embedded migration: the whole schema, at the one format this pactgraph reads (ADR
/// 0084).
static MIGRATIONS: &[Step] = &[(
    STORE_FORMAT,
    "run store",
    include_str!("../../../migrations/sqlite/run_store.sql"),
)];

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
            let path = file_path(rest).map_err(bad)?;
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
                // Checkpoint the WAL into the database every 1,000 pages (4 MB): the
                // next process reads the whole WAL when it opens the store, against a
                // checkpoint's fsyncs (ADR 0062).
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
        migrate(&mut writer, url).await?;
        // Reads: a pool. No ping before each acquire: a broken connection fails its
        // statement anyway, and the ping is one more round trip to SQLite's worker thread.
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false);
        let pool = pool
            .connect_with(connect)
            .await
            .map_err(|e| open_err(e.to_string()))?;
        let db = SqliteDb {
            pool,
            writer: Arc::new(Mutex::new(writer)),
        };
        let store = Store::on(db, &dialects::SQLITE, options.snapshot_every, options.clock);
        // Rows are shown as of the database's clock (leases are fenced on it).
        store.sync_clock().await?;
        Ok(store)
    }
}

/// Checks the format and runs the migrations this database lacks, all under SQLite's
/// write lock (`BEGIN IMMEDIATE`; each migration a savepoint in it): processes opening a
/// new store at the same moment migrate it once, one after the other, instead of all
/// applying the migration over each other ("table documents already exists"). A store already at
/// this format takes no lock.
async fn migrate(writer: &mut SqliteConnection, url: &str) -> Result<(), StoreError> {
    let open_err = |reason: String| open_error(url, reason);
    if check_format(&mut *writer, url).await? == STORE_FORMAT {
        return Ok(());
    }
    let migrator = migrator(MIGRATIONS, url).await?;
    let mut tx = writer
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(|e| open_err(format!("locking the store to migrate it: {e}")))?;
    // Another process may have migrated it while this one waited for the lock.
    if check_format(&mut tx, url).await? != STORE_FORMAT {
        migrator
            .run_direct(&mut *tx)
            .await
            .map_err(|e| open_err(format!("migrations: {e}")))?;
        sqlx::query(&format!("PRAGMA user_version = {STORE_FORMAT}"))
            .execute(&mut *tx)
            .await
            .map_err(|e| open_err(format!("setting the format: {e}")))?;
    }
    tx.commit()
        .await
        .map_err(|e| open_err(format!("migrations: {e}")))
}

/// Refuses a database of another format (its `user_version`, or the migration applied:
/// a newer pactgraph's, or a development build's) before any migration touches it.
/// Reading the header also fails early, and clearly, on a file that is not a database.
/// Returns the format found (0 for a new database, or one not marked yet).
async fn check_format(conn: &mut SqliteConnection, url: &str) -> Result<i64, StoreError> {
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| open_error(url, e.to_string()))?;
    let migrated: Option<i64> = sqlx::query_scalar(
        "SELECT MAX(version) FROM _sqlx_migrations \
         WHERE EXISTS (SELECT 1 FROM sqlite_master WHERE name = '_sqlx_migrations')",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap_or(None);
    let migrated = migrated.unwrap_or(0);
    // A newer format first, whichever says it; then each must be this one (or unset).
    for found in [version.max(migrated), migrated, version] {
        refuse_other(url, found)?;
    }
    // Both must say it: a store whose migration ran but whose `user_version` was not set
    // yet is migrated (a no-op) and marked.
    Ok(if version == migrated { version } else { 0 })
}
