//! The SQLite backend: one database file (WAL mode), opened by URL, tables created by
//! the embedded migration `migrations/sqlite/run_store.sql`. Writes go through one
//! connection of their own, every write transaction `BEGIN IMMEDIATE`; reads through a
//! small pool. The store itself is [`Store`] (`store/sql`), written once for both
//! databases.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

mod open;

#[cfg(feature = "cli")]
pub(crate) use open::file_path;

use sqlx::pool::PoolConnection;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Connection, Sqlite, SqliteConnection, Transaction};
use tokio::sync::{Mutex, MutexGuard};

use super::StoreError;
use super::clock::Clock;
use super::db::{Backend, Begin, Conn, Tx};
use super::dialects;
use super::format::shared_options;
use super::sql::Store;

/// The run store in one SQLite database.
pub type SqliteStore = Store<SqliteDb>;

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
    /// The clock leases and times are read from (the system's by default).
    pub clock: Clock,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Normal,
            snapshot_every: None,
            busy_timeout: Duration::from_secs(5),
            clock: Clock::system(),
        }
    }
}

shared_options!(SqliteOptions);

impl SqliteOptions {
    /// Waiting up to `timeout` for a lock.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }
}

/// SQLite's connections: a pool for reads, one connection for writes.
#[derive(Debug, Clone)]
pub struct SqliteDb {
    /// Reads (any of several connections).
    pool: SqlitePool,
    /// Writes: one connection of their own, not a pool. Its page cache stays valid
    /// between checkpoints (a connection drops its cache when another connection of the
    /// database wrote), and a pool would ping the connection (one more round trip to
    /// SQLite's worker thread) each time it is given back. SQLite lets one connection
    /// write at a time anyway.
    ///
    /// Cancel safety: dropping a future that holds it mid-statement lets SQLite finish
    /// that statement (an open transaction is rolled back before the connection's next
    /// statement), so the next holder finds the connection idle.
    writer: Arc<Mutex<SqliteConnection>>,
}

/// A SQLite connection held: the writer, or one of the readers.
#[doc(hidden)]
pub enum SqliteConn<'a> {
    /// The write connection.
    Writer(MutexGuard<'a, SqliteConnection>),
    /// A read connection from the pool.
    Reader(PoolConnection<Sqlite>),
}

impl Deref for SqliteConn<'_> {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        match self {
            SqliteConn::Writer(w) => w,
            SqliteConn::Reader(r) => r,
        }
    }
}

impl DerefMut for SqliteConn<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        match self {
            SqliteConn::Writer(w) => w,
            SqliteConn::Reader(r) => r,
        }
    }
}

impl Backend for SqliteDb {
    type Row = SqliteRow;
    type Conn<'a> = SqliteConn<'a>;

    async fn read(&self) -> Result<SqliteConn<'_>, StoreError> {
        self.pool
            .acquire()
            .await
            .map(SqliteConn::Reader)
            .map_err(StoreError::db("connecting", None))
    }

    async fn write(&self) -> Result<SqliteConn<'_>, StoreError> {
        Ok(SqliteConn::Writer(self.writer.lock().await))
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

impl Conn for SqliteConn<'_> {
    type Tx<'c>
        = Transaction<'c, Sqlite>
    where
        Self: 'c;

    async fn begin(&mut self, how: Begin) -> Result<Transaction<'_, Sqlite>, sqlx::Error> {
        (**self).begin_with(dialects::SQLITE.begin(how)).await
    }
}

impl Tx for Transaction<'_, Sqlite> {
    async fn commit(self) -> Result<(), sqlx::Error> {
        Transaction::commit(self).await
    }

    async fn rollback(self) -> Result<(), sqlx::Error> {
        Transaction::rollback(self).await
    }
}
