//! SQLite keeps a checkpoint's event chunk packed (lz4, in the client; ADR 0059), a `BLOB`
//! value of `event_chunks.events`, and reads it back. Real `pactgraph` processes on a
//! real SQLite file.
#![cfg(feature = "store")]

mod support;

use sqlx::{Connection, SqliteConnection};
use support::cli::Bench;
use support::packed::a_damaged_chunk_is_named;
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

/// Proves, on SQLite, the scenario of `support::packed::chunks_are_packed_and_read_back`.
#[test]
fn chunks_are_packed_and_read_back() {
    let b = Bench::new(BIN);
    support::packed::chunks_are_packed_and_read_back(&b, &chunk_kinds);
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
