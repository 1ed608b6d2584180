//! PostgreSQL keeps a checkpoint's event chunk packed in the client (lz4, ADR 0063), in
//! the `BYTEA` column `packed`, stored without the server's compression, and reads it
//! back. Real `pactgraph` processes on a real PostgreSQL schema (`PG_URL`; skipped
//! without it). The scenario is SQLite's too (`support::packed`).
#![cfg(feature = "store")]

mod support;

use sqlx::{Connection, PgConnection, Row};
use support::cli::Bench;
use support::packed::a_damaged_chunk_is_named;
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

/// How each chunk is kept, in key order: `packed` (its bytes kept as they came, never
/// compressed by the server) or `text` (in `events`, which no write of this format sets).
fn chunk_kinds(b: &Bench) -> Vec<String> {
    rt().block_on(async {
        let mut c = PgConnection::connect(&b.store).await.expect("connects");
        let rows = sqlx::query(
            "SELECT events IS NULL AS no_text, packed IS NULL AS no_packed, \
             pg_column_compression(packed) AS compression FROM event_chunks \
             ORDER BY run_id, first_seq",
        )
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

/// Proves, on PostgreSQL, the scenario of `support::packed::chunks_are_packed_and_read_back`,
/// and that a packed chunk is kept as it came (`chunk_kinds`: never compressed again by
/// the server).
#[test]
fn chunks_are_packed_and_read_back() {
    let Some(b) = pg_bench() else { return };
    support::packed::chunks_are_packed_and_read_back(&b, &chunk_kinds);
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
