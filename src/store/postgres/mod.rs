//! The PostgreSQL run store: the same tables and meanings as the SQLite store, in one
//! PostgreSQL database that workers on many machines share. Opened by URL; the schema is
//! made by the embedded migrations in `migrations/postgres` on first use (under sqlx's
//! advisory lock, so workers starting together migrate once).
//!
//! Concurrency: every write is one statement or one transaction whose first statement is
//! a conditional update of the run's row, so the fence (sequence number, lease) and the
//! write are one step under the row's lock. Claims take the row with
//! `FOR UPDATE SKIP LOCKED`: two workers claiming the same run never wait on each other;
//! the one that finds it locked is told it is held. ADR 0024 gives the design.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

mod conns;
mod deps;
mod load;
mod store;

use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection, Row};

use self::conns::Conns;

use super::delta::StepDelta;
use super::rows::{STORE_FORMAT, delta_from_row, to_i64, to_u64};
use super::weights::Weights;
use super::{Durability, StoreError, now_ms};
use crate::runtime::{RunId, RunState};

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
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Normal,
            snapshot_every: None,
            max_connections: 4,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

impl PgOptions {
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

/// The run store in one PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgStore {
    conns: Arc<Conns>,
    snapshot_every: Option<u64>,
    weights: Arc<Weights>,
}

/// The embedded migrations.
#[derive(Debug)]
struct Embedded;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(self) -> BoxFuture<'s, Result<Vec<Migration>, sqlx::error::BoxDynError>> {
        Box::pin(async {
            Ok(vec![Migration::new(
                4,
                Cow::Borrowed("run store (format 4)"),
                MigrationType::Simple,
                Cow::Borrowed(include_str!(
                    "../../../migrations/postgres/0004_run_store.sql"
                )),
                false,
            )])
        })
    }
}

/// `url` with its password, if any, replaced by `***` (URLs are printed in errors).
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

impl PgStore {
    /// Opens the store at `url` (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`, the
    /// parameters libpq takes), migrating its schema on first use. Default options: see
    /// [`PgOptions`].
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, PgOptions::default()).await
    }

    /// Opens the store at `url` with `options`. An unreachable server, refused
    /// credentials or a database of a newer format fail here, clearly, before any write.
    pub async fn open_with(url: &str, options: PgOptions) -> Result<Self, StoreError> {
        let shown = redact(url);
        let open_err = |reason: String| StoreError::Open {
            url: shown.clone(),
            reason,
        };
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(StoreError::BadUrl {
                url: shown,
                reason: "expected `postgres://USER:PASSWORD@HOST:PORT/DATABASE`".into(),
            });
        }
        let connect: PgConnectOptions = url.parse().map_err(|e| StoreError::BadUrl {
            url: shown.clone(),
            reason: format!("{e}"),
        })?;
        let connect = connect
            .options([(
                "synchronous_commit",
                match options.durability {
                    Durability::Normal => "off",
                    Durability::Full => "on",
                },
            )])
            .application_name("pactgraph")
            .log_statements(tracing::log::LevelFilter::Trace);
        // One connection first: the format check and migrations, and a quick, clear
        // failure (a pool would retry a refused connection until its acquire timeout).
        let mut first = tokio::time::timeout(
            options.connect_timeout,
            PgConnection::connect_with(&connect),
        )
        .await
        .map_err(|_| {
            open_err(format!(
                "the server did not answer within {} s",
                options.connect_timeout.as_secs_f64()
            ))
        })?
        .map_err(|e| open_err(e.to_string()))?;
        check_format(&mut first, &shown).await?;
        let migrator = Migrator::new(Embedded)
            .await
            .map_err(|e| open_err(format!("migrations: {e}")))?;
        migrator
            .run(&mut first)
            .await
            .map_err(|e| open_err(format!("migrations: {e}")))?;
        let conns = Conns::new(
            options.max_connections,
            first,
            connect,
            options.connect_timeout,
        );
        Ok(Self {
            conns: Arc::new(conns),
            snapshot_every: options.snapshot_every.map(|n| n.max(1)),
            weights: Arc::default(),
        })
    }

    /// Closes its connections (waiting for their holders).
    pub async fn close(&self) {
        self.conns.close().await;
    }

    /// Run `id`'s step rows in sequence order (see `SqliteStore::deltas`).
    pub async fn deltas(&self, id: RunId) -> Result<Vec<(u64, StepDelta)>, StoreError> {
        let rows = sqlx::query("SELECT seq, delta FROM steps WHERE run_id = $1 ORDER BY seq")
            .bind(id.to_string())
            .fetch_all(&mut *self.conns.get().await?)
            .await
            .map_err(StoreError::db("reading steps", Some(id)))?;
        rows.iter()
            .map(|r| delta_from_row(id, r).map(|(seq, delta, _)| (seq, delta)))
            .collect()
    }

    /// What run `id` takes: step rows and snapshots, in bytes of JSON.
    pub async fn storage(&self, id: RunId) -> Result<super::RunStorage, StoreError> {
        let db = StoreError::db("measuring storage", Some(id));
        let row = sqlx::query(
            "SELECT \
               (SELECT COUNT(*) FROM steps WHERE run_id = $1) AS steps, \
               (SELECT COALESCE(SUM(LENGTH(delta)), 0)::BIGINT FROM steps WHERE run_id = $1) \
                 AS step_bytes, \
               (SELECT COUNT(*) FROM snapshots WHERE run_id = $1) AS snapshots, \
               (SELECT COALESCE(SUM(LENGTH(run_state)), 0)::BIGINT FROM snapshots \
                 WHERE run_id = $1) AS snapshot_bytes, \
               (SELECT COALESCE(MAX(seq), 0) FROM snapshots WHERE run_id = $1) AS snapshot_seq",
        )
        .bind(id.to_string())
        .fetch_one(&mut *self.conns.get().await?)
        .await
        .map_err(&db)?;
        let get = |col: &str| row.try_get::<i64, _>(col).map(to_u64).map_err(&db);
        Ok(super::RunStorage {
            steps: get("steps")?,
            step_bytes: get("step_bytes")?,
            snapshots: get("snapshots")?,
            snapshot_bytes: get("snapshot_bytes")?,
            snapshot_seq: get("snapshot_seq")?,
        })
    }

    /// Gives `result` back; when it is an error that lost its connection (the server
    /// restarted, the network broke), first drops the idle connections, which are likely
    /// lost too: the next statements open new ones.
    fn watch<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e) = &result
            && conns::connection_lost(e)
        {
            self.conns.drop_idle();
        }
        result
    }

    /// Whether checkpoint `seq` of run `id` carries a snapshot (as on SQLite).
    fn wants_snapshot(&self, id: RunId, seq: u64, run: &RunState, delta_bytes: usize) -> bool {
        self.weights
            .wants_snapshot(self.snapshot_every, id, seq, run, delta_bytes)
    }

    /// The error of a lease-fenced update that touched no row: `LeaseLost`, naming the
    /// holder if its lease is current at `now` (or the error reading the run).
    async fn lease_lost(&self, id: RunId, owner: &str, now: u64) -> StoreError {
        use super::RunStore;
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
    /// `$1` id and `$2` owner): `LeaseLost` if `owner` does not hold it.
    async fn let_go(
        &self,
        id: RunId,
        owner: &str,
        operation: &'static str,
        sql: &'static str,
    ) -> Result<(), StoreError> {
        let updated = sqlx::query(sql)
            .bind(id.to_string())
            .bind(owner)
            .execute(&mut *self.conns.get().await?)
            .await
            .map_err(StoreError::db(operation, Some(id)))?
            .rows_affected();
        if updated == 0 {
            return Err(self.lease_lost(id, owner, now_ms()).await);
        }
        Ok(())
    }

    /// Why a fenced checkpoint was refused: no such run, a lease not held, or a sequence
    /// number that is not the next.
    async fn refusal(&self, id: RunId, owner: &str, seq: u64, now: u64) -> StoreError {
        use super::RunStore;
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

/// Refuses a database whose schema a newer pactgraph wrote (a migration version above
/// [`STORE_FORMAT`]) before any migration touches it.
async fn check_format(conn: &mut PgConnection, url: &str) -> Result<(), StoreError> {
    let open_err = |reason: String| StoreError::Open {
        url: url.to_string(),
        reason,
    };
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| open_err(e.to_string()))?;
    if !exists {
        return Ok(());
    }
    let found: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| open_err(e.to_string()))?;
    let found = found.unwrap_or(0);
    if found > STORE_FORMAT {
        return Err(StoreError::NewerFormat {
            url: url.to_string(),
            found,
            supported: STORE_FORMAT,
        });
    }
    Ok(())
}

/// Whether `e` is `pactgraph_checkpoint` refusing a checkpoint (the fence failed).
fn is_refusal(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.message().contains("pactgraph: checkpoint refused"))
}
