//! Format 11 (ADR 0059): SQLite keeps a checkpoint's event chunk packed (lz4, in the
//! client) and still reads the text chunks of a store written at format 10, byte for
//! byte. Real `pactgraph` processes on a real SQLite file; the store is taken back to
//! format 10 with sqlx (each packed chunk unpacked into the text format 10 wrote).
#![cfg(feature = "store")]

mod support;

use serde_json::Value;
use sqlx::{Connection, SqliteConnection};
use support::cli::{ASKER, Bench};

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

/// The type of each chunk's `events` value (`text` or `blob`), in key order.
fn chunk_types(b: &Bench) -> Vec<String> {
    let url = format!("sqlite:{}", b.dir.join("store.db").display());
    rt().block_on(async {
        let mut c = SqliteConnection::connect(&url).await.expect("opens");
        let types = sqlx::query_scalar(
            "SELECT typeof(events) FROM event_chunks ORDER BY run_id, first_seq",
        )
        .fetch_all(&mut c)
        .await
        .expect("reads");
        c.close().await.expect("closes");
        types
    })
}

/// Takes the store back to format 10: each packed chunk unpacked into its text (what
/// format 10 wrote), migration 11 forgotten, `user_version` 10.
fn back_to_format_10(b: &Bench) {
    let db = b.dir.join("store.db");
    assert!(support::stores::unpack_chunks(&db) > 0);
    let url = format!("sqlite:{}", db.display());
    rt().block_on(async {
        let mut c = SqliteConnection::connect(&url).await.expect("opens");
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

fn lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Proves that a format-11 store packs its chunks, and that a store written at format 10
/// (text chunks) loads, shows and watches byte for byte as it did, then takes packed
/// chunks beside its text ones when its paused run is resumed: `runs watch` of the whole
/// history is the old history followed by the new events, numbered on without a gap,
/// and `runs show --trace` of a run whose trace is put back from its chunks is the same
/// before and after the store went back to format 10 and was migrated again.
#[test]
fn a_store_of_format_10_loads_and_goes_on_with_packed_chunks() {
    let b = Bench::new(BIN);
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
    // Checkpointed every step: the trace of `runs show` is put back from the chunks of
    // the checkpoints after the run's snapshot.
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
    let types = chunk_types(&b);
    assert!(types.len() > 40, "a chunk a checkpoint: {types:?}");
    assert!(types.iter().all(|t| t == "blob"), "packed: {types:?}");

    back_to_format_10(&b);
    assert!(chunk_types(&b).iter().all(|t| t == "text"));
    assert_eq!(user_version(&b), 10);
    // Read as format 10 wrote them (the store migrated to 11 on open, its chunks kept).
    let shown_10 = b.run(&["runs", "show", "loop", "--trace"]);
    assert_eq!(shown_10.out, shown.out, "runs show, byte for byte");
    assert_eq!(b.run(&["runs", "watch", "loop"]).out, watched_loop.out);
    let before = b.run(&["runs", "watch", "old", "--until-pause"]);
    assert_eq!(before.code, 4, "{}", before.err);
    let history: Vec<&str> = before.out.lines().collect();
    assert_eq!(
        history,
        streamed[..streamed.len() - 1],
        "the history of format 10"
    );
    assert_eq!(user_version(&b), pactgraph::store::STORE_FORMAT);

    // Resumed: its new chunks are packed, beside the text ones.
    let r = b.run(&["runs", "resume", "old", "--answer", "yes", "--quiet"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let types = chunk_types(&b);
    assert!(types.iter().any(|t| t == "blob") && types.iter().any(|t| t == "text"));
    let watched = b.run(&["runs", "watch", "old"]);
    assert_eq!(watched.code, 0, "{}", watched.err);
    assert!(watched.out.starts_with(&before.out), "the history is kept");
    let events = lines(&watched.out);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "numbered on without a gap");
    }
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(&kinds[kinds.len() - 2..], ["run_ended", "checkpoint"]);
}

/// Proves a packed chunk that does not unpack is reported as corrupt, naming the run and
/// the events, not a panic nor a silent gap.
#[test]
fn a_damaged_packed_chunk_is_named_not_skipped() {
    let b = Bench::new(BIN);
    let lp = b.file("loop.json", LOOP);
    let r = b.run(&["run", lp.to_str().unwrap(), "--quiet", "--name", "loop"]);
    assert_eq!(r.code, 3, "{}", r.err);
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
    let watched = b.run(&["runs", "watch", "loop"]);
    assert_eq!(watched.code, 1, "{}", watched.err);
    let run_id = r.json()["run_id"].as_str().unwrap().to_string();
    assert!(watched.err.contains(&run_id), "{}", watched.err);
    assert!(watched.err.contains("packed events"), "{}", watched.err);
}
