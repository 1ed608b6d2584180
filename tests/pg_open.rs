//! Opening a PostgreSQL store whose schema is current (ADR 0050): one statement reads
//! the migrations applied and the database's clock, and sqlx's migrator (six more round
//! trips under a database-wide advisory lock) is not run; a schema that is not exactly
//! this pactgraph's (its migration changed since it was applied or failed half-way, a
//! development build's format) is refused. Skipped without `PG_URL`.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::store::{PgStore, RunStore, STORE_FORMAT, StoreError};
use sqlx::Connection;
use support::stores::{Schema, admin, pg_url};

/// The advisory lock sqlx's migrator takes on database `name` (its `generate_lock_id`:
/// the CRC-32/ISO-HDLC of the name times a constant).
fn migrator_lock(name: &str) -> i64 {
    let mut crc: u32 = !0;
    for byte in name.bytes() {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    0x3d32_ad9e * i64::from(!crc)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The reason of an `Open` error, or a panic naming what came instead.
fn open_reason(opened: Result<PgStore, StoreError>) -> String {
    match opened {
        Err(StoreError::Open { reason, .. }) => reason,
        Err(other) => panic!("expected an Open error, got {other}"),
        Ok(_) => panic!("expected an Open error, the store opened"),
    }
}

/// Proves that an open of a current store does not run the migrator: while another
/// session holds the migrator's advisory lock, opening a new schema waits on it (so the
/// lock is the migrator's), and opening the current one does not.
#[test]
fn a_current_store_opens_without_the_migrators_lock() {
    let Some(base) = pg_url() else {
        eprintln!("PG_URL is not set: skipped");
        return;
    };
    let current = Schema::new();
    let fresh = Schema::new();
    let rt = rt();
    rt.block_on(async {
        PgStore::open(&current.url)
            .await
            .expect("makes the schema")
            .close()
            .await;
        let mut holder = sqlx::PgConnection::connect(&base)
            .await
            .expect("connects to PG_URL");
        let name: String = sqlx::query_scalar("SELECT current_database()")
            .fetch_one(&mut holder)
            .await
            .expect("reads the database's name");
        let key = migrator_lock(&name);
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(key)
            .execute(&mut holder)
            .await
            .expect("takes the migrator's lock");
        // Held as briefly as can be: other tests opening new schemas wait on it too.
        let new = tokio::time::timeout(Duration::from_secs(1), PgStore::open(&fresh.url)).await;
        let again = tokio::time::timeout(Duration::from_secs(5), PgStore::open(&current.url)).await;
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(key)
            .execute(&mut holder)
            .await
            .expect("lets the lock go");
        assert!(
            new.is_err(),
            "a new schema opened while the migrator's lock was held: the key is not the migrator's"
        );
        let store = again
            .expect("the current store opened while the migrator's lock was held")
            .expect("opens");
        // The store works: its clock was read by the same statement.
        let ours = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis();
        let skew = store
            .clock()
            .now_ms()
            .abs_diff(u64::try_from(ours).expect("milliseconds fit"));
        assert!(
            skew < 60_000,
            "the database's clock read {skew} ms off ours"
        );
        store.close().await;
    });
}

/// Proves that the one-statement check still refuses what the migrator refused: a
/// migration whose text changed since it was applied, and one that failed half-way.
#[test]
fn a_changed_or_failed_migration_is_still_refused() {
    let Some(base) = pg_url() else {
        eprintln!("PG_URL is not set: skipped");
        return;
    };
    let schema = Schema::new();
    let rt = rt();
    rt.block_on(async {
        PgStore::open(&schema.url)
            .await
            .expect("makes the schema")
            .close()
            .await;
    });
    admin(
        &base,
        &format!(
            "UPDATE {}._sqlx_migrations SET success = false WHERE version = {STORE_FORMAT}",
            schema.name
        ),
    );
    let reason = open_reason(rt.block_on(PgStore::open(&schema.url)));
    assert!(
        reason.contains("migrations") && reason.contains("partially applied"),
        "a failed migration: {reason}"
    );
    admin(
        &base,
        &format!(
            "UPDATE {0}._sqlx_migrations SET success = true, checksum = '\\x00' \
             WHERE version = {STORE_FORMAT}",
            schema.name
        ),
    );
    let reason = open_reason(rt.block_on(PgStore::open(&schema.url)));
    assert!(
        reason.contains("migrations") && reason.contains(&format!("migration {STORE_FORMAT}")),
        "a changed migration: {reason}"
    );
}

/// What an open could change in schema `name`: its tables' columns, and the migrations
/// recorded.
fn schema_state(base: &str, name: &str) -> (String, String) {
    let (base, name) = (base.to_string(), name.to_string());
    rt().block_on(async move {
        let mut c = sqlx::PgConnection::connect(&base)
            .await
            .expect("connects to PG_URL");
        let columns: String = sqlx::query_scalar(
            "SELECT string_agg(table_name || '.' || column_name || ' ' || data_type, ', ' \
               ORDER BY table_name, ordinal_position) \
             FROM information_schema.columns WHERE table_schema = $1",
        )
        .bind(&name)
        .fetch_one(&mut c)
        .await
        .expect("reads the columns");
        let migrations: String = sqlx::query_scalar(&format!(
            "SELECT string_agg(version || ' ' || description || ' ' || success, ', ' \
               ORDER BY version) FROM {name}._sqlx_migrations"
        ))
        .fetch_one(&mut c)
        .await
        .expect("reads the migrations");
        (columns, migrations)
    })
}

/// Proves that a schema of a format development builds wrote (its migrations recorded as
/// versions 4 to 13, as those builds left them) is refused with `OlderFormat`, naming the
/// store (its password not shown) and saying to recreate it, and is left untouched: no
/// migration runs, on this open or the next.
#[test]
fn a_schema_of_a_development_format_is_refused_untouched_saying_to_recreate_it() {
    let Some(base) = pg_url() else {
        eprintln!("PG_URL is not set: skipped");
        return;
    };
    let schema = Schema::new();
    let rt = rt();
    rt.block_on(async {
        PgStore::open(&schema.url)
            .await
            .expect("makes the schema")
            .close()
            .await;
    });
    admin(
        &base,
        &format!(
            "DELETE FROM {0}._sqlx_migrations; \
             INSERT INTO {0}._sqlx_migrations (version, description, success, checksum, \
               execution_time) \
             SELECT v, 'format ' || v, true, '\\x00', 0 FROM generate_series(4, 13) v",
            schema.name
        ),
    );
    let before = schema_state(&base, &schema.name);
    for _ in 0..2 {
        match rt.block_on(PgStore::open(&schema.url)) {
            Err(e @ StoreError::OlderFormat { .. }) => {
                let said = e.to_string();
                let StoreError::OlderFormat {
                    url,
                    found,
                    supported,
                } = e
                else {
                    unreachable!()
                };
                assert_eq!((found, supported), (13, STORE_FORMAT));
                assert!(url.contains(&schema.name), "{url}");
                if let Some((_, password)) = base
                    .split_once("://")
                    .and_then(|(_, rest)| rest.split_once('@'))
                    .and_then(|(userinfo, _)| userinfo.split_once(':'))
                {
                    assert!(!url.contains(&format!(":{password}@")), "{url}");
                    assert!(url.contains(":***@"), "{url}");
                }
                assert!(
                    said.contains(&format!(
                        "cannot open the run store `{url}`: format 13 was written by a \
                         development build of pactgraph; this one reads format \
                         {STORE_FORMAT} only: recreate the store (a new SQLite file, or an \
                         empty PostgreSQL database or schema) and run again"
                    )),
                    "{said}"
                );
            }
            Err(other) => panic!("expected OlderFormat, got {other}"),
            Ok(_) => panic!("expected OlderFormat, the store opened"),
        }
        assert_eq!(schema_state(&base, &schema.name), before, "untouched");
    }
}
