//! [`AnyStore`]: the run store a URL names, SQLite or PostgreSQL, behind one type, so that
//! the commands and the worker are written once for both. It is the one store
//! ([`Store`]) on a backend chosen when opened ([`AnyDb`]): each connection, transaction
//! and row is the chosen backend's; no `RunStore` method is forwarded by hand.

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Sqlite, Transaction};

use super::db::{Backend, Begin, Conn, Exec, Sql, Tx};
use super::packed::ChunkValue;
use super::postgres::{PgConn, PgDb, PgTx, redact};
use super::rows::Cols;
use super::sql::Store;
use super::sqlite::{SqliteConn, SqliteDb};
use super::{Durability, PgOptions, PgStore, SqliteOptions, SqliteStore, StoreError};

/// A run store opened by URL: `sqlite:PATH` or `postgres://...`.
pub type AnyStore = Store<AnyDb>;

/// The backend of an [`AnyStore`]: SQLite's or PostgreSQL's.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyDb {
    /// A SQLite database file (one machine).
    Sqlite(SqliteDb),
    /// A PostgreSQL database (workers on many machines).
    Postgres(PgDb),
}

/// A connection of either backend.
#[doc(hidden)]
pub enum AnyConn<'a> {
    /// SQLite's.
    Sqlite(SqliteConn<'a>),
    /// PostgreSQL's.
    Postgres(PgConn<'a>),
}

/// A transaction of either backend.
#[doc(hidden)]
pub enum AnyTx<'c> {
    /// SQLite's.
    Sqlite(Transaction<'c, Sqlite>),
    /// PostgreSQL's.
    Postgres(PgTx<'c>),
}

/// A row of either backend.
#[doc(hidden)]
pub enum AnyRow {
    /// SQLite's.
    Sqlite(SqliteRow),
    /// PostgreSQL's.
    Postgres(PgRow),
}

/// Calls the same method on whichever backend's value `$value` holds (`$enum` names the
/// enum), wrapping rows into [`AnyRow`] with `$wrap`.
macro_rules! either {
    ($value:expr, $enum:ident, $v:ident => $call:expr) => {
        match $value {
            $enum::Sqlite($v) => $call,
            $enum::Postgres($v) => $call,
        }
    };
}

impl Cols for AnyRow {
    fn text(&self, col: &str) -> Result<String, sqlx::Error> {
        either!(self, AnyRow, r => r.text(col))
    }
    fn opt_text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        either!(self, AnyRow, r => r.opt_text(col))
    }
    fn int(&self, col: &str) -> Result<i64, sqlx::Error> {
        either!(self, AnyRow, r => r.int(col))
    }
    fn opt_int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        either!(self, AnyRow, r => r.opt_int(col))
    }
    fn chunk(&self, col: &str, packed: &str) -> Result<ChunkValue, sqlx::Error> {
        either!(self, AnyRow, r => r.chunk(col, packed))
    }
}

/// `Exec` for a connection or transaction of either backend: the backend's own, its rows
/// wrapped.
macro_rules! exec_either {
    ($ty:ident) => {
        impl Exec for $ty<'_> {
            type Row = AnyRow;
            async fn fetch_all(&mut self, sql: Sql<'_>) -> Result<Vec<AnyRow>, sqlx::Error> {
                Ok(match self {
                    $ty::Sqlite(c) => c.fetch_all(sql).await?.into_iter().map(AnyRow::Sqlite).collect(),
                    $ty::Postgres(c) => c.fetch_all(sql).await?.into_iter().map(AnyRow::Postgres).collect(),
                })
            }
            async fn fetch_optional(&mut self, sql: Sql<'_>) -> Result<Option<AnyRow>, sqlx::Error> {
                Ok(match self {
                    $ty::Sqlite(c) => c.fetch_optional(sql).await?.map(AnyRow::Sqlite),
                    $ty::Postgres(c) => c.fetch_optional(sql).await?.map(AnyRow::Postgres),
                })
            }
            async fn execute(&mut self, sql: Sql<'_>) -> Result<u64, sqlx::Error> {
                either!(self, $ty, c => c.execute(sql).await)
            }
        }
    };
}
exec_either!(AnyConn);
exec_either!(AnyTx);

impl Conn for AnyConn<'_> {
    type Tx<'c>
        = AnyTx<'c>
    where
        Self: 'c;

    async fn begin(&mut self, how: Begin) -> Result<AnyTx<'_>, sqlx::Error> {
        Ok(match self {
            AnyConn::Sqlite(c) => AnyTx::Sqlite(c.begin(how).await?),
            AnyConn::Postgres(c) => AnyTx::Postgres(c.begin(how).await?),
        })
    }
}

impl Tx for AnyTx<'_> {
    async fn commit(self) -> Result<(), sqlx::Error> {
        either!(self, AnyTx, tx => tx.commit().await)
    }

    async fn rollback(self) -> Result<(), sqlx::Error> {
        either!(self, AnyTx, tx => tx.rollback().await)
    }
}

impl Backend for AnyDb {
    type Row = AnyRow;
    type Conn<'a> = AnyConn<'a>;

    async fn read(&self) -> Result<AnyConn<'_>, StoreError> {
        Ok(match self {
            AnyDb::Sqlite(db) => AnyConn::Sqlite(db.read().await?),
            AnyDb::Postgres(db) => AnyConn::Postgres(db.read().await?),
        })
    }

    async fn write(&self) -> Result<AnyConn<'_>, StoreError> {
        Ok(match self {
            AnyDb::Sqlite(db) => AnyConn::Sqlite(db.write().await?),
            AnyDb::Postgres(db) => AnyConn::Postgres(db.write().await?),
        })
    }

    async fn close(&self) {
        either!(self, AnyDb, db => db.close().await)
    }

    async fn wakeups(&self) -> Option<super::Wakeups> {
        either!(self, AnyDb, db => db.wakeups().await)
    }

    async fn event_wakeups(&self, id: crate::runtime::RunId) -> Option<super::Wakeups> {
        either!(self, AnyDb, db => db.event_wakeups(id).await)
    }
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
            return SqliteStore::open_with(url, options).await.map(Self::from);
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgOptions::default()
                .durability(durability)
                .max_connections(connections);
            return PgStore::open_with(url, options).await.map(Self::from);
        }
        Err(StoreError::BadUrl {
            url: redact(url),
            reason: "expected `sqlite:PATH` or `postgres://USER:PASSWORD@HOST:PORT/DATABASE`"
                .into(),
        })
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.db() {
            AnyDb::Sqlite(_) => "sqlite",
            AnyDb::Postgres(_) => "postgres",
        }
    }
}

impl From<SqliteStore> for AnyStore {
    fn from(store: SqliteStore) -> Self {
        store.map(AnyDb::Sqlite)
    }
}

impl From<PgStore> for AnyStore {
    fn from(store: PgStore) -> Self {
        store.map(AnyDb::Postgres)
    }
}
