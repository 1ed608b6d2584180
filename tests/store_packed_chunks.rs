//! Format 11 (ADR 0059): SQLite keeps a checkpoint's event chunk packed (lz4, in the
//! client) and still reads the text chunks of a store written at format 10, byte for
//! byte. Real `pactgraph` processes on a real SQLite file; the store is taken back to
//! format 10 with sqlx (each packed chunk unpacked into the text format 10 wrote).
#![cfg(feature = "store")]

mod support;

use sqlx::{Connection, SqliteConnection};
use support::cli::Bench;
use support::packed::{OldFormat, a_damaged_chunk_is_named, old_format_loads_and_goes_on};
use support::runtime::rt;

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// How each chunk's `events` value is kept (`packed`, a `BLOB`, or `text`), in key order.
fn chunk_kinds(b: &Bench) -> Vec<String> {
    let url = format!("sqlite:{}", b.dir.join("store.db").display());
    rt().block_on(async {
        let mut c = SqliteConnection::connect(&url).await.expect("opens");
        let types: Vec<String> = sqlx::query_scalar(
            "SELECT typeof(events) FROM event_chunks ORDER BY run_id, first_seq",
        )
        .fetch_all(&mut c)
        .await
        .expect("reads");
        c.close().await.expect("closes");
        types
            .into_iter()
            .map(|t| if t == "blob" { "packed".into() } else { t })
            .collect()
    })
}

/// Takes the store back to format 10: each packed chunk unpacked into its text (what
/// format 10 wrote), the chunks' `delta` column (format 13) dropped, migrations 11 on
/// forgotten, `user_version` 10.
fn back_to_format_10(b: &Bench) {
    let db = b.dir.join("store.db");
    assert!(support::stores::unpack_chunks(&db) > 0);
    let url = format!("sqlite:{}", db.display());
    rt().block_on(async {
        let mut c = SqliteConnection::connect(&url).await.expect("opens");
        sqlx::query("ALTER TABLE event_chunks DROP COLUMN delta")
            .execute(&mut c)
            .await
            .expect("drops format 13's column");
        sqlx::query("DELETE FROM _sqlx_migrations WHERE version > 10")
            .execute(&mut c)
            .await
            .expect("forgets migration 11");
        sqlx::query("PRAGMA user_version = 10")
            .execute(&mut c)
            .await
            .expect("marks format 10");
        c.close().await.expect("closes");
    });
}

fn user_version(b: &Bench) -> i64 {
    let url = format!("sqlite:{}", b.dir.join("store.db").display());
    rt().block_on(async {
        let mut c = SqliteConnection::connect(&url).await.expect("opens");
        let v = sqlx::query_scalar("PRAGMA user_version")
            .fetch_one(&mut c)
            .await
            .expect("reads");
        c.close().await.expect("closes");
        v
    })
}

/// Proves, on SQLite, the scenario of `support::packed::old_format_loads_and_goes_on`
/// from format 10 (text chunks) to 11 and on.
#[test]
fn a_store_of_format_10_loads_and_goes_on_with_packed_chunks() {
    let b = Bench::new(BIN);
    old_format_loads_and_goes_on(
        &b,
        &OldFormat {
            old: 10,
            kinds: &chunk_kinds,
            format: &user_version,
            back: &back_to_format_10,
        },
    );
}

/// Proves a damaged packed chunk on SQLite is `Corrupt`, naming the run and the events
/// (`support::packed::a_damaged_chunk_is_named`).
#[test]
fn a_damaged_packed_chunk_is_named_not_skipped() {
    let b = Bench::new(BIN);
    a_damaged_chunk_is_named(&b, &|b| {
        let url = format!("sqlite:{}", b.dir.join("store.db").display());
        rt().block_on(async {
            let mut c = SqliteConnection::connect(&url).await.expect("opens");
            // The length kept, the block cut to its first bytes.
            sqlx::query("UPDATE event_chunks SET events = substr(events, 1, 12)")
                .execute(&mut c)
                .await
                .expect("damages");
            c.close().await.expect("closes");
        });
    });
}
