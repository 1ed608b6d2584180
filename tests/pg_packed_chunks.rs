//! Format 12 (ADR 0063): PostgreSQL keeps a checkpoint's event chunk packed in the client
//! (lz4, a `BYTEA` column `packed` stored without the server's compression) and still
//! reads the text chunks of a store written at format 11, byte for byte. Real `pactgraph`
//! processes on a real PostgreSQL schema (`PG_URL`; skipped without it); the store is
//! taken back to format 11 with sqlx (each packed chunk unpacked into the text format 11
//! wrote, the column dropped, migration 12 forgotten). The scenario is SQLite's too
//! (`support::packed`).
#![cfg(feature = "store")]

mod support;

use sqlx::{Connection, PgConnection, Row};
use support::cli::Bench;
use support::packed::{OldFormat, a_damaged_chunk_is_named, old_format_loads_and_goes_on};
use support::runtime::rt;
use support::stores::Backend;

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// A bench on a fresh PostgreSQL schema, or `None` (said) without `PG_URL`.
fn pg_bench() -> Option<Bench> {
    if support::stores::pg_url().is_none() {
        eprintln!("PG_URL is not set: skipped");
        return None;
    }
    Some(Bench::on(BIN, Backend::Postgres))
}

/// How each chunk is kept, in key order: `packed` (format 12, its bytes kept as they
/// came, never compressed by the server) or `text` (formats 8 to 11; a store at format 11
/// has no `packed` column).
fn chunk_kinds(b: &Bench) -> Vec<String> {
    rt().block_on(async {
        let mut c = PgConnection::connect(&b.store).await.expect("connects");
        let has_packed: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = 'event_chunks' \
             AND column_name = 'packed')",
        )
        .fetch_one(&mut c)
        .await
        .expect("reads the columns");
        let packed = if has_packed { "packed" } else { "NULL::BYTEA" };
        let rows = sqlx::query(&format!(
            "SELECT events IS NULL AS no_text, {packed} IS NULL AS no_packed, \
             pg_column_compression({packed}) AS compression FROM event_chunks \
             ORDER BY run_id, first_seq"
        ))
        .fetch_all(&mut c)
        .await
        .expect("reads the chunks");
        c.close().await.expect("closes");
        rows.iter()
            .map(|r| {
                let compression: Option<String> = r.get("compression");
                assert_eq!(compression, None, "a packed chunk is not compressed again");
                match (r.get::<bool, _>("no_text"), r.get::<bool, _>("no_packed")) {
                    (true, false) => "packed".to_string(),
                    (false, true) => "text".to_string(),
                    other => panic!("a chunk with both or neither column: {other:?}"),
                }
            })
            .collect()
    })
}

/// Takes the store back to format 11: each packed chunk unpacked into its text (what
/// format 11 wrote, in `events`), the `packed` column dropped and `events` `NOT NULL`
/// again, as migration 11 left the table, migration 12 forgotten.
fn back_to_format_11(b: &Bench) {
    rt().block_on(async {
        let mut c = PgConnection::connect(&b.store).await.expect("connects");
        let rows = sqlx::query(
            "SELECT run_id, first_seq, packed FROM event_chunks WHERE packed IS NOT NULL",
        )
        .fetch_all(&mut c)
        .await
        .expect("reads the chunks");
        assert!(!rows.is_empty(), "packed chunks to unpack");
        for row in &rows {
            let packed: Vec<u8> = row.get("packed");
            let text = lz4_flex::decompress_size_prepended(&packed).expect("a packed chunk");
            let text = String::from_utf8(text).expect("UTF-8 texts");
            sqlx::query(
                "UPDATE event_chunks SET events = $1, packed = NULL \
                 WHERE run_id = $2 AND first_seq = $3",
            )
            .bind(text)
            .bind(row.get::<String, _>("run_id"))
            .bind(row.get::<i64, _>("first_seq"))
            .execute(&mut c)
            .await
            .expect("writes the text");
        }
        sqlx::raw_sql(
            "ALTER TABLE event_chunks DROP COLUMN packed; \
             ALTER TABLE event_chunks ALTER COLUMN events SET NOT NULL; \
             DELETE FROM _sqlx_migrations WHERE version > 11",
        )
        .execute(&mut c)
        .await
        .expect("back to format 11");
        c.close().await.expect("closes");
    });
}

/// The newest migration applied to the bench's schema.
fn format(b: &Bench) -> i64 {
    rt().block_on(async {
        let mut c = PgConnection::connect(&b.store).await.expect("connects");
        let v = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
            .fetch_one(&mut c)
            .await
            .expect("reads the migrations");
        c.close().await.expect("closes");
        v
    })
}

/// Proves, on PostgreSQL, the scenario of `support::packed::old_format_loads_and_goes_on`
/// from format 11 (text chunks in `events`, compressed by the server) to 12, and that a
/// packed chunk is kept as it came (`chunk_kinds`: never compressed again by the server).
#[test]
fn a_store_of_format_11_loads_and_goes_on_with_packed_chunks() {
    let Some(b) = pg_bench() else { return };
    old_format_loads_and_goes_on(
        &b,
        &OldFormat {
            old: 11,
            kinds: &chunk_kinds,
            format: &format,
            back: &back_to_format_11,
        },
    );
}

/// Proves a damaged packed chunk on PostgreSQL is `Corrupt`, naming the run and the
/// events (`support::packed::a_damaged_chunk_is_named`).
#[test]
fn a_damaged_packed_chunk_is_named_not_skipped() {
    let Some(b) = pg_bench() else { return };
    a_damaged_chunk_is_named(&b, &|b| {
        // The length kept, the block cut to its first bytes.
        support::stores::admin(
            &b.store,
            "UPDATE event_chunks SET packed = substring(packed FROM 1 FOR 12)",
        );
    });
}
