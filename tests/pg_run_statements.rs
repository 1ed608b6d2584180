//! What one `pactgraph run` asks of PostgreSQL (ADR 0060), read from the server's own
//! per-table counters (`pg_stat_user_tables`, flushed when the run's session ends) in a
//! schema of the test's own: the run's events are never scanned, the create writes the
//! document, the run row and the snapshot holding the input once each (one statement on
//! PostgreSQL), a second run of the same document stores no second document, and the
//! events kept are numbered 1, 2, ... without a gap or an overlap. A real binary against
//! a real server. Skipped without `PG_URL`.
#![cfg(feature = "store")]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pactgraph::graph::synth;
use serde_json::json;
use sqlx::{Connection, Row};
use support::cli::Bench;
use support::stores::{Backend, pg_url};

/// The counters of every table of the schema `url` opens: (sequential scans, index scans,
/// rows inserted) by table name.
async fn counters(url: &str) -> BTreeMap<String, (i64, i64, i64)> {
    let mut c = sqlx::PgConnection::connect(url).await.expect("connects");
    let rows = sqlx::query(
        "SELECT relname::TEXT AS name, seq_scan, COALESCE(idx_scan, 0) AS idx_scan, \
         n_tup_ins FROM pg_stat_user_tables WHERE schemaname = current_schema()",
    )
    .fetch_all(&mut c)
    .await
    .expect("reads the counters");
    rows.iter()
        .map(|r| {
            (
                r.get::<String, _>("name"),
                (
                    r.get::<i64, _>("seq_scan"),
                    r.get::<i64, _>("idx_scan"),
                    r.get::<i64, _>("n_tup_ins"),
                ),
            )
        })
        .collect()
}

/// The counters once the server has counted `runs` rows inserted (a session's counts
/// reach the view when it ends, a moment after its client exits).
async fn counters_after(url: &str, runs: i64) -> BTreeMap<String, (i64, i64, i64)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = counters(url).await;
        if now.get("runs").is_some_and(|c| c.2 >= runs) || Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn a_run_reads_no_event_and_stores_its_input_once() {
    if pg_url().is_none() {
        eprintln!("PG_URL is not set: skipped");
        return;
    }
    let bench = Bench::on(env!("CARGO_BIN_EXE_pactgraph"), Backend::Postgres);
    // 600 pure steps (three batch checkpoints at effects) over a constant 20 KB slice.
    let doc = serde_json::to_string(&synth::supervisor_loop(600)).expect("a document");
    bench.file("chain.json", &doc);
    let big: Vec<String> = (0..2_000).map(|i| format!("item-{i:04}")).collect();
    bench.file("input.json", &json!({ "task": big }).to_string());
    let rt = support::runtime::rt();
    // The schema is migrated by the first open; its counters start from here.
    let ran = bench.run(&["runs", "list"]);
    assert_eq!(ran.code, 0, "{}", ran.err);
    let before = rt.block_on(counters(&bench.store));
    let ran = bench.run(&["run", "chain.json", "--input", "@input.json", "--quiet"]);
    // Stopped by its `max_steps` guard (exit 3), as the bench's chain is.
    assert_eq!(ran.code, 3, "{}", ran.err);
    let after = rt.block_on(counters_after(&bench.store, 1));
    let delta = |table: &str| {
        let (b, a) = (before.get(table).copied().unwrap_or_default(), after[table]);
        (a.0 - b.0, a.1 - b.1, a.2 - b.2)
    };
    let (seq_scans, _, chunks) = delta("event_chunks");
    assert_eq!(
        seq_scans, 0,
        "the run's events are read by index, never scanned"
    );
    assert!(chunks >= 3, "one chunk a batch checkpoint: {chunks}");
    for table in ["documents", "runs", "snapshots"] {
        assert_eq!(delta(table).2, 1, "{table}: one row a create");
    }
    // The events kept: 1, 2, ... with no gap and no overlap.
    let (first, last, count) = rt.block_on(async {
        let mut c = sqlx::PgConnection::connect(&bench.store)
            .await
            .expect("connects");
        let row = sqlx::query(
            "SELECT MIN(first_seq) AS first, MAX(last_seq) AS last, \
             SUM(last_seq - first_seq + 1)::BIGINT AS count FROM event_chunks",
        )
        .fetch_one(&mut c)
        .await
        .expect("reads the chunks");
        (
            row.get::<i64, _>("first"),
            row.get::<i64, _>("last"),
            row.get::<i64, _>("count"),
        )
    });
    assert_eq!(
        (first, count),
        (1, last),
        "events numbered from 1, contiguous"
    );
    assert!(last > 1_800, "three events a step: {last}");
    // A second run of the same document stores a run row and a snapshot, no document.
    let ran = bench.run(&["run", "chain.json", "--input", "@input.json", "--quiet"]);
    assert_eq!(ran.code, 3, "{}", ran.err);
    let again = rt.block_on(counters_after(&bench.store, 2));
    let inserted = |table: &str| again[table].2 - after[table].2;
    assert_eq!(
        (
            inserted("documents"),
            inserted("runs"),
            inserted("snapshots")
        ),
        (0, 1, 1)
    );
}
