//! Opening a PostgreSQL store: the URL (its password never printed), one first
//! connection under a timeout, the format check, the embedded migration and the slots.

use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

use super::conns::Conns;
use super::{PgDb, PgOptions, PgStore};
use crate::store::format::{Step, migrator, open_error, refuse_newer};
use crate::store::sql::Store;
use crate::store::{Durability, StoreError, dialects};

/// The embedded migrations: the whole schema of format 4 at once, then the events table.
static MIGRATIONS: &[Step] = &[
    (
        4,
        "run store (format 4)",
        include_str!("../../../migrations/postgres/0004_run_store.sql"),
    ),
    (
        5,
        "events",
        include_str!("../../../migrations/postgres/0005_events.sql"),
    ),
    (
        6,
        "event texts",
        include_str!("../../../migrations/postgres/0006_event_texts.sql"),
    ),
    (
        7,
        "event blob",
        include_str!("../../../migrations/postgres/0007_event_blob.sql"),
    ),
];

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

/// Refuses a database whose schema a newer pactgraph wrote (a migration version above
/// [`STORE_FORMAT`]) before any migration touches it.
async fn check_format(conn: &mut PgConnection, url: &str) -> Result<(), StoreError> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| open_error(url, e.to_string()))?;
    if !exists {
        return Ok(());
    }
    let found: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| open_error(url, e.to_string()))?;
    refuse_newer(url, found.unwrap_or(0))
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
        migrator(MIGRATIONS, &shown)
            .await?
            .run(&mut first)
            .await
            .map_err(|e| open_err(format!("migrations: {e}")))?;
        let conns = Conns::new(
            options.max_connections,
            first,
            connect,
            options.connect_timeout,
        );
        let db = PgDb {
            conns: Arc::new(conns),
        };
        let store = Store::on(
            db,
            &dialects::POSTGRES,
            options.snapshot_every,
            options.clock,
        );
        // Rows are shown as of the database's clock (leases are fenced on it).
        store.sync_clock().await?;
        Ok(store)
    }
}
