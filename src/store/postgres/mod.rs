//! The PostgreSQL backend: the same tables and meanings as SQLite's, in one PostgreSQL
//! database that workers on many machines share. Opened by URL; the schema is made by the
//! embedded migration `migrations/postgres/run_store.sql` on first use (under sqlx's
//! advisory lock, so workers starting together migrate once). The store itself is [`Store`]
//! (`store/sql`), written once for both databases.
//!
//! Concurrency: every write is one statement or one transaction whose first statement is
//! a conditional update of the run's row, so the fence (sequence number, lease) and the
//! write are one step under the row's lock. Claims take the row with
//! `FOR UPDATE SKIP LOCKED`: two workers claiming the same run never wait on each other;
//! the one that finds it locked is told it is held. ADR 0024 gives the design.

use std::sync::Arc;
use std::time::Duration;

mod conns;
mod listen;
mod open;

use sqlx::postgres::PgRow;

pub(crate) use self::conns::{Conn as PgConn, PgTx};
pub(crate) use self::open::redact;

use self::conns::{Conn, Conns};
use super::clock::Clock;
use super::db::Backend;
use super::dialects::{EVENTS_CHANNEL, RUNNABLE_CHANNEL};
use super::format::shared_options;
use super::sql::Store;
use super::{Durability, StoreError};

/// The run store in one PostgreSQL database.
pub type PgStore = Store<PgDb>;

/// How a [`PgStore`] is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PgOptions {
    /// `normal`: a commit survives the worker dying (`synchronous_commit=off`: the server
    /// has it before the call returns, its WAL reaches the disk within a fraction of a
    /// second); `full`: a commit survives the database server crashing
    /// (`synchronous_commit=on`: the server's WAL is flushed before the call returns).
    pub durability: Durability,
    /// A snapshot at least every this many checkpoints (see `SqliteOptions`).
    pub snapshot_every: Option<u64>,
    /// Connections to the server at most (each opened when first needed).
    pub max_connections: u32,
    /// How long opening waits for the server to answer.
    pub connect_timeout: Duration,
    /// The clock leases and times are read from (the system's by default; every worker's
    /// must agree with the others' to well under the lease).
    pub clock: Clock,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Normal,
            snapshot_every: None,
            max_connections: 4,
            connect_timeout: Duration::from_secs(10),
            clock: Clock::system(),
        }
    }
}

shared_options!(PgOptions);

impl PgOptions {
    /// At most `n` connections (at least 1).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }
    /// Waiting up to `timeout` for the server when opening.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}

/// PostgreSQL's connections: a fixed set of slots of the store's own (`conns.rs`).
#[derive(Debug, Clone)]
pub struct PgDb {
    conns: Arc<Conns>,
}

impl Backend for PgDb {
    type Row = PgRow;
    type Conn<'a> = Conn<'a>;

    /// Reads and writes alike take a free slot.
    async fn read(&self) -> Result<Conn<'_>, StoreError> {
        self.conns.get().await
    }

    async fn close(&self) {
        self.conns.close().await;
    }

    async fn wakeups(&self) -> Option<super::Wakeups> {
        listen::listen(self.conns.options(), RUNNABLE_CHANNEL, None).await
    }

    async fn event_wakeups(&self, id: crate::runtime::RunId) -> Option<super::Wakeups> {
        listen::listen(self.conns.options(), EVENTS_CHANNEL, Some(id.to_string())).await
    }
}
