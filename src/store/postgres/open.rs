//! Opening a PostgreSQL store: the URL (its password never printed), one first
//! connection under a timeout, one statement reading the migrations applied and the
//! database's clock (the format check; the embedded migrations run only when the schema
//! is not current), and the slots.

use std::sync::Arc;

use sqlx::migrate::{Migration, Migrator};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection, Row};

use super::conns::Conns;
use super::{PgDb, PgOptions, PgStore};
use crate::store::clock::Clock;
use crate::store::format::{Step, migrator, open_error, refuse_other};
use crate::store::rows::STORE_FORMAT;
use crate::store::sql::Store;
use crate::store::{Durability, StoreError, dialects};

/// The embedded migration: the whole schema, at the one format this pactgraph reads (ADR
/// 0084).
static MIGRATIONS: &[Step] = &[(
    STORE_FORMAT,
    "run store",
    include_str!("../../../migrations/postgres/run_store.sql"),
)];

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

/// What the one statement of an open tells: the migrations applied (version, checksum,
/// whether it succeeded), the database's clock, read between `sent` and `back` on the
/// store's clock, and the name of the schema's events channel.
struct Probe {
    applied: Vec<(i64, Vec<u8>, bool)>,
    now_ms: i64,
    events_channel: String,
    sent: u64,
    back: u64,
}

/// SQLSTATE `undefined_table`: a new database, no migration applied yet.
const UNDEFINED_TABLE: &str = "42P01";

/// Reads the migrations applied, the database's clock and the events channel's name (what
/// the checkpoints bind, ADR 0067) in one round trip; `None` on a database without
/// pactgraph's schema (no `_sqlx_migrations` table).
async fn probe(
    conn: &mut PgConnection,
    url: &str,
    clock: &Clock,
) -> Result<Option<Probe>, StoreError> {
    let sent = clock.now_ms();
    // Nothing bound: sent as a simple query, parsed, planned and run in one round trip
    // (a prepared statement's `Parse` is a round trip of its own, ~1 ms on a new
    // backend's cold catalog caches; ADR 0071). Its values come back as text.
    let rows = sqlx::raw_sql(&format!(
        "SELECT version, checksum, success, {} AS now_ms, NULL AS channel \
         FROM _sqlx_migrations \
         UNION ALL SELECT NULL, NULL, NULL, {}, {} ORDER BY version NULLS LAST",
        dialects::POSTGRES.now_ms,
        dialects::POSTGRES.now_ms,
        dialects::EVENTS_CHANNEL
    ))
    .fetch_all(&mut *conn)
    .await;
    let back = clock.now_ms();
    let rows = match rows {
        Ok(rows) => rows,
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(UNDEFINED_TABLE) => {
            return Ok(None);
        }
        Err(e) => return Err(open_error(url, e.to_string())),
    };
    let read = |e: sqlx::Error| open_error(url, format!("reading the migrations: {e}"));
    let mut applied = Vec::with_capacity(rows.len());
    let mut now_ms = 0;
    let mut events_channel = String::new();
    for row in &rows {
        now_ms = row.try_get("now_ms").map_err(read)?;
        if let Some(channel) = row.try_get::<Option<String>, _>("channel").map_err(read)? {
            events_channel = channel;
        }
        let version: Option<i64> = row.try_get("version").map_err(read)?;
        if let Some(version) = version {
            let checksum: Vec<u8> = row.try_get("checksum").map_err(read)?;
            let success: bool = row.try_get("success").map_err(read)?;
            applied.push((version, checksum, success));
        }
    }
    Ok(Some(Probe {
        applied,
        now_ms,
        events_channel,
        sent,
        back,
    }))
}

/// Whether `applied` is exactly `migrator`'s migrations, each succeeded with the same
/// checksum: the schema is current and the migrator has nothing to do (it would check the
/// same in six more round trips, under an advisory lock).
fn current(applied: &[(i64, Vec<u8>, bool)], migrator: &Migrator) -> bool {
    let embedded: Vec<&Migration> = migrator.iter().collect();
    applied.len() == embedded.len()
        && applied
            .iter()
            .zip(embedded)
            .all(|((version, checksum, success), m)| {
                *success && *version == m.version && checksum.as_slice() == &*m.checksum
            })
}

impl PgStore {
    /// Opens the store at `url` (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`, the
    /// parameters libpq takes), migrating its schema on first use. Default options: see
    /// [`PgOptions`].
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, PgOptions::default()).await
    }

    /// Opens the store at `url` with `options`. An unreachable server, refused
    /// credentials or a database of another format fail here, clearly, before any write.
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
        // Set at the connection's start (no round trip): the commit's durability, and
        // generic plans from a statement's first execution (ADR 0060). A short-lived
        // process (`pactgraph run`) runs its checkpoint statement a few times on one
        // connection, and PostgreSQL plans the first five executions of a prepared
        // statement for their values (a checkpoint's 420 KB of events copied into the
        // plan each time) before it tries the generic plan: 5.5 M of the server's 40 M
        // instructions in a 2,000-step run. Every statement of the store is written so
        // that a generic plan finds its index (no clause a bound value switches off).
        let settings = [
            (
                "synchronous_commit",
                match options.durability {
                    Durability::Normal => "off",
                    Durability::Full => "on",
                },
            ),
            ("plan_cache_mode", "force_generic_plan"),
        ];
        let connect = connect
            .options(settings)
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
        // One statement when the schema is current (what every open but a store's first
        // finds): the format check, the migration's check and the clock's reading. A
        // schema of another format (a development build's, or a newer pactgraph's) is
        // refused here, before the migrator touches it.
        let found = probe(&mut first, &shown, &options.clock).await?;
        if let Some(found) = &found {
            refuse_other(&shown, found.applied.iter().map(|a| a.0).max().unwrap_or(0))?;
        }
        let migrator = migrator(MIGRATIONS, &shown).await?;
        let (clock_read, events_channel) = match found {
            Some(found) if current(&found.applied, &migrator) => (
                Some((found.sent, found.back, found.now_ms)),
                found.events_channel,
            ),
            // New or failed half-way: the migrator (under its advisory lock, so that
            // processes opening a new database together migrate it once), then the
            // channel's name in the schema the migration made current.
            _ => {
                migrator
                    .run(&mut first)
                    .await
                    .map_err(|e| open_err(format!("migrations: {e}")))?;
                let channel: String =
                    sqlx::query_scalar(&format!("SELECT {}", dialects::EVENTS_CHANNEL))
                        .fetch_one(&mut first)
                        .await
                        .map_err(|e| open_err(format!("the events channel: {e}")))?;
                (None, channel)
            }
        };
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
        )
        // Every connection of the store has the same `search_path`, so the same current
        // schema and channel, which `runs watch` and the event feeds compute again on
        // their own connection when they listen (`event_wakeups`).
        .with_events_channel(events_channel);
        // Rows are shown as of the database's clock (leases are fenced on it): read by
        // the probe, or once more after the migrations.
        match clock_read {
            Some((sent, back, theirs)) => store.clock_read(sent, back, theirs),
            None => store.sync_clock().await?,
        }
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::db::{Backend, sql};
    use crate::store::rows::Cols;

    /// Proves that the settings an open asks for reach every session of the store, with
    /// no statement of their own: generic plans from a statement's first execution (ADR
    /// 0060) and the commit's durability. Needs `PG_URL` (skipped without).
    #[test]
    fn the_store_sessions_plan_generically() {
        let Ok(base) = std::env::var("PG_URL") else {
            eprintln!("PG_URL is not set: skipped");
            return;
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let schema = format!("open_{}", crate::runtime::RunId::new()).to_lowercase();
            let mut admin = PgConnection::connect(&base).await.expect("connects");
            sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
                .execute(&mut admin)
                .await
                .expect("makes a schema");
            let sep = if base.contains('?') { '&' } else { '?' };
            let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
            for (durability, commit) in [(Durability::Normal, "off"), (Durability::Full, "on")] {
                let options = PgOptions {
                    durability,
                    ..PgOptions::default()
                };
                let store = PgStore::open_with(&url, options).await.expect("opens");
                let mut conn = store.db().read().await.expect("a connection");
                for (setting, wanted) in [
                    ("plan_cache_mode", "force_generic_plan"),
                    ("synchronous_commit", commit),
                ] {
                    let row = sql(&format!("SELECT current_setting('{setting}') AS v"))
                        .fetch_one(&mut conn)
                        .await
                        .expect("reads a setting");
                    assert_eq!(row.text("v").expect("a text"), wanted, "{setting}");
                }
                drop(conn);
                store.db().close().await;
            }
            sqlx::raw_sql(&format!("DROP SCHEMA {schema} CASCADE"))
                .execute(&mut admin)
                .await
                .expect("drops the schema");
        });
    }
}
