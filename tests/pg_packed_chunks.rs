//! Format 12 (ADR 0063): PostgreSQL keeps a checkpoint's event chunk packed in the client
//! (lz4, a `BYTEA` column `packed` stored without the server's compression) and still
//! reads the text chunks of a store written at format 11, byte for byte. Real `pactgraph`
//! processes on a real PostgreSQL schema (`PG_URL`; skipped without it); the store is
//! taken back to format 11 with sqlx (each packed chunk unpacked into the text format 11
//! wrote, the column dropped, migration 12 forgotten).
#![cfg(feature = "store")]

mod support;

use serde_json::Value;
use sqlx::{Connection, PgConnection, Row};
use support::cli::{ASKER, Bench};
use support::stores::Backend;

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// A loop of `set` steps (no program, no model): many steps, a chunk a checkpoint.
const LOOP: &str = r#"{"workflow": "loop", "slices": {"task": {}, "result": {}},
  "budgets": {"max_steps": 40}, "entry": "boss",
  "supervisors": {"boss": {"allow": ["work"]}},
  "nodes": {"work": {"supervisor": "boss", "reads": ["task"], "writes": ["result"],
    "triggers": [{"priority": 1, "when": true}], "run": {"set": {"result": {"ok": true}}}}}}"#;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A bench on a fresh PostgreSQL schema, or `None` (said) without `PG_URL`.
fn pg_bench() -> Option<Bench> {
    if support::stores::pg_url().is_none() {
        eprintln!("PG_URL is not set: skipped");
        return None;
    }
    Some(Bench::on(BIN, Backend::Postgres))
}

/// How each chunk is kept, in key order: `packed` (format 12, its bytes kept as they
/// came, never compressed by the server) or `text` (formats 8 to 11).
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

fn lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Proves that a format-12 store packs its chunks (kept as they came: the server does not
/// compress them again), and that a store written at format 11 (text chunks) loads,
/// shows and watches byte for byte as it did, then takes packed chunks beside its text
/// ones when its paused run is resumed: `runs watch` of the whole history is the old
/// history followed by the new events, numbered on without a gap, and `runs show --trace`
/// of a run whose trace is put back from its chunks (checkpointed every step) is the same
/// before and after the store went back to format 11 and was migrated again.
#[test]
fn a_store_of_format_11_loads_and_goes_on_with_packed_chunks() {
    let Some(b) = pg_bench() else { return };
    let wf = b.file("ask.json", ASKER);
    let lp = b.file("loop.json", LOOP);
    let r = b.run(&[
        "run",
        wf.to_str().unwrap(),
        "--quiet",
        "--name",
        "old",
        "--stream",
    ]);
    assert_eq!(r.code, 4, "{}", r.err);
    let streamed: Vec<String> = r.out.lines().map(str::to_string).collect();
    let looped = b.run(&[
        "run",
        lp.to_str().unwrap(),
        "--quiet",
        "--name",
        "loop",
        "--checkpoints",
        "steps",
    ]);
    assert_eq!(looped.code, 3, "{}", looped.err);
    let shown = b.run(&["runs", "show", "loop", "--trace"]);
    assert_eq!(shown.code, 0, "{}", shown.err);
    let watched_loop = b.run(&["runs", "watch", "loop"]);
    assert_eq!(watched_loop.code, 3, "{}", watched_loop.err);
    let kinds = chunk_kinds(&b);
    assert!(kinds.len() > 40, "a chunk a checkpoint: {kinds:?}");
    assert!(kinds.iter().all(|k| k == "packed"), "packed: {kinds:?}");
    assert_eq!(format(&b), pactgraph::store::STORE_FORMAT);

    back_to_format_11(&b);
    assert_eq!(format(&b), 11);
    // Read as format 11 wrote them (the store migrated to 12 on open, its chunks kept).
    let shown_11 = b.run(&["runs", "show", "loop", "--trace"]);
    assert_eq!(shown_11.code, 0, "{}", shown_11.err);
    assert_eq!(shown_11.out, shown.out, "runs show, byte for byte");
    assert_eq!(format(&b), pactgraph::store::STORE_FORMAT);
    assert!(chunk_kinds(&b).iter().all(|k| k == "text"));
    assert_eq!(b.run(&["runs", "watch", "loop"]).out, watched_loop.out);
    let before = b.run(&["runs", "watch", "old", "--until-pause"]);
    assert_eq!(before.code, 4, "{}", before.err);
    let history: Vec<&str> = before.out.lines().collect();
    assert_eq!(
        history,
        streamed[..streamed.len() - 1],
        "the history of format 11"
    );

    // Resumed: its new chunks are packed, beside the text ones.
    let r = b.run(&["runs", "resume", "old", "--answer", "yes", "--quiet"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let kinds = chunk_kinds(&b);
    assert!(
        kinds.iter().any(|k| k == "packed") && kinds.iter().any(|k| k == "text"),
        "{kinds:?}"
    );
    let watched = b.run(&["runs", "watch", "old"]);
    assert_eq!(watched.code, 0, "{}", watched.err);
    assert!(watched.out.starts_with(&before.out), "the history is kept");
    let events = lines(&watched.out);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "numbered on without a gap");
    }
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(&kinds[kinds.len() - 2..], ["run_ended", "checkpoint"]);
    // A cancel writes its event chunk outside a checkpoint statement (`write_events`):
    // packed too, and read back.
    let r = b.run(&["run", wf.to_str().unwrap(), "--quiet", "--name", "gone"]);
    assert_eq!(r.code, 4, "{}", r.err);
    let packed = |b: &Bench| chunk_kinds(b).iter().filter(|k| *k == "packed").count();
    let before_cancel = packed(&b);
    let cancelled = b.run(&["runs", "cancel", "gone"]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.err);
    assert_eq!(packed(&b), before_cancel + 1, "the cancel's chunk, packed");
    let watched = b.run(&["runs", "watch", "gone"]);
    assert_eq!(watched.code, 3, "stopped: {}", watched.err);
    let events = lines(&watched.out);
    assert!(
        events.iter().any(|e| e["event"] == "run_ended"),
        "{}",
        watched.out
    );
}

/// Proves a packed chunk that does not unpack is reported as corrupt, naming the run and
/// the events, by `runs watch` and by `runs show --trace` (a load), not a panic nor a
/// silent gap.
#[test]
fn a_damaged_packed_chunk_is_named_not_skipped() {
    let Some(b) = pg_bench() else { return };
    let lp = b.file("loop.json", LOOP);
    let r = b.run(&[
        "run",
        lp.to_str().unwrap(),
        "--quiet",
        "--name",
        "loop",
        "--checkpoints",
        "steps",
    ]);
    assert_eq!(r.code, 3, "{}", r.err);
    support::stores::admin(
        &b.store,
        // The length kept, the block cut to its first bytes.
        "UPDATE event_chunks SET packed = substring(packed FROM 1 FOR 12)",
    );
    let run_id = r.json()["run_id"].as_str().unwrap().to_string();
    for args in [
        &["runs", "watch", "loop"][..],
        &["runs", "show", "loop", "--trace"],
    ] {
        let ran = b.run(args);
        assert_eq!(ran.code, 1, "{args:?}: {}", ran.err);
        assert!(ran.err.contains(&run_id), "{args:?}: {}", ran.err);
        assert!(ran.err.contains("packed events"), "{args:?}: {}", ran.err);
    }
}
